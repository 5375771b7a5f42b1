"""Per-client overrides, pure: the version ranges, the name patterns, what `Policy(...)`
refuses, and what the rules make of a declaration, in both eras, memoised with the record."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_negotiation import ClientOverride, Policy
from mcp_negotiation.core.engine import Engine
from mcp_negotiation.core.facts import PlainFacts
from mcp_negotiation.core.negotiation import Negotiation, Negotiator, supports
from mcp_negotiation.core.versions import VersionRange

MODERN = "2026-07-28"
APPS = "io.modelcontextprotocol/ui"
APP_MIME = "text/html;profile=mcp-app"


# --- Version ranges ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "inside", "outside"),
    [
        ("*", ["1.0.0", "0.0.1", None, "not a version", ""], []),
        ("1.2.3", ["1.2.3", "v1.2.3", "1.2.3+build.5"], ["1.2.4", "1.2.3-beta", "1.2"]),
        ("1.2", ["1.2.0", "1.2.9", "1.2.0-rc.1"], ["1.3.0", "1.20.0", "1.1.9"]),
        ("1.2.*", ["1.2.0", "1.2.77"], ["1.3"]),
        ("1.x", ["1.0", "1.99.3"], ["2.0.0", "0.9"]),
        (">=1.2 <2", ["1.2.0", "1.9.9", "1.10.0"], ["1.1.9", "2.0.0", "2.0.0-alpha"]),
        (">= 1.2, < 2", ["1.5"], ["2.1"]),
        (">1.2.3", ["1.2.4", "2"], ["1.2.3", "1.2.3-rc"]),
        ("<=2.1.251", ["2.1.251", "2.1.9", "2.0.999"], ["2.1.252", "2.2.0"]),
        ("=1.0", ["1.0.0"], ["1.0.1"]),
        ("==1.0.0", ["1.0"], ["1.0.1"]),
        ("^1.2.3", ["1.2.3", "1.9.0"], ["1.2.2", "2.0.0"]),
        ("^0.2.3", ["0.2.3", "0.2.9"], ["0.3.0"]),
        ("~1.2.3", ["1.2.3", "1.2.99"], ["1.3.0", "1.2.2"]),
        ("<1 || >=3", ["0.9", "3.0.0", "4"], ["1.0.0", "2.5"]),
        (">=2.1.0-beta", ["2.1.0-beta", "2.1.0-rc", "2.1.0"], ["2.0.9", "2.1.0-alpha"]),
        ("1.2.3.4", ["1.2.3.4"], ["1.2.3.5", "1.2.3"]),
    ],
)
def test_a_range_holds_what_it_says(written: str, inside: list[Any], outside: list[Any]) -> None:
    parsed = VersionRange.parse(written)
    assert [version for version in inside if version not in parsed] == []
    assert [version for version in outside if version in parsed] == []


@pytest.mark.parametrize("frozen", [None, "", "latest", "1.0.0 (build 7)", "x" * 300, 1, "1..2"])
def test_a_version_nobody_can_read_is_in_no_range_but_any(frozen: Any) -> None:
    """Unknown is not old: a missing or unreadable version matches only `*` (or no range)."""
    assert frozen not in VersionRange.parse("<100")
    assert frozen not in VersionRange.parse(">=0")
    assert frozen in VersionRange.parse("*")


@pytest.mark.parametrize(
    ("written", "meant"),
    [
        ("=>1.2", ">=1.2"),
        ("=<2", "<=2"),
        (">1 && <2", ">1 <2"),
        ("1.2 - 2.0", ">=1.2 <=2.0"),
        ("latest", "*"),
        ("", "*"),
    ],
)
def test_a_malformed_range_says_what_was_meant(written: str, meant: str) -> None:
    with pytest.raises(ValueError, match=f"did you mean '{meant}'") as raised:
        VersionRange.parse(written)
    assert "docs/client-overrides.md" in str(raised.value)


@pytest.mark.parametrize(
    ("written", "why"),
    [
        (">=", "has no version after it"),
        ("1.2.", "is no version"),
        ("1.2.3.4.5", "is no version"),
        (">=1.2 || ", "is empty"),
        ("!=1.2", "is not an operator"),
        ("1.2.3-", "is no version"),
        ("x" * 300, "longer than 256"),
    ],
)
def test_a_malformed_range_says_why(written: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        VersionRange.parse(written)


def test_a_range_is_text() -> None:
    with pytest.raises(TypeError, match="a version range is a string"):
        VersionRange.parse(2)


# --- Names and rules --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "name", "matched"),
    [
        ("cursor-vscode", "cursor-vscode", True),
        ("cursor-vscode", "Cursor-vscode", False),
        ("cursor-vscode", "cursor-vscode-2", False),
        ("local-agent-mode-*", "local-agent-mode-my-server", True),
        ("local-agent-mode-*", "local-agent-mode-", True),
        ("local-agent-mode-*", "x-local-agent-mode-a", False),
        ("* (via mcp-remote *)", "Claude Desktop (via mcp-remote 0.1.29)", True),
        ("Q?DEV?CLI", "Q-DEV-CLI", True),
        ("Q?DEV?CLI", "Q DEV CLI", True),
        ("*", "anything at all", True),
    ],
)
def test_names_match_exactly_or_by_glob(pattern: str, name: str, matched: bool) -> None:
    assert ClientOverride(pattern, revoke=["sampling"]).matches(name, "1.0.0") is matched


def test_a_rule_is_checked_as_it_is_written() -> None:
    with pytest.raises(TypeError, match="client name or glob"):
        ClientOverride("", revoke=["sampling"])
    with pytest.raises(ValueError, match="neither revokes nor grants"):
        ClientOverride("x")
    with pytest.raises(ValueError, match="both revokes and grants sampling"):
        ClientOverride("x", revoke=["sampling"], grant=["sampling"])
    with pytest.raises(ValueError, match="did you mean '>=2'"):
        ClientOverride("x", versions="=>2", revoke=["sampling"])
    with pytest.raises(ValueError, match="only extensions and experimental"):
        ClientOverride("x", grant={"sampling": {"tools": {}}})
    with pytest.raises(TypeError, match="settings object"):
        ClientOverride("x", grant={APPS: ["text/html"]})
    assert ClientOverride("x", revoke="sampling").revoke == ("sampling",)  # one string is one name


@pytest.mark.parametrize(
    ("rule", "problem"),
    [
        (ClientOverride("x", revoke=["elicitaton"]), "did you mean 'elicitation'"),
        (ClientOverride("x", revoke=["roots.list_changed"]), "did you mean 'roots.listChanged'"),
        (ClientOverride("x", grant=["structured_output"]), "is a server feature"),
        (ClientOverride("x", grant=["client."]), "no name of the 'client.' namespace"),
        (ClientOverride("x", grant=["clients.renders_resource_links"]), "client.'renders_resource_links'"),
        (
            ClientOverride("x", grant=["io.modelcontextprotocol/ui/v2"]),
            "did you mean 'io.modelcontextprotocol/ui-v2'",
        ),
    ],
)
def test_policy_refuses_a_rule_naming_what_no_rule_can_decide(rule: ClientOverride, problem: str) -> None:
    with pytest.raises(ValueError, match="client_overrides rule 'x'") as raised:
        Policy(client_overrides=[rule])
    assert problem in str(raised.value)


def test_policy_refuses_what_is_no_list_of_rules_and_twice_the_same_id() -> None:
    with pytest.raises(TypeError, match="a list of ClientOverride"):
        Policy(client_overrides=ClientOverride("x", revoke=["sampling"]))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="got dict"):
        Policy(client_overrides=[{"client": "x"}])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="there twice"):
        Policy(client_overrides=[ClientOverride("x", revoke=["sampling"])] * 2)
    Policy(
        client_overrides=[
            ClientOverride("x", revoke=["sampling"]),
            ClientOverride("x", versions="<2", revoke=["roots"]),
        ]
    )


def test_client_names_cannot_be_required() -> None:
    with pytest.raises(ValueError, match="only client_overrides rules assert"):
        Policy(required_capabilities=["client.renders_resource_links"])


def test_the_known_rules_cite_their_sources_and_are_accepted() -> None:
    known = ClientOverride.known()
    assert known
    assert all(rule.source and "#" in rule.source for rule in known)
    assert len({rule.rule_id for rule in known}) == len(known)
    Policy(client_overrides=known)


# --- What the rules make of a declaration -----------------------------------------------------


RULES = (
    ClientOverride("local-agent-mode-*", revoke=["elicitation"], id="desktop"),
    ClientOverride("acme", versions="<2", revoke=["elicitation.form"], id="acme-old"),
    ClientOverride("acme", versions=">=2", grant={APPS: {"mimeTypes": [APP_MIME]}}, id="acme-apps"),
    ClientOverride(
        "acme", grant=["elicitation.url", "roots.listChanged", "client.reads_instructions"], id="acme"
    ),
    ClientOverride("acme", revoke=["client.reads_instructions"], id="too-late"),
    ClientOverride("*", grant=["sampling"], id="everyone-samples"),
)


def legacy(
    caps: dict[str, Any], name: str | None = "acme", version: str | None = "1.5.0", **policy: Any
) -> Negotiation:
    info = None if name is None else {"name": name, **({"version": version} if version else {})}
    params = {"protocolVersion": "2025-11-25", "capabilities": caps, **({"clientInfo": info} if info else {})}
    return Negotiator(Policy(client_overrides=RULES, **policy)).initialize(params)


def modern(
    caps: dict[str, Any], name: str | None = "acme", version: str | None = "1.5.0", **policy: Any
) -> Negotiation:
    meta: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": caps,
    }
    if name is not None:
        meta["io.modelcontextprotocol/clientInfo"] = {"name": name, "version": version}
    return Negotiator(Policy(client_overrides=RULES, **policy)).request(meta)


ERAS = pytest.mark.parametrize("negotiate", [legacy, modern], ids=["legacy", "modern"])


@ERAS
def test_a_revocation_beats_the_declaration_and_reaches_sub_capabilities(negotiate: Any) -> None:
    record = negotiate({"elicitation": {"form": {}, "url": {}}}, name="local-agent-mode-shop")
    assert [record.supports(name) for name in ("elicitation", "elicitation.form", "elicitation.url")] == [
        False,
        False,
        False,
    ]
    assert record.overrides["elicitation"] == "desktop"
    assert record.source_of("elicitation") == "desktop"
    assert record.revoked == frozenset({"elicitation"})
    assert record.client_capabilities["elicitation"]  # what was declared is kept as declared


@ERAS
def test_a_sub_capability_revoked_leaves_its_siblings(negotiate: Any) -> None:
    """`acme` before 2 declares the bare `{}` (form) but shows no form: url mode, granted, stays."""
    record = negotiate({"elicitation": {}})
    assert record.supports("elicitation")
    assert not record.supports("elicitation.form")
    assert record.supports("elicitation.url")
    assert record.overrides["elicitation.form"] == "acme-old"
    assert record.overrides["elicitation.url"] == "acme"


@ERAS
def test_a_grant_added_to_a_bare_elicitation_keeps_its_form_mode(negotiate: Any) -> None:
    record = negotiate({"elicitation": {}}, version="2.0.0")
    assert record.supports("elicitation.form")
    assert record.supports("elicitation.url")
    assert record.source_of("elicitation.form") == "declared"
    assert record.effective_capabilities is not None
    assert dict(record.effective_capabilities["elicitation"]) == {"form": {}, "url": {}}


@ERAS
def test_declared_wins_over_a_grant(negotiate: Any) -> None:
    record = negotiate({"sampling": {"tools": {}}, "roots": {"listChanged": True}}, name="someone")
    assert record.supports("sampling.tools")
    assert "sampling" not in record.overrides
    assert record.source_of("sampling") == "declared"
    acme = negotiate({"roots": {"listChanged": True}})
    assert "roots.listChanged" not in acme.overrides
    assert acme.source_of("roots.listChanged") == "declared"


@ERAS
def test_a_grant_fills_in_what_was_not_declared(negotiate: Any) -> None:
    record = negotiate({}, name="someone")
    assert record.supports("sampling")
    assert not record.supports("sampling.tools")  # the grant is what it names, no more
    assert record.overrides == {"sampling": "everyone-samples"}
    assert record.source_of("roots") is None


@ERAS
def test_the_first_rule_naming_a_capability_decides_it(negotiate: Any) -> None:
    record = negotiate({})
    assert record.supports("client.reads_instructions")  # `acme` grants it before `too-late` revokes it
    assert record.overrides["client.reads_instructions"] == "acme"
    assert not negotiate({}, name="someone").supports("client.reads_instructions")


@ERAS
def test_an_extension_granted_with_its_settings(negotiate: Any) -> None:
    record = negotiate({}, version="2.3.0")
    assert record.supports(APPS, mimeTypes=[APP_MIME])
    assert not record.supports(APPS, mimeTypes=["text/plain"])
    assert record.source_of(APPS) == "acme-apps"


@ERAS
def test_a_version_range_picks_the_releases(negotiate: Any) -> None:
    assert "elicitation.form" in negotiate({"elicitation": {}}, version="1.9.9").overrides
    assert "elicitation.form" not in negotiate({"elicitation": {}}, version="2.0.0").overrides
    unread = negotiate({"elicitation": {}}, version="nightly")
    assert "elicitation.form" not in unread.overrides  # unknown is not old
    assert unread.overrides["elicitation.url"] == "acme"  # the rule with no range still holds


@ERAS
def test_no_client_info_matches_no_rule(negotiate: Any) -> None:
    record = negotiate({"elicitation": {}}, name=None)
    assert record.overrides == {}
    assert record.effective_capabilities is None
    assert record.supports("elicitation.form")


@ERAS
def test_revisions_and_the_policy_still_decide(negotiate: Any) -> None:
    """A grant answers as a declaration would: not past the revision, nor what is withheld."""
    record = negotiate({}, withhold=["sampling"])
    assert "sampling" in record.overrides
    assert not record.supports("sampling")
    old = Negotiator(Policy(client_overrides=RULES)).initialize(
        {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "acme", "version": "1"}}
    )
    assert "elicitation.url" in old.overrides
    assert not old.supports("elicitation.url")


@ERAS
def test_the_record_says_where_each_answer_came_from(negotiate: Any) -> None:
    shown = negotiate({"elicitation": {}}).as_dict()
    assert shown["overrides"] == {
        "elicitation.form": "acme-old",
        "elicitation.url": "acme",
        "roots.listChanged": "acme",
        "client.reads_instructions": "acme",
        "sampling": "everyone-samples",
    }
    assert shown["revoked"] == ["elicitation.form"]
    assert shown["client_capabilities"] == {"elicitation": {}}
    assert shown["effective_capabilities"] == {
        "elicitation": {"form": {}, "url": {}},
        "roots": {"listChanged": True},
        "sampling": {},
    }


def test_a_record_without_rules_is_as_it_was() -> None:
    record = Negotiator(Policy()).request(
        {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
    )
    assert (record.overrides, record.revoked, record.effective_capabilities, record.extensions) == (
        {},
        frozenset(),
        None,
        {},
    )


@ERAS
def test_a_revoked_requirement_is_refused_naming_the_rule(negotiate: Any) -> None:
    record = negotiate({"elicitation": {"form": {}}}, name="local-agent-mode-x")
    refusal = Negotiator(Policy(client_overrides=RULES)).missing_required(record, ["elicitation.form"])
    assert refusal is not None
    assert refusal.code == -32021
    assert "revoked for this client by rule 'desktop'" in refusal.message
    assert refusal.data == {"requiredCapabilities": {"elicitation": {"form": {}}}}


def test_a_policy_requirement_honours_the_rules_at_the_handshake() -> None:
    from mcp_negotiation.core.errors import NegotiationRefused

    with pytest.raises(NegotiationRefused) as refused:
        legacy({"elicitation": {}}, name="local-agent-mode-x", required_capabilities=["elicitation"])
    assert refused.value.refusal.code == -32021
    granted = legacy({}, name="someone", required_capabilities=["sampling"])
    assert granted.supports("sampling")


def test_the_rules_are_applied_once_per_envelope_not_per_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """Memoised with the record: a repeated envelope is served the very `Known`, its rules
    not applied again."""
    from mcp_negotiation.core import negotiation

    applied: list[object] = []
    real = negotiation.apply_overrides

    def counting(*args: Any) -> Any:
        applied.append(args)
        return real(*args)

    monkeypatch.setattr(negotiation, "apply_overrides", counting)
    engine = Engine(Policy(client_overrides=RULES))
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "acme", "version": "1.0.0"},
    }
    facts = PlainFacts("tools/call", {"name": "t", "_meta": meta}, revision=MODERN, transport="memory")
    first, second = engine.decide(facts), engine.decide(facts)
    assert first.known is second.known
    assert first.known is not None
    assert not supports(first.known.record, "elicitation.form")
    assert len(applied) == 1


def test_the_handshake_report_names_the_rules(caplog: pytest.LogCaptureFixture) -> None:
    from mcp_negotiation.core import client_log

    client_log.reset()
    engine = Engine(Policy(client_overrides=RULES))
    params = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "local-agent-mode-a"},
    }
    with caplog.at_level("INFO", logger="mcp_negotiation"):
        engine.decide(PlainFacts("initialize", params, transport="stdio"))
    decided = "elicitation revoked by 'desktop', sampling granted by 'everyone-samples'"
    assert f"answered by client_overrides: {decided}" in caplog.text


def test_a_client_name_no_rule_decides_is_false_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    negotiator = Negotiator(Policy(client_overrides=RULES))
    record = negotiator.initialize({"protocolVersion": "2025-11-25", "capabilities": {}})
    with caplog.at_level("WARNING", logger="mcp_negotiation"):
        answers = [negotiator.answers(record, "client.renders_links", {}) for _ in range(3)]
        decided = negotiator.answers(record, "client.reads_instructions", {})
    assert answers == [False] * 3
    assert decided is False  # decided by a rule, for no client named here: not logged
    assert caplog.text.count("no client_overrides rule of this server's policy asserts") == 1
    assert "'client.renders_links'" in caplog.text
