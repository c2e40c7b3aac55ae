"""`SqlStore`: the `Store` protocol over any SQL `Dialect`, each statement written once.

Runs and leases, the journal, the inbox, transaction epochs and the store's administration
are here; entities, record commits and dispatch (queues, schedules, search) in `sql_parts`.
Statements use `%s` / `%(name)s` marks and PostgreSQL casts; the dialect renders and runs them
(see `dialect`). A write that must commit with its journal row runs as one atomic write; a
unique violation on the journal becomes `DuplicateKey` (the key) or `LeaseLost` (the seq).
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import ConfigError, LeaseLost, StoreUnavailable
from ..records import STEPPED, TERMINAL, Event, Kind, RunInfo, check_text, dumps, settles
from . import chunks as chunk_sql
from . import retention, run_page
from .chunks import Chunk
from .dialect import Db, Dialect, Then
from .rows import (
    EVENT_COLUMNS,
    INSERT_EVENT,
    RAW_TABLES,
    RUN_ALL,
    RUN_COLUMNS,
    conflict_error,
    event_from_row,
    event_params,
    events_from_rows,
    events_skipping,
    run_from_row,
    run_params,
    runs_from_rows,
)
from .sql_parts import SqlCommits, SqlDispatch, SqlEntities
from .tx_rows import TERMINAL as TX_ENDED
from .tx_rows import TX_COLUMNS, TxRow, as_rows, mark_sql, select_sql
from .tx_signal import TxSignal

_INSERT_RUN = (
    f"INSERT INTO daybook_runs ({RUN_ALL}) VALUES ({', '.join(['%s'] * 4 + ['%s::json'] * 3 + ['%s'] * 11)}) "
    "ON CONFLICT (run_id) DO NOTHING"
)
# Take a lease that is free, expired, already ours, or held by the `expect`ed owner.
_FREE = "(lease_owner IS NULL OR lease_expires < %s OR lease_owner = %s OR lease_owner = %s)"
_CLAIM = (
    "UPDATE daybook_runs SET lease_owner = %s, lease_expires = %s, wake_at = NULL, status = CASE WHEN "
    "status IN ('pending', 'suspended', 'needs_attention', 'paused') THEN 'running' ELSE status END "
    f"WHERE run_id = %s AND {_FREE}"
)
_CLAIM_NEXT = (
    "UPDATE daybook_runs SET lease_owner = %s, lease_expires = %s, wake_at = NULL, status = 'running' "
    "WHERE run_id = (SELECT run_id FROM daybook_runs WHERE ((status IN ('pending', 'running') AND "
    "(lease_owner IS NULL OR lease_expires < %s) AND (wake_at IS NULL OR wake_at <= %s)) "
    "OR (status = 'suspended' AND wake_at <= %s AND (lease_owner IS NULL OR lease_expires < %s))) "
    # Queued runs are taken by `claim_queued`, under their queue's limits.
    "AND (CAST(%s AS TEXT) IS NULL OR code_version = %s) AND queue IS NULL "
    "ORDER BY created_at LIMIT 1{lock}) RETURNING run_id"
)
_FINISH = (
    "UPDATE daybook_runs SET status = %s, result = %s::json, error = %s::json, updated_at = %s, "
    "lease_owner = NULL, lease_expires = NULL, wake_at = NULL WHERE run_id = %s AND "
    # A cancelled run stays cancelled: an owner that had not noticed records nothing.
    "(lease_owner = %s OR lease_owner IS NULL) AND status NOT IN ('cancelled', 'expired')"
)
_TRANSITION = (
    "UPDATE daybook_runs SET status = %s, error = %s::json, updated_at = %s, lease_owner = NULL, "
    "lease_expires = NULL, wake_at = CASE WHEN %s = 'pending' THEN %s::float8 ELSE NULL END "
    "WHERE run_id = %s AND status IN ({marks})"
)
_SUSPEND = (
    # A signal that arrived while the run executed already set wake_at: keep the earlier.
    "UPDATE daybook_runs SET status = 'suspended', wake_at = CASE WHEN wake_at IS NOT NULL "
    "AND (%s::float8 IS NULL OR wake_at < %s) THEN wake_at ELSE %s END, updated_at = %s, "
    "lease_owner = NULL, lease_expires = NULL WHERE run_id = %s AND lease_owner = %s"
)
_OPEN_EFFECTS = (
    f"SELECT {', '.join('e.' + c.strip() for c in EVENT_COLUMNS.split(','))} "
    "FROM daybook_events e JOIN (SELECT run_id, step, MAX(seq) AS seq FROM daybook_events "
    "WHERE kind IN ('intent', 'attempt', 'outcome') GROUP BY run_id, step) last "
    "ON e.run_id = last.run_id AND e.seq = last.seq "
    "WHERE e.kind != 'outcome' OR e.status IN ('unknown', 'failed') ORDER BY e.at"
)
_ENDED = f"({', '.join(repr(str(s)) for s in sorted(TERMINAL))})"
# The VALUES tuple of one journal row, repeated for a multi-row insert (`append_batch`).
_EVENT_VALUES = INSERT_EVENT[INSERT_EVENT.index("VALUES ") + len("VALUES ") :]
# Statements of a `chain` (see `dialect`): each runs once for the guard's row `g`, if it has one.
EVENT_FROM_G = (
    f"INSERT INTO daybook_events ({EVENT_COLUMNS}) SELECT {_EVENT_VALUES[1:-1]} FROM g RETURNING seq"
)
# Two journal rows from `g` in one statement (a header's decision and its end, written together).
_TWO_EVENTS_FROM_G = (
    f"INSERT INTO daybook_events ({EVENT_COLUMNS}) SELECT {_EVENT_VALUES[1:-1]} FROM g "
    f"UNION ALL SELECT {_EVENT_VALUES[1:-1]} FROM g RETURNING seq"
)
_EPOCH_TAIL = '"epoch":0}'


def _inserts(events: Sequence[Event]) -> list[Then]:
    """The statements of a chain that insert `events`: two in one statement (a run's first row
    with its first act's, an act's outcome with the run's end: each proxied MCP call writes
    both pairs), one statement per row otherwise."""
    if len(events) == 2:
        return [(_TWO_EVENTS_FROM_G, (*event_params(events[0]), *event_params(events[1])))]
    return [(EVENT_FROM_G, event_params(e)) for e in events]


_EPOCH_EVENT_FROM_G = EVENT_FROM_G.replace("%s::json", "(CAST(%s AS TEXT) || g.epoch || '}')::json", 1)
_INSERT_TX = (
    f"INSERT INTO daybook_transactions ({TX_COLUMNS}) "
    "SELECT %s, %s, g.epoch, %s, 'open', %s, %s, %s, %s FROM g RETURNING epoch"
)
# The open headers below an epoch, read by `tx_begin` in the transaction that drew it; and the
# same but those whose id starts with a given prefix (a speculation's sibling branches, which
# never block one another: K begins would read K(K-1)/2 rows of siblings only to drop them).
_OPEN_BELOW = select_sql("%s", None, True, 0)[0]
_OPEN_BELOW_APART = _OPEN_BELOW.replace(
    " ORDER BY epoch", " AND substr(tx_id, 1, CAST(%s AS INTEGER)) <> %s ORDER BY epoch"
)
_INBOX_FROM_G = (
    "INSERT INTO daybook_inbox (run_id, name, payload, sender, at) "
    "SELECT g.run_id, %s, %s::json, %s, %s FROM g RETURNING id"
)
_WAKE_FROM_G = (
    f"UPDATE daybook_runs SET wake_at = %s WHERE run_id IN (SELECT run_id FROM g) AND status NOT IN {_ENDED}"
)


# A name prefix `load_named` takes: nothing LIKE would read as a wildcard (`%`, `_`).
_PREFIX = re.compile(r"[A-Za-z0-9:-]+")


def _marks(n: int) -> str:
    return ", ".join(["%s"] * n)


class SqlStore(SqlEntities, SqlCommits, SqlDispatch):
    """The store over `dialect` (a backend's `SQLiteStore`/`PostgresStore` only picks one)."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self.url = dialect.url
        self.read_only = dialect.read_only
        self.damage: dict[str, str] = {}
        self._read = dialect.read
        self._write = dialect.write
        self._tx_signal = dialect.tx_signal()
        # What each `tx_begin` of this handle saw of the earlier open headers (`tx_seen`).
        self._tx_seen: dict[str, list[TxRow]] = {}
        # A read-only handle may read a store from before the queue columns (schema v11).
        self._run_cols = RUN_ALL if "queue" in dialect.columns("daybook_runs") else RUN_COLUMNS

    def _chained(
        self,
        event: Event | None,
        guard: str,
        params: Any,
        names: str,
        then: Sequence[Then],
        retry: bool = False,
    ) -> Any:
        """The dialect's `chain` (one round trip on PostgreSQL); a unique violation on the
        journal row `event` says whose fault it is (DuplicateKey or LeaseLost)."""
        try:
            return self.dialect.chain(guard, params, names, then, retry)
        except Exception as exc:
            on_key = None if event is None else self.dialect.conflict(exc)
            if on_key is None or event is None:
                raise
            raise conflict_error(event, on_key) from None

    def _moved(self, update: str, params: tuple[Any, ...], event: Event, held: Sequence[Event] = ()) -> bool:
        """Change a header with `update` and insert `event` with it (after the rows `held`), or
        none of them (False) if the header was not in a state to change."""
        then = _inserts((*held, event))
        return self._chained(event, update + " RETURNING 1", params, "ok", then) is not None

    # -- runs and leases ------------------------------------------------------------------------

    def create_run(self, info: RunInfo, first: Event, more: Sequence[Event] = ()) -> bool:
        then = _inserts((first, *more))
        guard = _INSERT_RUN + " RETURNING run_id"
        # Safe to send again: a header already there (this very call's, had its answer been
        # lost) inserts nothing, and the caller then claims the run it finds (and replays its
        # rows: an intent among `more` is then one without an outcome, settled as an unknown).
        last = more[-1] if more else None  # a key taken by another run is that row's fault
        return self._chained(last, guard, run_params(info), "run_id", then, retry=True) is not None

    def get_run(self, run_id: str) -> RunInfo | None:
        row = self._read(f"SELECT {self._run_cols} FROM daybook_runs WHERE run_id = %s", (run_id,))
        return run_from_row(row[0]) if row else None

    def list_runs(self, status: str | None = None, limit: int = 100) -> list[RunInfo]:
        where, args = (" WHERE status = %s", (status,)) if status else ("", ())
        sql = f"SELECT {self._run_cols} FROM daybook_runs{where} ORDER BY created_at DESC, run_id LIMIT %s"
        return runs_from_rows(self._read(sql, (*args, limit)), self.damage)

    def runs_page(self, filters: dict[str, Any], limit: int, offset: int = 0) -> list[RunInfo]:
        where, params = run_page.where(filters, self.dialect.position)
        sql = (
            f"SELECT {self._run_cols} FROM daybook_runs{where} {run_page.ORDER} "
            "LIMIT %(limit)s OFFSET %(offset)s"
        )
        rows = self._read(sql, {**params, "limit": limit, "offset": offset})
        return runs_from_rows(rows, self.damage)

    def run_counts(self, filters: dict[str, Any]) -> dict[str, int]:
        where, params = run_page.where(filters, self.dialect.position)
        rows = self._read(f"SELECT status, COUNT(*) FROM daybook_runs{where} GROUP BY status", params)
        return {str(r[0]): int(r[1]) for r in rows}

    def _changed(self, sql: str, params: tuple[Any, ...]) -> bool:
        return bool(self._write(lambda db: db.execute(sql, params).rowcount == 1))

    def claim(self, run_id: str, owner: str, ttl: float, now: float, expect: str | None) -> bool:
        return self._changed(_CLAIM, (owner, now + ttl, run_id, now, owner, expect))

    def hold(
        self, run_id: str, owner: str, ttl: float, now: float, expect: str | None, allowed: tuple[str, ...]
    ) -> bool:
        sql = (
            "UPDATE daybook_runs SET lease_owner = %s, lease_expires = %s "
            f"WHERE run_id = %s AND status IN ({_marks(len(allowed))}) AND {_FREE}"
        )
        return self._changed(sql, (owner, now + ttl, run_id, *allowed, now, owner, expect))

    def claim_next(self, owner: str, ttl: float, now: float, version: str | None = None) -> str | None:
        # Workers racing for the queue head each take a different run, none waiting.
        sql = _CLAIM_NEXT.format(lock=self.dialect.skip_locked())
        params = (owner, now + ttl, now, now, now, now, version, version)
        row = self._write(lambda db: db.execute(sql, params).fetchone())
        return None if row is None else str(row[0])

    def renew(self, run_id: str, owner: str, ttl: float, now: float) -> bool:
        sql = "UPDATE daybook_runs SET lease_expires = %s WHERE run_id = %s AND lease_owner = %s"
        return self._changed(sql, (now + ttl, run_id, owner))

    def release(self, run_id: str, owner: str) -> None:
        sql = (
            "UPDATE daybook_runs SET lease_owner = NULL, lease_expires = NULL "
            "WHERE run_id = %s AND lease_owner = %s"
        )
        self._changed(sql, (run_id, owner))

    def defer(self, run_id: str, owner: str, wake_at: float, error: str, now: float) -> None:
        sql = (
            "UPDATE daybook_runs SET wake_at = %s, error = %s::json, updated_at = %s, lease_owner = NULL, "
            "lease_expires = NULL WHERE run_id = %s AND lease_owner = %s"
        )
        self._changed(sql, (wake_at, error, now, run_id, owner))

    def suspend(self, run_id: str, owner: str, wake_at: float | None, now: float) -> None:
        self._changed(_SUSPEND, (wake_at, wake_at, wake_at, now, run_id, owner))

    # -- journal --------------------------------------------------------------------------------

    def append(self, event: Event) -> None:
        params = event_params(event)
        try:  # `_insert`'s first try, inline: this runs for every row
            self.dialect.insert(INSERT_EVENT, params)
        except Exception as exc:
            self._insert(lambda: self.dialect.insert(INSERT_EVENT, params), (event,), failed=exc)

    def append_batch(self, events: list[Event]) -> None:
        # All the rows in one commit (a multi-row INSERT, or on PostgreSQL past a few rows the
        # one-row INSERT for each in one pipelined transaction): one round trip, all or none.
        rows = [event_params(e) for e in events]
        self._insert(lambda: self.dialect.insert_rows(INSERT_EVENT, rows), events)

    def _insert(
        self, send: Callable[[], None], events: Sequence[Event], failed: Exception | None = None
    ) -> None:
        """Journal rows written in one commit by `send`, healed and refused alike for one row or
        several. `failed`: `send` was called already (`append`) and raised this."""
        try:
            try:
                if failed is not None:
                    raise failed
                send()
            except StoreUnavailable:
                # The connection dropped under the insert, and is back: the rows are ours if
                # they landed (one commit, so the last one tells for all), else they are
                # written now. (The lease fences everyone else off these seqs.)
                if not self.dialect.heals:
                    raise
                if not self._landed(events[-1]):
                    send()
        except Exception as exc:
            on_key = self.dialect.conflict(exc)
            if on_key is None:
                raise
            # A key is an intent's (the last row: the held rows are outcomes); a seq, anyone's.
            raise conflict_error(events[-1] if on_key else events[0], on_key) from None

    def _landed(self, event: Event) -> bool:
        sql = "SELECT kind, name, at FROM daybook_events WHERE run_id = %s AND seq = %s"
        rows = self._read(sql, (event.run_id, event.seq))
        if not rows:
            return False
        if (rows[0][0], rows[0][1], float(rows[0][2])) != (event.kind, event.name, event.at):
            raise conflict_error(event, False)  # another row holds this seq
        return True

    def finish(
        self,
        run_id: str,
        owner: str,
        status: str,
        result: object,
        error: object,
        event: Event | None,
        now: float,
        held: Sequence[Event] = (),
    ) -> None:
        what = f"run {run_id!r}"
        params = (status, dumps(result, f"{what} result"), dumps(error, f"{what} error"), now, run_id, owner)
        if event is None and held:  # the held rows end the journal: the last carries the header
            *held, event = held
        if event is None:
            changed = self._changed(_FINISH, params)
        else:
            changed = self._moved(_FINISH, params, event, held)
        if not changed:
            raise LeaseLost(
                f"run {run_id!r}: another process took the run over before this one could record how "
                "it ended; nothing was recorded here"
            )

    def transition(
        self, run_id: str, allowed: tuple[str, ...], status: str, error: object, event: Event, now: float
    ) -> bool:
        update = _TRANSITION.format(marks=_marks(len(allowed)))
        params = (status, dumps(error, f"run {run_id!r} error"), now, status, now, run_id, *allowed)
        return self._moved(update, params, event)

    def load(self, run_id: str, after: int = 0, until: int | None = None) -> list[Event]:
        if after <= 0 and until is None:  # a whole journal: replay's hot path
            sql = f"SELECT {EVENT_COLUMNS} FROM daybook_events WHERE run_id = %s ORDER BY seq"
            return events_from_rows(self._read(sql, (run_id,)))
        sql = f"SELECT {EVENT_COLUMNS} FROM daybook_events WHERE run_id = %s AND seq > %s"
        params: tuple[Any, ...] = (run_id, after)
        if until is not None:
            sql, params = sql + " AND seq <= %s", (*params, until)
        return events_from_rows(self._read(sql + " ORDER BY seq", params))

    def load_named(self, run_id: str, kinds: tuple[str, ...], prefixes: tuple[str, ...]) -> list[Event]:
        for prefix in prefixes:
            if not _PREFIX.fullmatch(prefix):
                raise ConfigError(f"name prefix {prefix!r}: use letters, digits, '-' and ':' only")
        # The run's rows are read in key order (run_id, seq) and filtered in the database: only
        # the matching ones are sent and decoded.
        where = [f"kind IN ({_marks(len(kinds))})"] if kinds else []
        where += ["name LIKE %s"] * len(prefixes)
        if not where:
            return []
        which = " OR ".join(where)
        sql = f"SELECT {EVENT_COLUMNS} FROM daybook_events WHERE run_id = %s AND ({which}) ORDER BY seq"
        found = events_from_rows(self._read(sql, (run_id, *kinds, *(p + "%" for p in prefixes))))
        # A row left out that would not decode makes the read fail as `load`'s would (a listing
        # skips and flags the run): the database checks what the decoder would, without
        # sending the rows.
        known, stepped = sorted(k.value for k in Kind), sorted(STEPPED)
        sound = (
            f"{self.dialect.json_object.format('data')} AND kind IN ({_marks(len(known))})"
            f" AND (step IS NOT NULL OR kind NOT IN ({_marks(len(stepped))}))"
        )
        damaged = self._read(
            f"SELECT seq FROM daybook_events WHERE run_id = %s AND NOT ({sound}) ORDER BY seq LIMIT 1",
            (run_id, *known, *stepped),
        )
        if damaged:
            seq = int(damaged[0][0])
            self.load(run_id, seq - 1, seq)  # raises CorruptJournal, naming the row
        return found

    def events_of_kind(self, kind: str) -> list[Event]:
        sql = f"SELECT {EVENT_COLUMNS} FROM daybook_events WHERE kind = %s ORDER BY run_id, seq"
        return events_skipping(self._read(sql, (kind,)), self.damage)

    def find_intent(self, key: str) -> Event | None:
        # Served by the partial unique index on intent keys.
        sql = f"SELECT {EVENT_COLUMNS} FROM daybook_events WHERE kind = 'intent' AND key = %s"
        rows = self._read(sql, (key,))
        return events_from_rows(rows)[0] if rows else None

    def open_effects(self, skip_damaged: bool = False) -> list[Event]:
        rows = self._read(_OPEN_EFFECTS)
        events = events_skipping(rows, self.damage) if skip_damaged else list(map(event_from_row, rows))
        return [e for e in events if not settles(e)]

    # -- stream chunks (ctx.stream; the SQL in `chunks`) ----------------------------------------

    def chunks(
        self,
        run_id: str,
        after: int = 0,
        stream: str | None = None,
        limit: int = 1000,
        act: str | None = None,
        divergent: bool = False,
    ) -> list[Chunk]:
        args = [run_id, after, *(x for x in (stream, act) if x is not None), limit]
        return chunk_sql.from_rows(self._read(chunk_sql.select(stream, act, divergent), tuple(args)))

    def write_chunks(self, run_id: str, chunks: list[Chunk]) -> list[Chunk]:
        if not chunks:
            return []
        rows = [dataclasses.replace(c, run_id=run_id) for c in chunks]

        def write(db: Db) -> list[Chunk]:
            # The next cursor is read in the writing transaction: a racing writer's insert of
            # the same cursor is refused by the key (below), never interleaved.
            last = int(db.execute(chunk_sql.LAST, (run_id,)).fetchone()[0])
            placed = [dataclasses.replace(c, cursor=last + i) for i, c in enumerate(rows, 1)]
            sql = chunk_sql.INSERT + f", {chunk_sql.VALUES}" * (len(placed) - 1)
            db.execute(sql, tuple(p for c in placed for p in chunk_sql.params(c, c.cursor)))
            return placed

        try:
            written: list[Chunk] = self._write(write, atomic=True, retry=False)
        except Exception as exc:
            if self.dialect.conflict(exc) is None:
                raise
            raise LeaseLost(
                f"run {run_id!r}: another process wrote stream chunks at the same cursor or key; "
                "this one stops (the run's owner writes them again when it re-runs the step)"
            ) from None
        return written

    # -- inbox and approvers --------------------------------------------------------------------

    def signal(
        self,
        run_id: str,
        name: str,
        payload: str,
        sender: str,
        now: float,
        any_status: bool = False,
        wake: bool = True,
    ) -> int | None:
        live = "" if any_status else f" AND status NOT IN {_ENDED}"
        guard = f"SELECT run_id FROM daybook_runs WHERE run_id = %s{live}"
        then: list[Then] = [(_INBOX_FROM_G, (name, payload, sender, now))]
        if wake:
            # Also for a run executing now: if it suspends before reading this signal, the wake
            # time survives the suspend and a worker picks the run up again.
            then.insert(0, (_WAKE_FROM_G, (now,)))
        new = self._chained(None, guard, (run_id,), "run_id", then)  # never sent twice
        return None if new is None else int(new[0])

    def inbox(self, run_id: str) -> list[tuple[int, str, str, str, float]]:
        sql = "SELECT id, name, payload, sender, at FROM daybook_inbox WHERE run_id = %s ORDER BY id"
        return [(int(r[0]), r[1], r[2], r[3], float(r[4])) for r in self._read(sql, (run_id,))]

    def set_approver(self, name: str, token_hash: str, now: float) -> None:
        check_text(name, "the approver name")  # the same rule on every store
        sql = (
            "INSERT INTO daybook_approvers (name, token_hash, created_at) VALUES (%s, %s, %s) "
            "ON CONFLICT (name) DO UPDATE SET token_hash = excluded.token_hash, "
            "created_at = excluded.created_at"
        )
        self._changed(sql, (name, token_hash, now))

    def approvers(self) -> dict[str, str]:
        return {r[0]: r[1] for r in self._read("SELECT name, token_hash FROM daybook_approvers")}

    # -- transaction epochs (daybook.tx; headers in `tx_rows`) ----------------------------------

    def tx_begin(
        self,
        tx_id: str,
        run_id: str,
        scopes: str,
        attempt: int,
        retries: int,
        event: Event,
        now: float,
        siblings: str = "",
    ) -> int:
        # The journal row's data is given the epoch by the statement itself (it is drawn there):
        # its JSON text up to the epoch's value, the epoch's digits and "}" appended.
        data = {k: v for k, v in event.data.items() if k != "epoch"}
        data["epoch"] = 0
        row = event_params(dataclasses.replace(event, data=data))
        if not row[9].endswith(_EPOCH_TAIL):  # pragma: no cover - dumps puts the last key last
            raise AssertionError(f"a tx:begin row's data does not end with its epoch: {row[9][-40:]!r}")
        row = (*row[:9], row[9][: -len("0}")], *row[10:])
        header = (tx_id, run_id, scopes, attempt, retries, now, now)
        then = [(_EPOCH_EVENT_FROM_G, row), (_INSERT_TX, header)]
        try:
            read, apart = (_OPEN_BELOW_APART, (len(siblings), siblings)) if siblings else (_OPEN_BELOW, ())
            got, seen = self.dialect.chain_read(self.dialect.epoch_sql, (), "epoch", then, read, apart)
        except Exception as exc:
            on_key = self.dialect.conflict(exc)
            if on_key is None:
                raise
            raise conflict_error(event, on_key) from None
        epoch = int(got[0])
        event.data["epoch"] = epoch
        if seen is not None:
            self._tx_seen[tx_id] = as_rows(seen)
        return epoch

    def tx_seen(self, tx_id: str) -> list[TxRow] | None:
        """The open headers with a smaller epoch that `tx_begin(tx_id)` read in its own database
        transaction (taken once), or None: not read there (PostgreSQL), or taken already."""
        return self._tx_seen.pop(tx_id, None)

    def tx_mark(self, tx_id: str, status: str, event: Event, now: float, before: Event | None = None) -> bool:
        then: list[Then] = [(EVENT_FROM_G, event_params(event))]
        if before is not None:  # both rows in one statement: one less for SQLite to run
            then = [(_TWO_EVENTS_FROM_G, (*event_params(before), *event_params(event)))]
        update = mark_sql("%s") + " RETURNING 1"
        changed = self._chained(event, update, (status, now, tx_id), "ok", then) is not None
        if status in TX_ENDED:
            self._tx_signal.bump()  # this handle's waiters look again at once
        return changed

    def tx_rows(
        self, run_id: str | None = None, open_only: bool = False, before: int | None = None
    ) -> list[TxRow]:
        sql, params = select_sql("%s", run_id, open_only, before)
        return as_rows(self._read(sql, tuple(params)))

    def tx_signal(self) -> TxSignal:
        return self._tx_signal

    # -- administration: integrity, retention, settings ----------------------------------------

    def raw_rows(self, table: str, run_id: str | None = None) -> list[tuple[Any, ...]]:
        sql = f"SELECT {RAW_TABLES[table]} FROM daybook_{table}"
        if run_id is not None:
            sql += " WHERE run_id = %s"
        key = RAW_TABLES[table].split(",")[0]
        sql += " ORDER BY run_id, seq" if table == "events" else f" ORDER BY {key}"
        return [tuple(r) for r in self._read(sql, () if run_id is None else (run_id,))]

    def journal_run_ids(self) -> list[str]:
        return [r[0] for r in self._read("SELECT DISTINCT run_id FROM daybook_events ORDER BY run_id")]

    def quick_check(self) -> list[str]:
        return self.dialect.quick_check()

    def gc(
        self, cutoff: float, now: float, who: str, gc_id: str, key: bytes, dry_run: bool
    ) -> dict[str, Any]:
        """Erase the payloads of finished runs updated before `cutoff` (store/retention.py)."""
        return self.dialect.gc(
            lambda execute: retention.collect(
                execute, cutoff=cutoff, now=now, who=who, gc_id=gc_id, key=key, dry_run=dry_run,
                cast="::json",
            ),
            dry_run,
        )  # fmt: skip

    def gc_log(self) -> list[dict[str, Any]]:
        return self.dialect.gc(retention.history, dry_run=True)

    def meta_value(self, key: str, default: str) -> str:
        """The store setting `key`, set to `default` first if it has none (read-only: only read)."""
        if not self.read_only:
            sql = "INSERT INTO daybook_meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING"
            self._changed(sql, (key, default))
        row = self._read("SELECT value FROM daybook_meta WHERE key = %s", (key,))
        return str(row[0][0]) if row else default

    def meta_items(self, prefix: str) -> dict[str, str]:
        rows = self._read(
            "SELECT key, value FROM daybook_meta WHERE substr(key, 1, %s) = %s", (len(prefix), prefix)
        )
        return {str(k): str(v) for k, v in rows}

    def current_role(self) -> str | None:
        return self.dialect.role()

    def close(self) -> None:
        self._tx_signal.close()
        self.dialect.close()

    def now(self) -> float:
        return time.time()
