"""The built wheel is what a user installs: it must hold every file the package reads at run time,
say its licence and version, and take dependency ranges that hold the versions tested.

`daybook web` once crashed after any non-editable install because `web/static/live.js` was not in
the wheel (package data listed only `py.typed`), and CI, installing in editable mode, never saw it.
"""

from __future__ import annotations

import email
import email.message
import fcntl
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import daybook

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "daybook"
# What a clean checkout's build reads besides src/ (pyproject.toml's readme, license-files, MANIFEST.in).
BUILD_FILES = ("pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", "MANIFEST.in", "constraints.txt")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel `pip install .` builds from a clean checkout (in pip's isolated build
    environment, as for a user). Built once per session: the xdist workers share their parent
    temporary folder, and the first to take the lock builds there for all (each worker built its
    own, half a minute apiece on a loaded machine)."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    with open(shared / "wheel.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        tmp_path = shared / "wheel"
        if not tmp_path.exists():  # built aside and renamed: a failed build leaves no half folder
            building = shared / "wheel-building"
            shutil.rmtree(building, ignore_errors=True)
            _build(building)
            building.rename(tmp_path)
        (built,) = tmp_path.glob("daybook_runtime-*.whl")
        return built


def _build(tmp_path: Path) -> None:
    tmp_path.mkdir()
    # From a copy without the editable install's egg-info: its file list would smuggle data files
    # into the wheel that a clean checkout's `pip install .` leaves out.
    source = tmp_path / "source"
    ignore = shutil.ignore_patterns("*.egg-info", "__pycache__")
    shutil.copytree(ROOT / "src", source / "src", ignore=ignore)
    for name in BUILD_FILES:
        shutil.copy(ROOT / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(source)],
        check=True,
        timeout=300,
    )


def _metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return email.message_from_bytes(archive.read(name))


@pytest.mark.slow
def test_the_wheel_holds_every_non_python_file_of_the_package(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    wanted = {
        "daybook/" + path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file() and path.suffix not in {".py", ".pyc"} and "__pycache__" not in path.parts
    }
    assert wanted, "the package has data files to check"
    assert wanted <= names, f"missing from the wheel: {sorted(wanted - names)}"


@pytest.mark.slow
def test_the_wheel_says_its_licence_and_the_version_daybook_reports(wheel: Path) -> None:
    meta = _metadata(wheel)
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta["License-File"] == "LICENSE"
    assert meta["Version"] == daybook.__version__  # one place: daybook.__version__
    assert wheel.name.startswith(f"daybook_runtime-{daybook.__version__}-")
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in zipfile.ZipFile(wheel).namelist())
    assert "Typing :: Typed" in meta.get_all("Classifier", [])
    # The README's wheel file name is the one a build makes today.
    assert f"dist/{wheel.name}" in (ROOT / "README.md").read_text()
    assert "Apache License" in (ROOT / "LICENSE").read_text()


@pytest.mark.slow
def test_every_dependency_takes_a_range_that_holds_the_tested_version(wheel: Path) -> None:
    """An extra pinned with `==` downgrades or conflicts in an existing project; the exact
    versions tested are in constraints.txt, each inside the range the wheel declares."""
    tested = {
        Requirement(line).name: Requirement(line).specifier
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    requires = [Requirement(r) for r in _metadata(wheel).get_all("Requires-Dist", [])]
    assert requires, "the wheel declares its dependencies"
    for req in requires:
        assert not any(spec.operator in {"==", "==="} for spec in req.specifier), str(req)
        assert req.name in tested, f"{req.name} has no tested version in constraints.txt"
        (pin,) = tested[req.name]
        assert req.specifier.contains(pin.version), f"{req} does not admit the tested {pin.version}"


def test_the_dev_extra_and_the_bench_extra_take_ranges_too() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    pinned = [r for reqs in extras.values() for r in reqs if re.search(r"===?", r)]
    assert pinned == []


@pytest.mark.slow
def test_the_wheel_smoke_script_passes_against_the_checkout(tmp_path: Path) -> None:
    """`.ci/smoke-wheel` runs tests/wheel_smoke.py from an installed wheel; here the same script
    runs against this checkout, so a broken smoke test shows in the suite, not only in CI.
    (The demo and the extras' imports have tests of their own.)"""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "wheel_smoke.py"), "--only", "worker,web,proxy"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "proxy ok" in proc.stdout and "web ok" in proc.stdout


def test_ci_runs_the_readme_command_the_checks_and_then_the_wheel_as_a_user_installs_it() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text().splitlines()
    test_command = "pip install -e '.[dev]' && pytest"
    assert readme[2].endswith("`pip install . && python -m daybook demo`")  # the two commands first
    assert readme[4].endswith(f"`{test_command}`")
    steps = [
        'export PIP_CONSTRAINT="$PWD/constraints.txt"',
        test_command,
        "ruff check src tests",
        "mypy --strict src",
        "lint-imports",
        "python -m build",
        "twine check --strict dist/*",
        ".ci/smoke-wheel dist",
    ]
    at = [ci.index(step) for step in steps]
    assert at == sorted(at), "CI runs these in this order"
    assert "--installed" in (ROOT / ".ci" / "smoke-wheel").read_text()
