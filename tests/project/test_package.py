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


def test_the_top_level_names_are_one_per_job() -> None:
    # docs/concepts.md#the-public-api says what each is for, and what the old names became.
    assert sorted(mcp_negotiation.__all__) == [
        "ClientOverride",
        "Extension",
        "Negotiation",
        "NegotiationError",
        "NegotiationRefused",
        "NegotiationUnavailable",
        "NoNegotiation",
        "Policy",
        "PolicyError",
        "Refusal",
        "UcpPolicy",
        "UsageError",
        "__version__",
        "client_supports",
        "instrument",
        "negotiate",
        "negotiated",
        "negotiation_of",
        "record_refusals_asgi",
        "requires",
        "requires_extension",
        "requires_ucp",
        "uninstrument",
        "variant_of",
    ]
    for removed in ("Negotiator", "NegotiationMiddleware", "current_negotiation", "require", "supports"):
        assert not hasattr(mcp_negotiation, removed), removed


def test_every_error_of_the_library_is_a_negotiation_error_and_keeps_its_builtin_base() -> None:
    from mcp_negotiation import (
        NegotiationError,
        NegotiationRefused,
        NegotiationUnavailable,
        NoNegotiation,
        PolicyError,
        UsageError,
    )
    from mcp_negotiation.core.revisions import DeprecationClockError
    from mcp_negotiation.tools.probe import ProbeError
    from mcp_negotiation.ucp import UcpError

    kept = {
        NegotiationRefused: (),
        NegotiationUnavailable: (RuntimeError,),
        NoNegotiation: (LookupError,),
        PolicyError: (ValueError,),
        UsageError: (TypeError,),
        DeprecationClockError: (ValueError, TypeError),
        UcpError: (),
        ProbeError: (),
    }
    for error, builtins in kept.items():
        assert issubclass(error, NegotiationError), error
        assert all(issubclass(error, builtin) for builtin in builtins), error
