"""A fuzz test of the Python API: bad values in every argument slot of the public entry points
of `Daybook` (and the handles it gives out) and of `ctx` inside a workflow, on both stores.

Every call either works or raises a `DaybookError` that names the parameter; none hangs (a NaN
timeout once blocked its caller for good); a refused call creates no run; a bad step name or key
inside a workflow parks the run (`needs_attention`) instead of leaving it `running` for a
worker to retry for ever; and the store audits clean afterwards."""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import daybook
from daybook import Daybook, DaybookError, RunStatus
from daybook.worker import Worker

_loop: list[Any] = []
_loop.append(_loop)
_cycle: dict[str, Any] = {}
_cycle["self"] = _cycle
_deep: list[Any] = []
for _ in range(5000):
    _deep = [_deep]

BAD: dict[str, Any] = {
    "None": None,
    "empty": "",
    "blank": "   ",
    "1MB": "x" * 1_000_000,
    "surrogate": "a\ud800b",
    "NUL": "a\x00b",
    "nan": float("nan"),
    "inf": float("inf"),
    "-inf": float("-inf"),
    "1e30": 1e30,
    "neg": -1,
    "huge_int": 10**30,
    "recursive list": _loop,
    "recursive dict": _cycle,
    "5000 deep": _deep,
    "object": object(),
    "bytes": b"\xff",
    "int keys": {1: 2},
    "set": {1, 2},
    "secret": daybook.Secret("s3cr3t-value"),
    "codec mark": {"$codec": "fernet", "data": "zz"},
    "erased mark": {"$erased": "gc-x"},
    "datetime": datetime.datetime(2026, 11, 26),
    "control chars": "\x1b[2J\x07\u202e",
    "bool": True,
    "list": [1, 2],
    "dict": {"a": 1},
}


@daybook.workflow(name="apifuzz_simple")
def simple(ctx: daybook.Context, x: Any = None) -> dict[str, int]:
    return {"x": 1}


@daybook.workflow(name="apifuzz_waiting")
def waiting(ctx: daybook.Context) -> int:
    ctx.wait_for("go", timeout=3600)
    return 1


CALLED: list[str] = []


@daybook.tool(idempotent=True)
def echo(*, value: Any = None, idempotency_key: str) -> Any:
    CALLED.append(idempotency_key)
    return value


def _fresh() -> str:
    return f"f{time.monotonic_ns()}"


Call = Callable[[Daybook, Any], Any]

# book.*: one bad value in one slot; the store holds a completed run `ok1`, a waiting run `w1`,
# an approver `alice`.
BOOK: dict[str, Call] = {
    "run(arg)": lambda b, v: b.run(simple, v, run_id=_fresh()),
    "run(run_id)": lambda b, v: b.run(simple, run_id=v),
    "submit(run_id)": lambda b, v: b.submit(simple, run_id=v),
    "submit(queue)": lambda b, v: b.submit(simple, run_id=_fresh(), queue=v),
    "submit(priority)": lambda b, v: b.submit(simple, run_id=_fresh(), priority=v),
    "resume(run_id)": lambda b, v: b.resume(v),
    "resume(wait)": lambda b, v: b.resume("ok1", wait=v),
    "retry(run_id)": lambda b, v: b.retry(v),
    "get_run": lambda b, v: b.get_run(v),
    "journal": lambda b, v: b.journal(v),
    "export": lambda b, v: b.export(v),
    "checkpoint": lambda b, v: b.checkpoint(v),
    "signal(name)": lambda b, v: b.signal("w1", v, 1),
    "signal(payload)": lambda b, v: b.signal("w1", "go2", v),
    "signal(sender)": lambda b, v: b.signal("w1", "go3", 1, sender=v),
    "update(args)": lambda b, v: b.update("w1", "u", v, timeout=0.05),
    "update(timeout)": lambda b, v: b.update("w1", "u", 1, timeout=v),
    "steer(text)": lambda b, v: b.steer("w1", "add", v, wait=0),
    "steer(kind)": lambda b, v: b.steer("w1", v, "t", wait=0),
    "steer(author)": lambda b, v: b.steer("w1", "add", "t", author=v, wait=0),
    "steer(wait)": lambda b, v: b.steer("w1", "add", "t", wait=v),
    "pause(by)": lambda b, v: b.pause("ok1", by=v),
    "cancel(by)": lambda b, v: b.cancel(_fresh(), by=v),
    "fork(at)": lambda b, v: b.fork("ok1", v),
    "fork(args)": lambda b, v: b.fork("ok1", 1, args=v),
    "resolve(step)": lambda b, v: b.resolve("ok1", v, absent=True),
    "resolve(confirmed)": lambda b, v: b.resolve("ok1", 1, confirmed=v),
    "transaction(put)": lambda b, v: b.transaction("m", lambda tx: tx.put("c", "i", v)),
    "transaction(message)": lambda b, v: b.transaction(v, lambda tx: tx.put("c", "i2", {"a": 1})),
    "transaction(collection)": lambda b, v: b.transaction("m", lambda tx: tx.put(v, "i3", {"a": 1})),
    "record": lambda b, v: b.record(v, v),
    "orphans": lambda b, v: b.orphans(v),
    "sweep_orphans": lambda b, v: b.sweep_orphans(v),
    "add_approver": lambda b, v: b.add_approver(v),
    "approve(token)": lambda b, v: b.approve("w1", "w1/1", approver="alice", token=v),
    "approve(approver)": lambda b, v: b.approve("w1", "w1/1", approver=v, token="t"),
    "approve(reason)": lambda b, v: b.approve("w1", "w1/1", approver="alice", token="t", reason=v),
    "raise_budget": lambda b, v: b.raise_budget("w1", usd=v),
    "entity.claim(ttl)": lambda b, v: b.entity("e1").claim("a", ttl=v),
    "entity.claim(agent)": lambda b, v: b.entity("e2").claim(v, ttl=5),
    "entity(name)": lambda b, v: b.entity(v).claim("a", ttl=5),
    "budget_pool.set_cap": lambda b, v: b.budget_pool("p").set_cap(usd=v),
    "runs(limit)": lambda b, v: b.runs(None, v),
    "runs(status)": lambda b, v: b.runs(v),
    "runs(since)": lambda b, v: b.runs(since=v),
    "runs(attributes)": lambda b, v: b.runs(attributes={"k": v}),
    "runs(cursor)": lambda b, v: b.runs(cursor=v),
    "effects(status)": lambda b, v: b.effects(status=v),
    "why": lambda b, v: b.why(v),
    "reconcile(day)": lambda b, v: b.reconcile(day=v),
    "gc(older_than)": lambda b, v: b.gc(v, dry_run=True),
    "queue(concurrency)": lambda b, v: b.queue("qq", concurrency=v),
    "schedule(cron)": lambda b, v: b.schedule("sch", simple, cron=v),
    "Daybook(lease_ttl)": lambda b, v: Daybook(b.url, lease_ttl=v).close(),
    "Daybook(url)": lambda b, v: Daybook(v).close(),
    "Daybook(secret_key)": lambda b, v: Daybook(b.url, secret_key=v).close(),
}

