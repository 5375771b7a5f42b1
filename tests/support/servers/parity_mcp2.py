"""The parity suite's server on mcp 2.x: `parity_common`'s, registered on an `MCPServer`.

    python tests/support/servers/parity_mcp2.py --spans PATH [--min-revision R] [--require CAP]
"""

from mcp.server.mcpserver import Context, MCPServer
from parity_common import serve

if __name__ == "__main__":
    serve(MCPServer, Context)
