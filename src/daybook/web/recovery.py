"""The recovery view (`/runs/RUN?view=recovery`): one journal branch of a run shown as a diff,
the steps as they stood before it beside the steps after it, each with a mark.

A journal branch supersedes, never deletes, so both sides are read from the same rows:
- a recovery or a retry: the `run_retried` row listing the steps it `supersede`s (and the
  `soft` ones: confirmed acts replayed if asked for again), with the recovery's report (the
  checkpoint restored, the `--explain` verdict of every candidate checkpoint); the undos ran in
  its recovery run `RUN~recover<n>`;
- a fork: its first row (`fork_of`, `at`, and `supersede` when it took over the original's later
  steps); before is the original's current branch, after the fork's own (the shared steps
  replayed); the original's later acts undone ran in `ORIGINAL~undo@<at>`;
- a steering revision: the `revisions` signal row the run read at a step; before is the run up
  to it, after what the run did next (a retraction's undos are `comp/` acts of the run itself).

Marks, before: superseded (runs again), soft (replayed only if asked for as the same act),
kept, shared (a fork's common prefix), left standing (a fork that did not take them over),
undone (its `comp/<key>` undo is confirmed). After: replayed (the recorded rows), ran again
(new rows, a branch key `~r<n>`), new, not run yet, revision, undo.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..book import Daybook
from ..errors import DaybookError
from ..journal import keys
from ..journal.execution import Execution
from ..records import TERMINAL, Event, Kind, Status
from ..recovery.forking import undo_run_id
from ..recovery.subtask import PREFIX as SUBTASK
from ..recovery.undo import run_id_of
from ..runtime.fork import FORK_OF, SUPERSEDE, current_branch, expand
from ..store import Store
from . import views
from .html import Markup, join, link, status, table, tag, when
from .pages import run_href

CONTEXT = 2  # unchanged steps shown on each side of a changed one; the rest fold into a gap
MAX_UNDO_LOOKUPS = 200  # effects whose undo is looked up by key, per diff
OLD = ("kept", "shared", "replayed")


@dataclass(frozen=True)
class Branch:
    """One journal branch point of a run: `key` names it in `?branch=` (r1, fork, s12)."""

    key: str
    kind: str  # recovery | retry | rewind | fork | revision
    index: int  # its row's position in the run's own journal
    row: Event
    title: str


def branches(run_id: str, own: list[Event]) -> list[Branch]:
    """The run's journal branches, oldest first."""
    found: list[Branch] = []
    for i, ev in enumerate(own):
        if i == 0 and ev.kind == Kind.RUN_STARTED and isinstance(ev.data.get(FORK_OF), str):
            title = f"fork of {ev.data[FORK_OF]} at step {ev.data.get('at')}"
            found.append(Branch("fork", "fork", i, ev, title))
        elif ev.kind == Kind.RUN_RETRIED and ev.data.get("supersede"):
            n = int(ev.data.get("branch") or 1)
            rec = ev.data.get("recovery")
            kind = (
                "recovery"
                if isinstance(rec, dict)
                else "rewind"
                if isinstance(ev.data.get("rewind"), dict)
                else "retry"
            )
            found.append(Branch(f"r{n}", kind, i, ev, f"{kind} {n} ({when(ev.at)})"))
        elif ev.kind == Kind.SIGNAL and ev.name == "revisions" and ev.step is not None:
            found.append(Branch(f"s{ev.step}", "revision", i, ev, f"revision at step {ev.step}"))
    return found


def _steps(store: Store, run_id: str, events: list[Event]) -> dict[int, list[Event]]:
    """The current branch's rows by step, as a cursor over `events` reads them."""
    if not events:
        return {}
    return dict(Execution(store, run_id, expand(store, events), None, read_only=True).steps)


