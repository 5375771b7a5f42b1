"""One error family: every exception the library raises for a caller's mistake or a refusal
is a `NegotiationError` (docs/concepts.md#errors), and keeps the built-in base it had, so
`except ValueError` still catches what it caught.

The source is read, not run: a `raise ValueError(...)` added anywhere in `src/` fails here
before any test reaches it, however rare the path."""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

import mcp_negotiation
from mcp_negotiation import NegotiationError, Policy, PolicyError, UsageError

SRC = Path(mcp_negotiation.__file__).parent

BUILTIN_EXCEPTIONS = frozenset(
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
)

_MODULE_GETATTR = (
    "PEP 562: a module's __getattr__ says a name is missing with AttributeError, which hasattr()"
    " reads as False and `from ... import` turns into ImportError; it is Python's protocol"
)
RAISES_ALLOWED: Mapping[tuple[str, str], str] = {
    ("__init__.py", "AttributeError"): _MODULE_GETATTR,
    ("ucp/__init__.py", "AttributeError"): _MODULE_GETATTR,
    ("adapters/mcp2/fallback.py", "StopAsyncIteration"): (
        "how the relay's async iteration ends: `async for` consumes it, no caller sees it"
    ),
    ("semver/bridge.py", "TypeError"): (
        "control flow in FeatureMapping: caught by the `except (TypeError, ValueError)` around it,"
        " which raises UsageError"
    ),
    ("ucp/profile.py", "ValueError"): (
        "json.loads's parse_constant hook: Profile.from_bytes catches it and raises UcpError"
    ),
}
"""(module, exception) -> why that module's one raise of that built-in is not the caller's;
a second such raise in the module fails as any other would."""

CLASSES_ALLOWED: Mapping[tuple[str, str], str] = {
    ("core/errors.py", "NegotiationError"): "the family's base itself",
    ("core/frozen_json.py", "NotFreezable"): (
        "internal: every caller of freeze() catches it and raises its protocol's error"
        " (NegotiationRefused, UcpError)"
    ),
    ("tools/probe/matrix.py", "Stopped"): (
        "a signal stopping the probe, a KeyboardInterrupt: no mistake nor refusal, and as a"
        " NegotiationError (an Exception) `except Exception` would swallow it"
    ),
}
"""(module, class) -> why an exception class deriving from a built-in needs no NegotiationError."""


def _raises_of_builtins(tree: ast.AST) -> Iterator[tuple[int, str, str]]:
    """(line, enclosing function, exception name) for each `raise X` / `raise X(...)` of a built-in."""

    def walk(node: ast.AST, function: str) -> Iterator[tuple[int, str, str]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield from walk(child, child.name)
                continue
            if isinstance(child, ast.Raise) and child.exc is not None:
                raised = child.exc.func if isinstance(child.exc, ast.Call) else child.exc
                if isinstance(raised, ast.Name) and raised.id in BUILTIN_EXCEPTIONS:
                    yield child.lineno, function, raised.id
            yield from walk(child, function)

    return walk(tree, "<module>")


def _sources() -> Iterator[tuple[str, ast.AST]]:
    for path in sorted(SRC.rglob("*.py")):
        yield path.relative_to(SRC).as_posix(), ast.parse(path.read_text(encoding="utf-8"))


def test_the_library_raises_no_bare_builtin_exception() -> None:
    found: dict[tuple[str, str], list[str]] = {}
    for module, tree in _sources():
        for line, function, name in _raises_of_builtins(tree):
            site = f"src/mcp_negotiation/{module}:{line}: raise {name} in {function}()"
            found.setdefault((module, name), []).append(site)
    left = [
        site
        for key, sites in found.items()
        if not (key in RAISES_ALLOWED and len(sites) == 1)
        for site in sites
    ]
    assert not left, (
        "raise the library's own error, which keeps the built-in base (PolicyError for ValueError,"
        " UsageError for TypeError), or allow it here saying why no caller sees it:\n" + "\n".join(left)
    )
    assert RAISES_ALLOWED.keys() <= found.keys(), f"stale: {RAISES_ALLOWED.keys() - found.keys()}"


def test_every_public_exception_class_of_the_library_is_a_negotiation_error() -> None:
    # A class deriving straight from a built-in must name NegotiationError beside it; one
    # deriving from the library's own (UcpError) is checked in tests/project/test_package.py.
    left: list[str] = []
    allowed_seen: set[tuple[str, str]] = set()
    for module, tree in _sources():
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):
                continue
            bases = {base.id for base in node.bases if isinstance(base, ast.Name)}
            if not bases & BUILTIN_EXCEPTIONS or "NegotiationError" in bases:
                continue
            if (module, node.name) in CLASSES_ALLOWED:
                allowed_seen.add((module, node.name))
            else:
                left.append(f"src/mcp_negotiation/{module}:{node.lineno}: class {node.name}")
    assert not left, "derive from NegotiationError too:\n" + "\n".join(left)
    assert allowed_seen == CLASSES_ALLOWED.keys(), f"stale: {CLASSES_ALLOWED.keys() - allowed_seen}"


