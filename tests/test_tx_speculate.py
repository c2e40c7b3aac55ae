"""Speculation (Best-of-K): branches run concurrently, each in its own transaction; only the
winner's staged file, hold and email persist; losers' holds are cancelled, their files and
emails never appear; a failed branch is a loser; replay reproduces the choice."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import wait_until

import daybook
from daybook import Daybook
from daybook.tx.frontier import frontiers, listing

PRICES = {"a": 310, "b": 270, "c": 295}


@daybook.tool(bufferable=True, idempotent=True, irreversible=False)
def spec_page(root: str, name: str, idempotency_key: str) -> str:
    Path(root, name).write_text(name)
    return name


@daybook.tool(idempotent=True, irreversible=False)
def spec_cancel(original: dict[str, Any], result: str, idempotency_key: str) -> None:
    Path(original["root"], "holds", result).unlink()


@daybook.tool(inverse=spec_cancel)
def spec_hold(root: str, plan: str, idempotency_key: str) -> str:
    Path(root, "holds").mkdir(exist_ok=True)
    Path(root, "holds", plan).write_text(idempotency_key)
    return plan


@daybook.tool(irreversible=True)
def spec_mail(root: str, plan: str, idempotency_key: str) -> None:
    with Path(root, "mail.txt").open("a") as f:
        f.write(plan + "\n")


INSIDE: list[str] = []
LOCK = threading.Lock()


def _plan(name: str, root: str, fail: bool = False, together: str = "abc") -> Any:
    def branch(ctx: daybook.Context) -> dict[str, Any]:
        with LOCK:
            INSIDE.append(f"{name}:in")
        ctx.effect(spec_page, root=root, name=f"{name}.html")
        with ctx.transaction(scopes=[f"fs:{root}/**"]):  # joins the branch's own transaction
            ctx.effect(spec_hold, root=root, plan=name)
        ctx.effect(spec_mail, root=root, plan=name)
        # The branches overlap in time: each stays inside until all of `together` are (a fixed
        # sleep here let a branch delayed on a loaded machine enter after another left).
        wait_until(lambda: all(f"{n}:in" in INSIDE for n in together))
        with LOCK:
            INSIDE.append(f"{name}:out")
        if fail:
            raise RuntimeError(f"plan {name} broke")
        return {"price": PRICES[name]}

    return branch


@daybook.workflow(name="tx_speculate")
def trip(ctx: daybook.Context, root: str, fail_b: bool) -> Any:
    return ctx.speculate(
        {"a": _plan("a", root), "b": _plan("b", root, fail_b), "c": _plan("c", root)},
        choose=lambda results: min(results, key=lambda k: results[k]["price"]),
        scopes=[f"fs:{root}/**"],
    )


def _world(root: Path) -> tuple[list[str], list[str], list[str]]:
    pages = sorted(p.name for p in root.glob("*.html"))
    holds = sorted(p.name for p in (root / "holds").iterdir()) if (root / "holds").exists() else []
    mail = (root / "mail.txt").read_text().split() if (root / "mail.txt").exists() else []
    return pages, holds, mail


@pytest.mark.parametrize("fail_b", [False, True])
def test_only_the_winners_file_hold_and_email_persist(book: Daybook, tmp_path: Path, fail_b: bool) -> None:
    INSIDE.clear()
    best = book.run(trip, str(tmp_path), fail_b, run_id="s1")
    winner = "c" if fail_b else "b"  # b is cheapest unless it broke
    assert best == {"price": PRICES[winner]}
    assert _world(tmp_path) == ([f"{winner}.html"], [winner], [winner])
    # concurrently: every branch was inside before any left
    assert max(INSIDE.index(f"{n}:in") for n in "abc") < min(INSIDE.index(f"{n}:out") for n in "abc")
    statuses = sorted(r["status"] for r in listing(book.store, "s1"))
    assert statuses == ["aborted", "aborted", "committed"]
    assert frontiers(book.store) == []
    assert book.replay("s1") == best
    assert _world(tmp_path) == ([f"{winner}.html"], [winner], [winner])


RELEASE = threading.Event()  # lets the hung branch go on
WOKE = threading.Event()  # the hung branch went on and tried to write


def _hung(root: str, hang: float) -> Any:
    def branch(ctx: daybook.Context) -> dict[str, Any]:
        ctx.effect(spec_hold, root=root, plan="hung")  # runs now: undone when the branch is cut
        RELEASE.wait(hang)  # a branch that hangs past the speculation's deadline, until released
        try:
            ctx.effect(spec_mail, root=root, plan="hung")  # never happens
        finally:
            WOKE.set()
        return {"price": 1}

    return branch


@daybook.workflow(name="tx_speculate_deadline")
def racing(ctx: daybook.Context, root: str, hang: float) -> Any:
    plans = {"quick": _plan("a", root, together="a"), "hung": _hung(root, hang)}
    return ctx.speculate(plans, choose=lambda r: min(r, key=lambda k: r[k]["price"]), deadline=1.0)


def test_a_branch_that_hangs_past_the_deadline_is_cut_and_undone_and_replay_cuts_it_again(
    book: Daybook, tmp_path: Path
) -> None:
    INSIDE.clear()
    RELEASE.clear()
    WOKE.clear()
    done = book.run(racing, str(tmp_path), 600.0, run_id="cut")
    assert not WOKE.is_set()  # the run ended while the hung branch still hung: it did not wait
    assert done["price"] == PRICES["a"]  # the only branch that finished won
    assert not (tmp_path / "holds" / "hung").exists()  # its hold was undone
    cuts = [ev for ev in book.journal("cut") if ev.name == "tx:cut"]
    assert [ev.data["value"] for ev in cuts] == [["hung"]]
    RELEASE.set()  # the hung thread wakes and tries to write: nothing lands
    wait_until(WOKE.is_set)
    assert (tmp_path / "mail.txt").read_text() == "a\n"
    assert [ev.name for ev in book.journal("cut")].count("tx:cut") == 1
    assert book.replay("cut") == done  # the journal's cut holds: the branch writes nothing
