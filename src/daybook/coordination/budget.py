"""Budgets as a ledger in run state: caps, admit before a spend, charge after it, exactly once.

Caps and charges are recorded steps, so a resumed run restores what was spent and spends nothing
again. The runtime admits and charges every model call (`ctx.llm`: tokens, and USD from the price
table, reserved at the call's intent and settled in its recorded row) and every effect whose tool
declares a cost (`@tool(cost=...)`), inside and outside the agent loop. A cap is raised from
outside (`book.raise_budget`, `daybook budget RUN --raise`) by a signal that the run consumes,
recorded, only when an admission would otherwise be refused, so replay takes the same path. At a
cap the run pauses (`on_cap="pause"`, the default): a recorded `budget:paused` step, then a
durable wait for a raise (the run is suspended, holding no process); `on_cap="fail"` raises
`BudgetExceeded` instead.

A cap holds across the tree of runs below its run: a child's admission (a recorded
`budget:tree` step) counts what the cap's run and every run below it spent, and the raises sent
to it (taken or not: `pending_raises`) or taken for it below (`budget:tree-raise`). Past it the
child pauses (or fails) as that cap's `on_cap` says; a raise sent to the cap's run wakes the
runs below waiting at it. A run only its parent continues (a LangGraph model call's,
`continued_by_parent`) stops at such a cap without waiting for a signal, and its parent
suspends with it (`wait_below`).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..errors import BudgetExceeded, ConfigError
from ..journal.decision import RESERVED, Decision, Decisions, ModelCall, Pricer, is_model_call
from ..journal.execution import Execution
from ..journal.llm import LLMClient
from ..journal.price import PriceTable, defaults
from ..journal.stop import Suspend
from ..journal.stream import check_name
from ..journal.tool import Tool, cost_of
from ..journal.wait import Signal, Waits, opened
from ..records import JSON, Kind, Why
from ..runtime.tree import ancestors, descendants
from ..store import Store
from .pool import BudgetPool

SOFT_LIMIT = 0.8  # past this share of a cap, `soft` turns true: time to narrow the work
ON_CAP = ("pause", "fail")  # what an admission past a cap does (`cap(on_cap=...)`)
RAISE = "budget:raise"  # the signal a raise sends (`steering.acts.BUDGET_RAISE`)
CHARS_PER_TOKEN = 4  # a model call's reservation: its prompt's input tokens, estimated
TREE = "budget:tree"  # a child run's check against its ancestors' caps (recorded)
PAUSED = "budget:paused"  # the step a run at a cap records before it waits (or stops)
TREE_RAISE = "budget:tree-raise"  # a raise a run below took for an ancestor's cap


class Budget:
    """`ctx.budget`: caps, admissions, charges and draws on shared pools, all recorded steps."""

    def __init__(
        self, exe: Execution, decisions: Decisions, waits: Waits, prices: PriceTable | None = None
    ) -> None:
        self._exe = exe
        self._decisions = decisions
        self._waits = waits
        self._prices = prices
        self.caps: dict[str, float] = {}
        self.spent: dict[str, float] = {}
        self.on_cap = "pause"
        self._by_parent = False

    def cap(self, *, on_cap: str | None = None, **caps: float) -> None:
        """Set caps, e.g. `cap(usd=50, tokens=2_000_000)` (recorded; a later call adds or resets).
        `on_cap`: what a spend past a cap does: "pause" (the default) suspends the run until a
        person raises the cap (`daybook budget RUN --raise usd=AMOUNT`) or stops it (`--stop`);
        "fail" raises `BudgetExceeded`."""
        if on_cap is not None and on_cap not in ON_CAP:
            raise ConfigError(f"ctx.budget.cap(on_cap={on_cap!r}): on_cap must be 'pause' or 'fail'")
        for name, value in caps.items():
            if not _amount(value):
                raise ConfigError(f"budget cap {name}={value!r} must be a number >= 0 (e.g. usd=5)")
        chosen: dict[str, Any] = {"on_cap": on_cap} if on_cap is not None else {}
        recorded: dict[str, Any] = dict(
            self._decisions.decide("budget:cap", lambda: {**caps, **chosen}).value
        )
        self.on_cap = str(recorded.pop("on_cap", self.on_cap))
        self.caps.update({k: float(v) for k, v in recorded.items()})

    def admit(self, **estimate: float) -> None:
        """Admit a spend of `estimate` under the caps; one that would pass a cap takes a pending
        raise of it first, then pauses the run for a raise (`on_cap="pause"`) or raises
        BudgetExceeded, naming the cap (`on_cap="fail"`)."""
        while True:
            over = self._over(estimate)
            if over is None:
                self._admit_in_tree(estimate)
                return
            raised = self._waits.wait_for(RAISE, timeout=0)
            if raised is None:
                name, cap, after = over
                said = (
                    f"run {self._exe.run_id!r}: {name} would reach {after:g}, past its cap of "
                    f"{cap:g} (spent {self.spent.get(name, 0.0):g})"
                )
                if self.on_cap == "fail":
                    raise BudgetExceeded(
                        f"{said}; raise it with `daybook budget {self._exe.run_id} --raise "
                        f"{name}=AMOUNT` or narrow the work",
                        name,
                        cap,
                    )
                raised = self._paused(name, cap, after, said)
            for key, value in dict(raised.payload or {}).items():
                self.caps[key] = self.caps.get(key, 0.0) + float(value)

    def _paused(self, name: str, cap: float, after: float, said: str, owner: str | None = None) -> Signal:
        """The run at a cap: a recorded step saying so, then a durable wait for a raise (the run
        suspends, holding no process, until `daybook budget RUN --raise` or a stop). `owner`:
        the run above this one whose tree cap it is (recorded; a raise then raises that cap)."""
        run_id = self._exe.run_id
        whose = "" if owner in (None, run_id) else f" (it raises {owner!r}'s cap for its whole tree)"
        todo = (
            f"`daybook budget {run_id} --raise {name}=AMOUNT` to go on{whose}, or `daybook budget "
            f"{run_id} --stop` to cancel the run"
        )
        info: dict[str, JSON] = {
            "name": name,
            "cap": cap,
            "after": after,
            "message": f"{said}; paused: {todo}",
        }
        if owner not in (None, run_id):
            info["run"] = owner
        self._decisions.decide(PAUSED, lambda: info)
        try:
            raised = self._waits.wait_for(RAISE)
        except Suspend as wait:
            raise Suspend(run_id, None, f"a budget raise ({name} at its cap of {cap:g}): {todo}") from wait
        assert raised is not None  # no timeout: a wait returns a signal or suspends
        return raised

    def model_call(
        self,
        client: LLMClient,
        prompt: str,
        params: dict[str, JSON],
        why: Why | None = None,
        cost: Callable[[dict[str, Any]], Mapping[str, float]] | None = None,
        stream: str | None = None,
    ) -> Decision[dict[str, JSON]]:
        """`ctx.llm`: admitted against the caps at its reservation (the prompt's input tokens,
        estimated, at the model's input price), charged in its recorded row at what the model
        reported (tokens, and USD from the price table; `cost(completion)` instead if given)."""
        reserve = self._admitted("llm", str(getattr(client, "model", "") or ""), prompt)
        if stream is not None:
            check_name(stream)  # refused before anything is admitted or written
        decision, charge = self._decisions.model_call(
            client, prompt, params, why=why, price=self._pricer(cost), reserve=reserve, stream=stream
        )
        self._settle(charge.amounts)
        return decision

    def framework_call(self, spec: ModelCall, model: str, prompt: str, why: Why | None = None) -> Any:
        """`ctx.model_call`: a model call a framework makes (`spec.call()`), admitted and charged
        as `ctx.llm`'s, from the usage its SDK reports; an awaitable when the call is async."""
        reserve = self._admitted(spec.name, model, prompt)
        if inspect.iscoroutinefunction(spec.call):
            return self._framework_async(spec, reserve, why)
        decision, charge = self._decisions.made(spec, self._pricer(None), reserve, why)
        self._settle(charge.amounts)
        return decision

    async def _framework_async(
        self, spec: ModelCall, reserve: dict[str, float] | None, why: Why | None
    ) -> Decision[Any]:
        decision, charge = await self._decisions.made_async(spec, self._pricer(None), reserve, why)
        self._settle(charge.amounts)
        return decision

    def _admitted(self, name: str, model: str, prompt: str) -> dict[str, float] | None:
        """The reservation of the model call `name` about to be made, admitted under the caps."""
        reserve = self._reservation(name, model, prompt)
        if reserve is not None:
            self.admit(**reserve)
        return reserve

    def _reservation(self, name: str, model: str, prompt: str) -> dict[str, float] | None:
        ahead = self._exe.steps.get(self._exe.next_step)
        if ahead and ahead[0].kind == Kind.DECISION and ahead[0].name == name:
            # Replaying, the reservation the journal holds (the price table may have changed
            # since); a call recorded with none was made before calls were admitted: none now.
            if ahead[0].status != RESERVED:
                return None
            if isinstance(ahead[0].data.get("reserve"), dict):
                return {str(k): float(v) for k, v in ahead[0].data["reserve"].items()}
        return self._estimate(model, prompt)

    def _pricer(self, cost: Callable[[dict[str, Any]], Mapping[str, float]] | None) -> Pricer:
        if cost is not None:
            return lambda reply: ({str(k): float(v) for k, v in dict(cost(reply)).items()}, True)
        prices = self.prices

        def price(reply: dict[str, Any]) -> tuple[dict[str, float], bool]:
            inp, out = int(reply.get("input_tokens") or 0), int(reply.get("output_tokens") or 0)
            usd, priced = prices.cost(str(reply.get("model") or ""), inp, out)
            return {"usd": usd, "tokens": float(inp + out)}, priced

        return price

    @property
    def prices(self) -> PriceTable:
        if self._prices is None:
            self._prices = defaults()
        return self._prices

    def effect(self, tool: Tool[Any], args: dict[str, Any], call: Callable[[], Any]) -> Any:
        """`ctx.effect` of a tool that declares a cost: admitted at it (fixed amounts; a cost
        computed from the result is admitted while the caps are not passed yet), then `call()`,
        then charged what its confirmed outcome records (`cost=` kept in that row, written with
        the outcome: nothing between them for a crash to split)."""
        declared = tool.cost
        self.admit(
            **({str(k): float(v) for k, v in declared.items()} if isinstance(declared, Mapping) else {})
        )
        result = call()
        if inspect.isawaitable(result):
            return self._charged_async(tool, args, result)
        self._settle(_amounts(cost_of(declared, args, result)))
        return result

    async def _charged_async(self, tool: Tool[Any], args: dict[str, Any], pending: Awaitable[Any]) -> Any:
        result = await pending
        self._settle(_amounts(cost_of(tool.cost, args, result)))
        return result

    def _settle(self, amounts: Mapping[str, float]) -> None:
        for name, value in amounts.items():
            self.spent[name] = self.spent.get(name, 0.0) + float(value)

    def _admit_in_tree(self, estimate: dict[str, float]) -> None:
        """A child run's spend counts against every ancestor's caps (H8): the tree's spent so
        far plus this estimate must fit under each; the check is a recorded step, so replay
        takes the same path whatever the tree spent since. Past an ancestor's cap, the child
        pauses or fails as that cap says (its `on_cap`)."""
        exe = self._exe
        if exe.settings.parent_run is None:
            return
        store, run_id = exe.store, exe.run_id
        while True:
            found = self._decisions.decide(TREE, lambda: tree_over(store, run_id, estimate)).value
            if not found:
                return
            self._at_tree_cap(found)

    def continued_by_parent(self) -> None:
        """Only the run that started this one continues it (a LangGraph model call's run, whose
        live call only its graph holds): at an ancestor's cap it records the pause and stops,
        waiting for no signal (nothing must wake it where its call is unknown); its parent
        stops with it (`wait_below`), a raise sent to the ancestor wakes the parent, and the
        next execution of this run looks at the caps again."""
        self._by_parent = True

    def wait_below(self, run_id: str) -> None:
        """If run `run_id`, below this one, stopped at a budget cap, this run suspends with it
        (no step taken: it goes on when a raise sent to it, or to the cap's run, wakes it);
        otherwise nothing."""
        events = self._exe.store.load(run_id)
        said = paused_at_cap(events)
        if said is None:
            return
        owner = paused_at(events) or run_id
        raise Suspend(
            self._exe.run_id, None, f"run {run_id!r} below it, at the budget cap of {owner!r}: {said}"
        )

    def _at_tree_cap(self, found: Mapping[str, Any]) -> None:
        """A spend in this run's tree past the cap of `found["run"]` (this run or an ancestor):
        take a pending raise, else fail (`on_cap="fail"` on that cap) or pause for one. A raise
        this run takes for an ancestor's cap is recorded here (`budget:tree-raise`) and counts
        toward that cap across its tree (`tree_raises`); for its own cap, it is its own."""
        owner, name = str(found["run"]), str(found["name"])
        cap, after = float(found["cap"]), float(found["after"])
        run_id = self._exe.run_id
        said = (
            f"run {run_id!r}: {name} would reach {after:g} across the run tree of {owner!r}, "
            f"past that run's cap of {cap:g}"
        )
        # A check recorded before caps across a tree paused names no on_cap: it failed then.
        fail = str(found.get("on_cap") or "fail") == "fail"
        if self._by_parent:
            self._stopped(name, cap, after, said, owner, fail)
            return
        raised = self._waits.wait_for(RAISE, timeout=0)
        if raised is None:
            if fail:
                raise BudgetExceeded(
                    f"{said}; raise it with `daybook budget {owner} --raise {name}=AMOUNT` or "
                    "narrow the work",
                    name,
                    cap,
                )
            raised = self._paused(name, cap, after, said, owner)
        amounts = {str(k): float(v) for k, v in dict(raised.payload or {}).items()}
        if owner == run_id:
            for key, value in amounts.items():
                self.caps[key] = self.caps.get(key, 0.0) + value
        elif amounts:  # an empty raise only woke this run (its ancestor was raised): look again
            self._decisions.decide(TREE_RAISE, lambda: {"run": owner, "amounts": dict(amounts)})

    def _stopped(self, name: str, cap: float, after: float, said: str, owner: str, fail: bool) -> None:
        """At an ancestor's cap, a run its parent continues (`continued_by_parent`): fail, or
        record the pause and suspend (no wait: no signal wakes it). Replayed, a pause a later
        execution went past returns, and the caller looks at the caps again (a new step)."""
        todo = f"`daybook budget {owner} --raise {name}=AMOUNT`"
        if fail:
            raise BudgetExceeded(f"{said}; raise it with {todo} or narrow the work", name, cap)
        exe = self._exe
        replayed = exe.next_step in exe.steps
        message = f"{said}; paused: {todo} to go on, or `daybook budget {owner} --stop` to cancel the run"
        info: dict[str, JSON] = {"name": name, "cap": cap, "after": after, "run": owner}
        info.update(message=message, continued_by="parent")
        self._decisions.decide(PAUSED, lambda: info)
        if not replayed:
            raise Suspend(exe.run_id, None, f"a budget raise ({name} at the cap of {owner!r}): {todo}")

    def _estimate(self, model: str, prompt: str) -> dict[str, float]:
        """A model call's reservation: its prompt's input tokens, estimated, at the model's
        input price."""
        tokens = max(1, len(prompt) // CHARS_PER_TOKEN) if isinstance(prompt, str) else 1
        price = self.prices.price(model)
        usd = 0.0 if price is None else price.usd(tokens, 0)
        return {"tokens": float(tokens), "usd": usd}

    def charge(self, **actual: float) -> None:
        """Record what a spend cost (exactly once: replay reads it back, never charges again)."""
        self._settle(self._decisions.decide("budget:charge", lambda: dict(actual)).value)

    def draw(self, pool: str, **amounts: float) -> bool:
        """Spend from the shared pool `pool` (a coordination entity across runs and processes):
        True if it fit under the pool's cap and was recorded there, False if not (nothing spent).
        Recorded, so replay never draws twice; also counted in this run's `spent`."""
        store = self._exe.store
        agent = self._exe.run_id
        pool_ = BudgetPool(store, pool)
        drawn = self._decisions.decide(
            f"budget:draw:{pool}",
            lambda: {"ok": pool_.draw(agent, **amounts), "amounts": dict(amounts)},
        ).value
        ok = bool(drawn["ok"])
        if ok:
            for name, value in amounts.items():
                self.spent[name] = self.spent.get(name, 0.0) + float(value)
        return ok

    def remaining(self) -> dict[str, float]:
        return {k: cap - self.spent.get(k, 0.0) for k, cap in self.caps.items()}

    @property
    def soft(self) -> bool:
        """True once any capped quantity has used SOFT_LIMIT (80%) of its cap."""
        return any(cap > 0 and self.spent.get(k, 0.0) >= SOFT_LIMIT * cap for k, cap in self.caps.items())

    def _over(self, estimate: dict[str, float]) -> tuple[str, float, float] | None:
        for name, value in estimate.items():
            cap = self.caps.get(name)
            after = self.spent.get(name, 0.0) + float(value)
            if cap is not None and after > cap + 1e-12:
                return name, cap, after
        return None


def summary(events: list[Any]) -> dict[str, dict[str, float]]:
    """Caps, raises and spent totals from a run's journal (for `daybook budget`): explicit
    charges and draws, model calls (their recorded cost) and effects that declared a cost."""
    caps: dict[str, float] = {}
    spent: dict[str, float] = {}

    def add(amounts: dict[str, float]) -> None:
        for k, v in amounts.items():
            spent[k] = spent.get(k, 0.0) + float(v)

    for ev in events:
        if ev.kind == "decision" and ev.status == "recorded" and ev.name == "budget:cap":
            caps.update({k: float(v) for k, v in (ev.data.get("value") or {}).items() if k != "on_cap"})
        elif ev.kind in ("decision", "outcome"):
            add(charged(ev))
        elif ev.kind == "signal" and ev.name == "signal:budget:raise" and ev.status == "received":
            for k, v in (ev.data.get("payload") or {}).items():
                caps[k] = caps.get(k, 0.0) + float(v)
    return {"caps": caps, "spent": spent}


def charged(ev: Any) -> dict[str, float]:
    """What one row charged the run's budget: an explicit charge or a draw that fit, a model
    call (its recorded cost), an effect's confirmed outcome (its `cost=`)."""
    value = ev.data.get("value")
    if ev.kind == "outcome":
        return _amounts(ev.data.get("cost")) if ev.status == "confirmed" else {}
    if ev.status != "recorded":
        return {}
    if ev.name == "budget:charge":
        return _amounts(value)
    if is_model_call(ev) and ev.step is not None:
        return _amounts(ev.data.get("cost"))
    if ev.name.startswith("budget:draw:") and isinstance(value, dict) and value.get("ok"):
        return _amounts(value.get("amounts"))
    return {}


def paused_at_cap(events: list[Any]) -> str | None:
    """What a run waiting at a budget cap was told (`budget:paused`), if it still waits: the
    last such step with no raise received after it (nor, for a run its parent continues, any
    step after it: it went on)."""
    message: str | None = None
    by_parent = False
    for ev in events:
        if ev.kind == "decision" and ev.name == PAUSED and ev.status == "recorded":
            value = ev.data.get("value") or {}
            message = str(value.get("message") or "")
            by_parent = value.get("continued_by") == "parent"
            continue
        raised = ev.kind == "signal" and ev.name == "signal:budget:raise" and ev.status == "received"
        if raised or (by_parent and ev.step is not None):
            message = None
    return message


def paused_at(events: list[Any], *, woken: bool = False) -> str | None:
    """The run whose cap a run paused at a cap waits at (None: its own, or not paused).
    `woken`: only a pause that a signal ends (not one its parent continues)."""
    owner: Any = None
    for ev in events:
        if ev.kind == "decision" and ev.name == PAUSED and ev.status == "recorded":
            value = ev.data.get("value") or {}
            owner = None if woken and value.get("continued_by") == "parent" else value.get("run")
        elif ev.kind == "signal" and ev.name == "signal:budget:raise" and ev.status == "received":
            owner = None
    return None if owner is None else str(owner)


def paused_below(store: Store, run_id: str, *, woken: bool = False) -> list[str]:
    """The runs below `run_id` that wait, suspended, at its cap for its tree. `woken`: those a
    raise sent to `run_id` wakes (`steering.acts.raise_budget`): the ones waiting for a
    signal, not those their parent continues (the parent is woken instead)."""
    return [
        below.run_id
        for below in descendants(store, run_id)
        if below.status == "suspended" and paused_at(store.load(below.run_id), woken=woken) == run_id
    ]


def _amounts(raw: Any) -> dict[str, float]:
    """The numeric amounts of a recorded cost (a cost function that raised records why instead)."""
    if not isinstance(raw, Mapping):
        return {}
    return {str(k): float(v) for k, v in raw.items() if _amount(v)}


def _amount(value: Any) -> bool:
    """A number >= 0 (an amount of a cap or a cost)."""
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    )


def tree_over(store: Store, run_id: str, estimate: dict[str, float]) -> dict[str, Any] | None:
    """The first ancestor cap that `estimate` would pass, counting what the ancestor and every
    run below it spent (and the raises runs below it took for that cap), with that cap's
    `on_cap`; None when it fits under all."""
    for ancestor in ancestors(store, run_id):
        events = store.load(ancestor)
        books = summary(events)
        spent = dict(books["spent"])
        for below in descendants(store, ancestor):
            for name, value in summary(store.load(below.run_id))["spent"].items():
                spent[name] = spent.get(name, 0.0) + value
        caps = dict(books["caps"])
        taken = {int(ev.data["inbox_id"]) for ev in events if _received_raise(ev)}
        for extra in (tree_raises(store, ancestor), pending_raises(store, ancestor, taken)):
            for name, value in extra.items():
                caps[name] = caps.get(name, 0.0) + value
        for name, value in estimate.items():
            cap = caps.get(name)
            after = spent.get(name, 0.0) + float(value)
            if cap is not None and after > cap + 1e-12:
                return {
                    "run": ancestor,
                    "name": name,
                    "cap": cap,
                    "after": after,
                    "on_cap": on_cap_of(events),
                }
    return None


def pending_raises(store: Store, run_id: str, taken: set[int]) -> dict[str, float]:
    """The raises sent to `run_id` that it has not taken yet (not in `taken`, the inbox ids its
    journal consumed): a cap counts them for the runs below it from when they are sent (the
    run itself takes one when a spend of its own needs it; then its journal counts it)."""
    raised: dict[str, float] = {}
    for inbox_id, name, text, _sender, _at in store.inbox(run_id):
        if name != RAISE or inbox_id in taken:
            continue
        payload, _who = opened(text)
        for key, amount in _amounts(payload).items():
            raised[key] = raised.get(key, 0.0) + amount
    return raised


def _received_raise(ev: Any) -> bool:
    return (
        ev.kind == "signal"
        and ev.name == "signal:budget:raise"
        and ev.status == "received"
        and isinstance(ev.data.get("inbox_id"), int)
    )


def tree_raises(store: Store, run_id: str) -> dict[str, float]:
    """What runs below `run_id` raised its cap by, each while paused at it (`budget:tree-raise`
    rows: a raise is recorded by the run that took it, never written into another's journal)."""
    raised: dict[str, float] = {}
    for below in descendants(store, run_id):
        for ev in store.load(below.run_id):
            if ev.kind == "decision" and ev.status == "recorded" and ev.name == TREE_RAISE:
                value = ev.data.get("value") or {}
                if value.get("run") == run_id:
                    for name, amount in _amounts(value.get("amounts")).items():
                        raised[name] = raised.get(name, 0.0) + amount
    return raised


def on_cap_of(events: list[Any]) -> str:
    """What a run's caps do when passed, as its journal last set it ("pause" unless set)."""
    chosen = "pause"
    for ev in events:
        if ev.kind == "decision" and ev.status == "recorded" and ev.name == "budget:cap":
            value = ev.data.get("value") or {}
            if isinstance(value, dict) and value.get("on_cap") in ON_CAP:
                chosen = str(value["on_cap"])
    return chosen
