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
import mcp_negotiation.core.revisions
import mcp_negotiation.core.negotiation
import mcp_negotiation.semver.protocols
import mcp_negotiation.semver.bridge
import mcp_negotiation.core.engine
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


def _run_time_imports(node: ast.AST, *, typing: bool = False) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements under `node` that can run: all but `if TYPE_CHECKING:` bodies,
    unless `typing` asks for those too (what a type checker reads)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child
        elif isinstance(child, ast.If) and _is_type_checking(child.test) and not typing:
            for alternative in child.orelse:
                yield from _run_time_imports(ast.Module(body=[alternative], type_ignores=[]))
        else:
            yield from _run_time_imports(child, typing=typing)


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def import_graph(*, typing: bool = False) -> dict[str, set[str]]:
    """Module → the package's modules its imports run (with `typing`, or name for a type checker).

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
        for statement in _run_time_imports(ast.parse(path.read_text(encoding="utf-8")), typing=typing):
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
    assert f"{ROOT}.adapters" in graph[ROOT]  # inside the package's __getattr__
    assert f"{ROOT}.tools.probe" in graph[f"{ROOT}.tools.cli"]  # inside a function
    assert f"{ROOT}.ucp.stage" not in graph[ROOT]  # under TYPE_CHECKING: reached through `ucp` only
    assert f"{ROOT}.ucp" in graph[ROOT]


@pytest.mark.parametrize("typing", [False, True], ids=["at-run-time", "for-type-checkers-too"])
def test_no_import_cycle(typing: bool) -> None:
    graph = import_graph(typing=typing)
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


ADAPTERS = (f"{ROOT}.adapters", f"{ROOT}.otel", f"{ROOT}.tools")
"""What may import the SDK or OpenTelemetry, and what starts programs: never reached from the core."""


def is_adapter(name: str) -> bool:
    return any(name == adapter or name.startswith(f"{adapter}.") for adapter in ADAPTERS)


def test_the_core_never_reaches_an_adapter() -> None:
    graph = import_graph()
    core = [name for name in graph if name != ROOT and not is_adapter(name)]
    assert {f"{ROOT}.core.negotiation", f"{ROOT}.ucp.stage"} <= set(core)
    for start in core:
        seen, stack = {start}, [start]
        while stack:
            for target in graph[stack.pop()] - seen:
                assert not is_adapter(target), f"{start} reaches {target}"
                seen.add(target)
                stack.append(target)


UCP_HOMES = """
import json
import mcp_negotiation.ucp as ucp

lost = []
for name in ucp.__all__:
    try:
        getattr(ucp, name)
    except AttributeError:
        lost.append(name)
from mcp_negotiation.ucp import resolver

shared = set(resolver.__all__) & set(ucp.__all__)
elsewhere = [n for n in shared if getattr(ucp, n) is not getattr(resolver, n)]
print(json.dumps([lost, elsewhere]))
"""


def test_the_ucp_package_knows_which_of_its_names_are_the_resolvers() -> None:
    """Each name is imported from its home when first asked for (so in a fresh interpreter):
    the resolver's from `resolver`, the others from `binding`, neither of which has the other's."""
    done = subprocess.run(
        [sys.executable, "-c", UCP_HOMES], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(done.stdout.splitlines()[-1]) == [[], []]


# --- tests name no private of the library ----------------------------------------------------

REPOSITORY = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
PATCHERS = {"setattr", "getattr", "delattr", "hasattr"}
"""Calls (plain, or `monkeypatch.` ones) whose second argument names an attribute of the first."""


def _private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__")


def _module_privates() -> set[str]:
    """Private names the library's modules define at top level (`_CACHE_SIZE`, `_tracer`)."""
    names: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(t.id for t in targets if isinstance(t, ast.Name))
    return {name for name in names if _private(name)}


def _instance_privates() -> set[str]:
    """Private attributes and methods the library's classes define: `self._x = ...`, `__slots__`
    entries, and names defined in class bodies. A test's `obj._x` with one of them reaches in."""
    names: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                if isinstance(node.value, ast.Name) and node.value.id == "self":
                    names.add(node.attr)
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        names.add(item.name)
                    elif isinstance(item, (ast.Assign, ast.AnnAssign)):
                        targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                        names.update(t.id for t in targets if isinstance(t, ast.Name))
                        if any(isinstance(t, ast.Name) and t.id == "__slots__" for t in targets):
                            names.update(
                                c.value
                                for c in ast.walk(item.value)  # type: ignore[arg-type]
                                if isinstance(c, ast.Constant) and isinstance(c.value, str)
                            )
    return {name for name in names if _private(name)}


