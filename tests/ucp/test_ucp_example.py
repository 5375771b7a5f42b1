"""The worked examples in docs/ucp.md are the example files, and print what the page says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "ucp_negotiation_core.py"
RELEASE_EXAMPLE = ROOT / "examples" / "ucp_2026_08_25.py"
PAGE = (ROOT / "docs" / "ucp.md").read_text()


def blocks(language: str) -> list[str]:
    """The page's fenced blocks in `language`, in page order."""
    return re.findall(rf"^```{language}\n(.*?)^```$", PAGE, flags=re.DOTALL | re.MULTILINE)


def output(example: Path) -> str:
    run = subprocess.run(
        [sys.executable, str(example)], capture_output=True, text=True, timeout=60, check=True
    )
    assert run.stderr == ""
    return run.stdout


def test_the_page_shows_the_example_files() -> None:
    assert blocks("python") == [EXAMPLE.read_text(), RELEASE_EXAMPLE.read_text()]


def test_the_example_prints_what_the_page_says() -> None:
    assert output(EXAMPLE) == blocks("text")[0]


def test_the_2026_08_25_example_prints_what_the_page_says() -> None:
    assert output(RELEASE_EXAMPLE) == blocks("text")[1]
