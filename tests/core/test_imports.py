"""How the package imports: the core alone, adapters on demand, and no cycle anywhere.

The pure core (`revisions`, `negotiation`, `protocols`, `bridge`, UCP negotiation) must
be usable without the SDK: by a proxy, a client, another SDK. Each check on what a
fresh interpreter loads runs in a subprocess, because this one has loaded everything.

The cycle check reads the source: every import statement of every module of the package,
at any depth (a function-level import runs too, only later), except those under
`if TYPE_CHECKING:`, which never run.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import mcp_negotiation

PACKAGE = Path(mcp_negotiation.__file__).parent
ROOT = "mcp_negotiation"

FORBIDDEN = ("mcp", "mcp_types", "wrapt", "opentelemetry", "httpx2", "httpx", "starlette")
"""What the core must not load: the SDK, its wire types, the installer, telemetry, HTTP."""

CORE_IMPORTS = """
import mcp_negotiation.revisions
import mcp_negotiation.negotiation
import mcp_negotiation.protocols
import mcp_negotiation.bridge
import mcp_negotiation.engine
from mcp_negotiation.ucp import Profile, negotiate_capabilities, parse_ucp_agent
"""


def loaded_after(statements: str) -> list[str]:
    """The top-level names in FORBIDDEN that a fresh interpreter has loaded after `statements`."""
    probe = (
        f"{statements}\nimport json, sys\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & {set(FORBIDDEN)!r})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    return list(json.loads(done.stdout.splitlines()[-1]))


def test_the_core_imports_alone() -> None:
    assert loaded_after(CORE_IMPORTS) == []


def test_the_top_level_names_of_the_core_load_no_adapter() -> None:
    statements = "from mcp_negotiation import NegotiationError, Negotiation, NoNegotiation, Policy, Refusal"
    assert loaded_after(statements) == []


def test_ucp_policy_loads_its_http_client_only_when_it_builds_the_default_resolver() -> None:
    assert loaded_after("from mcp_negotiation import UcpPolicy") == []


def test_an_adapter_name_loads_the_sdk_when_first_asked_for() -> None:
    # The check above sees a load when there is one: asking for `negotiate` imports the SDK.
    assert {"mcp", "wrapt"} <= set(loaded_after("import mcp_negotiation\nmcp_negotiation.negotiate"))


def test_the_ucp_package_loads_its_http_client_only_for_the_resolver() -> None:
    assert "httpx2" not in loaded_after("import mcp_negotiation.ucp")
    assert "httpx2" in loaded_after("from mcp_negotiation.ucp import HttpsProfileResolver")


def test_unknown_names_are_attribute_errors() -> None:
    import mcp_negotiation.ucp

    for module in (mcp_negotiation, mcp_negotiation.ucp):
        with pytest.raises(AttributeError, match="no_such_name"):
            module.no_such_name  # noqa: B018
        assert set(module.__all__) <= set(dir(module))
        for name in module.__all__:
            assert getattr(module, name) is not None, name


# --- the import graph ----------------------------------------------------------------------


def module_names() -> dict[str, Path]:
    """Every module of the package by dotted name; a package by its own name."""
    names: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = (ROOT, *path.relative_to(PACKAGE).with_suffix("").parts)
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _run_time_imports(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements under `node` that can run: all but `if TYPE_CHECKING:` bodies."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for alternative in child.orelse:
                yield from _run_time_imports(ast.Module(body=[alternative], type_ignores=[]))
        else:
            yield from _run_time_imports(child)


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def import_graph() -> dict[str, set[str]]:
    """Module → the package's modules its imports run.

    `from . import x` reaches the submodule `x` when there is one. Importing `a.b.c` also runs
    the package `a.b`, unless that package is the importer's own (or an ancestor), which is
    imported before the importer runs; the root package is such an ancestor of every module.
    """
    modules = module_names()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        here = name if is_package else name.rpartition(".")[0]
        targets: set[str] = set()
        for statement in _run_time_imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(statement, ast.Import):
                targets.update(alias.name for alias in statement.names)
                continue
            if statement.level:
                base_parts = here.split(".")[: len(here.split(".")) - statement.level + 1]
                base = ".".join([*base_parts, *([statement.module] if statement.module else [])])
            else:
                base = statement.module or ""
            for alias in statement.names:
                submodule = f"{base}.{alias.name}"
                targets.add(submodule if submodule in modules else base)
        own = {*_ancestors(name), name}
        for target in targets:
            if target not in modules:
                continue  # outside the package
            for reached in (*_ancestors(target), target):
                if reached in modules and reached not in own:
                    graph[name].add(reached)
    return graph


def test_the_graph_sees_function_level_imports() -> None:
    graph = import_graph()
    assert f"{ROOT}.sdk" in graph[ROOT]  # inside the package's __getattr__
    assert f"{ROOT}.sdk.probe" in graph[f"{ROOT}.cli"]  # inside a function
    assert f"{ROOT}.ucp.binding" not in graph[ROOT]  # under TYPE_CHECKING: reached through `ucp` only
    assert f"{ROOT}.ucp" in graph[ROOT]


def test_no_import_cycle() -> None:
    graph = import_graph()
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            cycle = [*path[path.index(name) :], name]
            pytest.fail("import cycle: " + " -> ".join(cycle))
        if name in done:
            return
        for target in sorted(graph[name]):
            visit(target, [*path, name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])


ADAPTERS = (f"{ROOT}.sdk", f"{ROOT}.telemetry", f"{ROOT}.instrumentor", f"{ROOT}.cli", f"{ROOT}.demo")
"""What may import the SDK or OpenTelemetry, and what starts programs: never reached from the core."""


def is_adapter(name: str) -> bool:
    return any(name == adapter or name.startswith(f"{adapter}.") for adapter in ADAPTERS)


def test_the_core_never_reaches_an_adapter() -> None:
    graph = import_graph()
    core = [name for name in graph if name != ROOT and not is_adapter(name)]
    assert {f"{ROOT}.negotiation", f"{ROOT}.ucp.binding"} <= set(core)
    for start in core:
        seen, stack = {start}, [start]
        while stack:
            for target in graph[stack.pop()] - seen:
                assert not is_adapter(target), f"{start} reaches {target}"
                seen.add(target)
                stack.append(target)


def test_the_ucp_package_knows_which_of_its_names_are_the_resolvers() -> None:
    from mcp_negotiation import ucp
    from mcp_negotiation.ucp import resolver

    assert set(ucp._IN_RESOLVER) == set(resolver.__all__) & set(ucp.__all__)
