"""The SQL adapter: statements against a user's own SQLite or PostgreSQL database (not the daybook
store), buffered in the run and applied all together, once, in one database transaction.

`Database(url)` buffers `execute(ctx, sql, params, inverse=...)` calls in memory (nothing touches
the database), and `commit(ctx)` is one effect (`sql.commit`) whose journaled intent carries every
buffered statement. The tool opens one transaction, records the effect's idempotency key in a
marker table (`daybook_applied`), runs the statements and commits: the marker and the statements
land together or not at all. Its status query looks the key up in the marker table, so an effect
cut off by a crash resolves to confirmed (with the stored result) or absent (safe to send again),
and a re-send of an applied key changes nothing. Compensation (`sql.undo`) runs the recorded
inverse statements newest first in one transaction under the marker `comp/<key>`, also once.
A commit holding a statement without an inverse is journaled as `sql.commit_irreversible`, which
declares no inverse: `ctx.compensate()` reports it as having none instead of half-undoing it.

Owns: the three tools, their status queries, the marker table, and `Database`.
"""

from __future__ import annotations

import contextlib
import datetime
import decimal
import hashlib
import json
import re
import sqlite3
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from daybook import (
    ConfigError,
    Confirmed,
    Context,
    Decision,
    NotFound,
    OutcomeUnknown,
    ReconcileResult,
    Tool,
    TransientError,
    tool,
)

Param = str | int | float | bool | None
Params = list[Param] | dict[str, Param]
JSONDict = dict[str, Any]

MARKER_TABLE = "daybook_applied"
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
# Transaction control inside a statement would end the one transaction everything relies on.
_TX_CONTROL = re.compile(r"\s*(BEGIN|COMMIT|ROLLBACK|END|SAVEPOINT|RELEASE|START\s+TRANSACTION)\b", re.I)


def _kind(url: str) -> str:
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql"
    if url.startswith("sqlite:"):
        return "sqlite"
    raise ConfigError(
        f"unsupported database URL {url!r}: use sqlite:///path/to/file.db or "
        "postgresql://user@host:5432/dbname (optionally ?schema=NAME)"
    )


def _sqlite_path(url: str) -> str:
    parts = urlsplit(url)
    # sqlite:///rel.db -> "rel.db"; sqlite:////abs.db -> "/abs.db" (the daybook store's rule)
    path = parts.path[1:] if parts.path.startswith("/") else parts.path
    if parts.netloc:
        path = parts.netloc + parts.path
    if not path:
        raise ConfigError(f"SQLite URL {url!r} names no file: use sqlite:///path/to/file.db")
    return path


