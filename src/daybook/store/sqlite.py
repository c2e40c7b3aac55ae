"""The SQLite dialect: the embedded default, one file, WAL, every record its own durable commit.

Durability (`?synchronous=` in the URL):
- `full` (default): each intent and outcome is fsynced before daybook goes on. Survives a process
  crash and a power cut.
- `normal`: WAL without an fsync per commit. Survives a process crash (SIGKILL) with nothing lost;
  a power cut may lose the last few records. Lost intents are re-sent under the same key and lost
  outcomes become `unknown` and are reconciled, so with counterparties that honour keys no effect
  happens twice; without keys, a power cut can repeat the last effect.

Writes go through `group` commit on one connection, behind the `wal` guard; reads use a second
connection of their own. Statements arrive written once (`%s`, `%(name)s`, PostgreSQL casts) and
are rendered here (`?`, `:name`, no casts). One writer at a time holds the database's lock, so a
claim needs no SKIP LOCKED, and an epoch is a counter row incremented under that lock.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

from ..errors import ConfigError
from ..records import bounded
from .dialect import Dialect, Write
from .group import GroupCommit
from .retention import Exec
from .rows import foreign_tables, unencodable
from .sql import SqlStore
from .sqlite_schema import locked, migrate, open_read_only
from .tx_signal import TxSignal
from .wal import WalWatch

T = TypeVar("T")
_SYNC = {"full": "FULL", "normal": "NORMAL", "extra": "EXTRA"}
_CAST = re.compile(r"::[a-z0-9_]+", re.IGNORECASE)
_NAMED = re.compile(r"%\((\w+)\)s")


# `None` as a statement parameter: sqlite3 binds it as NULL, but only after looking for an
# adapter for it, and the failed lookup raises and clears an AttributeError inside sqlite3 (three
# per effect step: a journal row's empty columns). An adapter for NoneType that answers None (a
# C function: an empty dict's `get`) binds the same NULL without the exception. Process-wide, as
# every sqlite3 adapter is; what any connection stores is unchanged.
_NO_ADAPTER: dict[object, None] = {}
sqlite3.register_adapter(type(None), _NO_ADAPTER.get)


@functools.lru_cache(maxsize=1024)
def render(sql: str) -> str:
    """A statement written for every backend, as SQLite takes it: `?` and `:name`, no casts."""
    return _NAMED.sub(r":\1", _CAST.sub("", sql)).replace("%s", "?")


class _Connection(sqlite3.Connection):
    """The writer's connection: statements are rendered on the way in (cached)."""

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        return super().execute(render(sql), parameters)


def _path_of(url: str) -> tuple[str, dict[str, list[str]]]:
    if "://" not in url and not url.startswith("sqlite:"):
        return url, {}
    parts = urlsplit(url)
    if parts.scheme != "sqlite":
        raise ConfigError(f"not a SQLite URL: {url!r}")
    # sqlite:///rel.db -> "rel.db"; sqlite:////abs.db -> "/abs.db"
    path = parts.path[1:] if parts.path.startswith("/") else parts.path
    if parts.netloc:
        path = parts.netloc + parts.path
    if not path:
        raise ConfigError(f"SQLite URL {url!r} names no file: use sqlite:///daybook.db")
    return path, parse_qs(parts.query)


def _timeout_of(query: dict[str, list[str]], url: str) -> float:
    """`?timeout=SECONDS`: how long a write waits for another process's lock (default 30)."""
    raw = query.get("timeout", ["30"])[0]
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"timeout={raw!r} in {url!r}: give seconds, e.g. timeout=30") from None
    return bounded(value, f"timeout in {url!r}", low=0.0, high=3600.0)


