"""Atomix transactions in one process, on both stores: epochs from the store, buffered calls
staged until commit, calls that run now compensated on abort, irreversible calls held until
commit, retries under a fresh epoch, scopes enforced before a call runs, and the commit rule."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import daybook
from daybook import Daybook, ScopeViolation
from daybook.demo.bank import Bank
from daybook.tx.frontier import frontiers, listing

FAIL_ONCE: dict[str, int] = {}
SEEN: dict[str, list[Any]] = {}


@daybook.tool(bufferable=True, irreversible=False, scopes="fs:{root}/{name}")
def write_page(root: str, name: str, html: str, idempotency_key: str) -> str:
    Path(root, name).write_text(html)
    return name


@daybook.tool(idempotent=True, irreversible=False)
def unhold(original: dict[str, Any], result: Any, idempotency_key: str) -> None:
    Path(original["root"], "holds", str(result)).unlink(missing_ok=True)


@daybook.tool(inverse=unhold, scopes=lambda root, hotel, **_: [f"api:hotel:holds:{hotel}"])
def hold_room(root: str, hotel: str, idempotency_key: str) -> str:
    holds = Path(root, "holds")
    holds.mkdir(exist_ok=True)
    name = f"{hotel}-{len(list(holds.iterdir()))}"
    (holds / name).write_text(idempotency_key)
    return name


@daybook.tool(irreversible=True, scopes="email:outbox:{to}")
def send_mail(root: str, to: str, body: str, idempotency_key: str) -> None:
    with Path(root, "outbox.txt").open("a") as f:
        f.write(f"{to}:{body}:{idempotency_key}\n")


def _mails(root: Path) -> list[str]:
    p = root / "outbox.txt"
    return p.read_text().splitlines() if p.exists() else []


def _holds(root: Path) -> list[str]:
    p = root / "holds"
    return sorted(x.name for x in p.iterdir()) if p.exists() else []


SCOPES = ["fs:{root}/**", "api:hotel:holds:*", "email:outbox:*"]


def _book_trip(ctx: daybook.Context, root: str, fail_times: int) -> dict[str, Any]:
    scopes = [s.format(root=root) for s in SCOPES]
    with ctx.transaction(scopes=scopes, retries=3) as tx:
        staged = ctx.effect(write_page, root=root, name="offer.html", html="<p>offer</p>")
        hold = ctx.effect(hold_room, root=root, hotel="H1")
        ctx.effect(send_mail, root=root, to="ann@example.com", body=f"hold {hold}")
        # What the world shows inside the block (live; a replay sees the committed world):
        # the page staged and invisible, the hold made now, the email held.
        page, held = Path(root, "offer.html").exists(), Path(root, "holds", hold).exists()
        SEEN.setdefault(root, []).append((staged, page, held, _mails(Path(root))))
        seen = FAIL_ONCE.get(root, 0)
        if seen < fail_times:
            FAIL_ONCE[root] = seen + 1
            raise RuntimeError("the model changed its mind")
    return {"epoch": tx.epoch, "attempt": tx.attempt, "hold": hold, "status": tx.status}


@daybook.workflow(name="tx_trip")
def trip(ctx: daybook.Context, root: str, fail_times: int) -> dict[str, Any]:
    return _book_trip(ctx, root, fail_times)


def test_a_transaction_stages_runs_now_and_holds_then_commits_all_together(
    book: Daybook, tmp_path: Path
) -> None:
    out = book.run(trip, str(tmp_path), 0, run_id="t1")
    assert out["status"] == "committed" and out["attempt"] == 1 and out["epoch"] >= 1
    assert SEEN[str(tmp_path)] == [(None, False, True, [])]
    assert (tmp_path / "offer.html").read_text() == "<p>offer</p>"
    assert _holds(tmp_path) == [out["hold"]]
    assert len(_mails(tmp_path)) == 1
    rows = listing(book.store, "t1")
    assert [(r["status"], r["attempt"]) for r in rows] == [("committed", 1)]
    assert frontiers(book.store) == []  # nothing open holds any resource
    assert book.replay("t1") == out  # replay reproduces the decisions, firing nothing
    assert len(_mails(tmp_path)) == 1 and _holds(tmp_path) == [out["hold"]]


def test_an_exception_aborts_compensates_in_reverse_and_retries_under_a_fresh_epoch(
    book: Daybook, tmp_path: Path
) -> None:
    out = book.run(trip, str(tmp_path), 2, run_id="t2")
    assert out["attempt"] == 3
    assert SEEN[str(tmp_path)] == [(None, False, True, [])] * 3
    rows = listing(book.store, "t2")
    assert [r["status"] for r in rows] == ["aborted", "aborted", "committed"]
    epochs = [r["epoch"] for r in rows]
    assert epochs == sorted(epochs) and len(set(epochs)) == 3  # a fresh epoch per attempt
    assert _holds(tmp_path) == [out["hold"]]  # the two aborted holds were cancelled
    assert len(_mails(tmp_path)) == 1  # the aborted attempts' emails were never sent
    assert book.replay("t2") == out


def test_when_retries_run_out_the_exception_propagates_and_nothing_remains(
    book: Daybook, tmp_path: Path
) -> None:
    @daybook.workflow(name="tx_trip_once")
    def once(ctx: daybook.Context, root: str) -> dict[str, Any]:
        scopes = [s.format(root=root) for s in SCOPES]
        with ctx.transaction(scopes=scopes, retries=1):
            ctx.effect(write_page, root=root, name="offer.html", html="x")
            ctx.effect(hold_room, root=root, hotel="H1")
            ctx.effect(send_mail, root=root, to="ann@example.com", body="x")
            raise RuntimeError("always")
        return {}

    with pytest.raises(daybook.RunFailed, match="always"):
        book.run(once, str(tmp_path), run_id="t3")
    assert [r["status"] for r in listing(book.store, "t3")] == ["aborted", "aborted"]
    assert not (tmp_path / "offer.html").exists() and _holds(tmp_path) == [] and _mails(tmp_path) == []


def test_a_call_outside_the_declared_scopes_is_refused_before_it_runs(book: Daybook, tmp_path: Path) -> None:
    @daybook.workflow(name="tx_out_of_scope")
    def stray(ctx: daybook.Context, root: str) -> None:
        with ctx.transaction(scopes=["api:hotel:holds:H1"], retries=3):
            ctx.effect(hold_room, root=root, hotel="H1")
            ctx.effect(hold_room, root=root, hotel="H2")  # not declared

    with pytest.raises(daybook.RunFailed, match="ScopeViolation"):
        book.run(stray, str(tmp_path), run_id="t4")
    assert _holds(tmp_path) == []  # H2 never ran, H1 was compensated
    assert [r["status"] for r in listing(book.store, "t4")] == ["aborted"]  # no retry
    assert issubclass(ScopeViolation, daybook.DaybookError)


def test_an_async_transaction_commits_with_async_with(book: Daybook, tmp_path: Path) -> None:
    @daybook.tool(bufferable=True, irreversible=False)
    async def awrite(root: str, name: str, idempotency_key: str) -> str:
        Path(root, name).write_text("async")
        return name

    @daybook.workflow(name="tx_async")
    async def flow(ctx: daybook.Context, root: str) -> Any:
        async with ctx.transaction(scopes=["fs:/**"]) as tx:
            assert await ctx.effect(awrite, root=root, name="a.txt") is None
            assert not Path(root, "a.txt").exists()
        return list(tx.results.values())

    assert asyncio.run(book.run_async(flow, str(tmp_path), run_id="t5")) == ["a.txt"]
    assert (tmp_path / "a.txt").read_text() == "async"


def test_an_effect_outside_any_transaction_behaves_as_before(book: Daybook, tmp_path: Path) -> None:
    @daybook.workflow(name="tx_outside")
    def plain(ctx: daybook.Context, root: str) -> None:
        ctx.effect(send_mail, root=root, to="bob@example.com", body="now")
        ctx.effect(write_page, root=root, name="p.html", html="now")

    book.run(plain, str(tmp_path), run_id="t6")
    assert len(_mails(tmp_path)) == 1 and (tmp_path / "p.html").exists()
    assert listing(book.store, "t6") == []


def test_a_later_epoch_on_an_overlapping_scope_waits_for_the_earlier_one(db_url: str, tmp_path: Path) -> None:
    """The commit rule in one process: B (later epoch, same scope) enters only once A ended;
    C (disjoint scope) runs while A is open."""
    order: list[str] = []
    a_open = threading.Event()
    release_a = threading.Event()

    @daybook.workflow(name="tx_rule")
    def agent(ctx: daybook.Context, name: str, scope: str, block: bool) -> int:
        with ctx.transaction(scopes=[scope]) as tx:
            order.append(f"{name}:in")
            if block:
                a_open.set()
                release_a.wait(10)
            order.append(f"{name}:out")
        return tx.epoch

    with Daybook(db_url) as b1, Daybook(db_url) as b2, Daybook(db_url) as b3:
        a_args = (agent, "A", "db:shop:counter", True)
        ta = threading.Thread(target=b1.run, args=a_args, kwargs={"run_id": "A"})
        ta.start()
        assert a_open.wait(10)
        tb = threading.Thread(target=b2.run, args=(agent, "B", "db:shop:*", False), kwargs={"run_id": "B"})
        tb.start()
        b3.run(agent, "C", "db:other:x", False, run_id="C")  # disjoint: not blocked by A
        time.sleep(0.3)
        assert "B:in" not in order  # B waits on A's frontier
        held = frontiers(b3.store)
        assert any(f["held_by"]["run_id"] == "A" and f["waiting"] for f in held)
        release_a.set()
        ta.join(10)
        tb.join(10)
    assert order.index("C:out") < order.index("A:out") < order.index("B:in")


def test_at_the_bank_an_aborted_attempt_is_cancelled_and_its_irreversible_payment_never_sent(
    book: Daybook, bank: Bank
) -> None:
    """Counted at a real HTTP counterparty: each attempt books a leg now and holds a payment;
    the first attempt aborts (leg cancelled, payment dropped), the retry commits."""
    from agents import book_leg, pay_blind

    failed: list[int] = []

    @daybook.workflow(name="tx_bank")
    def transfer(ctx: daybook.Context, url: str) -> str:
        with ctx.transaction(scopes=["api:bank:**"], retries=2):
            leg = ctx.effect(book_leg, bank=url, n=1, fail_inverse_of=-1)
            ctx.effect(pay_blind, bank=url, n=99)
            if not failed:
                failed.append(1)
                raise RuntimeError("fault injected at the tool boundary")
        return str(leg["id"])

    book.run(transfer, bank.url, run_id="bank1")
    executed = bank.stats()["executed"]
    payments = bank.records["payments"].values()
    assert sorted(p["n"] for p in payments) == [1, 1, 99]  # two legs booked, one payment
    assert executed["cancels"] == 1  # the aborted attempt's leg, cancelled once
    assert all(n == 1 for n in bank.stats()["executions_by_key"].values())


def test_the_transactions_example_runs_and_keeps_only_the_committed_attempt() -> None:
    import subprocess
    import sys

    example = Path(__file__).parent.parent / "examples" / "transactions.py"
    proc = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "epoch 1: attempt 1 aborted" in proc.stdout and "epoch 2: attempt 2 committed" in proc.stdout
    assert "holds at the hotel: 1" in proc.stdout and "emails sent: 1" in proc.stdout
    assert "page published: True" in proc.stdout


def test_the_files_adapter_inside_a_transaction_publishes_only_at_its_commit(
    book: Daybook, tmp_path: Path
) -> None:
    from daybook.adapters.files import Workspace

    site = tmp_path / "site"
    site.mkdir()
    seen: list[bool] = []

    @daybook.workflow(name="tx_files")
    def publish(ctx: daybook.Context, root: str) -> None:
        ws = Workspace(root)
        with ctx.transaction(scopes=[f"fs:{root}/**"], retries=1) as tx:
            ws.write(ctx, "a.html", f"attempt {tx.attempt}")
            ws.write(ctx, "b.html", f"attempt {tx.attempt}")
            ws.commit(ctx)  # deferred to the transaction's commit
            seen.append(Path(root, "a.html").exists())
            if tx.attempt == 1:
                raise RuntimeError("abort the first attempt")

    book.run(publish, str(site), run_id="f1")
    assert seen == [False, False]
    assert (site / "a.html").read_text() == (site / "b.html").read_text() == "attempt 2"
    staging = site / ".daybook" / "staging"
    assert not staging.exists() or not any(p.is_file() for p in staging.rglob("*"))


def test_compensating_the_run_after_an_aborted_attempt_undoes_only_what_is_left(
    book: Daybook, tmp_path: Path
) -> None:
    @daybook.workflow(name="tx_then_compensate")
    def flow(ctx: daybook.Context, root: str) -> list[str]:
        with ctx.transaction(scopes=["api:hotel:holds:*"], retries=1) as tx:
            ctx.effect(hold_room, root=root, hotel="H1")
            if tx.attempt == 1:
                raise RuntimeError("abort the first attempt")
        ctx.effect(hold_room, root=root, hotel="H2")
        return ctx.compensate().compensated

    undone = book.run(flow, str(tmp_path), run_id="tc")
    assert len(undone) == 2 and _holds(tmp_path) == []  # the committed hold and H2; not twice
    assert book.replay("tc") == undone


def test_the_files_adapter_derives_its_scopes_and_a_write_outside_them_is_refused(
    book: Daybook, tmp_path: Path
) -> None:
    from daybook.adapters.files import Workspace

    @daybook.workflow(name="tx_files_scope")
    def publish(ctx: daybook.Context, root: str) -> None:
        ws = Workspace(root)
        with ctx.transaction(scopes=[f"fs:{root}/public/**"]):
            ws.write(ctx, "public/a.html", "ok")
            ws.write(ctx, "private/key.pem", "secret")

    with pytest.raises(daybook.RunFailed, match="ScopeViolation"):
        book.run(publish, str(tmp_path), run_id="fs1")
    assert not (tmp_path / "public").exists() and not (tmp_path / "private").exists()
    assert [r["status"] for r in listing(book.store, "fs1")] == ["aborted"]  # refused: no retry


def test_many_runs_in_threads_of_one_handle_open_and_end_transactions_safely(book: Daybook) -> None:
    """One store handle is shared by threads: each header change lands with its journal row."""

    @daybook.workflow(name="tx_threads")
    def agent(ctx: daybook.Context, me: int) -> int:
        for _ in range(5):
            with ctx.transaction(scopes=[f"bench:agent:{me}"]):
                ctx.decide("step", lambda: me)
        return me

    threads = [
        threading.Thread(target=book.run, args=(agent, me), kwargs={"run_id": f"th{me}"}) for me in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    rows = listing(book.store)
    assert len(rows) == 40 and {r["status"] for r in rows} == {"committed"}
    assert sorted(r["epoch"] for r in rows) == list(range(1, 41))


def test_a_transaction_that_waits_past_its_wait_gives_up_and_replays_the_same(db_url: str) -> None:
    a_open, release_a = threading.Event(), threading.Event()

    @daybook.workflow(name="tx_holder")
    def holder(ctx: daybook.Context) -> None:
        with ctx.transaction(scopes=["db:shop:counter"]):
            a_open.set()
            release_a.wait(10)

    @daybook.workflow(name="tx_impatient")
    def impatient(ctx: daybook.Context) -> str:
        try:
            with ctx.transaction(scopes=["db:shop:*"], wait=0.3):
                ctx.decide("x", lambda: 1)
            return "ran"
        except daybook.FrontierTimeout:
            return "gave up"

    with Daybook(db_url) as b1, Daybook(db_url) as b2:
        t = threading.Thread(target=b1.run, args=(holder,), kwargs={"run_id": "A"})
        t.start()
        assert a_open.wait(10)
        assert b2.run(impatient, run_id="B") == "gave up"
        release_a.set()
        t.join(10)
        assert [r["status"] for r in listing(b2.store, "B")] == ["aborted"]
        assert b2.replay("B") == "gave up"


def test_an_async_transaction_that_fails_retries_under_a_fresh_epoch(book: Daybook, tmp_path: Path) -> None:
    @daybook.tool(inverse=unhold, scopes=lambda root, hotel, **_: [f"api:hotel:holds:{hotel}"])
    async def ahold(root: str, hotel: str, idempotency_key: str) -> str:
        return str(hold_room.fn(root=root, hotel=hotel, idempotency_key=idempotency_key))

    @daybook.workflow(name="tx_async_retry")
    async def flow(ctx: daybook.Context, root: str) -> list[Any]:
        async with ctx.transaction(scopes=["api:hotel:holds:*", "email:outbox:*"]) as tx:
            hold = await ctx.effect(ahold, root=root, hotel="H1")
            ctx.effect(send_mail, root=root, to="ann@example.com", body=hold)
            if tx.attempt == 1:
                raise RuntimeError("abort the first attempt")
        return [tx.attempt, hold]

    attempt, hold = asyncio.run(book.run_async(flow, str(tmp_path), run_id="ar"))
    assert attempt == 2 and _holds(tmp_path) == [hold] and len(_mails(tmp_path)) == 1


@daybook.workflow(name="tx_gated")
def gated(ctx: daybook.Context, root: str) -> str:
    with ctx.transaction(scopes=["api:hotel:holds:*", "email:outbox:*"], gate=["oncall"]):
        hold = ctx.effect(hold_room, root=root, hotel="H1")
        ctx.effect(send_mail, root=root, to="ann@example.com", body=hold)
    return hold


@pytest.mark.parametrize("verdict", ["approve", "deny"])
def test_with_a_release_gate_the_held_email_waits_for_an_approver(
    db_url: str, tmp_path: Path, verdict: str
) -> None:
    with Daybook(db_url, inline_wait=0.1) as book:
        token = book.add_approver("oncall")
        with pytest.raises(daybook.Suspended, match="verdict"):
            book.run(gated, str(tmp_path), run_id="g1")
        assert len(_holds(tmp_path)) == 1 and _mails(tmp_path) == []  # held while the gate is open
        assert [t["status"] for t in book.transactions("g1")] == ["open"]
        gate = book.approvals()[0]["gate_id"]
        if verdict == "approve":
            book.approve("g1", str(gate), approver="oncall", token=token)
            hold = book.resume("g1", wait=10)
            assert _holds(tmp_path) == [hold] and len(_mails(tmp_path)) == 1
            assert [t["status"] for t in book.transactions("g1")] == ["committed"]
        else:
            book.approve("g1", str(gate), approver="oncall", token=token, approve=False)
            with pytest.raises(daybook.RunFailed, match="ReleaseDeclined"):
                book.resume("g1", wait=10)
            assert _holds(tmp_path) == [] and _mails(tmp_path) == []  # the hold undone, no email
            assert [t["status"] for t in book.transactions("g1")] == ["aborted"]  # no retry