def test_the_walk_finds_a_bare_raise_wherever_it_is() -> None:
    # The guard above passes on a clean tree; this shows it would see a raise, named or bare,
    # in a method, a nested function or at module level.
    tree = ast.parse(
        "class C:\n"
        "    def m(self):\n"
        "        def inner():\n"
        "            raise ValueError('x')\n"
        "        raise TypeError\n"
        "raise KeyError('k')\n"
        "def f():\n"
        "    raise PolicyError('fine')\n"
    )
    assert sorted(_raises_of_builtins(tree)) == [
        (4, "inner", "ValueError"),
        (5, "m", "TypeError"),
        (6, "<module>", "KeyError"),
    ]


@pytest.mark.parametrize("caught", [ValueError, NegotiationError, PolicyError])
def test_a_bad_policy_value_is_a_policy_error_that_except_value_error_still_catches(
    caught: type[Exception],
) -> None:
    with pytest.raises(caught, match="min_revision must be one of") as raised:
        Policy(min_revision="x")
    assert type(raised.value) is PolicyError


@pytest.mark.parametrize("caught", [TypeError, NegotiationError, UsageError])
def test_a_policy_switch_of_the_wrong_type_is_a_usage_error_that_except_type_error_still_catches(
    caught: type[Exception],
) -> None:
    with pytest.raises(caught, match="strict must be True or False") as raised:
        Policy(strict="false")  # type: ignore[arg-type]
    assert type(raised.value) is UsageError


def _refused_by_nobody(_: Path) -> object:
    from mcp_negotiation.semver.bridge import RefusedBy

    return RefusedBy("nobody")


def _schema_not_json(tmp_path: Path) -> object:
    from mcp_negotiation.ucp.requires import Requirements

    schema = tmp_path / "loyalty.json"
    schema.write_text("{not json")
    return Requirements(schemas=[schema])


def _allowed_network_not_a_network(_: Path) -> object:
    from mcp_negotiation.ucp import HttpsProfileResolver

    return HttpsProfileResolver(allow_addresses=["10.0.0.0/33"])


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (_refused_by_nobody, "refused_by must be one of downstream, upstream, both; got 'nobody'"),
        (_schema_not_json, "loyalty.json is not JSON"),
        (_allowed_network_not_a_network, "allow_addresses: '10.0.0.0/33'"),
    ],
)
def test_the_standard_librarys_own_error_on_a_configured_value_is_said_as_a_policy_error(
    make: Callable[[Path], object], says: str, tmp_path: Path
) -> None:
    # Not a `raise` of the library's, so the walk above cannot see these: an Enum's lookup,
    # json.loads and ipaddress raise ValueError about what the caller configured.
    with pytest.raises(PolicyError, match=re.escape(says)):
        make(tmp_path)
