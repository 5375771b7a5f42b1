"""The per-revision feature table, row by row, against its sources.

Where the installed SDK can confirm a row, the test checks it against the SDK's own
per-revision data (`mcp_types.methods` surface maps, keyed by `(method, revision)`,
whose key absence is the SDK's version gate) or its schema snapshots (`mcp_types._v*`).
The SDK validates every pre-2026 revision with the 2025-11-25 schema, so a schema can
only confirm a row at 2025-11-25 and 2026-07-28; boundaries older than that are
changelog facts, asserted explicitly and cited in each test's docstring.
"""

from __future__ import annotations

import sys
import typing
from types import ModuleType

import mcp_types._v2025_11_25 as v2025
import mcp_types._v2026_07_28 as v2026
import pytest
from mcp_types import methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, KNOWN_PROTOCOL_VERSIONS

from mcp_negotiation.core import revisions
from mcp_negotiation.core.revisions import FEATURES, KNOWN, feature

REVS = KNOWN_PROTOCOL_VERSIONS
SCHEMA_REVS = ("2025-11-25", "2026-07-28")
"""The revisions whose schema the SDK ships verbatim."""


def schema(revision: str) -> ModuleType:
    """The schema module the SDK itself uses to validate `revision` (read from its method map)."""
    return sys.modules[methods.CLIENT_REQUESTS[("tools/list", revision)].__module__]


def input_request_types() -> tuple[type, ...]:
    return typing.get_args(v2026.InputRequest)


def expected_span(first: str, last: str | None, revision: str) -> bool:
    i = KNOWN.index(revision)
    return KNOWN.index(first) <= i and (last is None or i <= KNOWN.index(last))


def test_schema_helper_maps_legacy_to_2025_and_modern_to_2026() -> None:
    assert [schema(r) for r in REVS] == [v2025, v2025, v2025, v2025, v2026]


# --- Table-wide invariants ---------------------------------------------------------------


def test_every_row_has_a_dedicated_test_naming_its_source() -> None:
    assert set(ROW_TESTS) == set(FEATURES)
    for name, test in ROW_TESTS.items():
        assert test.__doc__ is not None, name
        assert test.__doc__.startswith("Source:"), name


@pytest.mark.parametrize("name", sorted(FEATURES))
def test_row_is_well_formed(name: str) -> None:
    row = FEATURES[name]
    assert row.name == name
    assert row.side in ("client", "server")
    assert row.first in KNOWN
    assert row.last is None or row.last in KNOWN
    assert row.last is None or revisions.is_at_least(row.last, row.first)
    assert row.source.strip()
    # A row names either the SDK module it was read from, or a changelog / spec fact.
    assert any(word in row.source for word in ("mcp_types", "changelog", "era", "SEP-"))


@pytest.mark.parametrize("name", sorted(FEATURES))
@pytest.mark.parametrize("revision", REVS)
def test_feature_agrees_with_its_row(name: str, revision: str) -> None:
    row = FEATURES[name]
    assert feature(name, revision) is expected_span(row.first, row.last, revision)
    assert row.at(revision) is feature(name, revision)


def test_feature_names_partition_the_table() -> None:
    client, server = revisions.feature_names("client"), revisions.feature_names("server")
    assert not set(client) & set(server)
    assert set(client) | set(server) == set(FEATURES)
    assert {
        "roots",
        "roots.listChanged",
        "sampling",
        "sampling.tools",
        "sampling.context",
        "elicitation",
        "elicitation.form",
        "elicitation.url",
        "tasks",
        "extensions",
    } <= set(client)
    assert {
        "logging",
        "resources.subscribe",
        "completions",
        "structured_output",
        "resource_links",
        "tool_annotations",
    } <= set(server)
    with pytest.raises(ValueError, match="side must be 'client' or 'server'"):
        revisions.feature_names("zzz")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(FEATURES))
@pytest.mark.parametrize("revision", ["zzz", "", "2099-01-01", None, 20250618, ["2025-06-18"]])
def test_unknown_revisions_have_nothing(name: str, revision: object) -> None:
    assert feature(name, revision) is False


@pytest.mark.parametrize(
    "name", ["", "nope", "roots.", "sampling.foo", "ROOTS", "io.x/y", None, 3, ["roots"]]
)
@pytest.mark.parametrize("revision", REVS)
def test_unknown_feature_names_are_false(name: object, revision: str) -> None:
    assert feature(name, revision) is False  # type: ignore[arg-type]


