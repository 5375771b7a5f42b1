"""Every Python process of a test environment reads the calendar as of one day, `DAY`.

The deprecation window closes on 2027-07-28 by default. From then on a server built as the
docs and examples build it withdraws roots, sampling and logging (and a policy requiring one
is refused when it is made), so every test expecting them served would fail on every day
after. The suite therefore runs as of `DAY`, inside the window: in its own process and in
every server it starts. A test of another day pins its own (`Policy(today=...)`, a
`harness.Clock`), as the tests of the window's closing do.

The SDK starts a stdio server with a bare environment, so the pin cannot ride an environment
variable: nox's test sessions load this module from a `.pth` file in their environment
(`noxfile._as_of_one_day`), which every interpreter of it reads at start-up. Only the
library's reading of the calendar is pinned (`revisions.calendar_day`), as the library is
imported; the rest of the process keeps the real time (certificates, HTTP dates, spans).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import date
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec, PathFinder
from types import ModuleType

DAY = date(2026, 12, 1)
"""Four months into the window: the day the suite's expectations are written for."""
PINNED = "mcp_negotiation.core.revisions"


class _PinOnImport(MetaPathFinder):
    """Finds `PINNED` as the import system would, and pins its calendar once it has run."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname != PINNED:
            return None
        spec = PathFinder.find_spec(fullname, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _Pinning(spec.loader)
        return spec


class _Pinning(Loader):
    def __init__(self, loader: Loader) -> None:
        self._loader = loader

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        module.calendar_day = lambda: DAY  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:  # what else the import system asks (get_source)
        return getattr(self._loader, name)


if not any(isinstance(finder, _PinOnImport) for finder in sys.meta_path):
    sys.meta_path.insert(0, _PinOnImport())
