"""Client versions and the small range syntax per-client rules are written in.

A client's `clientInfo.version` is whatever its authors put there: real releases
(`1.138.0`), a version frozen for years (`cursor-vscode` always sends `1.0.0`, `Q DEV CLI`
too), nothing at all (a 2026-07-28 request need not carry `clientInfo`). So a rule's range
must be small enough to read at a glance, and a version it cannot read must match no
range: a frozen or missing version is *unknown*, never "old".

The syntax, semver-ish (documented in `docs/client-overrides.md`):

- `*` any version, also none or one that cannot be read;
- `1.2.3` exactly that version; `1.2`, `1.2.*`, `1.x` every `1.2.…` (`1.…`) version;
- `>=1.2`, `>1.2`, `<=1.2`, `<1.2`, `=1.2.3` (`==` too) compare;
- `^1.2.3` the same major version from 1.2.3 on (`>=1.2.3 <2`; for `0.y` the same minor);
  `~1.2.3` the same minor version from 1.2.3 on (`>=1.2.3 <1.3`);
- comparators separated by spaces (or commas) must all hold; `||` separates alternatives.

A version is up to four dot-separated numbers, optionally prefixed with `v` and followed by
a pre-release (`-beta.1`, sorting before its release) and build metadata (`+abc`, ignored).
Missing parts count as zero (`1.2` is `1.2.0`). A pre-release counts as the release it
precedes against a bound written without one (`<2` leaves `2.0.0-rc.1` out, `>=2` takes it
in); against a pre-release bound it is ordered as semver orders it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from .errors import PolicyError, UsageError

__all__ = ["MAX_RANGE_LENGTH", "Version", "VersionRange", "parse_version"]

MAX_RANGE_LENGTH: Final = 256
_PARTS: Final = 4
_VERSION: Final = re.compile(
    r"v?(\d{1,9}(?:\.\d{1,9}){0,3})(?:-([0-9A-Za-z.-]{1,64}))?(?:\+[0-9A-Za-z.-]{0,64})?"
)
_WILDCARD: Final = re.compile(r"v?((?:\d{1,9}\.){0,2}\d{1,9})(?:\.[*xX])?|v?((?:\d{1,9}\.){1,3})[*xX]")
_OPERATORS: Final = ("<=", ">=", "==", "<", ">", "=", "^", "~")
_MISTAKES: Final = {"=>": ">=", "=<": "<=", "!=": None, "&&": " ", "latest": "*", "any": "*", "all": "*"}

Version = tuple[tuple[int, ...], bool, str]
"""A parsed version, ordered as versions are: its numbers (four), whether it is a release
(a pre-release sorts before its release), and its pre-release text."""


def parse_version(text: object) -> Version | None:
    """`text` as a `Version`, or None when it is none (a client's version may be anything)."""
    if not isinstance(text, str) or len(text) > MAX_RANGE_LENGTH:
        return None
    match = _VERSION.fullmatch(text.strip())
    if match is None:
        return None
    numbers = tuple(int(part) for part in match.group(1).split("."))
    return numbers + (0,) * (_PARTS - len(numbers)), match.group(2) is None, match.group(2) or ""


Test = Callable[[Version], bool]


def _key(bound: Version) -> Callable[[Version], Any]:
    """How a version is compared with `bound`: by its numbers alone when the bound is a
    release (a pre-release counts as the release it precedes: `<2` leaves out `2.0.0-rc`,
    `>=2` takes it), in full when the bound is a pre-release itself."""
    if bound[1]:
        return lambda version: version[0]
    return lambda version: version


def _prefix(numbers: tuple[int, ...]) -> Test:
    def test(version: Version) -> bool:
        return version[0][: len(numbers)] == numbers

    return test


def _between(low: Version, high: tuple[int, ...]) -> Test:
    above, below = _compare(">=", low), _compare("<", (high + (0,) * (_PARTS - len(high)), True, ""))
    return lambda version: above(version) and below(version)


def _compare(operator: str, bound: Version) -> Test:
    key = _key(bound)
    limit = key(bound)
    if operator == ">=":
        return lambda version: key(version) >= limit
    if operator == ">":
        return lambda version: key(version) > limit
    if operator == "<=":
        return lambda version: key(version) <= limit
    if operator == "<":
        return lambda version: key(version) < limit
    return lambda version: version == bound  # `=`, `==`, or a version alone: exactly that one


class RangeError(PolicyError):
    """A malformed range, with what was probably meant."""


def _problem(rule: str, why: str, meant: str | None = None) -> RangeError:
    hint = f"; did you mean {meant!r}?" if meant else ""
    where = "(docs/client-overrides.md, 'Version ranges')"
    return RangeError(f"malformed version range {rule!r}: {why}{hint} {where}")


def _comparator(rule: str, token: str) -> Test:
    for wrong, right in _MISTAKES.items():
        if token.lower().startswith(wrong):
            if right is None:
                raise _problem(rule, f"{wrong!r} is not an operator (write the versions that match)")
            meant = (
                rule.replace("&&", " ") if right == " " else rule.replace(token, right + token[len(wrong) :])
            )
            raise _problem(rule, f"{token!r} is not a comparator", " ".join(meant.split()))
    operator = next((op for op in _OPERATORS if token.startswith(op)), "")
    text = token[len(operator) :]
    wild = _WILDCARD.fullmatch(text) if operator in ("", "=", "==") else None
    if wild is not None:
        numbers = tuple(int(part) for part in (wild.group(1) or wild.group(2)).rstrip(".").split("."))
        if text[-1] in "*xX" or (not operator and len(numbers) < 3):
            return _prefix(numbers)
    version = parse_version(text)
    if version is None:
        if not text:
            raise _problem(rule, f"{operator!r} has no version after it")
        raise _problem(rule, f"{text!r} is no version (up to four numbers: 1.2.3)")
    if operator == "^":
        numbers = version[0]
        nonzero = next((i for i, n in enumerate(numbers[:3]) if n), 2)
        return _between(version, (*numbers[:nonzero], numbers[nonzero] + 1))
    if operator == "~":
        numbers = version[0]
        return _between(version, (numbers[0], numbers[1] + 1))
    return _compare(operator, version)


@dataclass(frozen=True, slots=True)
class VersionRange:
    """A parsed range (see the module's docstring for the syntax); `text` is what was written."""

    text: str
    alternatives: tuple[tuple[Test, ...], ...]
    anything: bool

    @classmethod
    def parse(cls, text: object) -> VersionRange:
        """`text` parsed; a `RangeError` (a `ValueError`) saying what is wrong, and what was
        probably meant, for anything else."""
        if not isinstance(text, str):
            raise UsageError(f"a version range is a string such as '>=1.2 <2'; got {type(text).__name__}")
        if len(text) > MAX_RANGE_LENGTH:
            raise _problem(text[:40] + "...", f"longer than {MAX_RANGE_LENGTH} characters")
        if not text.strip():
            raise _problem(text, "it is empty (leave the range out, or write '*', for any version)", "*")
        hyphen = re.fullmatch(r"\s*(\S+)\s+-\s+(\S+)\s*", text)
        if hyphen:
            raise _problem(text, "hyphen ranges are not supported", f">={hyphen[1]} <={hyphen[2]}")
        alternatives: list[tuple[Test, ...]] = []
        anything = False
        for alternative in text.split("||"):
            # `>= 1.2` (a space after the operator) is read as `>=1.2`, as npm reads it.
            joined = re.sub(r"(<=|>=|==|<|>|=|\^|~)\s+", r"\1", alternative.replace(",", " "))
            tokens = joined.split()
            if not tokens:
                raise _problem(text, "an alternative between '||' is empty")
            if tokens == ["*"]:
                anything = True
                continue
            alternatives.append(tuple(_comparator(text, token) for token in tokens))
        return cls(text, tuple(alternatives), anything)

    def __contains__(self, version: object) -> bool:
        """Whether a client's `version` (a string, or None when it sent none) is in the range.

        One that cannot be read is in `*` only: a frozen or missing version is unknown."""
        if self.anything:
            return True
        parsed = parse_version(version)
        if parsed is None:
            return False
        return any(all(test(parsed) for test in tests) for tests in self.alternatives)

    def __repr__(self) -> str:
        return f"VersionRange({self.text!r})"
