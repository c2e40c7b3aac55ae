"""The documentation as the tests read it: README.md and every page under docs/ (the MkDocs
site), their fenced code blocks, and the snippets a page includes from the README."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

FENCE = re.compile(
    r"^(?P<indent>[ \t]*)```(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.S | re.M
)
SNIPPET = re.compile(r'^[ \t]*--8<-- "README\.md:(?P<name>[\w-]+)"[ \t]*$', re.M)


@dataclass(frozen=True)
class Block:
    """One fenced code block: the page it is on (relative to the repository), its line, its
    language (`python`, `py`, `console`, ...), its `title="..."` if any, and its text."""

    page: str
    line: int
    lang: str
    title: str | None
    code: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    """README.md first, then every Markdown page of the site, in path order."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def readme_section(name: str) -> str:
    """The README's text between `--8<-- [start:NAME]` and `--8<-- [end:NAME]` (what a docs page
    that says `--8<-- "README.md:NAME"` shows)."""
    text = README.read_text()
    found = re.search(rf"^.*--8<-- \[start:{name}\].*\n(.*?)^.*--8<-- \[end:{name}\]", text, re.S | re.M)
    assert found is not None, f"README.md has no snippet section {name!r}"
    return found.group(1)


def page_text(path: Path, expand: bool = True) -> str:
    """A page's Markdown, with the README sections it includes put in place when `expand`."""
    text = path.read_text()
    if expand:
        text = SNIPPET.sub(lambda m: readme_section(m.group("name")), text)
    return text


def all_text() -> str:
    """Everything documented, README and site together (snippets expanded)."""
    return "\n".join(page_text(p) for p in pages())


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of one page as written (an included snippet counts on the README)."""
    text = path.read_text()
    found = []
    for m in FENCE.finditer(text):
        info = m.group("info").strip()
        lang = info.split()[0] if info else ""
        title = re.search(r'title="([^"]+)"', info)
        indent = len(m.group("indent"))
        code = "\n".join(ln[indent:] for ln in m.group("body").splitlines()) + "\n"
        line = text.count("\n", 0, m.start()) + 1
        page = str(path.relative_to(ROOT))
        found.append(Block(page, line, lang, title.group(1) if title else None, code))
    return found


def all_blocks() -> list[Block]:
    return [b for p in pages() for b in blocks(p)]
