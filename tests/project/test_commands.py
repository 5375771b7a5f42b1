"""The project's commands: the bootstrap (dev.py) keeps the main job light, and CI runs the README's.

dev.py is imported (it does nothing until `main()`); noxfile.py is read without nox, which
the test environment lacks. A fresh clone's first `python3 dev.py probe` is timed by hand,
not here: speed is never asserted by a test.
"""

from __future__ import annotations

import ast
import importlib.util
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]


def _dev() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dev", ROOT / "dev.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _project() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        project: dict[str, Any] = tomllib.load(f)["project"]
    return project


def _noxfile_constants() -> dict[str, Any]:
    """noxfile.py's module-level names bound to literals."""
    constants = {}
    for node in ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                constants[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return constants


def test_the_probe_environment_gets_the_package_without_extras_and_no_test_only_package() -> None:
    requirements = [r for r in _dev().REQUIREMENTS if r != "-e"]
    assert "." in requirements, "the package itself, with its run-time dependencies"
    assert not [r for r in requirements if r.startswith(".[")], "an extra of the package"
    test_only = {Requirement(r).name for r in _project()["optional-dependencies"]["test"]}
    named = {Requirement(r).name for r in requirements if r != "."}
    assert named & test_only == set()


def test_each_bootstrap_command_runs_a_program_its_environment_has() -> None:
    """A script of the package, or a distribution `.venv` gets besides it."""
    dev = _dev()
    scripts = set(_project()["scripts"])
    programs = [argv[0] for argv in dev.COMMANDS.values()]
    assert {"probe", "nox"} <= set(dev.COMMANDS)
    assert [p for p in programs if p not in scripts and p not in dev.REQUIREMENTS] == []


def test_every_test_path_the_noxfile_names_exists() -> None:
    """The one place the sessions' test paths are written: a moved file must be repointed there."""
    constants = _noxfile_constants()
    names = ("TESTS", "NODE_PEERS", "MATRIX", "MATRIX_PLUGIN_DIR")
    paths = [constants[name] for name in names]
    assert [p for p in paths if not (ROOT / p).exists()] == []
    assert (ROOT / str(constants["MATRIX_PLUGIN_DIR"]) / "matrix_backports.py").exists()


def test_ci_runs_the_readme_test_command() -> None:
    script = (ROOT / ".ci/run").read_text(encoding="utf-8").strip().splitlines()
    command = script[-1].removeprefix("exec ").strip()
    shown = [line.split(" #", 1)[0].strip() for line in (ROOT / "README.md").read_text().splitlines()]
    assert command == "python3 dev.py nox"
    assert command in shown


def _pinned(lock: str) -> dict[str, str]:
    """A lock's pins (`locks/NAME.txt`), name -> version; markers are ignored (universal locks)."""
    pins = {}
    for line in (ROOT / "locks" / f"{lock}.txt").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith((" ", "#")):
            requirement = Requirement(line)
            pins[requirement.name] = str(requirement.specifier).removeprefix("==")
    return pins


def _unmet(requirements: list[str], pins: dict[str, str]) -> list[str]:
    """The requirements a lock does not satisfy (missing, or pinned outside the range)."""
    unmet = []
    for text in requirements:
        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        pinned = pins.get(requirement.name)
        if pinned is None or not requirement.specifier.contains(pinned, prereleases=True):
            unmet.append(f"{text} (locked: {pinned})")
    return unmet


def test_every_environment_installs_from_a_lock_that_meets_pyproject_and_the_matrix() -> None:
    """A lock older than pyproject.toml or the matrix fails here, with the fix in the message."""
    project = _project()
    extras = project["optional-dependencies"]
    dependencies = project["dependencies"]
    fix = "run `python3 dev.py nox -s lock` and commit locks/"
    everything = [*dependencies, *(r for extra in extras.values() for r in extra)]
    assert _unmet(everything, _pinned("main")) == [], fix
    assert _unmet([*dependencies, "nox", "uv"], _pinned("dev")) == [], fix
    constants = _noxfile_constants()
    with (ROOT / "tests/support/matrix.toml").open("rb") as f:
        rows = tomllib.load(f)["env"]
    left_out = {*constants["SDK"], *constants["BUILT_ON_SDK"]}
    for row in rows:
        pins = _pinned(f"matrix-{row['name']}")
        wanted = [f"mcp=={row['mcp']}"] + ([f"fastmcp=={row['fastmcp']}"] if "fastmcp" in row else [])
        rest = [r for r in extras["test"] if Requirement(r).name not in left_out]
        assert _unmet([*dependencies, *rest, *wanted], pins) == [], f"{row['name']}: {fix}"
        assert ("fastmcp" in pins) == ("fastmcp" in row), row["name"]


def test_every_session_that_installs_names_its_lock() -> None:
    """Each `session.install(...)` in noxfile.py starts with a lock (`*_lock(...)`)."""
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    installs = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "install"
    ]
    assert installs

    unlocked = [
        call for call in installs if not (call.args and ast.unparse(call.args[0]).startswith("*_lock("))
    ]
    assert [ast.unparse(call) for call in unlocked] == []
