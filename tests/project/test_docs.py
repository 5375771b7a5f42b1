"""The documentation: the site builds with warnings as errors, and no code block is untested.

Every fenced block in README.md and docs/ is collected and checked by its language:

- ```python: either it appears verbatim (leading and trailing whitespace aside) in one of
  the files listed in `EXECUTED`, which the test suite runs (checked below: `RUNNERS` maps
  each, and every file under examples/, to a test that names it, and those tests are run
  and must pass), or this module runs it in a fresh interpreter, from a directory of its
  own (a reader's, not the clone's root: no block may lean on a relative path), as a
  module named `__docs__` (so `if __name__ == "__main__":` guards keep servers from
  starting), and it must exit 0 within the timeout;
- ```json and ```toml: it must parse;
- ```sh, ```text and ```console: not run. They show commands and their output: the
  README's commands are run by CI itself (and checked below to be ones that run as
  written on a fresh clone), the probe's output by tests/tools/test_probe.py, the examples'
  output by the tests of each example;
- anything else, including a block without a language, fails: say what it is.

Every package a python block imports is installed with the library, or named on its
page (`pip install opentelemetry-sdk`), and no page installs the library by a name no
package index has. The site is built with `python -m mkdocs build --strict`, from the
venv running the tests (nox's `docs` session does the same), with every HTTP(S) proxy
variable pointing at a closed port, so that a build that tried to fetch anything (a
theme asset, a mkdocstrings inventory) would fail.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

from mcp_negotiation.core.revisions import FEATURES

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

RUNNERS = {
    "examples/bearer_server.py": "test_the_right_bearer_token_reads_every_revision",
    "examples/a2a_negotiation.py": "test_the_a2a_example_prints_each_negotiation_and_the_relayed_refusal",
    "examples/bridge_agreement.py": "test_example_prints_the_agreement",
    "examples/client_overrides.py": "test_each_client_is_answered_by_its_declaration_and_the_rules_naming_it",
    "examples/bridge_proxy.py": "test_bridge_proxy_at_the_oldest_revision_cannot_relay_streaming",
    "examples/elicit_or_default.py": "test_elicit_or_default_asks_a_legacy_client_that_can_answer",
    "examples/era_requirements.py": "test_the_example_serves_legacy_and_tells_modern_clients_where_to_go",
    "examples/lowlevel_server.py": "test_lowlevel_server_answers_for_the_negotiated_revision",
    "examples/mcp1_server.py": "test_the_documented_1x_example_runs_over_stdio",
    "examples/minimal_server.py": "test_minimal_server_asks_only_clients_that_can_elicit",
    "examples/probe_gate.py": "test_the_probe_gate_passes_what_is_served_and_fails_what_is_lost",
    "examples/prometheus_metrics.py": "test_the_prometheus_example_serves_its_metrics",
    "examples/requires_sampling.py": "test_requires_sampling_everywhere_serves_clients_that_sample",
    "examples/tool_catalogs.py": "test_every_client_sees_the_requirements_its_refusal_would_carry",
    "examples/tool_variants.py": "test_each_client_is_listed_and_served_its_variant",
    "examples/tracing.py": "test_tracing_example_prints_the_spans",
    "examples/ucp_2026_08_25.py": "test_the_2026_08_25_example_prints_what_the_page_says",
    "examples/ucp_negotiation_core.py": "test_the_example_prints_what_the_page_says",
    "examples/ucp_shop.py": "test_stdio_session_extension_and_arguments_path",
    "examples/wrap_git_server.py": "test_the_git_servers_factory_negotiated_with_a_tool_of_ours",
    "examples/wrap_time_main.py": "test_four_lines_negotiate_the_time_servers_own_main",
    "examples/wrap_traced.py": "test_spans_of_a_wrapped_stdio_server_go_to_stderr_one_line_each",
    "src/mcp_negotiation/tools/demo.py": "test_a_window_closing_while_serving_reaches_envelopes_seen_before",
}
"""Each file the docs quote, every example among them, and the one test that runs it (as a
subprocess, or imported and driven by the SDK's client); checked below by running that test."""

EXECUTED = tuple(RUNNERS)
"""Files the test suite executes; a docs block copied from one of them is tested there."""

EXEMPT = frozenset({"sh", "text", "console"})
TIMEOUT = 120


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    language: str
    code: str

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


def blocks_of(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown file (indented fences included, dedented)."""
    found: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        language = opening["info"].strip().split(" ")[0].lstrip(".").lower()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not re.match(rf"^[ \t]*{re.escape(fence)}[`~]*\s*$", lines[j]):
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j])
            j += 1
        assert j < len(lines), f"{path}:{i + 1}: a fenced block is never closed"
        found.append(Block(path, i + 1, language, "\n".join(body) + "\n"))
        i = j + 1
    return found


def markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


BLOCKS = [block for path in markdown_files() for block in blocks_of(path)]


def _executed_sources() -> dict[str, str]:
    return {name: (ROOT / name).read_text(encoding="utf-8") for name in EXECUTED}


def _source_of(block: Block) -> str | None:
    """The executed file that holds this block verbatim, if any."""
    code = block.code.strip()
    return next((name for name, text in _executed_sources().items() if code in text), None)


# --- The collection itself ------------------------------------------------------------------


def test_the_docs_have_code_blocks_of_each_kind() -> None:
    languages = {block.language for block in BLOCKS}
    assert {"python", "json", "sh", "text"} <= languages
    assert len([b for b in BLOCKS if b.language == "python"]) >= 10


def test_fences_are_found_in_a_sample() -> None:
    sample = DOCS / "probe.md"
    kinds = [block.language for block in blocks_of(sample)]
    assert kinds[0] == "sh"
    assert "json" in kinds
    json_block = next(block for block in blocks_of(sample) if block.language == "json")
    assert json.loads(json_block.code)["ucp"] is None


def test_every_example_has_a_runner() -> None:
    """An example added without a test that runs it fails here, named."""
    examples = {str(p.relative_to(ROOT)) for p in (ROOT / "examples").glob("*.py")}
    assert sorted(examples - set(RUNNERS)) == []


def _runner(name: str) -> tuple[Path, ast.Module, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The test module (of the suite or of the mcp 1.x one) that defines the test `name`."""
    found = [
        (path, tree, node)
        for path in sorted((ROOT / "tests").rglob("test_*.py"))
        if "node_modules" not in path.parts
        for tree in [ast.parse(path.read_text(encoding="utf-8"))]
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name
    ]
    assert len(found) == 1, f"{len(found)} tests are named {name}"
    return found[0]


@pytest.mark.parametrize("example", sorted(RUNNERS))
def test_the_runner_of_each_example_names_it(example: str) -> None:
    """The runner's body names the file (`stdio_params("x.py")`, `-m mcp_negotiation.tools.demo`),
    or a name its module binds to it: `EXAMPLE = ROOT / "examples" / "x.py"`, `from x import
    build`, a helper that starts the file."""
    path = Path(example)
    package = ".".join(path.with_suffix("").parts[1:])  # src/mcp_negotiation/tools/demo.py
    named = path.name if path.parts[0] == "examples" else package
    module = path.stem if path.parts[0] == "examples" else named
    _, tree, test = _runner(RUNNERS[example])
    bound: set[str] = set()
    for statement in tree.body:
        if isinstance(statement, ast.ImportFrom) and statement.module == module:
            bound.update(alias.asname or alias.name for alias in statement.names)
        elif named not in ast.unparse(statement):
            continue
        elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            bound.add(statement.name)  # a helper that starts it (a test is no helper)
        elif isinstance(statement, ast.Assign):
            bound.update(t.id for t in statement.targets if isinstance(t, ast.Name))
    body = "\n".join(ast.unparse(statement) for statement in test.body)
    used = {node.id for statement in test.body for node in ast.walk(statement) if isinstance(node, ast.Name)}
    bound = {name for name in bound if not name.startswith("test_")}
    assert named in body or used & bound, f"{test.name} does not run {example}"


def test_each_example_runs_under_its_runner(tmp_path: Path) -> None:
    """The runners pass, run here together (not skipped). The mcp 1.x example's runs in the
    SDK matrix's 1.x environments, where `tests/adapters/mcp1` is collected."""
    nodes = {
        example: f"{path.relative_to(ROOT)}::{test.name}"
        for example, name in RUNNERS.items()
        for path, _, test in [_runner(name)]
        if "mcp1" not in path.relative_to(ROOT).parts
    }
    report = tmp_path / "runners.xml"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junitxml={report}",
            *nodes.values(),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=15 * TIMEOUT,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    cases = ET.parse(report).getroot().iter("testcase")
    passed = {case.get("name", "").split("[")[0] for case in cases if not len(case)}  # no failure, no skip
    assert sorted(example for example, node in nodes.items() if node.split("::")[1] not in passed) == []


# --- Every block -----------------------------------------------------------------------------


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: f"{b.id}[{b.language or 'none'}]")
def test_code_block(block: Block, tmp_path: Path) -> None:
    if block.language in EXEMPT:
        return
    if block.language == "json":
        json.loads(block.code)
        return
    if block.language == "toml":
        tomllib.loads(block.code)
        return
    assert block.language == "python", (
        f"{block.id}: a block needs a language (python, json, toml, sh, text, console)"
    )
    if _source_of(block) is not None:
        return  # copied from a file the suite executes
    script = tmp_path / "block.py"
    script.write_text(block.code, encoding="utf-8")
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__docs__')",
            str(script),
        ],
        cwd=tmp_path,  # from any directory, not only the clone's root
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert run.returncode == 0, f"{block.id} failed:\n{run.stderr}"