def test_features_are_not_monotonic() -> None:
    """DESIGN.md: roots.listChanged, logging/setLevel and tasks end before 2026-07-28."""
    for name in ("roots.listChanged", "logging.setLevel", "resources.subscribe", "tasks", "sessions"):
        assert feature(name, "2025-11-25"), name
        assert not feature(name, "2026-07-28"), name


# --- Client capabilities ---------------------------------------------------------------------


@pytest.mark.parametrize("revision", REVS)
def test_roots(revision: str) -> None:
    """Source: mcp_types.methods.SERVER_REQUESTS (roots/list, legacy) and the 2026 InputRequest union;
    ClientCapabilities.roots in both schemas."""
    if revisions.era(revision) == "legacy":
        sdk = ("roots/list", revision) in methods.SERVER_REQUESTS
    else:
        sdk = v2026.ListRootsRequest in input_request_types()
    assert "roots" in schema(revision).ClientCapabilities.model_fields
    assert feature("roots", revision) is sdk is True


@pytest.mark.parametrize("revision", REVS)
def test_roots_list_changed(revision: str) -> None:
    """Source: ("notifications/roots/list_changed", rev) in mcp_types.methods.CLIENT_NOTIFICATIONS."""
    sdk = ("notifications/roots/list_changed", revision) in methods.CLIENT_NOTIFICATIONS
    assert feature("roots.listChanged", revision) is sdk
    if sdk:
        assert v2025.Roots.model_fields["list_changed"].alias == "listChanged"


@pytest.mark.parametrize("revision", REVS)
def test_sampling(revision: str) -> None:
    """Source: mcp_types.methods.SERVER_REQUESTS (sampling/createMessage, legacy) and the 2026
    InputRequest union (CreateMessageRequest)."""
    if revisions.era(revision) == "legacy":
        sdk = ("sampling/createMessage", revision) in methods.SERVER_REQUESTS
    else:
        sdk = v2026.CreateMessageRequest in input_request_types()
    assert "sampling" in schema(revision).ClientCapabilities.model_fields
    assert feature("sampling", revision) is sdk is True


@pytest.mark.parametrize("sub", ["context", "tools"])
@pytest.mark.parametrize("revision", REVS)
def test_sampling_sub_capabilities(revision: str, sub: str) -> None:
    """Source: Sampling.context / Sampling.tools in mcp_types._v2025_11_25 and _v2026_07_28;
    before 2025-11-25: the 2025-11-25 changelog added tool use in sampling (SEP-1577) and
    the context capability gating includeContext."""
    if revision in SCHEMA_REVS:
        assert feature(f"sampling.{sub}", revision) is (sub in schema(revision).Sampling.model_fields) is True
    else:
        assert feature(f"sampling.{sub}", revision) is False


@pytest.mark.parametrize("revision", REVS)
def test_elicitation(revision: str) -> None:
    """Source: ("elicitation/create", rev) in mcp_types.methods.SERVER_REQUESTS for legacy
    revisions; ElicitRequest in the 2026-07-28 InputRequest union."""
    if revisions.era(revision) == "legacy":
        sdk = ("elicitation/create", revision) in methods.SERVER_REQUESTS
    else:
        sdk = v2026.ElicitRequest in input_request_types()
    assert feature("elicitation", revision) is sdk


@pytest.mark.parametrize("revision", REVS)
def test_elicitation_form(revision: str) -> None:
    """Source: elicitation/create exists (SERVER_REQUESTS / InputRequest) and 2025-06-18's
    elicitation is form-only (2025-06-18 changelog); Elicitation.form and
    ElicitRequestFormParams in both schemas."""
    assert feature("elicitation.form", revision) is feature("elicitation", revision)
    if revision in SCHEMA_REVS:
        assert "form" in schema(revision).Elicitation.model_fields
        assert hasattr(schema(revision), "ElicitRequestFormParams")
        assert feature("elicitation.form", revision) is True


@pytest.mark.parametrize("revision", REVS)
def test_elicitation_url(revision: str) -> None:
    """Source: for legacy revisions, notifications/elicitation/complete (URL mode's completion
    notification, SEP-1036) in mcp_types.methods.SERVER_NOTIFICATIONS, 2025-11-25 only;
    Elicitation.url / ElicitRequestURLParams in both schema snapshots."""
    if revisions.era(revision) == "legacy":
        sdk = ("notifications/elicitation/complete", revision) in methods.SERVER_NOTIFICATIONS
        assert feature("elicitation.url", revision) is sdk
    if revision in SCHEMA_REVS:
        assert "url" in schema(revision).Elicitation.model_fields
        assert hasattr(schema(revision), "ElicitRequestURLParams")
        assert feature("elicitation.url", revision) is True