# ctx.*: each in a fresh run of its own.
CTX: dict[str, Callable[[daybook.Context, Any], Any]] = {
    "decide(name)": lambda c, v: c.decide(v, lambda: CALLED.append("decided")).value,
    "decide(value)": lambda c, v: c.decide("d", lambda: v).value,
    "effect(key)": lambda c, v: c.effect(echo, key=v, value=1),
    "effect(arg)": lambda c, v: c.effect(echo, value=v),
    "return": lambda c, v: v,
    "sleep": lambda c, v: c.sleep(v),
    "wait_for(name)": lambda c, v: c.wait_for(v, timeout=0.01),
    "wait_for(timeout)": lambda c, v: c.wait_for("x", timeout=v),
    "gate(action)": lambda c, v: c.gate(v, timeout=0.01),
    "obligation(due_in)": lambda c, v: c.obligation("k", owner="o", due_in=v),
    "set_attributes": lambda c, v: c.set_attributes(a=v),
    "budget.cap": lambda c, v: c.budget.cap(usd=v),
    "llm(prompt)": lambda c, v: c.llm(daybook.ScriptedLLM(["ok"]), v).value,
    "patched": lambda c, v: c.patched(v),
    "entity": lambda c, v: c.entity(v),
    "child(run_id)": lambda c, v: c.child(simple, run_id=v),
}


# Where a big value is data (a payload, a result): the rest refuse it by its type or length.
BIG_OK = ("run(arg)", "signal(payload)", "steer(text)", "decide(value)", "return", "run(run_id)")


# The entry points that create runs (a refused call must create none).
CREATES = ("run(", "submit(", "fork(", "schedule(")


class Hung(AssertionError):
    pass


def within(seconds: float, fn: Callable[[], Any]) -> BaseException | None:
    """Run `fn` on a thread; the exception it raised (None if it returned). A call still
    running after `seconds` is a hang."""
    box: list[BaseException | None] = []

    def go() -> None:
        try:
            fn()
            box.append(None)
        except BaseException as exc:  # reported to the caller, judged there
            box.append(exc)

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise Hung(f"the call still runs after {seconds}s")
    return box[0]


class Fixture:
    def __init__(self, url: str) -> None:
        self.url = url
        self.book = Daybook(url, inline_wait=0.05)
        self.book.run(simple, run_id="ok1")
        with pytest.raises(daybook.Suspended):
            self.book.run(waiting, run_id="w1")
        self.book.add_approver("alice")

    def run_ids(self) -> set[str]:
        return {r.run_id for r in self.book.runs(None, 100_000)}


@pytest.fixture
def api(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Fixture]:
    monkeypatch.chdir(tmp_path)  # Daybook(None) in the fuzz opens ./daybook.db here, not in the repo
    fixture = Fixture(db_url)
    yield fixture
    fixture.book.close()


def _judge(label: str, value_name: str, raised: BaseException | None) -> None:
    if raised is not None and not isinstance(raised, DaybookError):
        raise AssertionError(f"{label}({value_name}) raised {type(raised).__name__}: {raised}") from raised