def _pg_conninfo(url: str) -> str:
    """The libpq URL, with `?schema=NAME` turned into that schema as the search path."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query)
    schemas = [v for k, v in query if k == "schema"]
    rest = [(k, v) for k, v in query if k not in ("schema", "options")]
    options = [v for k, v in query if k == "options"]
    for schema in schemas:
        if not _IDENT.fullmatch(schema):
            raise ConfigError(f"schema={schema!r} in the database URL is not a plain SQL identifier")
        options.append(f"-csearch_path={schema}")
    if options:
        rest.append(("options", " ".join(options)))
    return urlunsplit(parts._replace(query=urlencode(rest, quote_via=quote)))


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise ConfigError(
            "the sql adapter needs psycopg 3 for PostgreSQL: pip install 'psycopg[binary]>=3.1' "
            "(or pip install 'daybook-runtime[postgres]')"
        ) from None
    return psycopg


class _Session:
    """One connection to the user's database, driven the same way on both drivers."""

    def __init__(self, url: str) -> None:
        self.kind = _kind(url)
        self.ph = "?" if self.kind == "sqlite" else "%s"
        try:
            if self.kind == "sqlite":
                # isolation_level=None: the transaction is ours (BEGIN IMMEDIATE), not the driver's.
                self.raw: Any = sqlite3.connect(_sqlite_path(url), isolation_level=None, timeout=30.0)
            else:
                pg = _psycopg()
                self.raw = pg.connect(_pg_conninfo(url), autocommit=False, connect_timeout=10)
        except ConfigError:
            raise
        except Exception as exc:
            raise TransientError(f"cannot connect to {url}: {str(exc).strip()}") from exc

    def begin(self) -> None:
        if self.kind == "sqlite":
            # Take the write lock now, so a concurrent re-send waits instead of interleaving.
            self.raw.execute("BEGIN IMMEDIATE")
        # psycopg opens the transaction implicitly at the first statement.

    def run(self, sql: str, params: Params | None) -> int:
        cur = self.raw.execute(sql, () if params is None and self.kind == "sqlite" else params)
        return int(cur.rowcount)

    def rows(self, sql: str, params: Params | None) -> list[tuple[Any, ...]]:
        cur = self.raw.execute(sql, () if params is None and self.kind == "sqlite" else params)
        return list(cur.fetchall())

    def commit(self) -> None:
        if self.kind == "postgresql":
            self.raw.commit()
        else:
            self.raw.execute("COMMIT")

    def rollback(self) -> None:
        # No transaction open, or the connection is gone: either way nothing is left to undo.
        with contextlib.suppress(Exception):
            if self.kind == "postgresql":
                self.raw.rollback()
            else:
                self.raw.execute("ROLLBACK")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.raw.close()

    def marker_exists(self, table: str) -> bool:
        if self.kind == "sqlite":
            sql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
            return bool(self.rows(sql, [table]))
        return self.rows("SELECT to_regclass(%s::text) IS NOT NULL", [table])[0][0] is True

    def ensure_marker(self, table: str) -> None:
        at = "REAL" if self.kind == "sqlite" else "DOUBLE PRECISION"
        self.run(
            f"CREATE TABLE IF NOT EXISTS {table} (key TEXT PRIMARY KEY, at {at} NOT NULL, "
            "batch TEXT NOT NULL, result TEXT NOT NULL)",
            None,
        )

    def claim(self, table: str, key: str, batch: str) -> bool:
        """Insert the key's marker; False if it is already there. On PostgreSQL a concurrent
        transaction holding the same key makes this wait for it, so two senders never both run."""
        sql = (
            f"INSERT INTO {table} (key, at, batch, result) VALUES ({self.ph}, {self.ph}, {self.ph}, '') "
            "ON CONFLICT (key) DO NOTHING"
        )
        return self.run(sql, [key, time.time(), batch]) == 1

    def stored(self, table: str, key: str) -> tuple[JSONDict, str] | None:
        found = self.rows(f"SELECT result, batch FROM {table} WHERE key = {self.ph}", [key])
        if not found:
            return None
        value: JSONDict = json.loads(found[0][0])
        return value, str(found[0][1])

    def settle(self, table: str, key: str, result: JSONDict) -> None:
        self.run(f"UPDATE {table} SET result = {self.ph} WHERE key = {self.ph}", [json.dumps(result), key])


def _is_connection_loss(exc: BaseException) -> bool:
    if isinstance(exc, sqlite3.OperationalError):
        text = str(exc).lower()
        return "locked" in text or "busy" in text
    psycopg = _loaded_psycopg()
    return psycopg is not None and isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)


def _loaded_psycopg() -> Any:
    # Only an error from psycopg can be a psycopg error; never import it just to ask.
    return sys.modules.get("psycopg")


Plan = list[tuple[str, Params | None]]