@pytest.mark.parametrize("revision", REVS)
def test_tasks(revision: str) -> None:
    """Source: "tasks" in ClientCapabilities.model_fields of mcp_types._v2025_11_25 and not of
    _v2026_07_28 (tasks became an extension); before 2025-11-25: the 2025-11-25 changelog
    introduced tasks (SEP-1686)."""
    if revision in SCHEMA_REVS:
        assert feature("tasks", revision) is ("tasks" in schema(revision).ClientCapabilities.model_fields)
    else:
        assert feature("tasks", revision) is False
    assert "tasks" in v2025.ClientCapabilities.model_fields
    assert "tasks" not in v2026.ClientCapabilities.model_fields


@pytest.mark.parametrize("revision", REVS)
def test_extensions(revision: str) -> None:
    """Source: "extensions" in ClientCapabilities.model_fields of mcp_types._v2026_07_28 only
    (older revisions are validated by the 2025-11-25 schema, which lacks it)."""
    sdk = "extensions" in schema(revision).ClientCapabilities.model_fields
    assert feature("extensions", revision) is sdk


@pytest.mark.parametrize("revision", REVS)
def test_experimental(revision: str) -> None:
    """Source: ClientCapabilities.experimental in both schema snapshots (and every revision)."""
    sdk = "experimental" in schema(revision).ClientCapabilities.model_fields
    assert feature("experimental", revision) is sdk is True


# --- Server features -------------------------------------------------------------------------


@pytest.mark.parametrize("revision", REVS)
def test_logging(revision: str) -> None:
    """Source: ServerCapabilities.logging in both schemas; notifications/message in
    mcp_types.methods.SERVER_NOTIFICATIONS at every revision (deprecated, not removed, SEP-2577)."""
    sdk = ("notifications/message", revision) in methods.SERVER_NOTIFICATIONS
    assert "logging" in schema(revision).ServerCapabilities.model_fields
    assert feature("logging", revision) is sdk is True


@pytest.mark.parametrize("revision", REVS)
def test_logging_set_level(revision: str) -> None:
    """Source: ("logging/setLevel", rev) in mcp_types.methods.CLIENT_REQUESTS."""
    sdk = ("logging/setLevel", revision) in methods.CLIENT_REQUESTS
    assert feature("logging.setLevel", revision) is sdk


@pytest.mark.parametrize("revision", REVS)
def test_resources_subscribe(revision: str) -> None:
    """Source: ("resources/subscribe", rev) in mcp_types.methods.CLIENT_REQUESTS."""
    sdk = ("resources/subscribe", revision) in methods.CLIENT_REQUESTS
    assert feature("resources.subscribe", revision) is sdk


@pytest.mark.parametrize("revision", REVS)
def test_subscriptions_listen(revision: str) -> None:
    """Source: ("subscriptions/listen", rev) in mcp_types.methods.CLIENT_REQUESTS."""
    sdk = ("subscriptions/listen", revision) in methods.CLIENT_REQUESTS
    assert feature("subscriptions.listen", revision) is sdk


@pytest.mark.parametrize("revision", REVS)
def test_server_discover(revision: str) -> None:
    """Source: ("server/discover", rev) in mcp_types.methods.CLIENT_REQUESTS."""
    assert feature("server.discover", revision) is (("server/discover", revision) in methods.CLIENT_REQUESTS)


@pytest.mark.parametrize("revision", REVS)
def test_input_requests(revision: str) -> None:
    """Source: InputRequiredResult exists in the schema the SDK uses for the revision
    (mcp_types._v2026_07_28 only)."""
    sdk = hasattr(schema(revision), "InputRequiredResult")
    assert feature("input_requests", revision) is sdk


@pytest.mark.parametrize("revision", REVS)
def test_sessions(revision: str) -> None:
    """Source: ("initialize", rev) in mcp_types.methods.CLIENT_REQUESTS (the handshake that opens
    a session) and mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS."""
    sdk = ("initialize", revision) in methods.CLIENT_REQUESTS
    assert sdk is (revision in HANDSHAKE_PROTOCOL_VERSIONS)
    assert feature("sessions", revision) is sdk


@pytest.mark.parametrize("revision", REVS)
def test_completions(revision: str) -> None:
    """Source: the 2025-03-26 changelog ("Added completions capability"). completion/complete
    itself exists in 2024-11-05 (mcp_types.methods.CLIENT_REQUESTS), but the capability that
    declares it does not; ServerCapabilities.completions is in both schema snapshots."""
    assert ("completion/complete", revision) in methods.CLIENT_REQUESTS
    assert feature("completions", revision) is (revision != "2024-11-05")
    if revision in SCHEMA_REVS:
        assert "completions" in schema(revision).ServerCapabilities.model_fields


