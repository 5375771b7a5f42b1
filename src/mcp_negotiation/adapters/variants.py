"""`@variant_of`, and what serves each tool of a server, read from what it registered.

A variant is a tool the server registers as usual (`@server.tool()`), marked below that
decorator as another way to serve a base tool (`core.variants`). What serves a name is read
from the functions behind a server's tools: for a listing from all of them
(`served_from`), for a call from the one it names (`RegisteredTools`, which the engine asks
on every `tools/call` once anything in the process is gated, so it reads a few attributes
and no more; only a call of a name given to `@variant_of` as a base looks through the
server's other tools, for its variants).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Collection, Mapping
from typing import Any, Final, TypeVar

from ..core.errors import UsageError
from ..core.listings import REQUIRES_ATTRIBUTE
from ..core.variants import GATES, VARIANT_ATTRIBUTE, Implementation, Served, VariantOf, variants_by_base
from .mcp2 import seams

__all__ = ["RegisteredTools", "implementation", "marks", "served_from", "variant_of"]

_F = TypeVar("_F", bound=Callable[..., Any])
_MAX_UNWRAP: Final = 8
_BASES: set[str] = set()
"""The names `variant_of` was given as bases (the server author's, a handful): a call of any
other name needs no look at the server's other tools."""


def variant_of(
    base: str, *, when: str | Collection[str] = (), unless: str | Collection[str] = ()
) -> Callable[[_F], _F]:
    """Mark a tool as a variant of the tool `base`: listed, under `base`'s name, and called,
    for the clients it is chosen for, in place of `base`'s own implementation.

    It is chosen for a client that supports every capability in `when` and not every one
    in `unless` (names as `client_supports` takes them); with neither, for a client that
    lacks what `base`'s `@requires` names (a fallback). Where several are chosen, the first
    the server lists wins; where none is, `base` serves. Write it below `@server.tool()`, as
    `@requires`; its own name is never listed, and calling that name is an unknown tool.
    """
    marking = VariantOf(
        base,
        (when,) if isinstance(when, str) else tuple(when),
        (unless,) if isinstance(unless, str) else tuple(unless),
    )

    def decorate(fn: _F) -> _F:
        if not callable(fn) or isinstance(fn, type):
            raise UsageError(
                f"variant_of() decorates a function, not {type(fn).__name__}: write @variant_of(...)"
                " below @server.tool(), right above the `def`"
            )
        existing = getattr(fn, VARIANT_ATTRIBUTE, None)
        if existing is not None and existing != marking:
            raise UsageError(f"{getattr(fn, '__name__', fn)!r} is already a variant of {existing.base!r}")
        try:
            setattr(fn, VARIANT_ATTRIBUTE, marking)
        except AttributeError:
            raise UsageError("variant_of() decorates a function that takes attributes (a def)") from None
        _BASES.add(base)
        GATES.any = True
        return fn

    return decorate


def marks(fn: object) -> tuple[tuple[str, ...] | None, VariantOf | None]:
    """What `@requires` checks for `fn` and what `@variant_of` marked it as, through the
    wrappers the SDK put around it (pydantic's `validate_call` on a prompt, FastMCP's own):
    read from each layer's `__dict__`."""
    names: tuple[str, ...] | None = None
    variant: VariantOf | None = None
    for _ in range(_MAX_UNWRAP):
        found = getattr(fn, "__dict__", None)
        if type(found) is not dict:
            break
        if names is None and type(held := found.get(REQUIRES_ATTRIBUTE)) is tuple:
            names = held
        if variant is None and type(marked := found.get(VARIANT_ATTRIBUTE)) is VariantOf:
            variant = marked
        fn = found.get("__wrapped__")
        if fn is None or (names is not None and variant is not None):
            break
    return names, variant


def implementation(key: str, fn: object) -> Implementation | None:
    """What registered `fn` as `key` is, for the core: None for a tool nothing marked."""
    names, variant = marks(fn)
    if not names and variant is None:
        return None
    return Implementation(key, names or (), variant)


def served_from(functions: Mapping[str, Any], *, variants: bool = True) -> dict[str, Served]:
    """What serves each of a server's entries (`functions`, by listed key, in its order): the
    ones with requirements, variants, or variants of their own. Without `variants` (prompts,
    templates: no call of theirs is dispatched) only requirements count."""
    implementations = {
        key: found for key, fn in functions.items() if (found := implementation(key, fn)) is not None
    }
    if not variants:
        return {
            key: Served(found._replace(variant=None))
            for key, found in implementations.items()
            if found.requires
        }
    bases = variants_by_base(tuple(implementations.values()))
    served = {key: Served(found, bases.get(key, ())) for key, found in implementations.items()}
    for base, listed in bases.items():
        if base in functions and base not in served:
            served[base] = Served(Implementation(base), listed)
    return served


class RegisteredTools:
    """The engine's `ToolLookup` for one server: what serves the tool a call names, read from
    the function the server registered under that name (and, for a base, its variants)."""

    __slots__ = ("__weakref__", "_find", "_found", "_held_server")

    def __init__(self, find: Callable[[], Any]) -> None:
        self._find = find
        """The server holding the tools, found at the first call (the owner of a lowlevel server
        `instrument()` reached holds none until its own constructor is done)."""
        self._found = False
        self._held_server: weakref.ReferenceType[Any] | None = None

    def _holder(self) -> Any:
        if self._found:
            return self._held_server() if self._held_server is not None else None
        held = self._find()
        try:
            self._held_server = weakref.ref(held) if held is not None else None
            self._found = True
        except TypeError:  # a server that takes no weak reference: found again at each call
            pass
        return held

    def __call__(self, name: str) -> Served | None:
        server = self._holder()
        if server is None:
            return None
        fn = seams.registered_tool(server, name)
        if fn is None:
            return None  # not a tool of this server's (or one we cannot see): the SDK answers
        found = implementation(name, fn)
        if name in _BASES:
            variants = tuple(
                variant
                for key, other in seams.registered_tools(server)
                if (variant := implementation(key, other)) is not None
                and variant.variant is not None
                and variant.variant.base == name
            )
            if variants:
                return Served(found or Implementation(name), variants)
        return Served(found) if found is not None else None
