"""What both SDK majors' installers share: the strict-or-warn rule, and negotiating the
servers built while `instrument()` is active.

Installation never raises into the user's program: a missing hook is a logged warning and
the server runs unnegotiated, unless the policy asked for `strict` mode.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..core.errors import NegotiationUnavailable
from ..core.negotiation import Policy

__all__ = ["negotiate_built", "unavailable"]

logger = logging.getLogger("mcp_negotiation")


def unavailable(policy: Policy, message: str) -> None:
    """The SDK offers no way to negotiate (a hook missing): raise in strict mode, the clear
    error the user asked for, else warn and let the server run unnegotiated."""
    if policy.strict:
        raise NegotiationUnavailable(message)
    logger.warning(message)


def negotiate_built(negotiate: Callable[[Any, Policy], Any], server: Any, policies: list[Policy]) -> None:
    """Negotiate `server`, just built, under the policy `instrument()` holds (if any): from a
    constructor, so nothing but strict mode's error may reach the user's program."""
    if not policies:
        return
    try:
        negotiate(server, policies[-1])
    except NegotiationUnavailable:
        raise  # strict mode: the clear error the user asked for
    except Exception:
        logger.exception("could not negotiate a new server (ignored)")
