"""A PostgreSQL connection that heals: the one socket the PostgreSQL dialect talks through.

A server restart, a failover, `pg_terminate_backend` or a pooler's idle kill closes the socket
under a long-lived handle. The next statement finds it broken; the link then opens a new
connection (same conninfo, same `search_path`) and:
- a read, or a write that is safe to repeat (a lease renewal, an upsert), is sent again once;
- any other write raises `StoreUnavailable` (whether it took is unknown), so the caller can
  check, as the journal append does, or stop and resume from the journal.
If the server cannot be reached yet, `StoreUnavailable` is raised and the next call tries again.
Encoding refusals (`DataError`: a NUL in text, bad Unicode) become `NotSerializable`: the value
is at fault, never the store.

A handle holds its links in `Links`: one at first, another opened only when a thread finds every
one busy (threads of one process writing at once), so their commits overlap and the server
flushes them to its WAL together instead of one after another on one socket.
"""

from __future__ import annotations

import contextlib
import select
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg
from psycopg.types.string import TextLoader

from ..errors import StoreUnavailable
from .rows import unencodable

_ENCODING = (psycopg.DataError, UnicodeEncodeError)


def _lost(conn: psycopg.Connection[Any]) -> bool:
    return conn.closed or conn.broken


class Link:
    """One autocommit connection, re-established when the server drops it."""

    def __init__(self, conninfo: str, schema: str | None, read_only: bool = False) -> None:
        self._conninfo = conninfo
        self._schema = schema
        self._read_only = read_only
        self._lock = threading.Lock()
        # A handle is shared by threads: a transaction holds the connection to its end, so no
        # other thread's statement lands inside it (one thread's turn at a time).
        self._turn = threading.RLock()
        self.reconnects = 0
        self.conn = self._connect()  # psycopg.OperationalError: the caller says what to fix
        # The journal's inserts reuse one cursor per connection: psycopg builds a cursor (and its
        # adapters) for every `conn.execute`, a third of a statement's client-side cost.
        self._cursor = self.conn.cursor()

    def _connect(self) -> psycopg.Connection[Any]:
        conn = psycopg.connect(self._conninfo, autocommit=True)
        # JSON comes back as the text stored, as on every backend (`rows` parses it).
        conn.adapters.register_loader("json", TextLoader)
        if self._read_only:
            # Defence in depth: the session refuses every write, whatever the code asks.
            conn.execute("SET default_transaction_read_only = on")
        if self._schema:
            # A schema that does not exist yet is allowed in search_path (the store creates it).
            conn.execute(f'SET search_path TO "{self._schema}"')
        return conn

    def _heal(self, broken: psycopg.Connection[Any], exc: Exception) -> psycopg.Connection[Any]:
        with self._lock:
            if self.conn is broken:  # else another thread has healed it already
                with contextlib.suppress(Exception):
                    broken.close()
                try:
                    self.conn = self._connect()
                except psycopg.Error as again:
                    raise StoreUnavailable(
                        f"the connection to PostgreSQL was lost ({_brief(exc)}) and cannot be "
                        f"re-established yet ({_brief(again)}); daybook tries again on the next call"
                    ) from None
                self.reconnects += 1
            return self.conn

    def execute(self, sql: str, params: Any = None, *, retry: bool = True) -> psycopg.Cursor[Any]:
        """One statement. `retry`: safe to send again if the connection was lost under it."""
        with self._turn:
            return self._execute(sql, params, retry)

    def insert(self, sql: str, params: Sequence[Any]) -> None:
        """One statement whose answer nobody reads (a journal insert), never sent twice, on the
        connection's kept cursor (its answer is left unread: no thread reads the kept cursor)."""
        with self._turn:
            self._execute(sql, params, False, kept=True)

    def _execute(self, sql: str, params: Any, retry: bool, kept: bool = False) -> psycopg.Cursor[Any]:
        conn = self.conn if retry else self._idle_checked()
        try:
            return self._kept(conn).execute(sql, params) if kept else conn.execute(sql, params)
        except _ENCODING as exc:
            raise unencodable(exc, "PostgreSQL") from None
        except psycopg.OperationalError as exc:
            if not _lost(conn):
                raise
            conn = self._heal(conn, exc)
            if not retry:
                raise StoreUnavailable(
                    f"the connection to PostgreSQL was lost during a write ({_brief(exc)}); it is "
                    "re-established, but whether that write took is unknown"
                ) from exc
        try:
            return conn.execute(sql, params)
        except _ENCODING as exc:
            raise unencodable(exc, "PostgreSQL") from None

    def _kept(self, conn: psycopg.Connection[Any]) -> psycopg.Cursor[Any]:
        """The cursor kept for statements whose answer nobody reads, on `conn`."""
        if self._cursor.connection is not conn:  # healed since: a cursor of the new connection
            self._cursor = conn.cursor()
        return self._cursor

    def _idle_checked(self) -> psycopg.Connection[Any]:
        """The connection for a statement that is never sent twice, healed first if the server
        closed it while it was idle (a restart, an idle kill): then nothing of the statement was
        sent, so it may go on the new connection. Seen without waiting: the server's farewell, or
        the end of the stream, is already readable on an idle socket."""
        conn = self.conn
        try:
            readable = bool(select.select([conn.pgconn.socket], [], [], 0)[0])
        except (OSError, ValueError, psycopg.Error):
            readable = True  # no socket to look at: let libpq say what it is
        if not readable:
            return conn
        try:
            conn.pgconn.consume_input()
        except psycopg.OperationalError as exc:
            return self._heal(conn, exc)
        if conn.pgconn.status == psycopg.pq.ConnStatus.BAD:
            return self._heal(conn, psycopg.OperationalError("the server closed the connection"))
        return conn

    def batch(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[Any]:
        """Statements in one transaction, sent together: one round trip and one commit (a
        pipeline: BEGIN, each statement, COMMIT, one Sync). Each one's rows (None if it
        returns none). Never sent twice: a connection lost under it raises `StoreUnavailable`;
        any other error leaves nothing of it written."""
        with self._turn, self._pipelined() as conn:
            cursors = [conn.execute(sql, params) for sql, params in statements]
        return [cur.fetchall() if cur.description else None for cur in cursors]

    def insert_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """One statement run for each of `rows`, in one transaction sent together, as `batch`,
        on the kept cursor (psycopg prepares the statement once for all rows); no answer read."""
        with self._turn, self._pipelined() as conn:
            self._kept(conn).executemany(sql, rows)

    @contextlib.contextmanager
    def _pipelined(self) -> Iterator[psycopg.Connection[Any]]:
        """The connection in a pipeline whose statements (the block's) run in one transaction,
        committed at the end; the turn is the caller's to hold. A statement that fails rolls
        back the rest; a connection lost under it raises `StoreUnavailable`."""
        conn = self._idle_checked()
        with self._mapped(conn):
            try:
                with conn.pipeline():
                    # Read Committed whatever the server's default: each statement sees
                    # every commit made before it (a begin's look after the epoch lock).
                    self._kept(conn).execute("BEGIN ISOLATION LEVEL READ COMMITTED")
                    yield conn
                    self._kept(conn).execute("COMMIT")
            finally:
                if not _lost(conn) and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    with contextlib.suppress(psycopg.Error):
                        conn.execute("ROLLBACK")  # a statement failed: the rest never ran

    @contextlib.contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """A transaction, never retried once begun: whether a COMMIT whose answer was lost took
        is unknown, so a connection lost in it raises `StoreUnavailable` (the next call uses a
        new one). A connection found lost at BEGIN, before anything was sent, is healed first."""
        with self._turn:
            conn, tx = self._begin()
            with self._mapped(conn):
                try:
                    yield conn
                except BaseException as exc:
                    if not tx.__exit__(type(exc), exc, exc.__traceback__):
                        raise
                else:
                    tx.__exit__(None, None, None)

    @contextlib.contextmanager
    def _mapped(self, conn: psycopg.Connection[Any]) -> Iterator[None]:
        """A begun transaction's errors as daybook's: text the database cannot encode is
        refused as such; a connection lost under it raises `StoreUnavailable` (its fate unknown)."""
        try:
            yield
        except _ENCODING as exc:
            raise unencodable(exc, "PostgreSQL") from None
        except psycopg.OperationalError as exc:
            if not _lost(conn):
                raise
            raise self._lost_in_transaction(conn, exc) from exc

    def _lost_in_transaction(self, conn: psycopg.Connection[Any], exc: Exception) -> StoreUnavailable:
        """Heals the link; the error says the transaction's fate is unknown."""
        self._heal(conn, exc)
        return StoreUnavailable(
            f"the connection to PostgreSQL was lost during a transaction ({_brief(exc)}); "
            "it is re-established, but whether the transaction committed is unknown"
        )

    def _begin(self) -> tuple[psycopg.Connection[Any], contextlib.AbstractContextManager[Any]]:
        conn = self.conn
        try:
            tx = conn.transaction()
            tx.__enter__()
        except psycopg.OperationalError as exc:
            if not _lost(conn):
                raise
            conn = self._heal(conn, exc)  # nothing of this transaction was sent yet
            tx = conn.transaction()
            tx.__enter__()
        return conn, tx

    def close(self) -> None:
        self.conn.close()


class Links:
    """A handle's links, taken one per call: `first` at once (its errors are the caller's to
    report), more on demand up to `most`; past that a call waits for one to be free."""

    def __init__(self, conninfo: str, schema: str | None, read_only: bool = False, most: int = 16) -> None:
        self._args = (conninfo, schema, read_only)
        self.first = Link(conninfo, schema, read_only=read_only)
        self._idle = [self.first]
        self._all = [self.first]
        self._count = 1
        self._most = most
        self._free = threading.Condition()

    @contextlib.contextmanager
    def take(self) -> Iterator[Link]:
        """A link no other thread is using, for the block (the one used last, when free)."""
        link = self._get()
        try:
            yield link
        finally:
            self._put(link)

    def insert(self, sql: str, params: Sequence[Any]) -> None:
        """`Link.insert` on a free link: the journal's hot path, without `take`'s generator."""
        link = self._get()
        try:
            link.insert(sql, params)
        finally:
            self._put(link)

    def _put(self, link: Link) -> None:
        with self._free:
            self._idle.append(link)
            self._free.notify()

    def insert_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """`Link.insert_many` on a free link."""
        with self.take() as link:
            link.insert_many(sql, rows)

    def _get(self) -> Link:
        with self._free:
            if self._idle:
                return self._idle.pop()
            grow = self._count < self._most
            if grow:
                self._count += 1
            else:
                self._free.wait_for(lambda: bool(self._idle))
                return self._idle.pop()
        try:
            link = Link(*self._args[:2], read_only=self._args[2])
        except psycopg.Error:
            # The server refuses another connection (its limit, or it is down): share the ones
            # there are (a link heals itself when next used).
            with self._free:
                self._count -= 1
                self._free.wait_for(lambda: bool(self._idle))
                return self._idle.pop()
        with self._free:
            self._all.append(link)
        return link

    def close(self) -> None:
        with self._free:
            links = list(self._all)
        for link in links:
            with contextlib.suppress(Exception):
                link.close()


def _brief(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"
