"""The distribution itself: its run-time dependencies and its typing marker."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import mcp_negotiation


def test_runtime_dependencies_are_exactly_the_four() -> None:
    requirements = metadata.requires("mcp-negotiation") or []
    runtime = sorted(
        re.split(r"[<>=!~ \[;]", requirement, maxsplit=1)[0].lower()
        for requirement in requirements
        if "extra ==" not in requirement
    )
    assert runtime == ["http-sf", "mcp", "opentelemetry-api", "wrapt"]


def test_package_is_typed() -> None:
    assert (Path(mcp_negotiation.__file__).parent / "py.typed").is_file()
