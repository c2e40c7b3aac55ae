"""Effect classes (journal/effect_class.py): one table says what daybook does with an act of each
class, and what `Tool.profile()` reports is what transactions, recovery, forks and the gates do.
Declarations that cannot be honoured are refused when the tool is declared; a reversible-with-cost
act records its fee; an act inside a transaction names its attempt and epoch in every row and
never holds a secret in clear (both stores); the key grammar keeps its stored formats."""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_bytes import store_text

import daybook
from daybook import ConfigError, Daybook, RunParked, RunStuck
from daybook.journal import keys
from daybook.journal.effect_class import EFFECT_CLASSES, TABLE
from daybook.recovery.trace import _class_of
from daybook.runtime.fork import _effect_class

calls: list[tuple[str, int]] = []
UNDONE: list[str] = []


@daybook.tool(name="ec.undo", idempotent=True, irreversible=False)
def undo_it(original: dict[str, Any], result: Any, idempotency_key: str) -> str:
    UNDONE.append(idempotency_key)
    return "undone"


def _fn(name: str) -> Any:
    def fn(x: int, idempotency_key: str = "") -> int:
        calls.append((name, x))
        return x

    fn.__name__ = name
    return fn


CURRENT: dict[str, Any] = {}
SERIAL = itertools.count()


class Abort(Exception):
    pass


@daybook.workflow(name="ec.plain")
def plain(ctx: daybook.Context) -> int:
    return int(ctx.effect(CURRENT["tool"], x=1))


@daybook.workflow(name="ec.aborted")
def aborted(ctx: daybook.Context) -> list[tuple[str, int]]:
    seen: list[tuple[str, int]] = []
    with ctx.transaction(scopes=["**"], retries=0):
        ctx.effect(CURRENT["tool"], x=2)
        seen.extend(calls)
        CURRENT["seen"] = seen
        raise Abort("abort")


@daybook.workflow(name="ec.committed")
def committed(ctx: daybook.Context) -> str:
    with ctx.transaction(scopes=["**"]):
        ctx.effect(CURRENT["tool"], x=3)
    return "ok"


@pytest.fixture(scope="module")
def shared_book() -> Iterator[Daybook]:
    with Daybook(f"sqlite:///{tempfile.mkdtemp()}/ec.db") as book:
        yield book


KEYWORDS = st.fixed_dictionaries(
    {
        "effect_class": st.sampled_from([None, *EFFECT_CLASSES]),
        "irreversible": st.sampled_from([None, True, False]),
        "idempotent": st.booleans(),
        "bufferable": st.booleans(),
        "inverse": st.booleans(),
        "cost": st.booleans(),
        "status": st.booleans(),
    }
)


def _refused(kw: dict[str, Any]) -> bool:
    """What the table promises and a declaration cannot keep."""
    cls = kw["effect_class"]
    if cls is None:
        return False
    row = TABLE[cls]
    contradicts = kw["irreversible"] is not None and kw["irreversible"] == row.undone
    return (row.inverse and not kw["inverse"]) or contradicts or (row.cost and not kw["cost"])


def _declare(kw: dict[str, Any], name: str) -> daybook.Tool[Any]:
    return daybook.tool(
        name=name,
        effect_class=kw["effect_class"],
        irreversible=kw["irreversible"],
        idempotent=kw["idempotent"],
        bufferable=kw["bufferable"],
        inverse=undo_it if kw["inverse"] else None,
        cost=(lambda args, result: {"fee": 1}) if kw["cost"] else None,
        status=(lambda key, args: daybook.Absent()) if kw["status"] else None,
    )(_fn(name))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kw=KEYWORDS)
def test_the_class_the_profile_reports_is_what_transactions_recovery_forks_and_gates_do(
    shared_book: Daybook, kw: dict[str, Any]
) -> None:
    name = f"ec.t{next(SERIAL)}"  # each example its own tool and runs
    if _refused(kw):
        with pytest.raises(ConfigError, match=name):
            _declare(kw, name)
        return
    tool = _declare(kw, name)
    p = tool.profile()
    CURRENT["tool"] = tool
    book = shared_book
    assert p["effect_class"] in TABLE and p["irreversible"] == (not TABLE[p["effect_class"]].undone)
    # Outside a transaction: runs at once, gated by nothing by default (D-3, D-6).
    assert p["outside_transaction"] == "now" and p["gated_by_default"] is False
    calls.clear()
    assert book.run(plain, run_id=f"{name}/plain") == 1
    assert calls == [(name, 1)]
    # Inside, aborted: buffered and held calls never ran; a call that ran now is undone by its
    # inverse, or the run is stuck.
    calls.clear()
    UNDONE.clear()
    with pytest.raises((Abort, RunParked, RunStuck)) as raised:
        book.run(aborted, run_id=f"{name}/abort")
    ran_inside = CURRENT["seen"] == [(name, 2)]
    assert ran_inside == (p["in_transaction"] == "now")
    outcome = {"drop": not ran_inside and calls == [], "undo": ran_inside and len(UNDONE) == 1}
    outcome["stuck"] = ran_inside and raised.type is RunStuck and UNDONE == []
    assert outcome[str(p["on_rollback"])], (p, calls, UNDONE, raised.type)
    # Committed: it runs once, at the commit or at once.
    calls.clear()
    assert book.run(committed, run_id=f"{name}/commit") == "ok"
    assert calls == [(name, 3)]
    # Recovery and forks read the same class; the agent loop gates what the row says.
    assert _class_of(tool) == p["on_recovery"]
    assert (_effect_class(tool) != "compensable") == p["fork_needs_confirm"]
    assert p["gated_by_agent_loop"] == (p["effect_class"] == "irreversible")
    assert p["resend_safe"] == tool.idempotent
    outcome_row = [e for e in book.journal(f"{name}/plain") if e.kind == "outcome"][-1]
    assert ("cost" in outcome_row.data) == p["cost"]


