"""The command and configuration blocks of docs/deployment.md, as the fleet test runs them.

Each block the test runs is marked in the guide (`<!-- fleet: NAME -->` on the line before
its fence). The test takes a block as written and puts in only what differs on a test
machine: ports, file names and the interpreter, each replaced where the guide has it
(a replacement the block does not contain fails, so the guide and the test cannot drift
apart), and the shell variables the guide names (`$PORT`, `$REPLICA`).
"""

from __future__ import annotations

import re
import shlex
import string
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""Where the guide's commands run (`examples/ucp_shop.py` is a path from here)."""
GUIDE = ROOT / "docs" / "deployment.md"
_MARKED = re.compile(
    r"<!-- fleet: (?P<name>[\w.-]+) -->\n```\w*\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL
)


def block(name: str) -> str:
    """The block marked `name`, as the guide shows it."""
    found = {match["name"]: match["body"] for match in _MARKED.finditer(GUIDE.read_text(encoding="utf-8"))}
    assert name in found, f"docs/deployment.md marks no block {name!r} (it marks {sorted(found)})"
    return found[name]


def put_in(text: str, replacements: Mapping[str, str]) -> str:
    """`text` with each key replaced by its value; every key must be there."""
    for old, new in replacements.items():
        assert old in text, f"the guide's block no longer says {old!r}"
        text = text.replace(old, new)
    return text


def command(name: str, replacements: Mapping[str, str] = {}, variables: Mapping[str, str] = {}) -> list[str]:
    """The command of block `name` as an argument list: `replacements` put in, the shell's
    line continuations joined, `$VARIABLES` expanded as the shell would, `python` this
    interpreter."""
    text = put_in(block(name), replacements or {}).replace("\\\n", " ")
    argv = shlex.split(string.Template(text).substitute(variables or {}))
    return [sys.executable if argv[0] == "python" else argv[0], *argv[1:]]


def arguments(name: str, replacements: Mapping[str, str] | None = None) -> list[str]:
    """The options of block `name` (a block of options to add to a command)."""
    return shlex.split(put_in(block(name), replacements or {}).replace("\\\n", " "))
