"""What differs between the SQL backends: the `Dialect` hooks that `SqlStore` (`sql`) runs its
statements through. A backend is one dialect module plus its DDL and migrations (`*_schema`).

Statements are written once (in `sql`, `sql_parts`, `dispatch_sql`, `tx_rows`, `retention`)
with `%s` or `%(name)s` marks and PostgreSQL's casts (`%s::json`); a dialect runs them the way
its driver wants (SQLite: `?`, `:name`, no casts). JSON columns come back as text on every
backend. The hooks: opening (connection, pragmas, migrations), `read` and `write` (SQLite
commits writes in groups behind the write-ahead-log guard; PostgreSQL heals a dropped
connection), the skip-locked claim fragment, what a unique violation means, the epoch
allocator, the wake-up of transaction waiters across processes (`TxSignal`), the engine's own
consistency check, and gc's housekeeping.

A write whose statements depend on one another (insert a journal row only if the header moved)
is a `chain`: a guard statement, then statements that read the guard's row as table `g`. The
base runs it statement by statement in one transaction (SQLite: a round trip costs nothing);
PostgreSQL sends it as one statement (data-modifying WITH), one round trip and one commit,
batched with the chains other threads of the handle send at once (`postgres_group`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from .retention import Exec
from .tx_signal import TxSignal

T = TypeVar("T")
# A connection as a write function sees it: `execute(sql, params)` returns a DB-API cursor.
Db = Any
Write = Callable[[Db], T]
# One statement of a chain and its `%s` parameters.
Then = tuple[str, Sequence[Any]]


class Dialect(ABC):
    """The few things one SQL backend does its own way."""

    name = "SQL"  # the engine, in messages
    url = ""  # for showing (a password masked)
    dsn = ""  # what connects
    read_only = False
    greatest = "GREATEST"  # the two-argument maximum
    position = "strpos"  # (haystack, needle): where needle starts in haystack (1-based), or 0
    # A float column as text that reads back as the same float (PostgreSQL's shortest exact form).
    real_text = "{}"
    # Whether a JSON column's value `{0}` is a JSON object (PostgreSQL's JSON type is always
    # valid JSON; SQLite's text may not be).
    json_object = "json_typeof({0}) = 'object'"
    # Whether a write whose connection dropped under it may have landed all the same, so the
    # journal append looks before writing again (PostgreSQL; SQLite fails a write whole).
    heals = False

    def skip_locked(self, of: str = "") -> str:
        """The clause that makes racing claimers each take a different row, none waiting
        (`of`: the table alias to lock); empty where one writer at a time holds the lock."""
        return ""

    @abstractmethod
    def read(self, sql: str, params: Any = ()) -> list[Any]:
        """Every row of one query, seeing only committed rows."""

    @abstractmethod
    def write(self, fn: Write[T], atomic: bool = False, retry: bool = True) -> T:
        """Run `fn(db)` as one durable commit. `atomic`: fn issues several statements that must
        commit together; `retry`: fn may be run again if the connection dropped under it."""

    def insert(self, sql: str, params: Sequence[Any]) -> None:
        """One INSERT statement of journal rows as one durable commit, never run again by the
        dialect (the journal append looks whether a dropped write landed: `heals`). SQLite's
        runs it without the write function and the rendering on every call (its hot path)."""
        self.write(lambda db: db.execute(sql, params), retry=False)

    @abstractmethod
    def conflict(self, exc: BaseException) -> bool | None:
        """None unless `exc` is a uniqueness refusal of a journal insert; else whether it was on
        the idempotency key (DuplicateKey) rather than the seq (LeaseLost)."""

    def chain(
        self, guard: str, params: Sequence[Any], names: str, then: Sequence[Then], retry: bool = False
    ) -> Any:
        """One atomic write: `guard` (a statement returning at most one row, its
        columns named `names`), then, only if it returned a row, each statement of `then` in
        order, reading that row as table `g` (`... SELECT ... FROM g`, `... IN (SELECT x FROM
        g)`). Returns the last statement's row (each of `then` but the last may return none;
        the last needs RETURNING), the guard's row if `then` is empty, or None if the guard
        returned none and nothing was written. Statements of `then` do not see one another's
        rows (on PostgreSQL they are parts of one statement, sharing its snapshot). `retry`: the
        chain may be sent again if the connection dropped under it (it changes nothing twice).

        Here: statement by statement in one transaction, the row given to each as `g` by a
        VALUES list (SQLite)."""
        marks = ", ".join(["%s"] * len(names.split(",")))
        prefix = f"WITH g({names}) AS (VALUES ({marks})) "

        def write(db: Db) -> Any:
            g = db.execute(guard, params).fetchone()
            if g is None:
                return None
            row = g
            for sql, more in then:
                row = db.execute(prefix + sql, (*g, *more)).fetchone()
            return row

        return self.write(write, atomic=True, retry=retry)

    def chain_read(
        self,
        guard: str,
        params: Sequence[Any],
        names: str,
        then: Sequence[Then],
        read: str,
        read_params: Sequence[Any] = (),
    ) -> tuple[Any, list[Any] | None]:
        """`chain`, and the query `read` (given the chain's first column, then `read_params`) run in the same
        database transaction, after the chain's statements: (the chain's row, read's rows), or
        (None, None) if the guard returned no row. A backend whose chain's statements cannot see
        every row committed before the guard's row was drawn returns None for the rows (the
        caller reads after the commit instead).

        Here (SQLite) the transaction holds the database's write lock from its start, so the
        read sees every write committed before it, and those of the same batch (which commit
        with it, or are all run again one by one)."""
        marks = ", ".join(["%s"] * len(names.split(",")))
        prefix = f"WITH g({names}) AS (VALUES ({marks})) "

        def write(db: Db) -> tuple[Any, list[Any] | None]:
            g = db.execute(guard, params).fetchone()
            if g is None:
                return None, None
            row = g
            for sql, more in then:
                row = db.execute(prefix + sql, (*g, *more)).fetchone()
            return row, db.execute(read, (g[0], *read_params)).fetchall()

        result: tuple[Any, list[Any] | None] = self.write(write, atomic=True)
        return result

    # The statement that allocates the next transaction epoch, returning it as one column: totally
    # ordered, and a smaller one never becomes visible after a larger one (run as a chain's guard).
    epoch_sql = ""

    @abstractmethod
    def tx_signal(self) -> TxSignal:
        """What transaction frontier waiters sleep on (see `tx_signal`)."""

    @abstractmethod
    def columns(self, table: str) -> set[str]:
        """The columns `table` has (a read-only handle may read a store from before some)."""

    def quick_check(self) -> list[str]:
        """What the engine's own consistency check finds ([] when sound)."""
        return []

    def role(self) -> str | None:
        """The database role this handle connects as; None where the file is the only guard."""
        return None

    def claim_in_queue(self, db: Db, queue: str, sql: str, params: dict[str, Any]) -> Any:
        """Run the queued claim `sql` inside the write `db`; the row it returns, or None."""
        return db.execute(sql, params).fetchone()

    @abstractmethod
    def gc(self, work: Callable[[Exec], T], dry_run: bool) -> T:
        """Run retention's `work` in one transaction (only reading when `dry_run`)."""

    @abstractmethod
    def close(self) -> None: ...
