"""The pure core: revisions, the negotiation record and `Policy`, errors, and the engine.

Nothing here imports the SDK, OpenTelemetry or an HTTP client: it is plain functions over
frozen values, usable by a proxy, a client or another SDK, and tested with plain values.
"""