@pytest.mark.parametrize("revision", REVS)
def test_tool_annotations(revision: str) -> None:
    """Source: the 2025-03-26 changelog (ToolAnnotations: readOnlyHint, destructiveHint, ...);
    ToolAnnotations and Tool.annotations in both schema snapshots."""
    assert feature("tool_annotations", revision) is (revision != "2024-11-05")
    if revision in SCHEMA_REVS:
        assert hasattr(schema(revision), "ToolAnnotations")
        assert "annotations" in schema(revision).Tool.model_fields


@pytest.mark.parametrize("revision", REVS)
def test_audio_content(revision: str) -> None:
    """Source: the 2025-03-26 changelog (audio data alongside text and image); AudioContent in
    both schema snapshots."""
    assert feature("audio_content", revision) is (revision != "2024-11-05")
    if revision in SCHEMA_REVS:
        assert hasattr(schema(revision), "AudioContent")


@pytest.mark.parametrize("revision", REVS)
def test_progress_message(revision: str) -> None:
    """Source: the 2025-03-26 changelog (message field on ProgressNotification);
    ProgressNotificationParams.message in both schema snapshots."""
    assert feature("progress.message", revision) is (revision != "2024-11-05")
    if revision in SCHEMA_REVS:
        assert "message" in schema(revision).ProgressNotificationParams.model_fields


@pytest.mark.parametrize("revision", REVS)
def test_batching(revision: str) -> None:
    """Source: JSON-RPC batching was added by the 2025-03-26 changelog and removed by the
    2025-06-18 changelog; neither schema snapshot defines a batch type."""
    assert feature("batching", revision) is (revision == "2025-03-26")
    if revision in SCHEMA_REVS:
        assert not [name for name in dir(schema(revision)) if "Batch" in name]


@pytest.mark.parametrize("revision", REVS)
def test_structured_output(revision: str) -> None:
    """Source: the 2025-06-18 changelog (structured tool output); Tool.outputSchema and
    CallToolResult.structuredContent in both schema snapshots."""
    assert feature("structured_output", revision) is revisions.is_at_least(revision, "2025-06-18")
    if revision in SCHEMA_REVS:
        assert "output_schema" in schema(revision).Tool.model_fields
        assert "structured_content" in schema(revision).CallToolResult.model_fields


@pytest.mark.parametrize("revision", REVS)
def test_resource_links(revision: str) -> None:
    """Source: the 2025-06-18 changelog (resource links in tool call results); ResourceLink in
    both schema snapshots."""
    assert feature("resource_links", revision) is revisions.is_at_least(revision, "2025-06-18")
    if revision in SCHEMA_REVS:
        assert hasattr(schema(revision), "ResourceLink")


@pytest.mark.parametrize("revision", REVS)
def test_icons(revision: str) -> None:
    """Source: the 2025-11-25 changelog (icons on tools, resources, prompts and
    implementations, SEP-973); Icon, Tool.icons and Implementation.icons in both snapshots."""
    assert feature("icons", revision) is revisions.is_at_least(revision, "2025-11-25")
    if revision in SCHEMA_REVS:
        assert hasattr(schema(revision), "Icon")
        assert "icons" in schema(revision).Tool.model_fields
        assert "icons" in schema(revision).Implementation.model_fields


ROW_TESTS: dict[str, typing.Callable[..., None]] = {
    "roots": test_roots,
    "roots.listChanged": test_roots_list_changed,
    "sampling": test_sampling,
    "sampling.context": test_sampling_sub_capabilities,
    "sampling.tools": test_sampling_sub_capabilities,
    "elicitation": test_elicitation,
    "elicitation.form": test_elicitation_form,
    "elicitation.url": test_elicitation_url,
    "tasks": test_tasks,
    "extensions": test_extensions,
    "experimental": test_experimental,
    "logging": test_logging,
    "logging.setLevel": test_logging_set_level,
    "resources.subscribe": test_resources_subscribe,
    "subscriptions.listen": test_subscriptions_listen,
    "server.discover": test_server_discover,
    "input_requests": test_input_requests,
    "sessions": test_sessions,
    "completions": test_completions,
    "tool_annotations": test_tool_annotations,
    "audio_content": test_audio_content,
    "progress.message": test_progress_message,
    "batching": test_batching,
    "structured_output": test_structured_output,
    "resource_links": test_resource_links,
    "icons": test_icons,
}
"""The dedicated test of each row; the meta test above requires one per row of the table."""