# -- refused at declaration -----------------------------------------------------------------------


def _k(*, idempotency_key: str) -> None: ...


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        ({"effect_class": "reversible"}, "promises an undo but gives no inverse"),
        ({"effect_class": "compensable"}, "promises an undo but gives no inverse"),
        ({"effect_class": "reversible-with-cost", "inverse": undo_it}, "give cost="),
        ({"effect_class": "idempotent", "irreversible": True}, "contradict each other"),
        ({"effect_class": "irreversible", "irreversible": False}, "contradict each other"),
        ({"irreversible": False, "in_transaction": "held"}, "only an irreversible one"),
        ({"irreversible": True, "in_transaction": "now"}, "only an irreversible one"),
        ({"in_transaction": "later"}, "use one of buffered, held, now"),
        ({"effect_class": "undoable"}, "use one of idempotent, manual"),
    ],
)
def test_a_declaration_that_cannot_be_honoured_is_refused_when_the_tool_is_declared(
    kw: dict[str, Any], says: str
) -> None:
    with pytest.raises(ConfigError, match=says):
        daybook.tool(**kw)(_k)


# -- the defects ----------------------------------------------------------------------------------


@daybook.tool(name="ec.pay", irreversible=True)  # named apart: tools register by name
def pay(to: str, idempotency_key: str) -> str:
    calls.append(("pay", 0))
    return "ok"


@daybook.workflow(name="ec.d3")
def d3(ctx: daybook.Context) -> str:
    return str(ctx.effect(pay, to="bob"))


def test_d3_profile_says_what_a_plain_call_does(book: Daybook) -> None:
    profile = pay.profile()
    assert profile["gated_by_default"] is False and profile["gated_by_agent_loop"] is True
    calls.clear()
    assert book.run(d3, run_id="d3") == "ok" and calls == [("pay", 0)]  # it fires, as reported


REFUNDS: list[str] = []


@daybook.tool(name="ec.refund", idempotent=True, irreversible=False, cost=lambda a, r: {"fee_usd": 0.3})
def refund(original: dict[str, Any], result: Any, idempotency_key: str) -> str:
    REFUNDS.append(idempotency_key)
    return "refunded"


@daybook.tool(name="ec.scratch", effect_class="reversible", inverse=refund)
def scratch(x: int, idempotency_key: str) -> int:
    return x


@daybook.workflow(name="ec.d5")
def d5(ctx: daybook.Context) -> None:
    with ctx.transaction(scopes=["**"], retries=0):
        ctx.effect(scratch, x=1)
        raise Abort("abort")


def test_d5_a_reversible_tool_is_undone_by_its_inverse_on_abort(book: Daybook) -> None:
    REFUNDS.clear()
    with pytest.raises((Abort, RunParked)):
        book.run(d5, run_id="REV")
    assert book.get_run("REV").status != "stuck" and REFUNDS == ["comp/REV/2"]


@daybook.tool(name="ec.stage", bufferable=True, idempotent=True)
def stage(x: int, idempotency_key: str) -> int:
    calls.append(("stage", x))
    return x


@daybook.workflow(name="ec.d6")
def d6(ctx: daybook.Context) -> dict[str, Any]:
    calls.clear()
    ctx.effect(stage, x=1)
    outside = list(calls)
    with ctx.transaction(scopes=["**"]) as tx:
        ctx.effect(stage, x=2)
        inside = list(calls)
    seen = {"outside": outside, "inside": inside, "after": list(calls)}
    return {**{k: [list(c) for c in v] for k, v in seen.items()}, "results": tx.results}


