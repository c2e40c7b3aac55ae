"""Row <-> record conversion shared by the backends (column order is the same in both)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..errors import CorruptJournal, DuplicateKey, LeaseLost, NotSerializable
from ..records import STEPPED, Event, Kind, RunInfo, check_text, dumps, loads, safe_text, text_ok, validate

_KIND_SET = frozenset(k.value for k in Kind)

EVENT_COLUMNS = "run_id, seq, step, kind, name, key, status, attempt, fp, data, at, parent"
RUN_COLUMNS = (
    "run_id, workflow, ref, status, input, result, error, created_at, updated_at, "
    "lease_owner, lease_expires, schema_version, wake_at, code_version"
)


def event_params(ev: Event) -> tuple[Any, ...]:
    if not (text_ok(ev.run_id) and text_ok(ev.name) and (ev.key is None or text_ok(ev.key))):
        _check_event_text(ev)
    parent = ev.data.get("decision") if ev.kind == "intent" else None
    return (
        ev.run_id,
        ev.seq,
        ev.step,
        ev.kind,
        ev.name,
        ev.key,
        ev.status,
        ev.attempt,
        ev.fp,
        dumps(ev.data, f"run {ev.run_id!r} seq {ev.seq}"),
        ev.at,
        parent,
    )


def _check_event_text(ev: Event) -> None:
    where = f"run {ev.run_id!r} seq {ev.seq} ({ev.kind} step {ev.step})"
    check_text(ev.run_id, f"{where}: the run id")
    check_text(ev.name, f"{where}: the step name")
    if ev.key is not None:
        check_text(ev.key, f"{where}: the idempotency key")


def event_from_row(row: Sequence[Any], parsed: bool = False) -> Event:
    run_id, seq = row[0], row[1]
    try:
        data = row[9] if parsed else loads(row[9], run_id, seq)
        ev = Event(
            run_id=run_id,
            seq=int(seq),
            step=None if row[2] is None else int(row[2]),
            kind=str(row[3]),
            name=str(row[4]),
            key=row[5],
            status=row[6],
            attempt=int(row[7]),
            fp=row[8],
            data=data,
            at=float(row[10]),
        )
    except (TypeError, ValueError) as exc:
        raise CorruptJournal(f"run {run_id!r} seq {seq}: unreadable row ({exc})") from None
    return validate(ev)


def events_from_rows(rows: Sequence[Sequence[Any]], parsed: bool = False) -> list[Event]:
    """A whole journal at once: one JSON parse for every payload, then one cheap pass per row.

    Resume reads every row of a run, so this is the replay hot path; a row that does not parse
    is found by falling back to the row-by-row reader, which names it."""
    if not rows:
        return []
    if parsed:
        datas = [r[9] for r in rows]
    else:
        try:
            datas = json.loads("[" + ",".join(r[9] for r in rows) + "]")
        except (TypeError, ValueError):
            return [event_from_row(r) for r in rows]
        if len(datas) != len(rows):  # a payload like '1,2' would split in two
            return [event_from_row(r) for r in rows]
    out: list[Event] = []
    append = out.append
    stepped = STEPPED
    for r, data in zip(rows, datas, strict=True):
        kind = r[3]
        if kind not in _KIND_SET or type(data) is not dict or (r[2] is None and kind in stepped):
            return [event_from_row(row, parsed) for row in rows]
        append(Event(r[0], r[1], kind, r[2], r[4], r[5], r[6], r[7], r[8], data, r[10]))
    return out


def run_params(info: RunInfo) -> tuple[Any, ...]:
    what = f"run {info.run_id!r}"
    check_text(info.run_id, "the run id")
    check_text(info.workflow, f"{what}: the workflow name")
    check_text(info.ref, f"{what}: the workflow reference")
    return (
        info.run_id,
        info.workflow,
        info.ref,
        info.status,
        dumps(info.input, f"{what} input"),
        dumps(info.result, f"{what} result"),
        dumps(info.error, f"{what} error"),
        info.created_at,
        info.updated_at,
        info.lease_owner,
        info.lease_expires,
        info.schema_version,
        info.wake_at,
        info.code_version,
    )


def run_from_row(row: Sequence[Any], parsed: bool = False) -> RunInfo:
    run_id = row[0]

    def val(x: Any) -> Any:
        return x if parsed else loads(x, run_id, 0)

    return RunInfo(
        run_id=run_id,
        workflow=row[1],
        ref=row[2],
        status=row[3],
        input=val(row[4]),
        result=val(row[5]),
        error=val(row[6]),
        created_at=float(row[7]),
        updated_at=float(row[8]),
        lease_owner=row[9],
        lease_expires=None if row[10] is None else float(row[10]),
        schema_version=int(row[11]),
        wake_at=None if row[12] is None else float(row[12]),
        code_version=row[13] or "",
    )


def parse_version(stamp: object, url: str) -> int:
    """The schema version stamped in `daybook_meta` (0: none yet, a new store)."""
    from ..errors import SchemaVersionError

    if stamp is None:
        return 0
    try:
        return int(str(stamp))
    except ValueError:
        raise SchemaVersionError(
            f"store {url} has a schema version stamp {_short(stamp)} that is not a number; "
            "daybook_meta was changed outside daybook. Restore it from a backup, or set "
            "schema_version to the number daybook wrote"
        ) from None


def foreign_tables(url: str, exc: BaseException) -> str:
    """The message for a store whose daybook_* tables were not made by daybook."""
    return (
        f"{url} holds tables named like daybook's that daybook did not make "
        f"({safe_text(str(exc)).strip()}); give daybook a file, database or ?schema= of its own"
    )


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_version(found: int, current: int, url: str) -> None:
    from ..errors import SchemaVersionError

    if found > current:
        raise SchemaVersionError(
            f"store {url} has daybook schema v{found}, but this daybook only knows up to "
            f"v{current}; upgrade daybook (pip install -U daybook) before opening it"
        )


def unencodable(exc: BaseException, store: str) -> NotSerializable:
    """What an encoding refusal by the database driver means: a value or name it cannot store
    (a lone surrogate; on PostgreSQL a NUL in text), never an unavailable store."""
    return NotSerializable(
        f"{store} cannot store a value daybook was given ({type(exc).__name__}: "
        f"{safe_text(str(exc)).strip()}); text must be valid Unicode, and names, ids, keys and "
        "senders may not hold NUL: clean the value where it is produced"
    )


def conflict_error(event: Event, on_key: bool) -> Exception:
    """What a unique violation on a journal insert means: a reused key, or a lost lease."""
    if on_key:
        return DuplicateKey(
            f"idempotency key {event.key!r} (run {event.run_id!r} step {event.step}) is already "
            "used by another effect; keys name one decision each: derive them with "
            "ctx.key(decision, kind, i) or give each effect its own name"
        )
    return LeaseLost(
        f"run {event.run_id!r}: journal position seq {event.seq} was written by another process; "
        "this process no longer owns the run and stopped without acting"
    )
