"""The built wheel is what a user installs: it must hold every file the package reads at run time.

`daybook web` once crashed after any non-editable install because `web/static/live.js` was not in
the wheel (package data listed only `py.typed`), and CI, installing in editable mode, never saw it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "daybook"


@pytest.mark.slow
# pip builds the wheel in an isolated environment, as `pip install .` does for a user.
def test_the_wheel_holds_every_non_python_file_of_the_package(tmp_path: Path) -> None:
    # From a copy without the editable install's egg-info: its file list would smuggle data files
    # into the wheel that a clean checkout's `pip install .` leaves out.
    source = tmp_path / "source"
    ignore = shutil.ignore_patterns("*.egg-info", "__pycache__")
    shutil.copytree(ROOT / "src", source / "src", ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(source)],
        check=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("daybook_runtime-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    wanted = {
        "daybook/" + path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file() and path.suffix not in {".py", ".pyc"} and "__pycache__" not in path.parts
    }
    assert wanted, "the package has data files to check"
    assert wanted <= names, f"missing from the wheel: {sorted(wanted - names)}"