def test_copied_blocks_are_the_examples_in_full() -> None:
    """Blocks that quote an example quote all of it: a reader can run what they read."""
    sources = _executed_sources()
    for block in BLOCKS:
        name = _source_of(block) if block.language == "python" else None
        if name is not None and name.startswith("examples/"):
            assert block.code == sources[name], f"{block.id} shows part of {name}; show the whole file"


# --- What a reader installs and runs ----------------------------------------------------------


def _normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _installed_with_the_library() -> set[str]:
    """The distributions `pip install .` brings: the library's requirements, recursively
    (markers for extras left out), by normalised name."""
    found: set[str] = set()
    wanted = ["mcp-negotiation"]
    while wanted:
        name = wanted.pop()
        if name in found:
            continue
        try:
            requirements = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue  # for another platform (pywin32): not installed, so nothing imports it here
        found.add(name)
        for requirement in requirements:
            if "extra ==" in requirement:
                continue
            wanted.append(_normalised(re.split(r"[\s<>=!~;\[(]", requirement, maxsplit=1)[0]))
    return found


def _distribution_of(module: str) -> str | None:
    """The distribution that installed `module`; None for the standard library and this repository."""
    top = module.split(".")[0]
    if top in sys.stdlib_module_names:
        return None
    try:
        spec = importlib.util.find_spec(module)
    except ModuleNotFoundError:  # `from package import name`: a name, not a module
        return None
    if spec is None or spec.origin is None:  # not a module, or a namespace package (no files)
        return None
    origin = Path(spec.origin).resolve()
    if ROOT in origin.parents and Path(sys.prefix).resolve() not in origin.parents:
        return None  # the library itself (an editable install) or an example's module, not the venv's
    for name in importlib.metadata.packages_distributions().get(top, []):
        files = importlib.metadata.distribution(name).files or []
        if any(origin == Path(str(f.locate())).resolve() for f in files):
            return _normalised(name)
    raise AssertionError(f"no distribution owns {origin}")