def _digest(plan: Plan) -> str:
    """Names a batch's content, kept with its marker: a key met again with other statements is
    someone else's act (another store reusing run ids), never this one already done."""
    text = json.dumps([[sql, params] for sql, params in plan], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _same_batch(url: str, table: str, key: str, found: tuple[JSONDict, str], plan: Plan) -> JSONDict:
    result, batch = found
    if batch != _digest(plan):
        raise ConfigError(
            f"{url}: key {key!r} is already in {table} for a different batch of statements, so "
            "another run used it (another daybook store with the same run ids?). Nothing was "
            "applied. Give runs ids that are unique across every store writing to this database"
        )
    return result


def _transaction(
    url: str,
    table: str,
    key: str,
    statements: Plan,
    extra: JSONDict,
    require: str | None = None,
) -> JSONDict:
    """Run `statements` and record `key` in one transaction; an applied key returns its stored
    result and runs nothing. Raises TransientError where nothing was applied and may be retried,
    OutcomeUnknown where the commit's answer was lost (the status query settles it)."""
    session = _Session(url)
    try:
        try:
            session.begin()
            session.ensure_marker(table)
            if require is not None and session.stored(table, require) is None:
                raise ConfigError(
                    f"{url}: nothing was applied under key {require!r} (no row in {table}), so "
                    "there is nothing to undo; if it was recorded by hand as confirmed, resolve "
                    "the compensation by hand too"
                )
            if not session.claim(table, key, _digest(statements)):
                session.rollback()
                found = session.stored(table, key)
                assert found is not None
                return _same_batch(url, table, key, found, statements)
        except ConfigError:
            session.rollback()
            raise
        except Exception as exc:
            session.rollback()
            # Before any statement ran: certainly nothing applied.
            raise TransientError(f"{url}: could not open the transaction: {exc}") from exc
        try:
            rowcounts = [session.run(sql, params) for sql, params in statements]
            result: JSONDict = {"key": key, "rowcounts": rowcounts, **extra}
            session.settle(table, key, result)
        except Exception as exc:
            session.rollback()
            if _is_connection_loss(exc):
                raise TransientError(f"{url}: the transaction was cut off and rolled back: {exc}") from exc
            raise
        try:
            session.commit()
        except Exception as exc:
            psycopg = _loaded_psycopg()
            if psycopg is not None and isinstance(exc, psycopg.IntegrityError):
                raise  # a deferred constraint refused the commit: the server answered no
            session.rollback()
            raise OutcomeUnknown(f"{url}: COMMIT of key {key!r} got no answer: {exc}") from exc
        return result
    finally:
        session.close()


def _applied(url: str, table: str, key: str, plan: Plan) -> ReconcileResult:
    _check_marker(table)
    session = _Session(url)
    try:
        found = session.stored(table, key) if session.marker_exists(table) else None
    finally:
        session.close()
    # The marker commits with the statements, so absent means none of them were applied.
    if found is None:
        return NotFound()
    return Confirmed(_same_batch(url, table, key, found, plan), ref=key)


def _forward(statements: list[JSONDict]) -> Plan:
    return [(str(s["sql"]), s.get("params")) for s in statements]


def _backward(statements: list[JSONDict]) -> Plan:
    return [(str(s["inverse"]["sql"]), s["inverse"].get("params")) for s in reversed(statements)]


def _commit_status(key: str, args: dict[str, Any]) -> ReconcileResult:
    return _applied(str(args["url"]), str(args["marker_table"]), key, _forward(args["statements"]))


def _undo_status(key: str, args: dict[str, Any]) -> ReconcileResult:
    original = args["original"]
    statements = original["statements"]
    if any(not s.get("inverse") for s in statements):
        return NotFound()  # the undo refuses such a batch before touching anything
    return _applied(str(original["url"]), str(original["marker_table"]), key, _backward(statements))


def _commit(*, url: str, marker_table: str, statements: list[JSONDict], idempotency_key: str) -> JSONDict:
    _check_marker(marker_table)
    return _transaction(url, marker_table, idempotency_key, _forward(statements), {})


def _reference(result: Any) -> Any:
    return result["key"] if isinstance(result, dict) else None


# Every doubtful case of a transaction is raised as OutcomeUnknown or TransientError; any other
# exception is the database's refusal, after a rollback: certain.
_REFUSED = (Exception,)


@tool(name="sql.undo", status=_undo_status, idempotent=True, effect_class="idempotent", certain=_REFUSED)
def undo(*, original: JSONDict, result: JSONDict, idempotency_key: str) -> JSONDict:
    """Run a committed batch's inverse statements, newest first, in one transaction, once
    (marker `idempotency_key`, i.e. `comp/<key>`). Refuses, applying nothing, if any statement of
    the batch has no inverse or the batch was never applied."""
    statements: list[JSONDict] = list(original["statements"])
    missing = [i for i, s in enumerate(statements) if not s.get("inverse")]
    if missing:
        raise ConfigError(
            f"statements {missing} of {result.get('key')!r} have no inverse, so the batch cannot "
            "be undone as a whole; nothing was changed. Undo it by hand, then `daybook resolve`"
        )
    table = str(original["marker_table"])
    _check_marker(table)
    return _transaction(
        str(original["url"]),
        table,
        idempotency_key,
        _backward(statements),
        {"undoes": result.get("key")},
        require=str(result["key"]),
    )


commit = tool(
    name="sql.commit",
    status=_commit_status,
    idempotent=True,
    inverse=undo,
    reference=_reference,
    effect_class="compensable",
    bufferable=True,
    certain=_REFUSED,
)(_commit)
"""Apply a batch whose every statement has an inverse: compensable."""

commit_irreversible = tool(
    name="sql.commit_irreversible",
    status=_commit_status,
    idempotent=True,
    reference=_reference,
    effect_class="irreversible",
    bufferable=True,
    certain=_REFUSED,
)(_commit)
"""Apply a batch in which some statement has no inverse: nothing registered can undo it."""


def _check_marker(table: str) -> None:
    if not _IDENT.fullmatch(table):
        raise ConfigError(f"marker_table={table!r} is not a plain SQL identifier (letters, digits, _)")


def _params(value: Any, what: str) -> Params | None:
    if value is None:
        return None
    if isinstance(value, Mapping):
        items = {str(k): v for k, v in value.items()}
        bad = [k for k, v in items.items() if not _scalar(v)]
    elif isinstance(value, Sequence) and not isinstance(value, str | bytes):
        items_l = list(value)
        bad = [str(i) for i, v in enumerate(items_l) if not _scalar(v)]
        if not bad:
            return items_l
    else:
        raise ConfigError(f"{what}: params must be a list, a tuple or a dict, got {type(value).__name__}")
    if bad:
        raise ConfigError(
            f"{what}: params {bad} are not str, int, float, bool or None; the journal keeps them "
            "as JSON, so convert dates, decimals and bytes to strings first"
        )
    return items


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, str | int | float | bool)


