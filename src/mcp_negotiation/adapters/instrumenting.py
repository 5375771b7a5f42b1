"""Whether `instrument()` is in force, shared by the installers and `negotiation_of`.

A request with no negotiation while it is in force most likely belongs to a server built
before `instrument()` was called, which it cannot know of: `NoNegotiation` says so.
"""

from __future__ import annotations

from ..core.negotiation import Policy

__all__ = ["ACTIVE"]

ACTIVE: list[Policy] = []
"""The policy of the `instrument()` in force (one at most); empty when none is."""
