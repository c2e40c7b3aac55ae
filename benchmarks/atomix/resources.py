"""The real local resources a scripted agent acts on, behind one small key-value shape:
SQLite, PostgreSQL, files in a temp dir and a "desktop" of files, INI/JSON configs and a SQLite
app database. Each remembers the idempotency keys it applied (its own dedup, as a counterparty
would) so a status query can answer, and keeps the before-image a compensation restores.

`snapshot`/`restore` is what a client can checkpoint (CR): local state only; an HTTP service's
server state (services.py) is not the client's to snapshot, so it returns None there."""

from __future__ import annotations

import configparser
import contextlib
import json
import shutil
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

MISSING = object()  # status(): the key was never applied


@dataclass(frozen=True)
class Op:
    """One scripted call: `set` a name to a value, `add` a value to it (not idempotent without a
    key), or `read` it (no effect)."""

    verb: str
    name: str
    value: int = 0
    api: str = ""  # the service's own verb for it (retail `cancel`, shop `add_to_cart`), if any

    def as_args(self) -> dict[str, Any]:
        return {"verb": self.verb, "name": self.name, "value": self.value, "api": self.api}


def expected(ops: list[Op], start: dict[str, int] | None = None) -> dict[str, int]:
    """The ground-truth end state of applying `ops` once each, in order."""
    state = dict(start or {})
    for op in ops:
        if op.verb == "set":
            state[op.name] = op.value
        elif op.verb == "add":
            state[op.name] = state.get(op.name, 0) + op.value
    return state


class Store(Protocol):
    def apply(self, op: Op, key: str | None) -> Any: ...
    def undo(self, name: str, before: Any) -> None: ...
    def status(self, key: str) -> Any: ...
    def state(self) -> dict[str, int]: ...
    def snapshot(self) -> Any: ...
    def restore(self, snap: Any) -> None: ...


