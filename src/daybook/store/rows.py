"""Row <-> record conversion shared by the backends (column order is the same in both)."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from ..errors import CorruptJournal, DuplicateKey, LeaseLost, NotSerializable, SchemaVersionError
from ..records import STEPPED, Event, Kind, RunInfo, check_text, dumps, loads, row_text, safe_text, validate

_KIND_SET = frozenset(k.value for k in Kind)
log = logging.getLogger("daybook")

EVENT_COLUMNS = "run_id, seq, step, kind, name, key, status, attempt, fp, data, at, parent"
# Written once for every backend (`dialect`): `%s` marks, the payload cast to PostgreSQL's json.
INSERT_EVENT = (
    f"INSERT INTO daybook_events ({EVENT_COLUMNS}) "
    f"VALUES ({', '.join(['%s'] * 9 + ['%s::json', '%s', '%s'])})"
)
RUN_COLUMNS = (
    "run_id, workflow, ref, status, input, result, error, created_at, updated_at, "
    "lease_owner, lease_expires, schema_version, wake_at, code_version"
)
# The header's columns from schema v11 on (queues, search): written always (a store open for
# writing is current), read when the store has them (a read-only handle may read an older one).
RUN_EXTRA = "queue, priority, partition_key, parent_run"
RUN_ALL = f"{RUN_COLUMNS}, {RUN_EXTRA}"


# The tables `raw_rows` reads and their columns, in order (JSON columns come back as text).
RAW_TABLES = {
    "runs": RUN_COLUMNS,
    "events": EVENT_COLUMNS,
    "inbox": "id, run_id, name, payload, sender, at",
    "entity_log": "id, name, at, agent, action, data",
    "commits": "commit_id, key, message, author, at, records",
}


def event_params(ev: Event) -> tuple[Any, ...]:
    run_id, name, key = ev.run_id, ev.name, ev.key
    # `text_ok` of each, inline: this runs for every journal row.
    if not (
        run_id.isascii()
        and "\x00" not in run_id
        and name.isascii()
        and "\x00" not in name
        and (key is None or (key.isascii() and "\x00" not in key))
    ):
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
        row_text(ev.data, run_id, ev.seq),
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
        info.queue,
        info.priority,
        info.partition,
        info.parent_run,
    )


def run_from_row(row: Sequence[Any], parsed: bool = False) -> RunInfo:
    run_id = row[0]

    def val(x: Any, column: str) -> Any:
        if parsed or x is None:
            return x
        try:
            return json.loads(x)
        except ValueError as exc:
            raise CorruptJournal(
                f"run {run_id!r}: the {column} in its header is not valid JSON ({exc}); the row "
                f"was changed outside daybook. Restore it from a backup (`daybook export {run_id} "
                "--raw` salvages what is readable)"
            ) from None

    try:
        return RunInfo(
            run_id=run_id,
            workflow=row[1],
            ref=row[2],
            status=row[3],
            input=val(row[4], "input"),
            result=val(row[5], "result"),
            error=val(row[6], "error"),
            created_at=float(row[7]),
            updated_at=float(row[8]),
            lease_owner=row[9],
            lease_expires=None if row[10] is None else float(row[10]),
            schema_version=int(row[11]),
            wake_at=None if row[12] is None else float(row[12]),
            code_version=row[13] or "",
            **(_extra(row) if len(row) > 14 else {}),
        )
    except (TypeError, ValueError) as exc:
        raise CorruptJournal(
            f"run {run_id!r}: its header does not decode ({exc}); restore it from a backup "
            f"(`daybook export {run_id} --raw` salvages what is readable)"
        ) from None


def _extra(row: Sequence[Any]) -> dict[str, Any]:
    return {"queue": row[14], "priority": int(row[15] or 0), "partition": row[16], "parent_run": row[17]}


def runs_from_rows(
    rows: Sequence[Sequence[Any]], damage: dict[str, str], parsed: bool = False
) -> list[RunInfo]:
    """Run headers for a listing: one that does not decode is skipped and flagged in `damage`."""
    out: list[RunInfo] = []
    for row in rows:
        try:
            out.append(run_from_row(row, parsed))
        except CorruptJournal as exc:
            flag(damage, str(row[0]), str(exc))
    return out


def events_skipping(
    rows: Sequence[Sequence[Any]], damage: dict[str, str], parsed: bool = False
) -> list[Event]:
    """Rows of several runs for a listing: one that does not decode is skipped and its run
    flagged in `damage`, so one damaged row does not hide every other run's."""
    try:
        return events_from_rows(rows, parsed)
    except CorruptJournal:
        pass
    out: list[Event] = []
    for row in rows:
        try:
            out.append(event_from_row(row, parsed))
        except CorruptJournal as exc:
            flag(damage, str(row[0]), str(exc))
    return out


def flag(damage: dict[str, str], run_id: str, problem: str) -> None:
    """Note that a listing skipped run `run_id` because of `problem` (logged once per run)."""
    if run_id not in damage:
        damage[run_id] = problem
        log.warning("skipped run %r: %s", run_id, problem)


# The oldest schema whose tables and columns this code reads as they are: a read-only handle
# (which never migrates) can read a store stamped with it or later.
READABLE_FROM = 7


def parse_stamp(value: object, url: str) -> int:
    """The schema version in `daybook_meta`, as an int (SchemaVersionError if it is not one)."""
    try:
        return int(str(value))
    except ValueError:
        raise SchemaVersionError(
            f"store {url} has schema version stamp {_short(value)}, which is not a version number "
            "(not a number at all): the daybook_meta table was changed outside daybook. Restore it "
            "from a backup, or set schema_version to the number daybook wrote"
        ) from None


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def foreign_tables(url: str, exc: BaseException) -> str:
    """The message for a store whose daybook_* tables were not made by daybook."""
    return (
        f"{url} holds tables named like daybook's that daybook did not make "
        f"({safe_text(str(exc)).strip()}); give daybook a file, database or ?schema= of its own"
    )


def check_version(found: int, current: int, url: str, read_only: bool = False) -> None:
    """Refuse a store written by a newer daybook; a read-only handle also refuses one too old
    to read without the upgrade it may not make."""
    if found > current:
        raise SchemaVersionError(
            f"store {url} has daybook schema v{found}, but this daybook only knows up to "
            f"v{current}; upgrade daybook (pip install -U daybook-runtime) before opening it"
        )
    if read_only and found < READABLE_FROM:
        raise SchemaVersionError(
            f"store {url} has daybook schema v{found}, older than the v{READABLE_FROM} this "
            "daybook reads without upgrading it, and reading never writes: upgrade the store "
            "first with `daybook migrate`, then read it"
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
