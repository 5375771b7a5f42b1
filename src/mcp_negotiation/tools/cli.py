"""The `mcp-negotiation` command: probe a server's negotiation across every MCP revision,
or see what an A2A agent's card answers a request's A2A headers."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping
from typing import Any, Final

from .. import __version__
from ..ucp import Profile, UcpError
from . import a2a_command

PRESETS: Final[Mapping[str, dict[str, Any]]] = {
    "none": {},
    "basic": {"roots": {"listChanged": True}, "sampling": {}},
    "full": {
        "roots": {"listChanged": True},
        "sampling": {"tools": {}, "context": {}},
        "elicitation": {"form": {}, "url": {}},
    },
}
"""Client capability maps the probe can declare by name."""


def _capabilities(value: str) -> dict[str, Any]:
    if value in PRESETS:
        return dict(PRESETS[value])
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        raise argparse.ArgumentTypeError(f"not a preset ({', '.join(PRESETS)}) nor JSON: {value!r}") from None
    if not isinstance(parsed, dict):
        raise argparse.ArgumentTypeError("--capabilities JSON must be an object")
    return parsed


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {value!r}") from None
    if not seconds > 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds; got {value}")
    return seconds


def _platform_profile(path: str) -> Profile:
    """Read before probing: a file that cannot be used is a bad option, not a failed probe."""
    try:
        return Profile.from_file(path)
    except OSError as failure:
        raise argparse.ArgumentTypeError(f"cannot read {path}: {failure.strerror or failure}") from None
    except UcpError as failure:
        raise argparse.ArgumentTypeError(f"{path}: {failure.code} ({failure.message})") from None


_TOKEN: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
"""An HTTP field name (RFC 9110 token)."""
_SET_BY_THE_PROBE: Final = ("accept", "content-type", "content-length", "host", "transfer-encoding")


def _header(value: str) -> tuple[str, str]:
    """`NAME:VALUE` (`Authorization: Bearer x`): sent with every HTTP request, never printed."""
    name, colon, field_value = value.partition(":")
    name, field_value = name.strip(), field_value.strip()
    if not colon or not _TOKEN.fullmatch(name):
        raise argparse.ArgumentTypeError("give NAME:VALUE, e.g. 'Authorization: Bearer TOKEN'")
    if name.lower().startswith("mcp-") or name.lower() in _SET_BY_THE_PROBE:
        raise argparse.ArgumentTypeError(f"{name} is set by the probe itself, per request")
    if any(char in field_value for char in "\r\n\0"):
        raise argparse.ArgumentTypeError(f"the value of {name} holds a line break or NUL")
    return name, field_value


def _client_info(value: str) -> dict[str, str]:
    """`NAME/VERSION` (`claude-ai/0.1.0`): the `clientInfo` the probe sends, so that what a
    server's per-client rules do for that client shows in the table."""
    name, slash, version = value.rpartition("/")
    if not slash or not name.strip() or not version.strip():
        raise argparse.ArgumentTypeError("give NAME/VERSION, e.g. 'claude-ai/0.1.0'")
    if len(value) > 256 or not value.isprintable():
        raise argparse.ArgumentTypeError("NAME/VERSION must be printable, at most 256 characters")
    return {"name": name.strip(), "version": version.strip()}


def _is_url(token: str) -> bool:
    return token.lower().startswith(("http://", "https://"))


