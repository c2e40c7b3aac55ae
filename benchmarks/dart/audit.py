"""The semantic audit, read at the counterparties (the service's tables, the SMTP sink, the
output files), never from the journal: safe-equivalence per T19/T20.

- semantic: the run finished and the failed instance's value is confirmed exactly once, with
  the value the final result reports;
- prefix: each consumer's durable record stands on the producer value the final result reports,
  and says what the final result says (no committed consumer left on an undone value);
- effect: every durable act happened exactly once and agrees with the final result (the
  invitation names the final slots; the repair targets the final cause);
- committed_prefix: the records committed before the failure are unchanged after recovery.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dart_resources as rs
from cases import Case


@dataclass(frozen=True)
class Audit:
    semantic: bool
    prefix: bool
    effect: bool | None  # None: this domain has no durable act to check
    committed_prefix: bool

    def safe(self, effect_required: bool, prefix_required: bool) -> bool:
        ok = self.semantic and self.prefix
        if effect_required and self.effect is not None:
            ok = ok and self.effect
        return ok and (self.committed_prefix or not prefix_required)


def snapshot(db: str, run: str) -> list[tuple[Any, ...]]:
    """The consumers' committed records before recovery (for the committed-prefix check)."""
    return [r[1:4] for r in rs.rows(db, "records", run)]


def audit(
    case: Case, run: str, result: dict[str, Any] | None, cp: rs.Counterparty, before: list[Any]
) -> Audit:
    db = cp.res["db"]
    records = [r[1:4] for r in rs.rows(db, "records", run)]
    committed_prefix = sorted(before) == sorted(records)
    if result is None:
        return Audit(False, False, False if _has_acts(case) else None, committed_prefix)
    target = case.producer
    confirms = [(e, v) for _, e, v, _ in rs.rows(db, "confirms", run)]
    semantic = confirms == [(target, result.get(target))] and all(b["entity"] in result for b in case.blocks)
    prefix = all(result.get(e) == v and b == result.get(case.producer, b) for e, v, b in records)
    prefix = prefix and len(records) == len({e for e, _, _ in records})
    if "files" in cp.res:
        path = f"{cp.res['files']}/{run}.{target}.out"
        semantic = semantic and os.path.exists(path) and Path(path).read_text() == result.get(target)
    return Audit(semantic, prefix, _effects(case, run, result, cp), committed_prefix)


def _has_acts(case: Case) -> bool:
    return any(op["op"] == "mail" or op.get("tool") == "act" for b in case.blocks for op in b["ops"])


def _effects(case: Case, run: str, result: dict[str, Any], cp: rs.Counterparty) -> bool | None:
    if not _has_acts(case):
        return None
    acts = [(what, body) for _, what, body, _ in rs.rows(cp.res["db"], "acts", run)]
    ok = len(acts) == len({w for w, _ in acts})  # each act exactly once
    for what, body in acts:
        expected = result.get(case.producer) if what == "notify" else result.get(what)
        ok = ok and body == expected
    if any(op["op"] == "mail" for b in case.blocks for op in b["ops"]):
        mails = cp.mail(run)
        ok = ok and len(mails) == 1 and all(f'"{result.get(k)}"' in mails[0] for k in ("p0", "c0"))
    return ok