def _imports(code: str) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            # The names may be modules (`from opentelemetry import trace`, a namespace package).
            modules |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return modules


def test_every_package_a_python_block_imports_comes_with_the_library_or_is_named() -> None:
    bundled = _installed_with_the_library()
    unnamed = []
    for block in BLOCKS:
        if block.language != "python":
            continue
        page = block.path.read_text(encoding="utf-8")
        for module in sorted(_imports(block.code)):
            needed = _distribution_of(module)
            if (
                needed is not None
                and needed not in bundled
                and f"`{needed}`" not in page
                and (f"pip install {needed}" not in page)
            ):
                unnamed.append(f"{block.id}: {module} needs `{needed}`, which the page does not name")
    assert unnamed == []


def _commands(path: Path) -> list[str]:
    """The commands a page shows: each line of its sh blocks, and inline `python…`/`pip …` spans."""
    prose = re.sub(r"(?ms)^[ \t]*(`{3,}|~{3,}).*?^[ \t]*\1[ \t]*$", "", path.read_text(encoding="utf-8"))
    text = prose.replace("\n", " ")
    shown = [
        line.split(" #", 1)[0].strip()
        for block in blocks_of(path)
        if block.language == "sh"
        for line in block.code.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    spans = re.findall(r"`((?:python3?|pip) [^`]+)`", text)
    return shown + [span for span in spans if "finds nothing" not in text.split(span, 1)[1][:20]]


def _dev_commands() -> set[str]:
    """The keys of `dev.COMMANDS`, read without running dev.py (it builds environments)."""
    tree = ast.parse((ROOT / "dev.py").read_text(encoding="utf-8"))
    table = next(
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "COMMANDS" for t in node.targets)
    )
    assert isinstance(table, ast.Dict)
    return {key.value for key in table.keys if isinstance(key, ast.Constant) and isinstance(key.value, str)}


def _nox_sessions() -> set[str]:
    """The sessions noxfile.py defines (functions under `@nox.session`), read without nox."""
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and any(ast.unparse(d).startswith("nox.session") for d in node.decorator_list)
    }


def _named_sessions(nox_args: list[str]) -> list[str]:
    """The sessions `-s`/`--session` names in nox's arguments (up to `--`), without parameters."""
    named, selecting = [], False
    for word in nox_args:
        if word == "--":
            break
        if word.startswith("-"):
            selecting = word in ("-s", "--session", "--sessions")
        elif selecting:
            named.append(word.split("(", 1)[0])
    return named


