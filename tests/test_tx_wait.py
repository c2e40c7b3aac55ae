"""Frontier waits are event-driven, not a timer: a transaction header that ends wakes a waiter at
once (in the same handle on both stores; on PostgreSQL in another handle too, by the NOTIFY the
ending database transaction sends), and a run that stops on purpose inside a transaction is
not taken for abandoned (it journals `tx_left`), while one whose steps end inside an open
transaction is aborted by the next execution."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

import daybook
from daybook import Daybook
from daybook.store.tx_signal import PgTxSignal


@daybook.tool(bufferable=True, scopes="fs:{root}/{name}")
def put(*, root: str, name: str, text: str, idempotency_key: str) -> str:
    Path(root, name).write_text(text)
    return name


@daybook.workflow(name="tx_wait_one")
def one(ctx: daybook.Context, root: str) -> int:
    with ctx.transaction(scopes=[f"fs:{root}/**"]) as tx:
        ctx.effect(put, root=root, name="f", text="x")
    return tx.epoch


def _wake_after(signal: Any, act: Any) -> float:
    """Seconds from `act()` (in a thread, after 0.2 s) to `signal` moving (10 s at most)."""
    seen = signal.generation()
    started = time.monotonic()
    thread = threading.Thread(target=lambda: (time.sleep(0.2), act()))
    thread.start()
    moved = signal.wait(seen, 10.0)
    woke = time.monotonic() - started
    thread.join()
    assert moved != seen, "the signal never moved"
    return woke


def test_a_header_ending_in_the_same_handle_wakes_its_waiter_at_once(db_url: str, tmp_path: Path) -> None:
    with Daybook(db_url) as book:
        woke = _wake_after(book.store.tx_signal(), lambda: book.run(one, str(tmp_path), run_id="w1"))
    assert woke < 5.0  # not a 10 s timeout: the commit itself woke it


def test_on_postgres_a_header_ending_in_another_process_wakes_a_waiter_by_notify(
    db_url: str, tmp_path: Path
) -> None:
    if not db_url.startswith("postgres"):
        pytest.skip("SQLite has no cross-process notification: its waiters poll (0.1 s)")
    with Daybook(db_url) as waiter, Daybook(db_url) as other:
        signal = waiter.store.tx_signal()
        assert isinstance(signal, PgTxSignal)
        signal.wait(signal.generation(), 0.0)  # starts the LISTEN thread
        assert signal.listening.wait(10.0)
        time.sleep(0.1)
        woke = _wake_after(signal, lambda: other.run(one, str(tmp_path), run_id="w2"))
    assert woke < 5.0


@daybook.workflow(name="tx_wait_gated")
def gated(ctx: daybook.Context, root: str) -> int:
    with ctx.transaction(scopes=[f"fs:{root}/**"], retries=0) as tx:
        ctx.effect(put, root=root, name="g", text="y")
        ctx.wait_for("go", timeout=3600)  # a long wait inside the block: the run suspends
    return tx.attempt


def test_a_run_suspended_inside_a_transaction_goes_on_with_it_when_resumed(
    db_url: str, tmp_path: Path
) -> None:
    with Daybook(db_url, inline_wait=0.1) as book:
        with pytest.raises(daybook.Suspended):
            book.run(gated, str(tmp_path), run_id="s1")
        kinds = [e.kind for e in book.journal("s1")]
        assert kinds[-1] == "tx_left"  # it stopped on purpose, with the transaction open
        book.signal("s1", "go", {})
    with Daybook(db_url) as other:  # another handle (owner) resumes it
        assert other.resume("s1", wait=10) == 1  # the same attempt: not aborted
        assert [t["status"] for t in other.transactions("s1")] == ["committed"]
    assert Path(tmp_path, "g").read_text() == "y"


@daybook.tool(idempotent=True, irreversible=False)
def unbook(*, original: dict[str, Any], result: Any, idempotency_key: str) -> None:
    Path(original["root"], "booked").unlink()


@daybook.tool(idempotent=True, irreversible=False, inverse=unbook)
def book_it(*, root: str, idempotency_key: str) -> str:
    Path(root, "booked").write_text(idempotency_key)
    return "booked"


def _interrupt() -> None:
    raise KeyboardInterrupt  # the process goes away mid-body: nothing on purpose is journaled


@daybook.workflow(name="tx_wait_abandoned")
def abandoned(ctx: daybook.Context, root: str, retries: int) -> int:
    with ctx.transaction(scopes=[f"fs:{root}/**"], retries=retries) as tx:
        ctx.effect(book_it, root=root)
        ctx.effect(put, root=root, name="page", text="staged")
        if tx.attempt == 1:
            ctx.decide("interrupt", _interrupt)
    return tx.attempt


@pytest.mark.parametrize("retries", [0, 1])
def test_an_attempt_left_open_without_tx_left_is_aborted_by_the_next_execution(
    db_url: str, tmp_path: Path, retries: int
) -> None:
    with Daybook(db_url) as first, pytest.raises(KeyboardInterrupt):
        first.run(abandoned, str(tmp_path), retries, run_id="a1")
    assert (tmp_path / "booked").exists() and not (tmp_path / "page").exists()
    with Daybook(db_url) as book:
        if retries == 0:
            with pytest.raises(daybook.RunParked, match="TransactionAbandoned"):
                book.resume("a1", wait=10)
            assert not (tmp_path / "booked").exists()  # undone by its inverse, once
            assert not (tmp_path / "page").exists()  # staged, never published
            assert [t["status"] for t in book.transactions("a1")] == ["aborted"]
        else:
            assert book.resume("a1", wait=10) == 2
            assert (tmp_path / "page").read_text() == "staged"
            assert (tmp_path / "booked").exists()  # booked again by the retry, which stands
            assert [t["status"] for t in book.transactions("a1")] == ["aborted", "committed"]
        assert book.frontiers() == []