def _root(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def private_uses(
    source: str, instance_privates: set[str], module_privates: set[str]
) -> Iterator[tuple[int, str]]:
    """(line, what) for each private name of `mcp_negotiation` that `source` uses.

    The rule: no `from mcp_negotiation... import _x`; no `_x` read off a name imported from
    the library (`negotiation._CACHE_SIZE`, `install.seams._x`); no `obj._x` where `_x` is
    an attribute or method the library's classes define (`negotiator._cache`); no
    `setattr`/`getattr`/`monkeypatch.setattr(ours, "_x", ...)` nor `"mcp_negotiation.m._x"`, nor
    a string that is a private top-level name of one of its modules (`"_tracer"`, to patch).
    Dunder names are not private. Python held in a string (a subprocess's script) is read too.
    """
    tree = ast.parse(source)
    ours = {"mcp_negotiation"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == ROOT:
            for alias in node.names:
                if _private(alias.name):
                    yield node.lineno, f"imports {node.module}.{alias.name}"
                ours.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == ROOT:
                    ours.add(alias.asname or ROOT)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            if _root(node.value) in ours or (
                node.attr in instance_privates and _root(node.value) not in ("self", "cls")
            ):
                yield node.lineno, f"reads {ast.unparse(node)}"
        elif isinstance(node, ast.Call) and len(node.args) >= 2:
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            name = node.args[1]
            if (
                called in PATCHERS
                and _root(node.args[0]) in ours
                and isinstance(name, ast.Constant)
                and isinstance(name.value, str)
                and _private(name.value)
            ):
                yield node.lineno, f"{called}s {ast.unparse(node.args[0])}.{name.value}"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if text in module_privates or (
                text.startswith(f"{ROOT}.") and any(_private(part) for part in text.split("."))
            ):
                yield node.lineno, f"names {text}"
            elif ROOT in text and "\n" in text:
                try:
                    inner = list(private_uses(text, instance_privates, module_privates))
                except SyntaxError:
                    continue
                yield from ((node.lineno, f"its script {what}") for _, what in inner)


def test_the_tests_name_no_private_of_the_library() -> None:
    """Tests use the public API, or public names of the module under test; where one needs a
    seam (a clock, a resolver, a fresh log budget) the library offers it, documented."""
    privates = (_instance_privates(), _module_privates())
    found = [
        f"{path.relative_to(REPOSITORY)}:{line}: {what}"
        for folder in ("tests", "benchmarks")
        for path in sorted((REPOSITORY / folder).rglob("*.py"))
        if "node_modules" not in path.parts and path != Path(__file__).resolve()  # (its examples below)
        for line, what in private_uses(path.read_text(encoding="utf-8"), *privates)
    ]
    assert found == []


@pytest.mark.parametrize(
    "source",
    [
        "from mcp_negotiation.tools.probe import _render_ucp",
        "from mcp_negotiation.core import negotiation\nnegotiation._CACHE_SIZE",
        "import mcp_negotiation.adapters.mcp2.install\nmcp_negotiation.adapters.mcp2.install._INSTRUMENTED",
        "ng = make()\nng._cache",
        'from mcp_negotiation.core import client_log\nmonkeypatch.setattr(client_log, "_clock", f)',
        'monkeypatch.setattr("mcp_negotiation.core.engine._x", f)',
        'SCRIPT = """\nfrom mcp_negotiation.otel import spans\nspans._tracer\n"""',
        'for name in ["_windows"]:\n    setattr(client_log, name, {})',
    ],
)
def test_the_check_sees_each_way_a_test_reaches_in(source: str) -> None:
    assert list(private_uses(source, _instance_privates(), _module_privates())) != []


def test_the_check_leaves_other_libraries_and_dunders_alone() -> None:
    source = "import asyncio\nprocess._transport\nserver._lowlevel_server\nmcp_negotiation.__version__"
    assert list(private_uses(source, _instance_privates(), _module_privates())) == []
