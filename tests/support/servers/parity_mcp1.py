"""The parity suite's server on mcp 1.x: `parity_common`'s, registered on a 1.x `FastMCP`.

    python tests/support/servers/parity_mcp1.py --spans PATH [--min-revision R] [--require CAP]
"""

from mcp.server.fastmcp import Context, FastMCP
from parity_common import serve

if __name__ == "__main__":
    serve(FastMCP, Context)