def _statement(sql: Any, params: Any, what: str) -> JSONDict:
    if not isinstance(sql, str) or not sql.strip():
        raise ConfigError(f"{what}: give the SQL as a non-empty string, got {sql!r}")
    if _TX_CONTROL.match(sql):
        raise ConfigError(
            f"{what}: {sql.strip().split()[0].upper()} is not allowed: Database.commit(ctx) opens "
            "and commits the one transaction that holds the batch"
        )
    return {"sql": sql, "params": _params(params, what)}


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, decimal.Decimal):
        return str(value)  # exact: a float would round money
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    return str(value)


def _read(url: str, sql: str, params: Params | None) -> list[list[Any]]:
    session = _Session(url)
    try:
        rows = session.rows(sql, params)
        session.rollback()
    finally:
        session.close()
    return [[_jsonable(v) for v in row] for row in rows]


class Database:
    """A user's SQLite (`sqlite:///path`) or PostgreSQL (`postgresql://...`, optional
    `?schema=NAME`) database. The URL is journaled with every commit (any process must be able to
    resume or compensate from the journal alone), so keep passwords out of it: use a trust rule,
    `PGPASSWORD`, `~/.pgpass` or a service file.

    Placeholders are the driver's own: `?` / `:name` on SQLite, `%s` / `%(name)s` on PostgreSQL
    (`db.placeholder` gives the positional one).
    """

    def __init__(self, url: str, *, marker_table: str = MARKER_TABLE) -> None:
        self.kind = _kind(url)
        if self.kind == "sqlite":
            _sqlite_path(url)
        else:
            _pg_conninfo(url)
        _check_marker(marker_table)
        self.url = url
        self.marker_table = marker_table

    @property
    def placeholder(self) -> str:
        return "?" if self.kind == "sqlite" else "%s"

    def execute(
        self,
        ctx: Context,
        sql: str,
        params: Sequence[Param] | Mapping[str, Param] | None = None,
        *,
        inverse: str | tuple[str, Sequence[Param] | Mapping[str, Param] | None] | None = None,
    ) -> None:
        """Buffer a statement for this run's next `commit`; nothing touches the database yet.
        `inverse` undoes it at compensation: SQL, or (SQL, params). Without one, the batch it
        joins cannot be compensated (it is committed as `sql.commit_irreversible`)."""
        buffer = ctx.held(self)
        what = f"statement {len(buffer)} of the batch"
        stmt = _statement(sql, params, what)
        if inverse is None:
            stmt["inverse"] = None
        elif isinstance(inverse, str):
            stmt["inverse"] = _statement(inverse, None, f"{what}, inverse")
        elif isinstance(inverse, tuple) and len(inverse) == 2:
            stmt["inverse"] = _statement(inverse[0], inverse[1], f"{what}, inverse")
        else:
            raise ConfigError(f"{what}: inverse must be SQL or a (SQL, params) tuple, got {inverse!r}")
        buffer.append(stmt)

    def pending(self, ctx: Context) -> list[JSONDict]:
        """The statements buffered by this run since its last commit."""
        return [dict(s) for s in ctx.held(self)]

    def rollback(self, ctx: Context) -> int:
        """Drop this run's buffered statements (they never reached the database); how many."""
        return len(ctx.held(self, take=True))

    def commit(
        self, ctx: Context, *, key: str | None = None, decision: Decision[Any] | None = None
    ) -> JSONDict | None:
        """Apply the buffered statements as one effect, in one database transaction, once.
        Returns `{"key", "rowcounts"}` (None, and no step, when nothing is buffered). A statement
        the database refuses rolls back all of them and raises `EffectFailed`."""
        statements = ctx.held(self, take=True)
        if not statements:
            return None
        chosen: Tool[JSONDict] = (
            commit if all(s["inverse"] is not None for s in statements) else commit_irreversible
        )
        result: JSONDict = ctx.effect(
            chosen,
            key=key,
            decision=decision,
            url=self.url,
            marker_table=self.marker_table,
            statements=statements,
        )
        return result

    def query(
        self, ctx: Context, sql: str, params: Sequence[Param] | Mapping[str, Param] | None = None
    ) -> list[list[Any]]:
        """Read committed rows as a recorded step (replay returns the same rows). It does not see
        this run's buffered statements. Values that are not JSON come back as strings (decimals
        exactly, dates as ISO 8601, bytes as hex)."""
        stmt = _statement(sql, params, "query")
        rows: list[list[Any]] = ctx.decide("sql.query", _read, self.url, stmt["sql"], stmt["params"]).value
        return rows
