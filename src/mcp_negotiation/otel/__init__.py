"""OpenTelemetry: the `capability_negotiated` span and metrics, and the one seam beyond the
public API. Built on `opentelemetry-api`."""
