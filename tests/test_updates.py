"""Updates are a request with an answer, applied once; queries read without writing."""

from __future__ import annotations

import threading

import pytest

import daybook
from daybook import Daybook


def test_an_update_is_answered_by_the_running_run_and_applied_once(db_url: str) -> None:
    @daybook.workflow
    def counter(ctx: daybook.Context) -> int:
        total = 0
        for _ in range(2):
            served = ctx.handle_update("add", lambda n, t=total: t + int(n), timeout=20)
            assert served is not None
            total = served[1]
        return total

    with Daybook(db_url, inline_wait=20) as runner, Daybook(db_url) as client:
        worker = threading.Thread(target=runner.run, args=(counter,), kwargs={"run_id": "ctr"})
        worker.start()
        while client.store.get_run("ctr") is None:
            pass
        assert client.update("ctr", "add", 5) == 5
        assert client.update("ctr", "add", 3) == 8
        worker.join(timeout=30)
        assert client.get_run("ctr").result == 8
        answers = [e for e in client.journal("ctr") if e.name.startswith("answer:")]
        assert [e.data["value"] for e in answers] == [5, 8]
        assert client.replay("ctr") == 8  # replay re-applies nothing


def test_an_unanswered_update_times_out_and_stays_queued(book: Daybook) -> None:
    @daybook.workflow
    def later(ctx: daybook.Context) -> object:
        served = ctx.handle_update("ping", lambda x: f"pong {x}", timeout=0)
        return None if served is None else served[1]

    book.submit(later, run_id="later")
    with pytest.raises(daybook.UpdateTimeout, match="stays queued"):
        book.update("later", "ping", 1, timeout=0.2)
    assert book.resume("later") == "pong 1"  # served when the run next ran


def test_an_update_answered_by_a_later_segment_reaches_the_caller(db_url: str) -> None:
    @daybook.workflow
    def hands_off(ctx: daybook.Context, n: int) -> object:
        if n == 1:
            ctx.wait_for("go", timeout=20)
            ctx.continue_as_new(2)
        served = ctx.handle_update("ping", lambda x: {"pong": x}, timeout=20)
        return None if served is None else served[1]

    with Daybook(db_url, inline_wait=20) as runner, Daybook(db_url) as client:
        worker = threading.Thread(target=runner.run, args=(hands_off, 1), kwargs={"run_id": "hop-u"})
        worker.start()
        while client.store.get_run("hop-u") is None:
            pass
        answers: list[object] = []
        asker = threading.Thread(target=lambda: answers.append(client.update("hop-u", "ping", 7)))
        asker.start()
        client.signal("hop-u", "go")
        asker.join(timeout=30)
        worker.join(timeout=30)
        assert answers == [{"pong": 7}]
        assert client.resume("hop-u") == {"pong": 7}