PROBE_EPILOG: Final = """\
examples:
  mcp-negotiation probe                                  the bundled example server, over stdio
  mcp-negotiation probe http://127.0.0.1:8000/mcp        a streamable HTTP server (give http://)
  mcp-negotiation probe -- python server.py --flag       a stdio server: the command after --
  mcp-negotiation probe --capabilities full --json -- python server.py
  mcp-negotiation probe --capabilities '{"elicitation": {}}' http://127.0.0.1:8000/mcp
  mcp-negotiation probe --header "Authorization: Bearer $TOKEN" https://mcp.example/mcp
  mcp-negotiation probe --client-info claude-ai/0.1.0    as that client: its per-client rules apply

exit status (for CI):
  0        every revision was served (agreed or counter-offered), the server's versions
           tell one story, and UCP agreed if asked
  1        the server answered as a JSON-RPC peer, but some revision was refused, timed
           out or failed, its versions contradict each other, or UCP failed: full table
  2        could not probe: bad options, command not found, or no revision answered as
           a JSON-RPC peer (it crashed, is not MCP, wants credentials, is unreachable)
  128+N    stopped by signal N

The revisions are probed at once, each over a connection of its own. The output says
what was probed and what the server uses, then a row per revision, what each revision
loses of what the server uses, the tools each client sees, whether the server's versions
tell one story, and a legend; --json carries all of it. See docs/probe.md.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="mcp-negotiation",
        description=__doc__,
        epilog="`mcp-negotiation probe --help` shows examples and exit statuses.",
    )
    parser.add_argument("--version", action="version", version=f"mcp-negotiation {__version__}")
    commands = parser.add_subparsers(dest="command")
    probe = commands.add_parser(
        "probe",
        help="connect once per revision and print what the server agreed",
        description="Connect once per MCP revision, all at once, with the chosen client\n"
        "capabilities, and print what the server answered at each.",
        epilog=PROBE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    probe.add_argument(
        "target",
        nargs=argparse.REMAINDER,
        help="a URL (streamable HTTP) or a server command (stdio); default: the bundled example",
    )
    probe.add_argument(
        "--capabilities",
        type=_capabilities,
        default="basic",
        help="client capabilities: a preset (none, basic, full) or a JSON object",
    )
    probe.add_argument(
        "--ucp-profile",
        metavar="FILE",
        type=_platform_profile,
        help="negotiate UCP against this platform profile (JSON)",
    )
    probe.add_argument(
        "--header",
        metavar="NAME:VALUE",
        type=_header,
        action="append",
        default=[],
        help="an HTTP header sent with every request (repeatable), e.g. 'Authorization: Bearer TOKEN'",
    )
    probe.add_argument(
        "--client-info",
        metavar="NAME/VERSION",
        type=_client_info,
        help="the clientInfo to send (default mcp-negotiation-probe/1): per-client rules for it apply",
    )
    probe.add_argument("--json", action="store_true", help="machine-readable output (docs/probe.md)")
    probe.add_argument("--timeout", type=_seconds, default=20.0, help="seconds per revision (default 20)")
    a2a = commands.add_parser(
        "a2a",
        help="what an A2A agent with this card answers a request's A2A-Version and A2A-Extensions",
        description="Negotiate one A2A request against an agent card, as the agent would:\n"
        "the version it serves, the extensions it activates and echoes, or its refusal.",
        epilog=a2a_command.EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    a2a.add_argument(
        "--card", required=True, metavar="FILE", type=a2a_command.card_file, help="the agent card (JSON)"
    )
    a2a.add_argument(
        "--header",
        action="append",
        default=[],
        type=a2a_command.header,
        metavar="'NAME: VALUE'",
        help="a request header, such as 'A2A-Version: 1.0' (repeat for more)",
    )
    a2a.add_argument("--query", metavar="QUERY", help="the request's query string, such as 'A2A-Version=1.0'")
    a2a.add_argument(
        "--interface", metavar="URL", help="the URL the request arrived at: its interface's versions only"
    )
    a2a.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args(argv)
    if args.command == "a2a":
        return a2a_command.run(
            args.card, args.header, args.query, interface_url=args.interface, as_json=args.json
        )
    if args.command != "probe":
        parser.print_help(sys.stderr)
        return 2
    target: list[str] = list(args.target)
    if target[:1] == ["--"]:  # the separator only: a `--` inside the server's command is its own
        target = target[1:]
    elif target and _is_url(target[0]) and len(target) > 1:
        # Options after a URL (`probe URL --json`): nothing else may follow a URL.
        args.target = []
        probe.parse_args(target[1:], namespace=args)
        if args.target:
            probe.error(f"a URL takes no command arguments: {' '.join(args.target)}")
        target = target[:1]
    from ..adapters.compat import MCP_MAJOR

    if MCP_MAJOR < 2:
        print("mcp-negotiation: the probe needs mcp 2.x (its client speaks every revision)", file=sys.stderr)
        return 2
    from .probe import run

    chosen: str | list[str] | None
    if not target:
        chosen = None
    elif len(target) == 1 and _is_url(target[0]):
        chosen = target[0]
    else:
        chosen = target
    if args.header and not isinstance(chosen, str):
        probe.error("--header is for a URL; a stdio server takes its credentials from its environment")
    caps = args.capabilities if isinstance(args.capabilities, dict) else _capabilities(args.capabilities)
    return run(
        chosen,
        caps,
        timeout=args.timeout,
        as_json=args.json,
        ucp_profile=args.ucp_profile,
        headers=tuple(args.header),
        client_info=args.client_info,
    )


if __name__ == "__main__":
    sys.exit(main())
