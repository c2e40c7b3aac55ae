"""Printing: markdown tables, REPRODUCED lines, and the JSON beside them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def fmt(x: Any, digits: int = 2) -> str:
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


@dataclass
class Table:
    """One of the paper's tables, as measured here."""

    key: str
    title: str
    header: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    verdicts: list[tuple[bool, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    def row(self, *cells: Any) -> None:
        self.rows.append(list(cells))

    def check(self, ok: bool, criterion: str, why: str = "") -> None:
        """A criterion and what we measured; `why` (the reason it fails) is printed only if it does."""
        self.verdicts.append((bool(ok), criterion if ok or not why else f"{criterion}: {why}"))

    def markdown(self) -> str:
        out = [f"### {self.key}: {self.title}", "", "| " + " | ".join(self.header) + " |"]
        out.append("|" + "---|" * len(self.header))
        out += ["| " + " | ".join(fmt(c) for c in r) + " |" for r in self.rows]
        out.append("")
        out += [f"REPRODUCED: {'yes' if ok else 'no'} — {c}" for ok, c in self.verdicts]
        out += [f"note: {n}" for n in self.notes]
        return "\n".join(out) + "\n"

    def as_json(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "header": self.header,
            "rows": [[fmt(c) if not isinstance(c, int | float) else c for c in r] for r in self.rows],
            "reproduced": [{"ok": ok, "criterion": c} for ok, c in self.verdicts],
            "notes": self.notes,
            "data": self.data,
        }
