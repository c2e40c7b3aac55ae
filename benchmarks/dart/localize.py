"""Localization (T23) and the gate's dry runs, on one failed run: what DART would restore, what
blocking off would drop, and how many instances each weakened key matches (and whether the
localizer abstains on it, as it must when more than one does)."""

from __future__ import annotations

from typing import Any

from cases import Case

from daybook import Daybook, RecoveryPolicy
from daybook.journal.execution import Execution
from daybook.recovery.trace import Trace, lift
from daybook.runtime.fork import expand


def trace_of(book: Daybook, run: str) -> Trace:
    """The lifted trace of a failed run, read as `book.recover` reads it."""
    store = book.store
    info = store.get_run(run)
    assert info is not None
    exe = Execution(store, run, expand(store, store.load(run)), None, read_only=True)
    error = info.error if isinstance(info.error, dict) else {"message": str(info.error or "")}
    return lift(exe.steps, error)


def aliases(full: str) -> dict[str, str]:
    skel, entity, _ = full.split("::")
    return {"full": full, "no_ordinal": f"{skel}::{entity}", "skeleton_only": skel}


def matches(trace: Trace, alias: str) -> list[str]:
    if alias in trace.instances:
        return [alias]
    return sorted(i for i in trace.instances if i.startswith(alias + "::"))


def probe(book: Daybook, run: str, case: Case) -> dict[str, Any]:
    trace = trace_of(book, run)
    dart = book.recover(run, dry_run=True)
    off = book.recover(run, policy=RecoveryPolicy(blocking=False), dry_run=True)
    keys = {}
    for name, alias in aliases(case.failed).items():
        found = matches(trace, alias)
        rec = book.recover(run, instance=alias, dry_run=True)
        keys[name] = {"alias": alias, "candidates": found, "resolved": rec.instance}
    kind = dart.checkpoint.split("@")[0] if dart.checkpoint else "none"
    return {
        "observed_instance": dart.instance,
        "expected_instance": case.failed,
        "observed_kind": kind,
        "expected_kind": case.expect,
        "reason": dart.reason,
        "blocked_ckpts": sum(1 for v in dart.verdicts if v["reason"] != "eligible"),
        "noblock_checkpoint": off.checkpoint,
        "noblock_dropped": list(off.dropped),
        "keys": keys,
    }
