"""OpenTelemetry: the `capability_negotiated` span and metrics, the one seam beyond the
public API, and the `opentelemetry-instrument` entry point. Built on `opentelemetry-api`."""