def _side(rows: list[Event], mark: str, note: str = "") -> dict[str, Any]:
    intent = next((ev for ev in rows if ev.kind == Kind.INTENT), None)
    outcomes = [ev for ev in rows if ev.kind == Kind.OUTCOME]
    first = rows[0]
    state = outcomes[-1].status if outcomes else (None if intent is not None else rows[-1].status)
    value = first.data.get("value") if first.name.startswith(SUBTASK) else None
    if not note and isinstance(value, dict) and isinstance(value.get("instance"), str):
        note = value["instance"]  # which subtask instance the marker belongs to
    return {
        "kind": "effect" if intent is not None else first.kind,
        "name": first.name,
        "key": (intent.key if intent is not None else first.key) or "",
        "status": state or ("in flight" if intent is not None else ""),
        "run": first.run_id,
        "mark": mark,
        "note": note,
    }


def _undos(store: Store, effect_keys: list[str]) -> dict[str, dict[str, Any]]:
    """For each key, its undo (`comp/<key>`) if one was made: the run and step, and its outcome."""
    found: dict[str, dict[str, Any]] = {}
    journals: dict[str, list[Event]] = {}
    for key in effect_keys[:MAX_UNDO_LOOKUPS]:
        intent = store.find_intent(keys.compensation_key(key))
        if intent is None:
            continue
        if intent.run_id not in journals:
            journals[intent.run_id] = store.load(intent.run_id)
        outs = [e for e in journals[intent.run_id] if e.step == intent.step and e.kind == Kind.OUTCOME]
        found[key] = {
            "key": key,
            "undo": intent.key,
            "tool": intent.name,
            "run": intent.run_id,
            "step": intent.step,
            "status": outs[-1].status if outs else "in flight",
        }
    return found


def diff(book: Daybook, run_id: str, key: str | None) -> dict[str, Any]:
    """One branch of the run as a diff (the latest when `key` is None); see the module."""
    store = book.store
    info = book.get_run(run_id)
    own = store.load(run_id)
    found = branches(run_id, own)
    out: dict[str, Any] = {
        "run": run_id,
        "status": info.status,
        "branches": [{"key": b.key, "kind": b.kind, "title": b.title} for b in found],
        "branch": None,
        "rows": [],
        "undone": [],
        "verdicts": [],
        "summary": "",
        "preview": None,
    }
    if not found:
        out["preview"] = _preview(book, run_id, info.status)
        return out
    chosen = found[-1] if key is None else next((b for b in found if b.key == key), None)
    if chosen is None:
        names = ", ".join(b.key for b in found)
        raise ValueError(f"run {run_id!r} has no journal branch {key!r}; its branches are: {names}")
    later = [b.index for b in found if b.index > chosen.index]
    end = later[0] if later else len(own)
    after = _steps(store, run_id, own[:end])
    row = chosen.row
    out["branch"] = chosen.key
    out["kind"] = chosen.kind
    out["at"] = row.at
    if chosen.kind == "fork":
        side = _fork_side(store, row, out)
    elif chosen.kind == "revision":
        side = _revision_side(store, run_id, own, chosen, out)
    else:
        side = _branch_side(store, run_id, own, chosen, out)
    before, marks, undone, old_mark = side
    out["rows"] = _rows(run_id, before, marks, after, row, chosen, undone, old_mark, info.status)
    restored = str(out.get("checkpoint") or "").rpartition("@")[2]
    for r in out["rows"]:
        if restored.isdigit() and r.get("step") == int(restored) and r["before"] is not None:
            r["before"]["note"] = f"the checkpoint restored ({out['checkpoint']}); {r['before']['note']}"
    out["undone"] = list(undone.values())
    return out


# What a branch's diff is made of: the steps before it by step, each step's mark before, the
# undos of its acts found by key, and the mark of an unchanged step after it.
Side = tuple[dict[int, list[Event]], dict[int, str], dict[str, dict[str, Any]], str]


def _fork_side(store: Store, row: Event, out: dict[str, Any]) -> Side:
    """A fork: before is the original's current branch, shared up to the fork point."""
    origin, at = str(row.data[FORK_OF]), int(row.data.get("at") or 0)
    before: dict[int, list[Event]] = {}
    for ev in current_branch(store, origin):
        if ev.step is not None:
            before.setdefault(ev.step, []).append(ev)
    took = SUPERSEDE in row.data
    soft = {int(s) for s in row.data.get("soft") or ()}
    later = {
        s: ("soft" if s in soft else "superseded") if took else "left standing" for s in before if s > at
    }
    marks = {s: later.get(s, "shared") for s in before}
    undone = _undos(store, _effect_keys(before, list(later)))
    how = "took over its later steps" if took else "left its later steps standing"
    out["origin"] = origin
    out["undo_run"] = undo_run_id(origin, at)
    out["summary"] = (
        f"Fork of {origin} at step {at} by {row.data.get('by')}: it shares steps up to {at} "
        f"(replayed, never re-fired) and {how}."
    )
    return before, marks, undone, "replayed"