def test_d6_bufferable_is_held_by_a_transaction_and_runs_at_once_outside_one(book: Daybook) -> None:
    profile = stage.profile()
    assert profile["outside_transaction"] == "now" and profile["in_transaction"] == "buffered"
    out = book.run(d6, run_id="B")
    assert out["outside"] == [["stage", 1]]  # no commit step outside a transaction: at once
    assert out["inside"] == [["stage", 1]]  # staged: invisible until the commit
    assert out["after"] == [["stage", 1], ["stage", 2]] and list(out["results"].values()) == [2]


# -- reversible-with-cost ---------------------------------------------------------------------------


@daybook.tool(
    name="ec.book_room",
    effect_class="reversible-with-cost",
    inverse=refund,
    cost=lambda args, result: {"fee_usd": 2.5, "quota": 1},
)
def book_room(night: str, idempotency_key: str) -> dict[str, Any]:
    return {"room": 7, "night": night}


@daybook.workflow(name="ec.costly")
def costly(ctx: daybook.Context) -> None:
    with ctx.transaction(scopes=["**"], retries=0):
        ctx.effect(book_room, night="fri")
        raise Abort("plans changed")


def test_a_reversible_with_cost_act_and_its_undo_record_what_they_spent(book: Daybook) -> None:
    assert book_room.profile()["records_cost"] is True and book_room.effect_class == "reversible-with-cost"
    with pytest.raises((Abort, RunParked)):
        book.run(costly, run_id="cost")
    outcomes = {e.key: e.data for e in book.journal("cost") if e.kind == "outcome"}
    assert outcomes["cost/2"]["cost"] == {"fee_usd": 2.5, "quota": 1}  # the act's fee stays spent
    assert outcomes["comp/cost/2"]["cost"] == {"fee_usd": 0.3}  # and so does its undo's


# -- acts inside a transaction: attempt and epoch, secrets ------------------------------------------

SECRET = "4111-HELD-CARD-ec"


@daybook.tool(name="ec.charge", irreversible=True, secrets=("card",))
def charge(card: str, amount: int, idempotency_key: str) -> str:
    return "charged"


@daybook.tool(name="ec.hold", idempotent=True, irreversible=False, bufferable=True, secrets=("card",))
def hold(card: str, idempotency_key: str) -> str:
    return "held"


@daybook.tool(name="ec.reserve", idempotent=True, inverse=undo_it, secrets=("card",))
def reserve(card: str, idempotency_key: str) -> str:
    return "reserved"


FAIL_ONCE: list[bool] = []


@daybook.workflow(name="ec.secret_tx")
def secret_tx(ctx: daybook.Context) -> str:
    with ctx.transaction(scopes=["**"], retries=1):
        ctx.effect(reserve, card=SECRET)
        ctx.effect(hold, card=SECRET, key="hold-1")
        ctx.effect(charge, card=SECRET, amount=5)
        if not FAIL_ONCE:
            FAIL_ONCE.append(True)
            raise Abort("first attempt fails")
    return "done"


def test_an_act_inside_a_transaction_names_its_attempt_and_never_holds_a_secret(
    db_url: str,
) -> None:
    FAIL_ONCE.clear()
    with Daybook(db_url) as book:
        assert book.run(secret_tx, run_id="sx") == "done"
        rows = book.journal("sx")
    assert SECRET not in store_text(db_url)  # not a staged row, an intent, an undo's arguments
    effect_rows = [e for e in rows if e.kind in ("intent", "attempt", "outcome")]
    assert effect_rows and all("tx" in e.data for e in effect_rows)
    attempts = {(e.data["tx"]["attempt"], e.data["tx"]["epoch"]) for e in effect_rows}
    assert len(attempts) == 2 and {a for a, _ in attempts} == {1, 2}
    stages = [e.data["value"] for e in rows if e.name == "tx:stage"]
    assert {(s["treatment"], s["attempt"]) for s in stages} == {
        ("buffered", 1),
        ("held", 1),
        ("buffered", 2),
        ("held", 2),
    }
    assert "hold-1#attempt2" in {s["key"] for s in stages}  # the second attempt's act is a new act


# -- the key grammar keeps the stored formats -------------------------------------------------------


def test_the_key_grammar_keeps_the_stored_formats() -> None:
    assert keys.step_key("run", 3) == "run/3"
    assert keys.decision_key("run/2", "pay", 0) == "run/2/pay/0"
    assert keys.branched("run/3", 2) == "run/3~r2" and keys.unbranched("run/3~r2/pay/0~r4") == "run/3/pay/0"
    assert keys.unbranched("<run/3%7Er2@x>") == "<run/3@x>" or keys.unbranched("run/3%7Er2") == "run/3"
    assert keys.attempt_key("k", 1) == "k" and keys.attempt_key("k", 2) == "k#attempt2"
    assert keys.compensation_key("run/3") == "comp/run/3" and keys.compensated("comp/run/3") == "run/3"
    assert keys.is_compensation("comp/x") and not keys.is_compensation("x/comp/")