def _runs_on_a_fresh_clone(command: str) -> bool:
    """Whether `command` runs as written in a fresh clone, with nothing but Python 3.11+ and pip
    (and, for `pip`, the package indexes): `python3 dev.py COMMAND` (for `nox`, naming only
    sessions noxfile.py has), or pip installing the clone, a wheel built from it, or published
    packages; never the library by name."""
    words = shlex.split(command)
    if words[:2] == ["python3", "dev.py"]:
        if len(words) < 3 or words[2] not in _dev_commands():
            return False
        return words[2] != "nox" or set(_named_sessions(words[3:])) <= _nox_sessions()
    if words[:1] != ["pip"] or len(words) < 3 or words[1] not in ("install", "wheel"):
        return False  # a bare `python` may be missing, or lack the dependencies
    targets = [word for word in words[2:] if not word.startswith("-") and word != "dist"]
    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    return all(
        target == "."
        or target.startswith(".[")
        or target == f"dist/mcp_negotiation-{version}-py3-none-any.whl"
        or (re.fullmatch(r"[a-z0-9-]+", target) is not None and target != "mcp-negotiation")
        for target in targets
    )


def test_every_command_the_readme_shows_runs_on_a_fresh_clone() -> None:
    commands = _commands(ROOT / "README.md")
    assert "python3 dev.py nox -s docs" in commands  # found at all
    assert "pip install -e ." in commands
    assert [c for c in commands if not _runs_on_a_fresh_clone(c)] == []
    assert not _runs_on_a_fresh_clone("python3 dev.py test")  # no such command
    assert not _runs_on_a_fresh_clone("python3 dev.py nox -s lint doc -- -q")  # no such session
    assert not _runs_on_a_fresh_clone("python -m mkdocs build --strict")  # the system's Python has no mkdocs
    assert not _runs_on_a_fresh_clone("pip install 'mcp-negotiation[instrumentation]'")  # not published


def test_no_page_installs_the_library_by_a_name_no_index_has() -> None:
    for path in markdown_files():
        for command in _commands(path):
            if command.startswith("pip "):
                assert _runs_on_a_fresh_clone(command), f"{path.name}: {command}"


def test_the_telemetry_snippet_exports_to_stderr_and_says_why() -> None:
    page = (DOCS / "telemetry.md").read_text(encoding="utf-8")
    snippets = [b.code for b in blocks_of(DOCS / "telemetry.md") if "ConsoleSpanExporter(" in b.code]
    assert snippets
    assert all("ConsoleSpanExporter(out=sys.stderr)" in code for code in snippets)
    assert "Why stderr: a stdio server speaks JSON-RPC on its standard output" in page


# --- The feature table in concepts.md ----------------------------------------------------------


def test_the_feature_table_is_revisions_features() -> None:
    page = (DOCS / "concepts.md").read_text(encoding="utf-8")
    section = page.split("### The feature table", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    table = []
    for row in rows:
        name, side, first, last = (cell.strip() for cell in row.strip("|").split("|"))
        table.append((name.strip("`"), side, first, None if last == "–" else last))
    assert table == [(r.name, r.side, r.first, r.last) for r in FEATURES.values()]


# --- The site ----------------------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_mkdocs_config_fetches_nothing() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "import:" not in config  # no mkdocstrings inventories
    assert "highlightjs: false" in config  # the mkdocs theme's highlight.js comes from a CDN
    assert "docs_dir: docs" in config


def test_the_site_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{_closed_port()}"
    env = {**os.environ, "HTTP_PROXY": dead, "HTTPS_PROXY": dead, "http_proxy": dead, "https_proxy": dead}
    env.pop("NO_PROXY", None)
    env.pop("no_proxy", None)
    site = tmp_path / "site"
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert run.returncode == 0, run.stderr
    assert "WARNING" not in run.stderr
    # Every page of the navigation is there, and the API reference came from the docstrings.
    for page in ("getting-started", "concepts", "probe", "examples", "faq", "api/bridge"):
        assert (site / page / "index.html").exists(), page
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    assert 'id="mcp_negotiation.client_supports"' in api
    assert "Whether the client of this request can be asked for" in api  # client_supports' docstring
    revisions_page = (site / "api" / "revisions" / "index.html").read_text(encoding="utf-8")
    assert 'id="mcp_negotiation.core.revisions.FEATURES"' in revisions_page


def test_every_test_the_security_page_names_exists() -> None:
    """docs/security.md says which test holds each promise: a renamed or removed test must
    not leave the page vouching with a name that runs nothing."""
    named = re.findall(r"`(tests(?:_v1)?/[\w/]+\.py)::(\w+)`", (DOCS / "security.md").read_text())
    assert len(named) >= 10
    missing = [
        f"{path}::{name}"
        for path, name in named
        if not re.search(rf"^(async )?def {name}\(", (ROOT / path).read_text(), re.MULTILINE)
    ]
    assert missing == []
