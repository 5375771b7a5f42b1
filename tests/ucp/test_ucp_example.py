"""The worked example in docs/ucp.md is the example file, and prints what the page says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "ucp_negotiation_core.py"
PAGE = (ROOT / "docs" / "ucp.md").read_text()


def block(language: str) -> str:
    """The page's only fenced block in `language`."""
    [found] = re.findall(rf"^```{language}\n(.*?)^```$", PAGE, flags=re.DOTALL | re.MULTILINE)
    return str(found)


def test_the_page_shows_the_example_file() -> None:
    assert block("python") == EXAMPLE.read_text()


def test_the_example_prints_what_the_page_says() -> None:
    run = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=60, check=True
    )
    assert run.stderr == ""
    assert run.stdout == block("text")
