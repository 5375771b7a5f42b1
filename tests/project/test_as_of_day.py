"""The suite reads the calendar as of one day, in its own process and in the servers it starts,
so that it passes on any day, the deprecation window's closing included (`as_of_day`)."""

import re
import subprocess
import sys
from pathlib import Path

from as_of_day import DAY
from mcp.client.stdio import get_default_environment

from mcp_negotiation import Policy
from mcp_negotiation.core import revisions
from mcp_negotiation.core.negotiation import SYSTEM_CLOCK

SRC = Path(__file__).resolve().parents[2] / "src"
CALENDAR = re.compile(r"\b(?:date\.today|datetime\.(?:now|utcnow|today)|time\.(?:time|localtime|gmtime))\(")
"""What reads the calendar in Python, bar a clock handed over (`policy.clock.today()`)."""
READ_IN_A_SERVER = (
    "from mcp_negotiation import Policy\n"
    "from mcp_negotiation.core.negotiation import SYSTEM_CLOCK\n"
    "print(SYSTEM_CLOCK.today(), sorted(Policy().withdrawn()))"
)


def test_the_day_is_inside_the_window_and_read_here() -> None:
    assert revisions.DEPRECATION_DATE <= DAY < revisions.DEFAULT_REMOVAL_DATE
    assert SYSTEM_CLOCK.today() == DAY == revisions.calendar_day()
    assert revisions.deprecation_window_open()
    assert Policy().withdrawn() == frozenset()


def test_a_server_started_as_the_sdk_starts_one_reads_the_same_day() -> None:
    """The SDK's stdio client gives a server only a few variables of its environment."""
    done = subprocess.run(
        [sys.executable, "-c", READ_IN_A_SERVER],
        env=get_default_environment(),
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == [DAY.isoformat(), "[]"]


def test_a_policy_given_another_day_still_reads_that_one() -> None:
    """Tests of the window's closing pin their own day, which the suite's day leaves alone."""
    closed = Policy(today=revisions.DEFAULT_REMOVAL_DATE)
    assert closed.withdrawn() == revisions.DEPRECATED_FEATURES


def test_the_library_reads_the_calendar_in_one_place() -> None:
    """The one place the pin replaces: another reading would escape it, and the suite would
    pass today and fail on the first day past the window."""
    readings = [
        str(path.relative_to(SRC))
        for path in sorted(SRC.rglob("*.py"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if CALENDAR.search(line)
    ]
    assert readings == ["mcp_negotiation/core/revisions.py"]
