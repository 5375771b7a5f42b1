from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from mcp_negotiation import Policy, instrument
from mcp_negotiation.otel.stderr import StderrSpanExporter

provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(StderrSpanExporter()))  # one line a span, on stderr
trace.set_tracer_provider(provider)
instrument(Policy())

from mcp_server_time import main  # noqa: E402

main()