class SQLiteDialect(Dialect):
    name = "SQLite"
    greatest = "max"
    position = "instr"
    json_object = "CASE WHEN json_valid({0}) THEN json_type({0}) = 'object' ELSE 0 END"
    # SQLite writes a REAL as text with 15 significant digits, which can round a lease's deadline
    # up past the next holder's claim; 17 (the `!` flag lifts its cap of 16) read back exactly.
    real_text = "printf('%!.17g', {})"

    def __init__(self, url: str, read_only: bool = False) -> None:
        self.url = self.dsn = url
        self.read_only = read_only
        path, query = _path_of(url)
        sync = query.get("synchronous", ["full"])[0].lower()
        if sync not in _SYNC:
            raise ConfigError(f"synchronous={sync!r} in {url!r}: use full or normal")
        self.path, self.synchronous, self.timeout = path, sync, _timeout_of(query, url)
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise ConfigError(f"directory {parent!r} for SQLite store {url!r} does not exist")
        if os.path.isdir(path):
            raise ConfigError(f"SQLite store {url!r} names a directory; give a file path")
        if read_only:
            self._db = self._reader = open_read_only(path, url, self.timeout)
        else:
            self._db = self._open_for_writing()
            self._reader = self._connect()
        self.group = GroupCommit(self._db, WalWatch(self.path) if not read_only else None)
        self._read_lock = threading.Lock()

    def _connect(self, factory: type[sqlite3.Connection] = sqlite3.Connection) -> sqlite3.Connection:
        db = sqlite3.connect(
            self.path, isolation_level=None, timeout=self.timeout, check_same_thread=False, factory=factory
        )
        db.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
        return db

    def _open_for_writing(self) -> sqlite3.Connection:
        # Two processes opening a new file at once can get "database is locked" from the switch
        # to WAL without SQLite calling the busy handler (the switch needs the file to itself,
        # and SQLite answers BUSY at once rather than risk a deadlock): such a refusal is tried
        # again, with a short backoff, until the store's lock timeout has passed.
        deadline = time.monotonic() + self.timeout
        pause = 0.005
        while True:
            db: sqlite3.Connection | None = None
            try:
                db = self._connect(_Connection)
                mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise ConfigError(f"could not switch {self.path!r} to WAL mode (got {mode})")
                db.execute(f"PRAGMA synchronous = {_SYNC[self.synchronous]}")
                migrate(db, self.url)
                return db
            except sqlite3.OperationalError as exc:
                _close(db)
                if "column" in str(exc):
                    raise ConfigError(foreign_tables(self.url, exc)) from None
                if "locked" in str(exc) and time.monotonic() + pause < deadline:
                    time.sleep(pause)
                    pause = min(pause * 2, 0.25)
                    continue
                raise self._unavailable(exc) from None
            except sqlite3.DatabaseError as exc:
                _close(db)
                raise self._unavailable(exc) from None
            except BaseException:
                _close(db)
                raise

    def _unavailable(self, exc: sqlite3.DatabaseError) -> Exception:
        return locked(self.path, self.timeout, exc) or ConfigError(
            f"cannot open {self.path!r} as a SQLite store: {exc}"
        )

    def read(self, sql: str, params: Any = ()) -> list[Any]:
        # Reads use their own connection: they must see only committed rows, never a batch
        # that another thread's leader has open.
        with self._read_lock:
            try:
                return self._reader.execute(render(sql), params).fetchall()
            except UnicodeEncodeError as exc:
                raise unencodable(exc, "SQLite") from None
            except sqlite3.OperationalError as exc:
                raise locked(self.path, self.timeout, exc) or exc from None

    def write(self, fn: Write[T], atomic: bool = False, retry: bool = True) -> T:
        """One durable write (group commit); a lock held too long by another process is a
        StoreUnavailable that says so."""
        try:
            result: T = self.group.write(fn, atomic)
        except sqlite3.OperationalError as exc:
            raise locked(self.path, self.timeout, exc) or exc from None
        return result

    def insert(self, sql: str, params: Sequence[Any]) -> None:
        """A journal INSERT (the hot path): rendered here (cached), then run by the group commit
        as it is, with no write function around it and no rendering on the connection."""
        try:
            self.group.execute(render(sql), params)
        except sqlite3.OperationalError as exc:
            raise locked(self.path, self.timeout, exc) or exc from None

    def conflict(self, exc: BaseException) -> bool | None:
        if not isinstance(exc, sqlite3.IntegrityError):
            return None
        return "daybook_events.key" in str(exc)

    epoch_sql = "UPDATE daybook_epochs SET last = last + 1 RETURNING last"

    def tx_signal(self) -> TxSignal:
        return TxSignal()  # no notification across processes: waiters poll (see tx_signal)

    def columns(self, table: str) -> set[str]:
        return {str(r[1]) for r in self.read(f"PRAGMA table_info({table})")}

    def quick_check(self) -> list[str]:
        found = [str(r[0]) for r in self.read("PRAGMA quick_check")]
        return [] if found == ["ok"] else found

    def gc(self, work: Callable[[Exec], T], dry_run: bool) -> T:
        if dry_run:
            with self._read_lock:
                return work(lambda sql, params: self._reader.execute(render(sql), tuple(params)))

        def erase(db: sqlite3.Connection) -> T:
            # Freed and overwritten content is zeroed, so the erased text leaves the file too.
            db.execute("PRAGMA secure_delete = ON")
            return work(db.execute)

        done = self.write(erase, atomic=True)
        # The write-ahead log still holds the pages as they were: fold it in and empty it.
        with contextlib.suppress(sqlite3.Error), self._read_lock:
            self._reader.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return done

    def close(self) -> None:
        # Under the read lock: closing a connection another thread is reading from crashes the
        # interpreter (a use after free in sqlite3), not only that read.
        with self._read_lock:
            self._db.close()
            if self._reader is not self._db:
                self._reader.close()


class SQLiteStore(SqlStore):
    """The store on a SQLite file (`sqlite:///path.db`)."""

    def __init__(self, url: str, read_only: bool = False) -> None:
        self.dialect: SQLiteDialect = SQLiteDialect(url, read_only)
        super().__init__(self.dialect)
        self.path, self.synchronous = self.dialect.path, self.dialect.synchronous

    @property
    def _group(self) -> GroupCommit:
        """The group commit (benchmarks and the write-ahead-log test reach it)."""
        return self.dialect.group


def _close(db: sqlite3.Connection | None) -> None:
    if db is not None:
        db.close()
