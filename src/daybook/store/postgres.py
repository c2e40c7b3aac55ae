"""The PostgreSQL dialect (psycopg 3): the store for several processes or hosts.

A lone write is one statement in autocommit mode (one round trip, one WAL flush with
`synchronous_commit=on`); so is a write whose statements depend on one another (a `chain`: one
data-modifying WITH statement); other writes that must commit together run in one transaction.
The connection heals when the server drops it (`postgres_link`). A `?schema=NAME` URL parameter
keeps daybook's tables in their own schema (created if missing), so one database can hold
several isolated books. Racing claims take different rows (SKIP LOCKED); epochs come from a
sequence drawn under a transaction lock; a transaction that ends wakes waiters in every process
(LISTEN/NOTIFY, `PgTxSignal`). Payloads are `json`, not `jsonb`: jsonb reorders object keys,
and replay must hand the workflow exactly the value the live run saw.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..errors import ConfigError, redact_url
from ..records import SCHEMA_VERSION
from .dialect import Db, Dialect, Then, Write
from .postgres_schema import migrate, schema_exists, stamp
from .retention import Exec
from .rows import check_version, foreign_tables
from .sql import SqlStore
from .tx_signal import PgTxSignal, TxSignal

try:
    import psycopg

    from .postgres_group import StatementGroup
    from .postgres_link import Link, Links
except ImportError:  # pragma: no cover - exercised only without the extra installed
    psycopg = None  # type: ignore[assignment]

T = TypeVar("T")


def _split(url: str) -> tuple[str, str | None]:
    parts = urlsplit(url)
    schema, rest = None, []
    for k, v in parse_qsl(parts.query):
        if k == "schema":
            schema = v
        else:
            rest.append((k, v))
    if schema is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", schema):
        raise ConfigError(f"schema={schema!r} in the store URL is not a plain SQL identifier")
    return urlunsplit(parts._replace(query=urlencode(rest))), schema


def _without(text: str, dsn: str) -> str:
    """A driver's message with the URL's password taken out, should the driver quote it."""
    password = urlsplit(dsn).password
    return text.replace(password, "***") if password else text


class _Once:
    """The link as a lone write sees it: a statement sent again after a reconnect only if safe."""

    def __init__(self, link: Link, retry: bool) -> None:
        self.link, self.retry = link, retry

    def execute(self, sql: str, params: Any = None) -> Any:
        return self.link.execute(sql, params, retry=self.retry)


def _one_statement(
    guard: str, params: Sequence[Any], names: str, then: Sequence[Then]
) -> tuple[str, Sequence[Any]]:
    """A chain as one statement: the guard and each statement but the last parts of a WITH."""
    if not then:
        return guard, params
    parts = [f"g({names}) AS ({guard})", *(f"t{i} AS ({t})" for i, (t, _) in enumerate(then[:-1]))]
    args = list(params)
    for _, more in then:
        args += more
    return f"WITH {', '.join(parts)} {then[-1][0]}", args


class PostgresDialect(Dialect):
    name = "PostgreSQL"
    heals = True

    def __init__(self, url: str, read_only: bool = False) -> None:
        if psycopg is None:
            raise ConfigError(
                "PostgreSQL support needs psycopg 3: pip install 'psycopg[binary]>=3.1' (or the "
                "extra, pip install 'daybook-runtime[postgres]'; from a checkout, pip install '.[postgres]')"
            )
        # `url` is for showing (messages, `daybook` output): its password masked (audit D10);
        # `dsn` is what connects (a heartbeat's own connection is opened with it).
        self.dsn, self.url, self.read_only = url, redact_url(url), read_only
        self.conninfo, self.schema = _split(url)
        try:
            self.links = Links(self.conninfo, self.schema, read_only=read_only)
        except psycopg.Error as exc:  # unreachable, unknown role or database, a bad URL option
            raise ConfigError(f"cannot connect to {self.url}: {_without(str(exc).strip(), url)}") from None
        self.link = self.links.first  # opening, migrations and the administration's own calls
        self.group = StatementGroup(self.links)
        try:
            self._open()
        except psycopg.errors.UndefinedColumn as exc:
            raise ConfigError(foreign_tables(self.url, exc)) from None

    def _open(self) -> None:
        url = self.url
        if self.read_only and self.schema and not schema_exists(self.link, self.schema):
            raise ConfigError(
                f"no schema {self.schema!r} in {url}, so no daybook store there, and "
                "reading never creates one; check --db (or $DAYBOOK_DB)"
            )
        found = stamp(self.link, url)
        if self.read_only:
            if found is None:
                raise ConfigError(
                    f"no daybook store in {url} (no daybook_meta table), and reading never "
                    "creates one; check --db (or $DAYBOOK_DB)"
                )
            check_version(found, SCHEMA_VERSION, url, read_only=True)
        elif found is None or found < SCHEMA_VERSION:
            with self.link.transaction() as db:
                migrate(db, self.schema, url)
        else:
            check_version(found, SCHEMA_VERSION, url)

    def skip_locked(self, of: str = "") -> str:
        return f" FOR UPDATE{' OF ' + of if of else ''} SKIP LOCKED"

    def read(self, sql: str, params: Any = ()) -> list[Any]:
        with self.links.take() as link:
            return link.execute(sql, params).fetchall()

    def write(self, fn: Write[T], atomic: bool = False, retry: bool = True) -> T:
        with self.links.take() as link:
            if not atomic:
                return fn(_Once(link, retry))
            with link.transaction() as db:  # never retried: a lost COMMIT's fate is unknown
                return fn(db)

    def conflict(self, exc: BaseException) -> bool | None:
        if not isinstance(exc, psycopg.errors.UniqueViolation):
            return None
        return getattr(exc.diag, "constraint_name", "") == "daybook_events_key"

    # Drawn under a transaction lock (taken first: OFFSET 0 keeps the subquery apart), so
    # epochs become visible in the order they are drawn.
    epoch_sql = (
        "SELECT nextval('daybook_epoch_seq') FROM "
        "(SELECT pg_advisory_xact_lock(hashtext(current_schema())) OFFSET 0) AS l"
    )

    def chain(
        self, guard: str, params: Sequence[Any], names: str, then: Sequence[Then], retry: bool = False
    ) -> Any:
        # One statement: the guard and each statement but the last are parts of a WITH (a
        # data-modifying part runs once, whether or not anything reads it), so the chain is one
        # round trip and one commit. Unless `retry`, a lost answer leaves its fate unknown.
        sql, args = _one_statement(guard, params, names, then)
        return self.group.run(sql, args, retry)  # with others' at once: one commit (postgres_group)

    def chain_read(
        self,
        guard: str,
        params: Sequence[Any],
        names: str,
        then: Sequence[Then],
        read: str,
        read_params: Sequence[Any] = (),
    ) -> tuple[Any, list[Any] | None]:
        # The chain is one statement, whose snapshot is taken before its guard waits for the
        # epoch lock: a read in it could miss a smaller epoch committed meanwhile. The read is
        # a statement of its own, sent after the chain in its transaction and its round trip
        # (`StatementGroup.run(read=)`): in Read Committed it sees every commit made before it
        # began, the lock's holders' included. Its parameter, the chain's first column, is not
        # known when it is sent: it is given as the sequence's value this session drew last
        # (only the epoch's chain reads, and its guard draws the epoch); the rest are `read_params`.
        if guard != self.epoch_sql:
            return self.chain(guard, params, names, then), None
        sql, args = _one_statement(guard, params, names, then)
        drawn = read.replace("%s", "currval('daybook_epoch_seq')", 1)
        got: tuple[Any, list[Any]] = self.group.run(sql, args, False, drawn, read_params)
        row, rows = got
        return (None, None) if row is None else (row, rows)

    def tx_signal(self) -> TxSignal:
        return PgTxSignal(self.conninfo, self.schema)

    def columns(self, table: str) -> set[str]:
        sql = (
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = %s"
        )
        return {str(r[0]) for r in self.read(sql, (table,))}

    def role(self) -> str | None:
        with self.links.take() as link:
            row = link.execute("SELECT current_user").fetchone()
        return str(row[0]) if row else ""

    def claim_in_queue(self, db: Db, queue: str, sql: str, params: dict[str, Any]) -> Any:
        # The queue's row lock, held to the commit: the next claim on this queue counts this
        # one (Read Committed gives the claim a snapshot taken after the lock). Both statements
        # go in one pipeline: one round trip while the lock is held.
        with db.pipeline():
            db.execute("SELECT 1 FROM daybook_queues WHERE name = %s FOR UPDATE", (queue,))
            cur = db.execute(sql, params)
        return cur.fetchone()

    def gc(self, work: Callable[[Exec], T], dry_run: bool) -> T:
        with self.links.take() as link, link.transaction() as db:
            return work(db.execute)

    def close(self) -> None:
        self.links.close()


class PostgresStore(SqlStore):
    """The store in a PostgreSQL database (`postgresql://user@host/db?schema=NAME`)."""

    def __init__(self, url: str, read_only: bool = False) -> None:
        self.dialect: PostgresDialect = PostgresDialect(url, read_only)
        super().__init__(self.dialect)
        self.dsn, self.schema = self.dialect.dsn, self.dialect.schema
