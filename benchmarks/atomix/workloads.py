"""Seeded scripted workloads shaped like the paper's benchmarks (no benchmark data, no model),
and the `Lab` that gives each run a fresh resource and runs a cell (mode x workload x fp):

- web: calls to the shop app over HTTP (carts, form fields, forum replies, page views);
- desktop: text files, INI and JSON settings and SQLite app rows in one directory;
- retail: lookup/cancel/modify/return/exchange on the retail API (returns add refunds);
- rows: sequential writes to SQLite rows (A.6); pg: the same rows on PostgreSQL."""

from __future__ import annotations

import random
import shutil
import tempfile
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness import Outcome, Task, World
from policies import injector, run_mode
from resources import DesktopStore, Op, PgStore, SqliteStore, Store
from services import HttpStore, Service

import daybook


def _web_op(rng: random.Random, i: int) -> Op:
    kind = rng.choice(["add_to_cart", "set_field", "post_reply", "view"])
    generic = {"add_to_cart": "add", "set_field": "set", "post_reply": "set", "view": "read"}[kind]
    return Op(generic, f"{kind.split('_')[0]}-{rng.randrange(6)}", rng.randrange(1, 99), kind)


def _desktop_op(rng: random.Random, i: int) -> Op:
    kind = rng.choice(["file", "ini", "json", "db"])
    verb = "add" if kind == "db" and rng.random() < 0.3 else "set"
    return Op(verb, f"{kind}-{rng.randrange(5)}", rng.randrange(1, 99))


def _retail_op(rng: random.Random, i: int) -> Op:
    kind = rng.choice(["lookup", "lookup", "cancel", "modify", "return", "exchange"])
    generic = {"lookup": "read", "return": "add"}.get(kind, "set")
    name = f"refund-{rng.randrange(4)}" if kind == "return" else f"order-{rng.randrange(8)}"
    return Op(generic, name, rng.randrange(1, 99), kind)


def _rows_op(rng: random.Random, i: int) -> Op:
    return Op("set", f"row-{i}", rng.randrange(1, 999))


SHAPES: dict[str, Callable[[random.Random, int], Op]] = {
    "web": _web_op,
    "desktop": _desktop_op,
    "retail": _retail_op,
    "rows": _rows_op,
    "pg": _rows_op,
}


def tasks(workload: str, n: int, steps: tuple[int, int], seed: int) -> list[Task]:
    """n tasks of `workload`, each with a step count drawn from `steps` (inclusive)."""
    rng = random.Random(f"{workload}/{seed}")
    out = []
    for t in range(n):
        length = rng.randint(*steps)
        ops = tuple(SHAPES[workload](rng, i) for i in range(length))
        out.append(Task(f"{workload}-{t}", ops))
    return out


def scratch(durable: bool = False) -> Path:
    """A fresh temp dir: on tmpfs (/dev/shm) for the correctness experiments, where fsync is
    nearly free and only the counts matter; on disk (`durable`) for anything timed."""
    shm = Path("/dev/shm")
    where = None if durable or not shm.is_dir() else str(shm)
    return Path(tempfile.mkdtemp(prefix="atomix-", dir=where))


@dataclass
class Lab:
    """Temp dirs, services and a daybook store for one experiment; `close()` removes them."""

    pg_url: str | None = None
    root: Path = field(default_factory=scratch)
    _services: list[Service] = field(default_factory=list)
    _pg: list[PgStore] = field(default_factory=list)
    _book: daybook.Daybook | None = None

    @property
    def book(self) -> daybook.Daybook:
        if self._book is None:
            self._book = daybook.Daybook(f"sqlite:///{self.root / 'daybook.db'}")
        return self._book

    def store(self, workload: str, run: str) -> Store:
        if workload in ("web", "retail"):
            svc = Service("shop" if workload == "web" else "retail", self.root / run)
            self._services.append(svc)
            return HttpStore(svc)
        if workload == "desktop":
            return DesktopStore(self.root / run / "desktop")
        if workload == "pg":
            assert self.pg_url
            pg = PgStore(self.pg_url)
            self._pg.append(pg)
            return pg
        (self.root / run).mkdir(parents=True, exist_ok=True)
        return SqliteStore(self.root / run / "rows.db")

    def release(self) -> None:
        """Stop this cell's services (their ports and threads) once its runs are counted."""
        for svc in self._services:
            svc.stop()
        self._services.clear()

    def close(self) -> None:
        self.release()
        for pg in self._pg:
            pg.drop()
        if self._book is not None:
            self._book.close()
        shutil.rmtree(self.root, ignore_errors=True)


def cell(
    lab: Lab,
    mode: str,
    workload: str,
    task_list: list[Task],
    fp: float,
    *,
    repeats: int = 1,
    p_post: float | None = None,
    retries: int = 3,
    once: bool = False,
) -> list[Outcome]:
    """Every task `repeats` times under `mode`, each on a fresh resource."""
    inj = injector(mode, fp, p_post, once, seed=zlib.crc32(f"{workload}/{fp}".encode()))
    out = []
    for rep in range(repeats):
        for task in task_list:
            run = f"{mode[:5]}-{task.id}-{rep}-{uuid.uuid4().hex[:6]}"
            world = World(run, lab.store(workload, run), inj, draw=f"{task.id}/{rep}")
            out.append(run_mode(mode, task, world, retries, lab.book))
        lab.release()
    return out
