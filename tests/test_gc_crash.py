"""A `daybook gc` killed mid-pass beside unfinished runs (issue 25's crash matrix: gc).

A gc pass is one store transaction. A SIGKILL at any point of it (at its first erasure, in the
middle, or after its last statement but before the commit) leaves nothing half-erased: the
unfinished runs that read finished ones (a suspended parent, a pending fork, a live
continue-as-new chain) still end as they would have without gc, and the next pass completes.

The gc process is the real CLI (`python -m daybook gc`) in its own process; the only thing the
test adds is a pause at the chosen point, announced on stdout, so the SIGKILL lands exactly there.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest
from conftest import cli, killed
from test_gc_unfinished import DAY, _backdate

import daybook
from daybook import Daybook, Suspended

PAID: list[int] = []  # the counterparty's own record: every amount it was asked to pay
OLD_RUNS = 12

# Pauses the real `daybook gc` at a point inside its pass (argv: DB POINT), then waits to be killed.
GC_CHILD = textwrap.dedent(
    """
    import sys, time
    import daybook.store.retention as retention
    from daybook.cli import main

    db, point = sys.argv[1], sys.argv[2]
    real = retention.collect

    def stop():
        print("stopped", flush=True)
        time.sleep(600)

    def collect(execute, **kw):
        erased = [0]

        def counted(sql, args):
            if sql.startswith("UPDATE daybook_events"):
                erased[0] += 1
                if (point == "first" and erased[0] == 1) or (point == "middle" and erased[0] == 20):
                    stop()
            return execute(sql, args)

        done = real(counted, **kw)
        if point == "before-commit":
            stop()
        return done

    retention.collect = collect
    sys.argv = ["daybook", "gc", "--older-than", "1d", "--by", "crashing", "--db", db]
    main()
    """
)


@daybook.tool(idempotent=True)
def gck_pay(amount: int, idempotency_key: str) -> dict[str, int]:
    PAID.append(amount)
    return {"paid": amount}


@daybook.workflow(name="gck_forked")
def forked(ctx: daybook.Context, amount: int) -> dict[str, object]:
    return {"a": ctx.effect(gck_pay, amount=amount), "b": ctx.decide("double", lambda: amount * 2).value}


@daybook.workflow(name="gck_kid")
def kid(ctx: daybook.Context, n: int) -> dict[str, int]:
    got = ctx.wait_for("go", timeout=3600)
    return {"kid": n, "got": got.payload["x"] if got else -1}


@daybook.workflow(name="gck_parent")
def parent(ctx: daybook.Context) -> dict[str, object]:
    return {"from_child": ctx.child(kid, 1, run_id="kid")}


@daybook.workflow(name="gck_chain")
def chain(ctx: daybook.Context, n: int) -> dict[str, object]:
    if n < 2:
        ctx.continue_as_new(n + 1)
    got = ctx.wait_for("go", timeout=3600)
    return {"n": n, "got": got.payload if got else None}


@daybook.workflow(name="gck_plain")
def plain(ctx: daybook.Context, n: int) -> dict[str, int]:
    return {"n": ctx.decide("n", lambda: n).value}


def _unfinished_runs_beside_old_ones(book: Daybook) -> str:
    """A suspended parent whose child is done, a pending fork, a live chain, and old finished
    runs for gc to erase; everything backdated past the retention window. Returns the fork id."""
    with pytest.raises(Suspended):
        book.run(parent, run_id="par")
    book.signal("kid", "go", {"x": 7})
    assert book.resume("kid") == {"kid": 1, "got": 7}
    book.run(forked, 5, run_id="src")
    fork_id, _ = book.fork("src", 1, new_run_id="fork", confirm=True)
    with pytest.raises(Suspended):
        book.run(chain, 0, run_id="ch")
    for i in range(OLD_RUNS):
        book.run(plain, i, run_id=f"old{i}")
    return fork_id


def _kill_gc_at(db_url: str, point: str) -> None:
    command = [sys.executable, "-c", GC_CHILD, db_url, point]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "stopped", (line, proc.stderr.read() if proc.poll() is not None else "")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    assert killed(proc)


@pytest.mark.parametrize("point", ["first", "middle", "before-commit"])
def test_a_gc_killed_mid_pass_leaves_unfinished_runs_whole_and_the_next_pass_completes(
    db_url: str, point: str
) -> None:
    PAID.clear()
    with Daybook(db_url, inline_wait=0) as book:
        fork_id = _unfinished_runs_beside_old_ones(book)
        _backdate(db_url, "", 2 * DAY)
    paid_before = list(PAID)

    _kill_gc_at(db_url, point)

    with Daybook(db_url, inline_wait=0) as book:
        # Nothing of the killed pass stands: no log row, no old run half-erased.
        assert book.gc_log() == []
        results = [book.get_run(f"old{i}").result for i in range(OLD_RUNS)]
        assert results == [{"n": i} for i in range(OLD_RUNS)]
    # The next pass (the real CLI, no pause) completes and keeps what the unfinished runs read.
    again = cli("gc", "--older-than", "1d", "--by", "ops", db=db_url)
    assert again.returncode == 0, again.stderr
    assert f"erased the payloads of {OLD_RUNS} finished run(s)" in again.stdout
    assert "still reads: ch, ch~2, kid, src" in again.stdout
    with Daybook(db_url, inline_wait=0) as book:
        assert [entry["who"] for entry in book.gc_log()] == ["ops"]
        assert book.resume("par") == {"from_child": {"kid": 1, "got": 7}}
        assert book.resume(fork_id) == {"a": {"paid": 5}, "b": 10}
        book.signal("ch", "go", {"x": 1})  # sent to the first id: the live segment gets it
        assert book.resume("ch") == {"n": 2, "got": {"x": 1}}
    # The fork replayed its source's payment: the counterparty was paid once, before gc.
    assert PAID == paid_before == [5]
