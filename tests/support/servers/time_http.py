"""The reference time server over streamable HTTP, with no line of mcp_negotiation in it.

    python tests/support/servers/time_http.py --fd FD

What `opentelemetry-instrument` negotiates with no code (tests/otel/test_zero_code.py).
`--fd` is a socket the test bound and listens on, so the client may connect before
uvicorn has started (the kernel queues the connection).
"""

from __future__ import annotations

import argparse

import uvicorn
from mcp_server_time.server import create_server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fd", type=int, required=True)
    args = parser.parse_args()
    app = create_server("UTC").streamable_http_app()
    uvicorn.run(app, fd=args.fd, log_level="warning")


if __name__ == "__main__":
    main()