class SqliteStore:
    """Rows `kv(name, value)` and the applied keys, written in one SQLite transaction."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with self._db() as db:
            db.execute("CREATE TABLE IF NOT EXISTS kv (name TEXT PRIMARY KEY, value INTEGER)")
            db.execute("CREATE TABLE IF NOT EXISTS applied (key TEXT PRIMARY KEY, before TEXT)")

    @contextlib.contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        # Autocommit, and closed after each use: a call may come from any thread.
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            yield db
        finally:
            db.close()

    def apply(self, op: Op, key: str | None) -> Any:
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            if key is not None:
                row = db.execute("SELECT before FROM applied WHERE key=?", (key,)).fetchone()
                if row:  # a re-send under a key already applied: the counterparty dedupes
                    db.execute("COMMIT")
                    return json.loads(row[0])
            got = db.execute("SELECT value FROM kv WHERE name=?", (op.name,)).fetchone()
            before = got[0] if got else None
            if op.verb != "read":
                new = op.value if op.verb == "set" else (before or 0) + op.value
                db.execute("INSERT OR REPLACE INTO kv VALUES (?, ?)", (op.name, new))
            if key is not None:
                db.execute("INSERT INTO applied VALUES (?, ?)", (key, json.dumps(before)))
            db.execute("COMMIT")
            return before

    def undo(self, name: str, before: Any) -> None:
        with self._db() as db:
            if before is None:
                db.execute("DELETE FROM kv WHERE name=?", (name,))
            else:
                db.execute("INSERT OR REPLACE INTO kv VALUES (?, ?)", (name, before))

    def status(self, key: str) -> Any:
        with self._db() as db:
            row = db.execute("SELECT before FROM applied WHERE key=?", (key,)).fetchone()
        return json.loads(row[0]) if row else MISSING

    def state(self) -> dict[str, int]:
        with self._db() as db:
            return dict(db.execute("SELECT name, value FROM kv").fetchall())

    def snapshot(self) -> Any:
        # SQLite's online backup API: the whole database, as CR's checkpoint of local state.
        mem = sqlite3.connect(":memory:")
        with self._db() as db:
            db.backup(mem)
        return mem

    def restore(self, snap: Any) -> None:
        with self._db() as db:
            snap.backup(db)


class PgStore:
    """The same shape on PostgreSQL: one table pair per store, a connection per thread, all of
    them closed by `close()` (the server is shared: never leave connections behind)."""

    def __init__(self, url: str) -> None:
        import psycopg

        self._psycopg = psycopg
        self.url = url
        self.table = "atx_" + uuid.uuid4().hex[:10]
        self._local = threading.local()
        self._all: list[Any] = []
        self._guard = threading.Lock()
        with self._conn().cursor() as cur:
            cur.execute(f"CREATE TABLE {self.table} (name TEXT PRIMARY KEY, value BIGINT)")
            cur.execute(f"CREATE TABLE {self.table}_k (key TEXT PRIMARY KEY, before TEXT)")

    def _conn(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            conn = self._local.conn = self._psycopg.connect(self.url, autocommit=True)
            with self._guard:
                self._all.append(conn)
        return conn

    def close(self) -> None:
        with self._guard:
            conns, self._all = self._all, []
        for conn in conns:
            conn.close()

    def apply(self, op: Op, key: str | None) -> Any:
        t = self.table
        with self._conn().transaction(), self._conn().cursor() as cur:
            if key is not None:
                cur.execute(f"SELECT before FROM {t}_k WHERE key=%s", (key,))
                row = cur.fetchone()
                if row:
                    return json.loads(row[0])
            cur.execute(f"SELECT value FROM {t} WHERE name=%s", (op.name,))
            got = cur.fetchone()
            before = got[0] if got else None
            if op.verb != "read":
                new = op.value if op.verb == "set" else (before or 0) + op.value
                cur.execute(
                    f"INSERT INTO {t} VALUES (%s, %s) ON CONFLICT (name) DO UPDATE SET value=excluded.value",
                    (op.name, new),
                )
            if key is not None:
                cur.execute(f"INSERT INTO {t}_k VALUES (%s, %s)", (key, json.dumps(before)))
            return before

    def undo(self, name: str, before: Any) -> None:
        with self._conn().cursor() as cur:
            if before is None:
                cur.execute(f"DELETE FROM {self.table} WHERE name=%s", (name,))
            else:
                cur.execute(
                    f"INSERT INTO {self.table} VALUES (%s, %s) ON CONFLICT (name) DO UPDATE SET "
                    "value=excluded.value",
                    (name, before),
                )

    def status(self, key: str) -> Any:
        with self._conn().cursor() as cur:
            cur.execute(f"SELECT before FROM {self.table}_k WHERE key=%s", (key,))
            row = cur.fetchone()
        return json.loads(row[0]) if row else MISSING

    def state(self) -> dict[str, int]:
        with self._conn().cursor() as cur:
            cur.execute(f"SELECT name, value FROM {self.table}")
            return {n: int(v) for n, v in cur.fetchall()}

    def snapshot(self) -> Any:
        return None  # a server's rows are not client-side state

    def restore(self, snap: Any) -> None:
        return None

    def drop(self) -> None:
        with self._conn().cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS {self.table}, {self.table}_k")
        self.close()


class DesktopStore:
    """An OSWorld stand-in: names `file-*` are text files, `ini-*` keys of settings.ini, `json-*`
    keys of prefs.json, `db-*` rows of app.db, all under one directory (what CR snapshots whole,
    like a VM snapshot). Applied keys live outside it, as the runtime's memory would."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.db = SqliteStore(root / "app.db")
        self._applied: dict[str, Any] = {}
        self._lock = threading.Lock()

    def _get(self, name: str) -> int | None:
        kind = name.split("-", 1)[0]
        if kind == "file":
            p = self.root / f"{name}.txt"
            return int(p.read_text()) if p.exists() else None
        if kind == "ini":
            cfg = configparser.ConfigParser()
            cfg.read(self.root / "settings.ini")
            return cfg.getint("app", name) if cfg.has_option("app", name) else None
        if kind == "json":
            p = self.root / "prefs.json"
            return json.loads(p.read_text()).get(name) if p.exists() else None
        return self.db.state().get(name)

    def _put(self, name: str, value: int | None) -> None:
        kind = name.split("-", 1)[0]
        if kind == "file":
            p = self.root / f"{name}.txt"
            p.unlink(missing_ok=True) if value is None else p.write_text(str(value))
        elif kind == "ini":
            cfg = configparser.ConfigParser()
            cfg.read(self.root / "settings.ini")
            if not cfg.has_section("app"):
                cfg.add_section("app")
            cfg.remove_option("app", name) if value is None else cfg.set("app", name, str(value))
            with (self.root / "settings.ini").open("w") as f:
                cfg.write(f)
        elif kind == "json":
            p = self.root / "prefs.json"
            data = json.loads(p.read_text()) if p.exists() else {}
            data.pop(name, None) if value is None else data.__setitem__(name, value)
            p.write_text(json.dumps(data))
        else:
            self.db.undo(name, value)

    def apply(self, op: Op, key: str | None) -> Any:
        with self._lock:
            if key is not None and key in self._applied:
                return self._applied[key]
            before = self._get(op.name)
            if op.verb != "read":
                self._put(op.name, op.value if op.verb == "set" else (before or 0) + op.value)
            if key is not None:
                self._applied[key] = before
            return before

    def undo(self, name: str, before: Any) -> None:
        with self._lock:
            self._put(name, before)

    def status(self, key: str) -> Any:
        return self._applied.get(key, MISSING)

    def state(self) -> dict[str, int]:
        names = [p.stem for p in self.root.glob("file-*.txt")]
        cfg = configparser.ConfigParser()
        cfg.read(self.root / "settings.ini")
        names += list(cfg["app"]) if cfg.has_section("app") else []
        prefs = self.root / "prefs.json"
        names += list(json.loads(prefs.read_text())) if prefs.exists() else []
        out = {n: v for n in names if (v := self._get(n)) is not None}
        return out | self.db.state()

    def snapshot(self) -> Any:
        snap = self.root.with_name(self.root.name + ".snap")
        shutil.rmtree(snap, ignore_errors=True)
        shutil.copytree(self.root, snap)
        return snap

    def restore(self, snap: Any) -> None:
        shutil.rmtree(self.root)
        shutil.copytree(snap, self.root)
