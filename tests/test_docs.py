"""The documentation is a contract, README.md and the site under docs/ alike: nothing the README
documented before the manual moved to docs/ is lost, every Python block runs, every excerpt
parses, every shell session shows what the commands print (the crash included), and every
`daybook` command the pages name exists.

Conventions a page follows: a ```python block is a whole program and runs as a script; one with
`title="NAME.py"` is a file the page's ```console session uses (written beside it, never run on its
own); a ```py block is an excerpt of a larger program (it must parse; test_shape checks the
names it uses); a ```console block is a session: `$ ` lines are run in order in a fresh folder
(`daybook` is this checkout's, `python` this interpreter), the lines after each are its output, and
`Killed` says the command was SIGKILLed."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from documentation import ROOT, Block, all_blocks, all_text, blocks, pages

import daybook
from daybook.cli import main

FROZEN = json.loads((Path(__file__).parent / "documented_036cbea.json").read_text())


def test_everything_the_old_readme_documented_is_still_documented() -> None:
    """The README at 036cbea was the whole manual: each `ctx.x`, `book.x`, `daybook.X` and
    `daybook <command>` it named is still named in the README or a page of the site."""
    text = all_text()
    missing = [f"ctx.{n}" for n in FROZEN["ctx"] if not re.search(rf"\bctx\.{n}\b", text)]
    missing += [f"book.{n}" for n in FROZEN["book"] if not re.search(rf"\bbook\.{n}\b", text)]
    missing += [f"daybook.{n}" for n in FROZEN["daybook"] if not re.search(rf"\bdaybook\.{n}\b", text)]
    missing += [f"daybook {c}" for c in FROZEN["commands"] if not re.search(rf"\bdaybook {c}\b", text)]
    missing += [f"`{n}`" for n in FROZEN["public_names"] if f"`{n}`" not in text]
    assert missing == []


def _needs(code: str) -> list[str]:
    """Top-level packages the code imports that are not installed here."""
    tree = ast.parse(code)
    mods = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    mods |= {
        n.module.split(".")[0]
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and n.module and not n.level
    }
    return sorted(m for m in mods if importlib.util.find_spec(m) is None)


def _env(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DAYBOOK_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(folder)])
    return env


PROGRAMS = [b for b in all_blocks() if b.lang == "python" and b.title is None]
EXCERPTS = [b for b in all_blocks() if b.lang in {"py", "python"}]
SESSIONS = [p for p in pages() if any(b.lang == "console" for b in blocks(p))]


@pytest.mark.parametrize("block", PROGRAMS, ids=[b.id for b in PROGRAMS])
def test_every_python_block_runs(block: Block, tmp_path: Path) -> None:
    if missing := _needs(block.code):
        pytest.skip(f"{block.id} needs {', '.join(missing)}")
    script = tmp_path / "block.py"
    script.write_text(block.code)
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"{block.id}:\n{proc.stderr}"


@pytest.mark.parametrize("block", EXCERPTS, ids=[b.id for b in EXCERPTS])
def test_every_excerpt_parses(block: Block) -> None:
    ast.parse(block.code, filename=block.id)


def _session(block: Block) -> list[tuple[str, list[str]]]:
    """A console block as (command, expected output lines)."""
    steps: list[tuple[str, list[str]]] = []
    for line in block.code.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line.rstrip())
    return steps


def _run_step(command: str, folder: Path) -> subprocess.CompletedProcess[str]:
    command = re.sub(r"(^|\s)python(\s)", rf"\g<1>{sys.executable}\g<2>", command)
    command = re.sub(r"(^|\s)daybook(\s)", rf"\g<1>{sys.executable} -m daybook\g<2>", command)
    return subprocess.run(
        ["bash", "-c", command], cwd=folder, env=_env(folder), capture_output=True, text=True, timeout=300
    )


@pytest.mark.slow
@pytest.mark.parametrize("page", SESSIONS, ids=[str(p.relative_to(ROOT)) for p in SESSIONS])
def test_every_console_session_prints_what_the_page_shows(page: Path, tmp_path: Path) -> None:
    """The page's files are written to a fresh folder and its sessions run there in order: each
    command prints exactly the lines the page shows after it (a `Killed` line: it was SIGKILLed)."""
    files = [b for b in blocks(page) if b.title]
    local = {Path(b.title).stem for b in files if b.title}
    if missing := sorted({m for b in files if b.lang == "python" for m in _needs(b.code)} - local):
        pytest.skip(f"{page.name} needs {', '.join(missing)}")
    for b in files:
        (tmp_path / b.title).write_text(b.code)  # type: ignore[operator]
    for block in (b for b in blocks(page) if b.lang == "console"):
        for command, expected in _session(block):
            proc = _run_step(command, tmp_path)
            wanted = [ln for ln in expected if ln != "Killed"]
            if "Killed" in expected:
                assert proc.returncode in {-9, 137}, f"{block.id} `{command}` was not killed:\n{proc.stderr}"
            else:
                assert proc.returncode == 0, f"{block.id} `{command}`:\n{proc.stderr}"
            shown = [ln.rstrip() for ln in proc.stdout.splitlines()]
            assert shown == wanted, f"{block.id} `{command}`"


def _commands() -> set[tuple[str, ...]]:
    """Each `daybook CMD [SUB]` the pages name as code: in backticks, or a code block's line
    that starts with it (a shell line, `$ daybook ...`)."""
    found: set[tuple[str, ...]] = set()
    word = r"daybook ([a-z][\w-]*)(?: ([a-z][\w-]*))?"
    for page in pages():
        text = page.read_text()
        for chunk in re.findall(r"`([^`\n]+)`", text):
            found |= {(m.group(1), m.group(2) or "") for m in re.finditer(rf"(?:^|[\s(]){word}", chunk)}
        for b in blocks(page):
            found |= {(m.group(1), m.group(2) or "") for m in re.finditer(rf"^(?:\$ )?{word}", b.code, re.M)}
    return found


def test_every_daybook_command_the_docs_name_exists() -> None:
    unknown = sorted({name for name, _ in _commands() if name not in main.commands})
    assert unknown == []


def test_the_layout_in_docs_architecture_is_true() -> None:
    """docs/architecture.md names every sub-package and top-level module of src/daybook, and
    every file it names exists (the layout went stale once, in the README)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    layout = blocks(ROOT / "docs" / "architecture.md")[0].code
    src = ROOT / "src" / "daybook"
    parts = [p.name + "/" for p in src.iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    parts += [p.name for p in src.glob("*.py") if p.name not in {"__init__.py", "__main__.py"}]
    assert [p for p in sorted(parts) if not re.search(rf"^  {re.escape(p)}\s", layout, re.M)] == []
    files = {
        p.name for d in ("src", "benchmarks", "examples", "tests", "docs") for p in (ROOT / d).rglob("*.py")
    }
    assert sorted(set(re.findall(r"\b([a-z_]+\.py)\b", text)) - files) == []


def test_every_link_in_the_readme_reaches_a_file() -> None:
    """The site's own links are checked by `mkdocs build --strict`; the README's, here."""
    text = (ROOT / "README.md").read_text()
    targets = {t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in t}
    assert sorted(t for t in targets if t and not (ROOT / t).exists()) == []


JSON_BLOCKS = [b for b in all_blocks() if b.lang == "json"]


@pytest.mark.parametrize("block", JSON_BLOCKS, ids=[b.id for b in JSON_BLOCKS])
def test_every_json_block_parses(block: Block) -> None:
    json.loads(block.code)


DIFFS = [p for p in pages() if any(b.lang == "diff" for b in blocks(p))]


@pytest.mark.parametrize("page", DIFFS, ids=[str(p.relative_to(ROOT)) for p in DIFFS])
def test_every_diff_shows_lines_of_the_files_it_compares(page: Path) -> None:
    """A first-hour page's diff ("the lines it takes") goes from its `before.py` to the durable
    file: each removed line is one of before.py's, each added line one of the other's."""
    files = {b.title: b.code.splitlines() for b in blocks(page) if b.title}
    before = files.pop("before.py")
    (after,) = [lines for title, lines in files.items() if title != "scripted.py"]
    for b in (b for b in blocks(page) if b.lang == "diff"):
        for line in b.code.splitlines():
            if line.startswith("-"):
                assert line[1:] in before, f"{b.id}: {line}"
            elif line.startswith("+"):
                assert line[1:] in after, f"{b.id}: {line}"


def test_the_api_reference_renders_every_public_name() -> None:
    text = (ROOT / "docs" / "reference" / "api.md").read_text()
    rendered = set(re.findall(r"^::: daybook\.(\w+)$", text, re.M))
    assert set(daybook.__all__) - {"SCHEMA_VERSION", "__version__"} - rendered == set()