def _revision_side(store: Store, run_id: str, own: list[Event], chosen: Branch, out: dict[str, Any]) -> Side:
    """A steering revision: before is the run up to it; a retraction's undos come after it."""
    row = chosen.row
    before = _steps(store, run_id, own[: chosen.index])
    comps = {
        keys.compensated(str(ev.key))
        for ev in own[chosen.index :]
        if ev.kind == Kind.INTENT and keys.is_compensation(ev.key)
    }
    undone = _undos(store, [k for k in _effect_keys(before, list(before)) if k in comps])
    revs = [r for r in row.data.get("revisions") or [] if isinstance(r, dict)]
    said = "; ".join(f"{r.get('kind')} {r.get('text')!r} by {r.get('author')}" for r in revs)
    conflicts = row.data.get("conflicts") or []
    out["summary"] = f"Revision read at step {row.step}: {said}." + (
        f" Conflicts: {conflicts}." if conflicts else ""
    )
    return before, dict.fromkeys(before, "kept"), undone, "kept"


def _branch_side(store: Store, run_id: str, own: list[Event], chosen: Branch, out: dict[str, Any]) -> Side:
    """A recovery's or a retry's journal branch: the steps it supersedes run again."""
    row = chosen.row
    before = _steps(store, run_id, own[: chosen.index])
    sup = {int(s) for s in row.data.get("supersede") or ()}
    soft = {int(s) for s in row.data.get("soft") or ()}
    marks = {s: ("soft" if s in soft else "superseded") if s in sup else "kept" for s in before}
    undone = _undos(store, _effect_keys(before, sorted(sup - soft)))
    rec = row.data.get("recovery")
    n = int(row.data.get("branch") or 1)
    if isinstance(rec, dict):
        out.update(_recovery(rec, row, n))
        out["undo_run"] = run_id_of(run_id, n)
    elif isinstance(row.data.get("rewind"), dict):  # `daybook rewind`: the checkout went back too
        done = row.data["rewind"]
        out["summary"] = (
            f"Rewind {n} by {row.data.get('by')} to after step {done.get('to')}: files restored "
            f"{done.get('restored') or 'none'}, removed {done.get('removed') or 'none'}; not restored "
            f"(ignored, live state) {done.get('live') or 'none'}; step(s) {sorted(sup)} run again, "
            "every other step replays."
        )
        out["rewind"] = done
    else:
        out["summary"] = (
            f"Retry {n} by {row.data.get('by')} (the run was {row.data.get('from')}): "
            f"step(s) {sorted(sup)} run again, every other step replays."
        )
    return before, marks, undone, "replayed"


def _effect_keys(steps: dict[int, list[Event]], which: list[int]) -> list[str]:
    return [
        str(ev.key) for s in sorted(which) for ev in steps.get(s, []) if ev.kind == Kind.INTENT and ev.key
    ]


def _recovery(rec: dict[str, Any], row: Event, n: int) -> dict[str, Any]:
    chosen = rec.get("checkpoint") if rec.get("action") == "restore" else None
    verdicts = [
        {**v, "chosen": chosen is not None and v.get("checkpoint") == chosen}
        for v in rec.get("verdicts") or []
        if isinstance(v, dict)
    ]
    if chosen:
        what = f"restored {rec.get('instance')} to checkpoint {chosen}"
    else:
        what = f"re-ran the whole task ({rec.get('reason')}: no checkpoint was admissible)"
    summary = (
        f"Recovery {n} ({rec.get('policy')}, failure signal {rec.get('signal')}) by {row.data.get('by')} "
        f"{what}. Steps {rec.get('superseded')} run again ({rec.get('replayed')} action(s), "
        f"{rec.get('upstream')} upstream); {rec.get('preserved')} committed instance(s) kept; "
        f"undone first: {rec.get('compensated') or 'nothing'}."
    )
    if rec.get("dropped"):
        summary += f" Committed consumers left on undone work: {rec.get('dropped')}."
    return {"summary": summary, "checkpoint": chosen, "verdicts": verdicts, "recovery": rec}


