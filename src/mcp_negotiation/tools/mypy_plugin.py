"""A mypy plugin that reports misspelt feature names where they are written.

Enable it in the project that uses the library::

    [tool.mypy]
    plugins = ["mcp_negotiation.tools.mypy_plugin"]

Why a plugin: the names `client_supports`, `requires`, `supports` and
`Policy` take are a closed set (the feature table, typed `revisions.FeatureName`) plus
two open ones, extension identifiers (`vendor/name`) and `experimental.NAME`. No static
type spells "any string with a `/`": typed as the `Literal` alone, every extension name
would be an error; typed `FeatureName | str`, no misspelling is. So the signatures say
`FeatureName | str` (editors complete the known names) and this plugin checks each string
literal passed there by the rule the library applies at run time
(`negotiation.feature_name_problem`), with the same message. A name held in a variable is
not a literal and is left to the run time check (logged once per name).

Only mypy imports this module; it is no part of the library's run time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Final

from mypy.errorcodes import ErrorCode
from mypy.nodes import Expression, ListExpr, SetExpr, StrExpr, TupleExpr
from mypy.plugin import FunctionContext, MethodContext, Plugin
from mypy.types import Type

from ..core.negotiation import feature_name_problem

FEATURE_NAME: Final = ErrorCode("mcp-feature-name", "Check MCP feature names", "General")

_CLIENT: Final = True
_ANY: Final = False

_CHECKED: Final[dict[str, dict[str, bool]]] = {
    "mcp_negotiation.adapters.context.client_supports": {"feature": _ANY},
    "mcp_negotiation.adapters.context.requires": {"features": _CLIENT},
    "mcp_negotiation.core.negotiation.supports": {"feature": _ANY},
    "mcp_negotiation.core.negotiation.Negotiation.supports": {"feature": _ANY},
    "mcp_negotiation.core.negotiation.Policy": {"required_capabilities": _CLIENT, "withhold": _ANY},
}
"""Callables by full name (where they are defined), and which of their parameters take
names: client capabilities only, or any feature."""


def _literals(expression: Expression) -> Iterator[StrExpr]:
    """The string literals in an argument: itself, or the items of a literal collection."""
    if isinstance(expression, StrExpr):
        yield expression
    elif isinstance(expression, TupleExpr | ListExpr | SetExpr):
        yield from (item for item in expression.items if isinstance(item, StrExpr))


def _checker(fullname: str) -> Callable[[FunctionContext | MethodContext], Type] | None:
    parameters = _CHECKED.get(fullname)
    if parameters is None:
        return None
    short = fullname.rsplit(".", 1)[-1]

    def check(ctx: FunctionContext | MethodContext) -> Type:
        for name, arguments in zip(ctx.callee_arg_names, ctx.args, strict=False):
            client_only = parameters.get(name) if name is not None else None
            if name is None or client_only is None:
                continue
            where = name if short == "Policy" else f"{short}()"  # as the run time names it
            for argument in arguments:
                for literal in _literals(argument):
                    problem = feature_name_problem(literal.value, client_only=client_only, where=where)
                    if problem is not None:
                        ctx.api.fail(problem, literal, code=FEATURE_NAME)
        return ctx.default_return_type

    return check


class FeatureNamePlugin(Plugin):
    def get_function_hook(self, fullname: str) -> Callable[[FunctionContext], Type] | None:
        return _checker(fullname)

    def get_method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
        return _checker(fullname)


def plugin(version: str) -> type[Plugin]:
    """mypy's entry point: the plugin class, whatever the mypy version."""
    return FeatureNamePlugin
