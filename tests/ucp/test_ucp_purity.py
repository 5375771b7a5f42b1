"""The UCP core does no I/O through the SDK, wrapt, OpenTelemetry or the HTTP client."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "mcp_negotiation" / "ucp"
FORBIDDEN_IN_CORE = {"mcp", "wrapt", "opentelemetry", "httpx2", "httpx", "httpcore2", "anyio"}


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("module", ["errors", "header", "profile", "negotiate"])
def test_core_modules_import_no_io_libraries(module: str) -> None:
    assert not imported_roots(PACKAGE / f"{module}.py") & FORBIDDEN_IN_CORE


def test_only_the_resolver_imports_httpx2_and_only_the_header_module_http_sf() -> None:
    users = {path.stem: imported_roots(path) for path in PACKAGE.glob("*.py")}
    assert {name for name, roots in users.items() if "httpx2" in roots} == {"resolver"}
    assert {name for name, roots in users.items() if "http_sf" in roots} == {"header"}
    assert not any(roots & {"mcp", "wrapt", "opentelemetry"} for roots in users.values())