def _rows(
    run_id: str,
    before: dict[int, list[Event]],
    marks: dict[int, str],
    after: dict[int, list[Event]],
    row: Event,
    chosen: Branch,
    undone: dict[str, dict[str, Any]],
    old_mark: str,
    run_status: str,
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    ended = run_status in TERMINAL
    for s in sorted(set(before) | set(after)):
        left = None
        if s in before:
            left = _side(before[s], marks.get(s, "kept"))
            undo = undone.get(left["key"])
            if undo is not None and undo["status"] == Status.CONFIRMED:
                left["mark"] = "undone"
                left["note"] = f"undone by {undo['undo']} ({undo['run']} step {undo['step']})"
            elif undo is not None:
                left["note"] = f"undo {undo['undo']} is {undo['status']}"
        right = None
        if s in after:
            rows = after[s]
            new = [ev for ev in rows if ev.run_id == run_id and ev.seq >= row.seq]
            if chosen.kind == "revision" and s == row.step:
                mark = "revision"
            elif not new:
                # The same rows; an act whose undo is confirmed stands in the journal, not the world.
                mark = "undone" if left is not None and left["mark"] == "undone" else old_mark
            elif keys.is_compensation(next((ev.key for ev in rows if ev.kind == Kind.INTENT), None)):
                mark = "undo"
            else:
                mark = "ran again" if s in before else "new"
            right = _side(rows, mark)
        elif left is not None and left["mark"] in ("superseded", "soft", "undone"):
            gone = "not asked for again" if ended else "not run yet"
            right = {"kind": "", "name": "", "key": "", "status": "", "run": run_id, "mark": gone, "note": ""}
        out.append({"step": s, "before": left, "after": right})
    return _fold(out)


def _fold(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Unchanged steps far from any change fold into one gap row, as a diff's context."""

    def changed(r: dict[str, Any]) -> bool:
        b, a = r["before"], r["after"]
        return (b is None or b["mark"] not in OLD) or (a is None or a["mark"] not in OLD)

    hot = [i for i, r in enumerate(rows) if changed(r)]
    keep = {j for i in hot for j in range(i - CONTEXT, i + CONTEXT + 1)}
    out: list[dict[str, Any]] = []
    gap: list[dict[str, Any]] = []

    def close() -> None:
        if len(gap) > 1:
            out.append({"gap": [gap[0]["step"], gap[-1]["step"]], "count": len(gap)})
        else:
            out.extend(gap)  # one step folded would hide as much as it shows
        gap.clear()

    for i, r in enumerate(rows):
        if i in keep or not hot:
            close()
            out.append(r)
        else:
            gap.append(r)
    close()
    return out


def _preview(book: Daybook, run_id: str, run_status: str) -> dict[str, Any] | None:
    """What `daybook recover --explain --dry-run` says of a failed or parked run with no branch."""
    if run_status not in ("failed", "needs_attention"):
        return None
    try:
        rec = book.recover(run_id, dry_run=True)
    except (DaybookError, ValueError) as exc:
        return {"error": str(exc)}
    report = rec.as_dict()
    chosen = report["checkpoint"] if report["action"] == "restore" else None
    report["verdicts"] = [{**v, "chosen": v.get("checkpoint") == chosen} for v in report["verdicts"]]
    return report


def data(book: Daybook, run_id: str, query: views.Query) -> dict[str, Any]:
    return diff(book, run_id, query.get("branch") or None)


def _yes(value: Any) -> str:
    return "yes" if value else "no"


def verdict_table(verdicts: list[dict[str, Any]]) -> Markup:
    """Every candidate checkpoint and the three conditions, as `daybook recover --explain`."""
    rows = [
        [
            tag("code", v.get("checkpoint")),
            _yes(v.get("in_scope")),
            _yes(v.get("no_committed_conflict")),
            _yes(v.get("effect_allowed")),
            status(str(v.get("reason"))),
            ", ".join(map(str, v.get("consumers") or v.get("effects") or [])),
            tag("strong", "restored", class_="mark m-restored") if v.get("chosen") else "",
        ]
        for v in verdicts
    ]
    headers = ["checkpoint", "in scope", "no committed conflict", "effect allowed", "verdict", "why", ""]
    return table(headers, rows, id="verdicts")


def _cell(side: dict[str, Any] | None) -> list[Any]:
    if side is None:
        return ["", ""]
    what = join(
        [
            tag("span", side["kind"], class_="diff-kind"),
            " ",
            side["name"],
            " " if side["key"] else "",
            tag("code", side["key"]) if side["key"] else "",
            " ",
            status(side["status"]) if side["status"] else "",
            tag("div", side["note"], class_="diff-note") if side["note"] else "",
        ]
    )
    mark = side["mark"]
    return [what, tag("span", mark, class_="mark m-" + mark.replace(" ", "-"))]


def _picker(run_id: str, found: dict[str, Any]) -> Markup:
    """Links to each journal branch of the run (the one shown in bold)."""
    items: list[Any] = ["journal branches: "]
    for i, b in enumerate(found["branches"]):
        shown = b["key"] == found["branch"]
        title = (
            tag("strong", b["title"])
            if shown
            else link(views.href(run_id, "recovery", branch=b["key"]), b["title"])
        )
        items += [" | " if i else "", title]
    return tag("p", *items, id="branches")


def _no_branch(found: dict[str, Any]) -> list[Any]:
    """A run with no branch: for a failed or parked one, what a recovery would do."""
    parts: list[Any] = [
        tag(
            "p",
            "No journal branch: this run was never recovered, retried, forked or steered.",
            id="diff-summary",
        )
    ]
    preview = found["preview"]
    if preview and preview.get("error"):
        parts.append(tag("p", "daybook recover --dry-run: ", preview["error"], id="preview"))
    elif preview:
        where = f" at {preview['checkpoint']}" if preview["checkpoint"] else ""
        what = f"{preview['action']} {preview['instance'] or 'the whole task'}{where}"
        parts.append(
            tag(
                "section",
                tag("h2", "What a recovery would do (daybook recover --explain --dry-run)"),
                tag("p", f"{what} ({preview['policy']}: {preview['reason']})", id="preview"),
                verdict_table(preview["verdicts"]) if preview["verdicts"] else "",
            )
        )
    return parts


def _undone_table(undone: list[dict[str, Any]]) -> Markup:
    rows = [
        [
            tag("code", u["key"]),
            tag("code", u["undo"]),
            link(run_href(u["run"]), u["run"]),
            u["step"],
            status(u["status"]),
        ]
        for u in undone
    ]
    return tag(
        "section",
        tag("h2", "Undone (compensations)"),
        table(["act", "undo", "in run", "step", "status"], rows, id="undone"),
    )


def shell(book: Daybook, run_id: str, query: views.Query) -> Markup:
    found = diff(book, run_id, query.get("branch") or None)
    parts: list[Any] = [_picker(run_id, found)] if found["branches"] else []
    if found["branch"] is None:
        return join(parts + _no_branch(found))
    parts.append(tag("p", found["summary"], id="diff-summary"))
    if found.get("origin"):
        parts.append(tag("p", "original: ", link(run_href(found["origin"]), found["origin"])))
    if found["verdicts"]:
        title = tag("h2", "Checkpoints (the --explain verdict of each)")
        parts.append(tag("section", title, verdict_table(found["verdicts"])))
    rows: list[list[Any]] = []
    for r in found["rows"]:
        if "gap" in r:
            a, b = r["gap"]
            rows.append(["", tag("em", f"steps {a} to {b}: {r['count']} unchanged"), "", "", ""])
        else:
            rows.append([r["step"], *_cell(r["before"]), *_cell(r["after"])])
    diff_table = table(["step", "before", "", "after", ""], rows, id="diff", class_="diff")
    parts.append(tag("section", tag("h2", "Steps, before and after"), diff_table))
    if found["undone"]:
        parts.append(_undone_table(found["undone"]))
    return join(parts)


views.register(views.View("recovery", "Recovery diff", shell, data, None))
