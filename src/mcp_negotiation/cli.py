"""The `mcp-negotiation` command."""

from __future__ import annotations

import argparse
import sys

from . import __version__


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mcp-negotiation", description=__doc__)
    parser.add_argument("--version", action="version", version=f"mcp-negotiation {__version__}")
    parser.parse_args(argv)
    parser.print_help(sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