def _in_workflow(
    fx: Fixture, body: Callable[[daybook.Context, Any], Any], value: Any
) -> BaseException | None:
    run_id = _fresh()

    @daybook.workflow(name=f"apifuzz_{run_id}")
    def wf(ctx: daybook.Context) -> Any:
        return body(ctx, value)

    raised = within(20, lambda: fx.book.run(wf, run_id=run_id))
    left = [r.run_id for r in fx.book.runs("running", 10)]
    assert run_id not in left, f"run {run_id} left running after {raised!r}"
    return raised


VALUES = st.one_of(
    st.sampled_from(sorted(BAD)).map(lambda k: (k, BAD[k])),
    st.floats().map(lambda f: (repr(f), f)),
    st.integers().map(lambda i: (str(i), i)),
    st.text(max_size=8).map(lambda t: (repr(t), t)),
)


@settings(
    max_examples=250,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(where=st.sampled_from(sorted(BOOK) + [f"ctx.{k}" for k in sorted(CTX)]), value=VALUES)
def test_bad_arguments_raise_a_daybook_error_never_hang_and_leave_no_run_running(
    api: Fixture, where: str, value: tuple[str, Any]
) -> None:
    name, bad = value
    if where.startswith("ctx."):
        raised = _in_workflow(api, CTX[where[4:]], bad)
    else:
        before = api.run_ids() if where.startswith(CREATES) else set()
        raised = within(20, lambda: BOOK[where](api.book, bad))
        if raised is not None and where.startswith(CREATES):  # a refused call leaves no run behind
            assert api.run_ids() == before, f"{where}({name}) refused but created a run"
    _judge(where, name, raised)
    assert not api.book.runs("running", 10), f"{where}({name}) left a run running"


def test_every_entry_point_with_every_bad_value_then_the_store_audits_clean(api: Fixture) -> None:
    """The whole grid once (each entry point with each listed bad value), then `check()`."""
    for where, call in BOOK.items():
        for name, bad in BAD.items():
            if name == "1MB" and where not in BIG_OK:
                continue  # a big value costs seconds per slot; tried where it is data
            before = api.run_ids() if where.startswith(CREATES) else set()
            raised = within(20, lambda: call(api.book, bad))  # noqa: B023 - called at once
            _judge(where, name, raised)
            if raised is not None and where.startswith(CREATES):
                assert api.run_ids() == before, f"{where}({name}) refused but created a run"
    for where, body in CTX.items():
        for name, bad in BAD.items():
            if name == "1MB" and where not in BIG_OK:
                continue
            _judge(f"ctx.{where}", name, _in_workflow(api, body, bad))
    assert not api.book.runs("running", 10)
    assert api.book.check() == []


def test_a_timeout_that_never_ends_is_refused_at_once(book: Daybook) -> None:
    for bad in (float("nan"), float("inf"), 1e30, -1):
        raised = within(5, lambda: book.update("none", "u", 1, timeout=bad))  # noqa: B023
        assert isinstance(raised, daybook.ConfigError) and "timeout" in str(raised)


def test_wrong_typed_ids_and_names_are_config_errors_before_the_store(book: Daybook) -> None:
    with pytest.raises(daybook.ConfigError, match=r"approve\(\): approver name must be a string"):
        book.approve("r", "g", approver=None, token="t")  # type: ignore[arg-type]
    with pytest.raises(daybook.ConfigError, match=r"transaction\(\): message must be a string"):
        book.transaction(float("nan"), lambda tx: None)  # type: ignore[arg-type]
    with pytest.raises(daybook.ConfigError, match=r"get_run\(\): run id must be a string"):
        book.get_run(float("nan"))  # type: ignore[arg-type]
    with pytest.raises(daybook.ConfigError, match=r"run\(\): run id must be a string"):
        book.run(simple, run_id=5)  # type: ignore[arg-type]
    assert book.runs() == []


@daybook.workflow(name="apifuzz_bad_name")
def bad_name(ctx: daybook.Context) -> Any:
    return ctx.decide(None, lambda: CALLED.append("decided")).value  # type: ignore[arg-type]


@daybook.workflow(name="apifuzz_bad_key")
def bad_key(ctx: daybook.Context) -> Any:
    return ctx.effect(echo, key=float("nan"), value=1)  # type: ignore[arg-type]


def test_a_bad_step_name_or_key_parks_the_run_and_a_worker_does_not_retry_it(db_url: str) -> None:
    CALLED.clear()
    with Daybook(db_url) as book:
        for wf, run_id in ((bad_name, "bad-name"), (bad_key, "bad-key")):
            with pytest.raises(daybook.RunParked, match="must be a string"):
                book.run(wf, run_id=run_id)
            assert book.get_run(run_id).status == RunStatus.NEEDS_ATTENTION
    assert CALLED == []  # neither the decision's function nor the tool ran
    stats = Worker(db_url, poll=0.01, echo=lambda _: None).run(until_idle=True)
    assert (stats.completed, stats.failed, stats.errors) == (0, 0, 0)
    assert CALLED == []
    with Daybook(db_url) as book:
        assert {r.status for r in book.runs()} == {RunStatus.NEEDS_ATTENTION}
