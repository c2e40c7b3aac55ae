"""Decisions: recorded values (model calls, reads of the world, clock, randomness, patch markers).

`decide` runs a function once and journals its value; replay returns the recorded value and never
runs the function again. The latest decision made is what an effect links to by default (the
decision ledger's "why"), except reads and bookkeeping steps listed in `NOT_REASONS`.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import random as _random
import time
import uuid as _uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, overload

from ..errors import BudgetExceeded, ConfigError, StepFailed, TimedOut, WorkflowFailed
from ..records import JSON, Event, Kind, Status, Why
from ..store.secrets import SEALED, withheld
from . import current, keys, strict
from .execution import check_step_json, error_info, step_fingerprint
from .facet import Facet
from .llm import LLMClient
from .stream import check_name, streamed_call
from .timeout import call_with_timeout
from .tool import Retry

T = TypeVar("T")

# What a decision's function raises on purpose (a certain failure); anything else is a bug.
ON_PURPOSE = (WorkflowFailed, StepFailed, BudgetExceeded)

# Reads and bookkeeping steps, not decisions an effect follows from: clock and randomness, the
# barrier, reads of the world (adapters, the loop's observe/verify), and every internal step
# (their names hold a colon: budget:charge, patch:NAME, precondition:..., notify:..., answer:...).
NOT_REASONS = frozenset(
    {"now", "random", "uuid", "barrier", "claim", "on_stuck", "observe", "verify", "files.read", "sql.query"}
)


@dataclass(frozen=True)
class Decision(Generic[T]):
    """A recorded decision. `id` is `<run id>/<step>`; derive effect keys from it with `key()`."""

    id: str
    name: str
    value: T
    step: int

    def key(self, kind: str, i: int = 0) -> str:
        return keys.decision_key(self.id, kind, i)


class Decisions(Facet):
    """`ctx.decide` and the recorded reads built on it: `now`, `random`, `uuid`, `llm`, `patched`."""

    @overload
    def decide(
        self,
        name: str,
        fn: Callable[..., Coroutine[Any, Any, T]],
        *args: Any,
        why: Why | Callable[[Any], Why] | None = None,
        timeout: float | None = None,
        retry: Retry | None = None,
        **kwargs: Any,
    ) -> Awaitable[Decision[T]]: ...

    @overload
    def decide(
        self,
        name: str,
        fn: Callable[..., T],
        *args: Any,
        why: Why | Callable[[Any], Why] | None = None,
        timeout: float | None = None,
        retry: Retry | None = None,
        **kwargs: Any,
    ) -> Decision[T]: ...

    def decide(
        self,
        name: str,
        fn: Callable[..., Any],
        *args: Any,
        why: Why | Callable[[Any], Why] | None = None,
        timeout: float | None = None,
        retry: Retry | None = None,
        **kwargs: Any,
    ) -> Any:
        """Run `fn(*args, **kwargs)` once and journal its value; replay returns the recorded value.

        Use it for anything non-deterministic: a model call, reading the world, a random choice.
        An `async def` fn makes this return an awaitable. `why=Why(policy=, version=,
        observation=, alternatives=)` (or a function of the value returning one) goes into the
        decision ledger with the value (`daybook why`);
        effects that follow link to this decision unless given another. `timeout`: seconds `fn`
        may take (start to close) before it counts as failed with `TimedOut`; `retry`: a
        `Retry` policy for a failing `fn` (attempts and backoff, as an effect's); the step fails
        once both are spent, and only the final outcome is journaled.
        """
        exe = self._exe
        step = exe.alloc()
        cover = exe.cover()
        fp = step_fingerprint(cover.conceal({"args": list(args), "kwargs": kwargs})[0], step, name)
        recs = exe.expect(step, Kind.DECISION, name, fp)
        if recs is not None:
            if inspect.iscoroutinefunction(fn):
                # A recorded failure must surface at `await`, as it did live, not at the call.
                return self._replayed_async(step, name, recs[0])
            return self._replayed(step, name, recs[0])
        if exe.read_only:
            exe.append(Kind.DECISION, step, name)  # raises: a pure replay never runs fn
        call = functools.partial(fn, *args, **kwargs)
        if inspect.iscoroutinefunction(fn):
            act = current.deciding_async(self._exe.id_of(step), call)  # a stream's chunks' act
            return self._decide_async(step, name, fp, act, why, timeout, retry)
        try:
            value = self._attempts(current.deciding(self._exe.id_of(step), call), timeout, retry)
        except Exception as exc:
            raise self._decision_failed(step, name, fp, exc) from exc
        return self._record(step, name, fp, value, why)

    async def _decide_async(
        self,
        step: int,
        name: str,
        fp: str,
        call: Callable[[], Any],
        why: Why | Callable[[Any], Why] | None,
        timeout: float | None,
        retry: Retry | None,
    ) -> Decision[Any]:
        import asyncio  # loaded already: this runs on an event loop

        attempt = 1
        while True:
            try:
                with strict.step():
                    value = await asyncio.wait_for(call(), timeout)
                break
            except Exception as exc:
                if isinstance(exc, TimeoutError):
                    exc = TimedOut(f"no answer within {timeout:g}s (start-to-close timeout)", {})
                if retry is None or not retry.allows(attempt + 1):
                    raise self._decision_failed(step, name, fp, exc) from exc
                await asyncio.sleep(retry.delay(attempt))
                attempt += 1
        return self._record(step, name, fp, value, why)

    def _attempts(self, call: Callable[[], Any], timeout: float | None, retry: Retry | None) -> Any:
        """`call()` under the decision's timeout, again after a failure while `retry` allows."""
        attempt = 1
        while True:
            try:
                with strict.step():
                    return call_with_timeout(call, timeout or 0.0)
            except Exception:
                if retry is None or not retry.allows(attempt + 1):
                    raise
                self._exe.settings.sleep(retry.delay(attempt))
                attempt += 1

    def _record(
        self,
        step: int,
        name: str,
        fp: str,
        value: Any,
        why: Why | Callable[[Any], Why] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> Decision[Any]:
        # A secret in the value is journaled as its digest; the workflow keeps the live value.
        stored, hidden = self._exe.cover().conceal(value)
        check_step_json(stored, f"step {step} decision {name!r} value")
        data: dict[str, Any] = {"value": stored, SEALED: True} if hidden else {"value": stored}
        if why is not None:
            reasons = (why if isinstance(why, Why) else why(value)).as_dict()
            check_step_json(reasons, f"step {step} decision {name!r} why")
            data["why"] = reasons
        if extra:
            data.update(extra)  # a model call's cost (`model_call`): numbers only
        self._exe.append(Kind.DECISION, step, name, status=Status.RECORDED.value, fp=fp, data=data)
        return self._made(Decision(id=self._exe.id_of(step), name=name, value=value, step=step))

    def _made(self, decision: Decision[Any]) -> Decision[Any]:
        if decision.name not in NOT_REASONS and ":" not in decision.name:
            self._exe.last_decision = decision.id
        return decision

    def _decision_failed(self, step: int, name: str, fp: str, exc: Exception) -> StepFailed:
        # The failure is recorded either way: a workflow that catches it must replay the same
        # history. One the function did not mean (a bug) is marked, so that left uncaught it
        # parks the run; `retry` runs the step again (runtime.finish, runtime.operator).
        info = error_info(exc)
        bug = not isinstance(exc, ON_PURPOSE)
        data: dict[str, Any] = {"error": info, "bug": True} if bug else {"error": info}
        self._exe.append(Kind.DECISION, step, name, status=Status.FAILED.value, fp=fp, data=data)
        message = f"step {step} decision {name!r} raised {info['type']}: {exc}"
        return StepFailed(message, info, step, bug)

    async def _replayed_async(self, step: int, name: str, ev: Event) -> Decision[Any]:
        return self._replayed(step, name, ev)

    def _replayed(self, step: int, name: str, ev: Event) -> Decision[Any]:
        if ev.status == Status.FAILED.value:
            info = ev.data.get("error") or {}
            raise StepFailed(
                f"step {step} decision {name!r} raised {info.get('type')}: {info.get('message')}",
                info,
                step,
                bool(ev.data.get("bug")),
            )
        value = ev.data.get("value")
        if ev.data.get(SEALED):
            value = withheld(value)  # the journal has digests only: secrets come back withheld
        return self._made(Decision(id=self._exe.id_of(step), name=name, value=value, step=step))

    def patched(self, name: str) -> bool:
        """A versioning marker: True where new code runs (a fresh execution, or a history that
        recorded the marker), False when replaying a history from before the marker, so old runs
        keep the path they took. Guard new behaviour with it; drop it once `daybook versions`
        shows no unfinished run without it."""
        exe = self._exe
        label = f"patch:{name}"
        ahead = exe.steps.get(exe.next_step)
        if ahead and ahead[0].kind == Kind.DECISION and ahead[0].name == label:
            return bool(self.decide(label, lambda: True).value)
        if exe.next_step <= exe.recorded_steps:
            return False  # a history from before the marker: keep the old path, use no step
        return bool(self.decide(label, lambda: True).value)

    def now(self) -> float:
        """Wall-clock time (epoch seconds), recorded once so replay sees the same instant."""
        value: float = self.decide("now", time.time).value
        return value

    def random(self) -> float:
        value: float = self.decide("random", _random.random).value
        return value

    def uuid(self) -> str:
        value: str = self.decide("uuid", lambda: str(_uuid.uuid4())).value
        return value

    def llm(
        self,
        client: LLMClient,
        prompt: str,
        *,
        why: Why | None = None,
        stream: str | None = None,
        **params: JSON,
    ) -> Decision[dict[str, JSON]]:
        """`Context.llm` without the budget: one recorded model call (`model_call`)."""
        if stream is not None:
            check_name(stream)
        return self.model_call(client, prompt, params, why=why, stream=stream)[0]

    def model_call(
        self,
        client: LLMClient,
        prompt: str,
        params: dict[str, JSON],
        *,
        why: Why | None = None,
        price: Pricer | None = None,
        reserve: dict[str, float] | None = None,
        stream: str | None = None,
    ) -> tuple[Decision[dict[str, JSON]], Charge]:
        """`llm` with its cost (`Context.llm`; not `Context.model_call`, a framework's call, which
        is `made`): a `reserved` row (the reservation, `reserve`) before the call,
        then the recorded completion with what it cost (`price(completion)`) in the same row.
        A reserved row with no completion after it is a call a crash cut off: the call is made
        again (re-sampled) under the next attempt. Replay reads the recorded cost and tallies
        it as saved (`Execution.replayed`)."""
        exe = self._exe

        def call() -> dict[str, Any]:
            if stream is not None:
                return streamed_call(exe, client, stream, prompt, params)  # type: ignore[no-any-return]
            return client.complete(prompt, **params).as_dict()

        spec = ModelCall("llm", {"args": [prompt], "kwargs": params}, call)
        return self.made(spec, price, reserve, why)

    def made(
        self, spec: ModelCall, price: Pricer | None, reserve: dict[str, float] | None, why: Why | None
    ) -> tuple[Decision[Any], Charge]:
        """One model call (`spec.call()` returns its value) as its two rows, charged from the
        second: the one mechanism behind `llm` and a framework's model call (`made_async`)."""
        begun = self._begin(spec, reserve)
        if isinstance(begun, tuple):
            return begun
        try:
            # The call is the act a stream's chunks belong to (`journal.stream`), as in `decide`.
            value = self._attempts(current.deciding(self._exe.id_of(begun.step), spec.call), None, None)
        except Exception as exc:
            raise self._decision_failed(begun.step, spec.name, begun.fp, exc) from exc
        return self._settled(spec, begun, value, price, why)

    async def made_async(
        self, spec: ModelCall, price: Pricer | None, reserve: dict[str, float] | None, why: Why | None
    ) -> tuple[Decision[Any], Charge]:
        """`made` for a call whose `spec.call()` returns an awaitable (an async SDK's model)."""
        begun = self._begin(spec, reserve)
        if isinstance(begun, tuple):
            return begun
        try:
            with strict.step():
                value = await current.deciding_async(self._exe.id_of(begun.step), spec.call)()
        except Exception as exc:
            raise self._decision_failed(begun.step, spec.name, begun.fp, exc) from exc
        return self._settled(spec, begun, value, price, why)

    def _begin(
        self, spec: ModelCall, reserve: dict[str, float] | None
    ) -> _Begun | tuple[Decision[Any], Charge]:
        """The step of a model call: its recorded outcome when replaying (tallied as saved),
        else its `reserved` row, written before the call is made."""
        exe = self._exe
        step = exe.alloc()
        fp = step_fingerprint(exe.cover().conceal(spec.inputs)[0], step, spec.name)
        recs = exe.expect(step, Kind.DECISION, spec.name, fp) or []
        done = [r for r in recs if r.status != RESERVED]
        if done:
            decision = self._replayed(step, spec.name, done[0])
            charge = charge_of(done[0], replayed=True)
            tally = exe.replayed
            for name, amount in {"calls": 1.0, **charge.amounts}.items():
                tally[name] = tally.get(name, 0.0) + amount
            return decision, charge
        if exe.read_only:
            exe.append(Kind.DECISION, step, spec.name)  # raises: a pure replay never runs the model
        attempt = len(recs) + 1
        data: dict[str, Any] = {"reserve": dict(reserve or {}), "attempt": attempt}
        exe.append(Kind.DECISION, step, spec.name, status=RESERVED, fp=fp, data=data)
        return _Begun(step, fp, attempt)

    def _settled(
        self, spec: ModelCall, begun: _Begun, value: Any, price: Pricer | None, why: Why | None
    ) -> tuple[Decision[Any], Charge]:
        # The model id and tokens: the completion's own (`llm`), or what the SDK reported.
        facts = spec.usage(value) if spec.usage is not None else value
        amounts, priced = price(facts) if price is not None else ({"tokens": float(tokens_of(facts))}, False)
        cost: dict[str, Any] = {"cost": amounts, "priced": priced, "attempt": begun.attempt}
        if spec.usage is not None:
            cost["usage"] = facts  # where the ledger reads a framework call's model and tokens
        reasons = dataclasses.replace(why or Why(), model=str(facts.get("model")), tokens=tokens_of(facts))
        decision = self._record(begun.step, spec.name, begun.fp, value, reasons, cost)
        return decision, Charge(amounts, priced, False)


@dataclass(frozen=True)
class ModelCall:
    """One model call to journal: the step's `name` (`llm`; a framework integration keeps its
    own), the `inputs` its fingerprint is made of, `call()` (its value, or an awaitable of it),
    and `usage(value)`: the model id and tokens the SDK reported (`{"model", "input_tokens",
    "output_tokens"}`; None when the value is a completion that holds them itself)."""

    name: str
    inputs: dict[str, Any]
    call: Callable[[], Any]
    usage: Callable[[Any], dict[str, Any]] | None = None


@dataclass(frozen=True)
class _Begun:
    step: int
    fp: str
    attempt: int


def usage_of(usage: Callable[[Any], Mapping[str, Any]]) -> Callable[[Any], dict[str, Any]]:
    """`usage`, its answer kept to what the ledger reads: the model id and token counts."""

    def read(value: Any) -> dict[str, Any]:
        got = usage(value)
        if not isinstance(got, Mapping):
            raise ConfigError(
                f"a model call's usage(value) returned {type(got).__name__}; return a dict "
                '{"model": ..., "input_tokens": ..., "output_tokens": ...}'
            )
        return {
            "model": str(got.get("model") or ""),
            "input_tokens": _count(got.get("input_tokens")),
            "output_tokens": _count(got.get("output_tokens")),
        }

    return read


def _count(raw: Any) -> int:
    return int(raw) if isinstance(raw, int | float) and not isinstance(raw, bool) and raw >= 0 else 0


def is_model_call(ev: Event) -> bool:
    """A model call's row: `llm`'s, a reservation, or a framework call's recorded usage."""
    return ev.name == "llm" or ev.status == RESERVED or isinstance(ev.data.get("usage"), dict)


# The row written before a model call (its reservation): a call that ran is recorded after it.
RESERVED = "reserved"

# What a model call cost, from its completion: (amounts such as usd and tokens, priced or not).
Pricer = Callable[[dict[str, Any]], tuple[dict[str, float], bool]]


@dataclass(frozen=True)
class Charge:
    """What one model call cost as its row records it, and whether it was replayed (not paid)."""

    amounts: dict[str, float]
    priced: bool
    replayed: bool


def tokens_of(reply: Any) -> int:
    if not isinstance(reply, dict):
        return 0
    return int(reply.get("input_tokens") or 0) + int(reply.get("output_tokens") or 0)


def charge_of(ev: Event, replayed: bool) -> Charge:
    """The charge a recorded model call's row holds; none for a row from before the runtime
    charged model calls (its run was never charged for it: replay keeps it so)."""
    amounts = ev.data.get("cost")
    if not isinstance(amounts, dict):
        return Charge({}, False, replayed)
    return Charge({str(k): float(v) for k, v in amounts.items()}, bool(ev.data.get("priced")), replayed)
