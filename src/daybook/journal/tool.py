"""Tools: functions that change the world, with the counterparty profile daybook needs to call
them safely.

A tool is called as `fn(**args, idempotency_key=key)`; the key comes from the run, never from the
tool. The profile says whether a re-send under the same key is safe (`idempotent`), how to ask
the counterparty what happened (`status`, by key; `lookup`, by the counterparty's own reference;
`verify`, by looking at the world, for keyless acts), how long the counterparty remembers keys
(`dedup_window`), how often to ask while it says pending (`poll`), how to undo it (`inverse`) and
its effect class. A tool with no profile at all is irreversible and keyless.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, overload

from ..errors import ConfigError
from .effect_class import EFFECT_CLASSES, EffectClass, declare

R = TypeVar("R")

# A tool's cost: fixed amounts by name, or a function (args, result) -> amounts.
Cost = Mapping[str, float] | Callable[[dict[str, Any], Any], dict[str, Any]]


def cost_of(cost: Cost | None, args: dict[str, Any], result: Any) -> dict[str, Any]:
    """The amounts an act spent, as its confirmed outcome records them."""
    if cost is None:
        return {}
    return dict(cost) if isinstance(cost, Mapping) else cost(args, result)


class OutcomeUnknown(Exception):
    """Raise from a tool when the request may have reached the counterparty but no answer came.
    `ref`: the counterparty's own id for the act, if it gave one (e.g. 202 Accepted with an id)."""

    def __init__(self, message: str = "", ref: Any = None) -> None:
        super().__init__(message)
        self.ref = ref


class TransientError(Exception):
    """Raise from a tool when the request certainly did not take effect and may be retried."""


@dataclass(frozen=True)
class Confirmed:
    """The counterparty did it; `result` is what the tool would have returned, `ref` its own id
    for the act (else the tool's `reference(result)` supplies it)."""

    result: Any
    ref: Any = None


@dataclass(frozen=True)
class NotFound:
    """The counterparty never received the request: safe to send again under the same key."""


@dataclass(frozen=True)
class StillUnknown:
    """The counterparty cannot tell yet (pending, or its status endpoint is down): ask again later.
    `ref`: the counterparty's own id for the act, if it gave one (kept for asking by reference)."""

    ref: Any = None


# The spec's names for the three answers of a status query: confirmed(ref) | absent | pending.
Absent = NotFound
Pending = StillUnknown

ReconcileResult = Confirmed | NotFound | StillUnknown


@dataclass(frozen=True)
class Retry:
    """How a step is retried. `max_attempts=None` means unlimited; every attempt uses the same key."""

    max_attempts: int | None = 3
    backoff: float = 0.2
    max_backoff: float = 10.0
    multiplier: float = 2.0
    # Seconds the act may take before its outcome is read as unknown. None (the default): no
    # limit, and the call runs in the caller's thread; a limit costs a hand-off to a helper
    # thread per call (`timeout.call_with_timeout`).
    timeout: float | None = None
    reconcile_rounds: int | None = 5
    # Seconds a status, lookup or verify query may take before it counts as no answer.
    query_timeout: float | None = 30.0

    def __post_init__(self) -> None:
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ConfigError(
                f"Retry(max_attempts={self.max_attempts}): use an int >= 1, or None for unlimited"
            )
        if not (0 <= self.backoff < math.inf and 0 <= self.max_backoff < math.inf):
            raise ConfigError("Retry backoff must be >= 0 seconds")
        for name in ("timeout", "query_timeout"):
            value = getattr(self, name)
            if value is not None and not 0 < value < math.inf:
                raise ConfigError(f"Retry({name}={value}): use seconds > 0, or None for no limit")

    def delay(self, attempt: int) -> float:
        return float(min(self.max_backoff, self.backoff * self.multiplier ** max(0, attempt - 1)))

    def allows(self, attempt: int) -> bool:
        return self.max_attempts is None or attempt <= self.max_attempts


@dataclass(frozen=True)
class Tool(Generic[R]):
    """A world-changing function and its counterparty profile. Build one with `@daybook.tool`."""

    fn: Callable[..., R]
    name: str
    idempotent: bool = False
    reconcile: Callable[[str, dict[str, Any]], ReconcileResult] | None = None
    dedup_window: float | None = None
    retry: Retry = field(default_factory=Retry)
    inverse: Tool[Any] | None = None
    irreversible: bool = False
    # The counterparty's own list of keys (for `daybook reconcile`: keys the journal never issued).
    list_keys: Callable[[], list[str]] | None = None
    # The counterparty's own id for the act (wire id, order id, commit sha), from the result.
    reference: Callable[[Any], Any] | None = None
    # Ask the counterparty by its own reference (past the dedup window the key proves nothing).
    lookup: Callable[[Any], ReconcileResult] | None = None
    # For keyless acts (a shell command, a click): look at the world to learn whether it happened.
    verify: Callable[[dict[str, Any]], ReconcileResult] | None = None
    # Seconds between status queries while the counterparty says pending; the wait between
    # rounds is a durable timer, and rounds are unlimited (a person can resolve by hand).
    poll: float | None = None
    effect_class: str = "irreversible"
    # Held until commit (a staged file, a buffered SQL statement, an outbox) vs happening now.
    bufferable: bool = False
    accepts_keys: bool = True
    # Exceptions (types, or HTTP status codes) that mean the act certainly did not happen: they
    # are `failed` even when the tool can ask the counterparty (else such a tool's unrecognised
    # exceptions are `unknown`, and the counterparty is asked).
    certain: tuple[type[BaseException] | int, ...] = ()
    # Argument names whose values are journaled as a keyed digest, never in clear; and whether
    # the result is (the workflow then gets it as a `daybook.Secret`).
    secrets: tuple[str, ...] = ()
    secret_result: bool = False
    # The resources one call touches, from its arguments: a function of them returning scope
    # strings, or templates formatted with them ("fs:/srv/{path}"); checked by `daybook.tx`.
    scopes: Any = None
    # Arguments that do not change which act a call is (a timestamp): a semantic recovery's
    # re-run asking for a confirmed act with only these changed replays it (`daybook.recovery`).
    volatile: tuple[str, ...] = ()
    # Asks a running call to stop (S11: a retraction of the step arrives while it runs): called
    # from the lease heartbeat thread with the call's arguments and key; the call then returns
    # what it did (kept, and undone by the retraction) or raises (nothing applied).
    cancel: Callable[..., Any] | None = None
    # What its act's fee or quota was: fixed amounts (`{"usd": 0.01}`, admitted against the
    # run's budget before the call) or a function of its arguments (as journaled) and result;
    # recorded with the confirmed outcome and charged to the budget (`coordination.budget`).
    cost: Cost | None = None
    # At a gate that releases a call: the facts an approver must see, from its arguments (a
    # price, a balance), re-read after the approval (changed: asked again); and how many
    # distinct approvers must approve it (`daybook.gates.gate`).
    precheck: Callable[[dict[str, Any]], Any] | None = None
    approvals: int = 1
    # The effect class (`journal/effect_class.py`): what daybook does with its acts. Built by
    # `@daybook.tool` from the keywords; for a `Tool` built directly, from its fields (and the
    # fields are then made to agree with it).
    effect: EffectClass = None  # type: ignore[assignment]  # always set by __post_init__

    is_async: bool = field(init=False)

    def __post_init__(self) -> None:
        # Looked up on every call on the hot path; inspect is slow enough to matter there.
        object.__setattr__(self, "is_async", inspect.iscoroutinefunction(self.fn))
        made: EffectClass | None = self.effect
        if made is None:
            made = declare(
                f"tool {self.name}",
                self.effect_class if self.effect_class in EFFECT_CLASSES else None,
                irreversible=self.irreversible,
                idempotent=self.idempotent,
                inverse=self.inverse is not None,
                bufferable=self.bufferable,
                asks=self.reconcile is not None,
                cost=self.cost is not None,
                strict=False,
            )
            object.__setattr__(self, "effect", made)
        object.__setattr__(self, "effect_class", made.name)
        object.__setattr__(self, "irreversible", made.irreversible)
        object.__setattr__(self, "idempotent", made.resend)
        object.__setattr__(self, "bufferable", made.bufferable)

    def __call__(self, *args: Any, **kwargs: Any) -> R:
        # Calling a tool directly bypasses the journal; allowed (tests, scripts) but never keyed.
        return self.fn(*args, **kwargs)

    @property
    def status(self) -> Callable[[str, dict[str, Any]], ReconcileResult] | None:
        """The status query by key (the spec's name for `reconcile`)."""
        return self.reconcile

    def profile(self) -> dict[str, Any]:
        """The counterparty profile as data (`daybook tools`): what daybook may do with this tool."""
        return {
            "name": self.name,
            "effect_class": self.effect_class,
            "bufferable": self.bufferable,
            "accepts_keys": self.accepts_keys,
            "idempotent": self.idempotent,
            "status_query": self.reconcile is not None,
            "lookup_by_reference": self.lookup is not None,
            "verify": self.verify is not None,
            "dedup_window": self.dedup_window,
            "poll": self.poll,
            "inverse": self.inverse.name if self.inverse is not None else None,
            "reference": self.reference is not None,
            "list_keys": self.list_keys is not None,
            "irreversible": self.irreversible,
            "certain": [c if isinstance(c, int) else c.__name__ for c in self.certain],
            "secrets": list(self.secrets),
            "secret_result": self.secret_result,
            "cancel": self.cancel is not None,
            "cost": self.cost is not None,
            "precheck": self.precheck is not None,
            "approvals": self.approvals,
            # What will actually happen to a call: in and out of a transaction, on a rollback, a
            # recovery and a fork, at the gates (`EffectClass.profile`).
            **self.effect.profile(),
        }


@overload
def tool(fn: Callable[..., R], /) -> Tool[R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    idempotent: bool = False,
    reconcile: Callable[[str, dict[str, Any]], ReconcileResult] | None = None,
    dedup_window: float | None = None,
    retry: Retry | None = None,
    inverse: Tool[Any] | None = None,
    irreversible: bool | None = None,
    list_keys: Callable[[], list[str]] | None = None,
    reference: Callable[[Any], Any] | None = None,
    status: Callable[[str, dict[str, Any]], ReconcileResult] | None = None,
    lookup: Callable[[Any], ReconcileResult] | None = None,
    verify: Callable[[dict[str, Any]], ReconcileResult] | None = None,
    poll: float | None = None,
    effect_class: str | None = None,
    bufferable: bool = False,
    accepts_keys: bool = True,
    certain: tuple[type[BaseException] | int, ...] = (),
    secrets: tuple[str, ...] = (),
    secret_result: bool = False,
    scopes: Any = None,
    cancel: Callable[..., Any] | None = None,
    volatile: tuple[str, ...] = (),
    cost: Cost | None = None,
    in_transaction: str | None = None,
    precheck: Callable[[dict[str, Any]], Any] | None = None,
    approvals: int = 1,
) -> Callable[[Callable[..., R]], Tool[R]]: ...


def tool(
    fn: Callable[..., R] | None = None,
    /,
    *,
    name: str | None = None,
    idempotent: bool = False,
    reconcile: Callable[[str, dict[str, Any]], ReconcileResult] | None = None,
    dedup_window: float | None = None,
    retry: Retry | None = None,
    inverse: Tool[Any] | None = None,
    irreversible: bool | None = None,
    list_keys: Callable[[], list[str]] | None = None,
    reference: Callable[[Any], Any] | None = None,
    status: Callable[[str, dict[str, Any]], ReconcileResult] | None = None,
    lookup: Callable[[Any], ReconcileResult] | None = None,
    verify: Callable[[dict[str, Any]], ReconcileResult] | None = None,
    poll: float | None = None,
    effect_class: str | None = None,
    bufferable: bool = False,
    accepts_keys: bool = True,
    certain: tuple[type[BaseException] | int, ...] = (),
    secrets: tuple[str, ...] = (),
    secret_result: bool = False,
    scopes: Any = None,
    cancel: Callable[..., Any] | None = None,
    volatile: tuple[str, ...] = (),
    cost: Cost | None = None,
    in_transaction: str | None = None,
    precheck: Callable[[dict[str, Any]], Any] | None = None,
    approvals: int = 1,
) -> Any:
    """Declare a tool. Use bare (`@tool`) or with a profile (`@tool(reconcile=status)`).

    `inverse`: the tool that undoes this one, called by `ctx.compensate()` as `inverse(original=ARGS,
    result=RESULT, idempotency_key="comp/<key>")`. `irreversible`: it cannot be undone (an email, a payment
    out): no model-proposed undo is ever tried for it, and it is never used as one. Left unset, a tool with
    no profile at all (none of idempotent, reconcile, inverse, dedup_window, list_keys, reference) counts as
    irreversible. The rest of the counterparty profile: `status(key, args)` (alias of `reconcile`) answers
    `Confirmed(result, ref) | Absent() | Pending()`; `lookup(ref)` asks by the counterparty's own reference,
    used once the dedup window has passed; `verify(args)` looks at the world for a keyless act
    (`accepts_keys=False`); `poll` is the seconds between status queries while the answer is pending (a
    durable timer, unlimited rounds); `effect_class`, `bufferable`, `in_transaction`, `cost`: what daybook
    does with its acts (`journal/effect_class.py`). `certain`: exception types (and HTTP 4xx codes) proving
    the act did not happen (`failed`, even for a tool with `status` or `verify`, whose other exceptions are
    read as `unknown`). `secrets`: argument names journaled as a keyed digest, never in clear (the tool
    still receives the value); `secret_result=True`: the result too, as a `daybook.Secret` (replay hands
    back a withheld one). `scopes`: the resources a call touches (`<type>:<path>[:<id>]`), as templates
    formatted with the call's arguments (`"fs:/srv/{path}"`) or a function of them; inside
    `ctx.transaction(scopes=...)` a call outside them is refused before it runs. `cancel(**args,
    idempotency_key=key)` stops a running call a retraction names; `volatile`: arguments that do not change
    which act a call is (a timestamp; for recovery re-runs); `precheck`, `approvals`: what a gate releasing
    a call asks for (`gate_terms`)."""
    profile = {k: v for k, v in locals().items() if k != "fn"}

    def wrap(f: Callable[..., R]) -> Tool[R]:
        made = _make(f, **profile)  # every keyword above, as given: checked, built
        _TOOLS[made.name] = made
        return made

    return wrap(fn) if fn is not None else wrap


def _make(
    f: Callable[..., R],
    *,
    name: str | None = None,
    idempotent: bool = False,
    reconcile: Callable[[str, dict[str, Any]], ReconcileResult] | None = None,
    dedup_window: float | None = None,
    retry: Retry | None = None,
    inverse: Tool[Any] | None = None,
    irreversible: bool | None = None,
    list_keys: Callable[[], list[str]] | None = None,
    reference: Callable[[Any], Any] | None = None,
    status: Callable[[str, dict[str, Any]], ReconcileResult] | None = None,
    lookup: Callable[[Any], ReconcileResult] | None = None,
    verify: Callable[[dict[str, Any]], ReconcileResult] | None = None,
    poll: float | None = None,
    effect_class: str | None = None,
    bufferable: bool = False,
    accepts_keys: bool = True,
    certain: tuple[type[BaseException] | int, ...] = (),
    secrets: tuple[str, ...] = (),
    secret_result: bool = False,
    scopes: Any = None,
    cancel: Callable[..., Any] | None = None,
    volatile: tuple[str, ...] = (),
    cost: Cost | None = None,
    in_transaction: str | None = None,
    precheck: Callable[[dict[str, Any]], Any] | None = None,
    approvals: int = 1,
) -> Tool[R]:
    """The `Tool` for `f` with this profile, checked, its effect class inferred where unset."""
    _check(f, dedup_window, inverse, status, reconcile, poll, cost)
    _check_gate(f, precheck, approvals)
    asker = reconcile or status
    # Every keyword as given: the one mapping onto an effect class reads the facts it needs.
    klass, profiled = _declared(f, dict(locals()))
    return Tool(
        fn=f,
        name=name or f.__name__,
        reconcile=asker,
        dedup_window=dedup_window,
        retry=retry or Retry(),
        inverse=inverse,
        list_keys=list_keys,
        reference=reference,
        lookup=lookup,
        verify=verify,
        poll=poll,
        effect=klass,  # its idempotent, irreversible and bufferable fields follow from it
        accepts_keys=accepts_keys and (profiled or irreversible is False),
        certain=_certain(f, certain),
        secrets=_secret_names(f, secrets),
        secret_result=bool(secret_result),
        scopes=scopes,
        cancel=cancel,
        volatile=tuple(volatile),
        cost=cost,
        precheck=precheck,
        approvals=approvals,
    )


def _declared(f: Callable[..., Any], p: dict[str, Any]) -> tuple[EffectClass, bool]:
    """The effect class of a `@daybook.tool` declaration (`effect_class.declare`, strict), and
    whether the tool has any counterparty profile at all."""
    asks = p["reconcile"] or p["status"]
    profiled = p["effect_class"] == "idempotent" or any(
        p[k] for k in ("idempotent", "inverse", "dedup_window", "list_keys", "reference", "lookup", "verify")
    )
    klass = declare(
        f"tool {p['name'] or f.__qualname__}",
        p["effect_class"],
        irreversible=p["irreversible"],
        idempotent=p["idempotent"],
        inverse=p["inverse"] is not None,
        bufferable=p["bufferable"],
        profiled=bool(profiled or asks),
        accepts_keys=p["accepts_keys"],
        asks=asks is not None,
        cost=p["cost"] is not None,
        in_transaction=p["in_transaction"],
    )
    return klass, bool(profiled or asks)


def _certain(f: Callable[..., Any], certain: Any) -> tuple[type[BaseException] | int, ...]:
    items = tuple(certain) if isinstance(certain, tuple | list) else (certain,)
    for c in items:
        ok = (isinstance(c, type) and issubclass(c, BaseException)) or (
            isinstance(c, int) and not isinstance(c, bool) and 400 <= c <= 499
        )
        if not ok:
            raise ConfigError(
                f"tool {f.__qualname__}: certain= takes exception types and HTTP 4xx status "
                f"codes (the failures that prove the act did not happen), got {c!r}"
            )
    return items


def _secret_names(f: Callable[..., Any], names: Any) -> tuple[str, ...]:
    items = (names,) if isinstance(names, str) else tuple(names)
    if not all(isinstance(n, str) and n for n in items):
        raise ConfigError(
            f"tool {f.__qualname__}: secrets= takes argument names, e.g. secrets=('password',); got {names!r}"
        )
    return items


def _check(
    f: Callable[..., Any],
    dedup_window: float | None,
    inverse: Tool[Any] | None,
    status: Callable[..., Any] | None,
    reconcile: Callable[..., Any] | None,
    poll: float | None,
    cost: Cost | None,
) -> None:
    """Refuse a profile that cannot work, saying what to change."""
    params = inspect.signature(f).parameters
    accepts_key = "idempotency_key" in params or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()
    )
    what = f"tool {f.__qualname__}"
    if not accepts_key:
        raise ConfigError(
            f"{what} must accept an `idempotency_key` keyword argument: daybook "
            "hands every call the key that names its decision, to pass to the counterparty"
        )
    if dedup_window is not None and dedup_window <= 0:
        raise ConfigError(f"{what}: dedup_window must be > 0 seconds or None")
    if inverse is not None and not isinstance(inverse, Tool):
        raise ConfigError(f"{what}: inverse= must be a @daybook.tool")
    if status is not None and reconcile is not None and status is not reconcile:
        raise ConfigError(f"{what}: give status= or reconcile= (the same hook), not both")
    if poll is not None and poll <= 0:
        raise ConfigError(f"{what}: poll must be > 0 seconds or None")
    if cost is not None and not callable(cost) and not _amounts_given(cost):
        raise ConfigError(
            f"{what}: cost= must be amounts by name, each a number >= 0 (cost={{'usd': 0.01}}), or "
            "a function (args, result) -> dict of amounts"
        )


def _amounts_given(cost: Any) -> bool:
    return isinstance(cost, Mapping) and all(
        isinstance(k, str) and isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v < math.inf
        for k, v in cost.items()
    )


def _check_gate(f: Callable[..., Any], precheck: Any, approvals: Any) -> None:
    what = f"tool {f.__qualname__}"
    if precheck is not None and not callable(precheck):
        raise ConfigError(f"{what}: precheck= must be a function (args) -> the facts an approver sees (JSON)")
    if isinstance(approvals, bool) or not isinstance(approvals, int) or approvals < 1:
        raise ConfigError(
            f"{what}: approvals={approvals!r}: give the number of distinct approvers who must "
            "approve a call, an int >= 1 (approvals=2 for four eyes)"
        )


def gate_terms(tool: Tool[Any], args: dict[str, Any]) -> dict[str, Any]:
    """What a gate releasing one call of `tool` asks for, as `ctx.gate` keywords (the agent
    loop's gate, `Daybook(gate_irreversible=)`, `ctx.transaction(gate=)`): `approvals`, the
    distinct approvers it needs (four eyes: 2); `precheck`, the facts the approver is shown (a
    price, a balance) from the call's arguments, re-read after the approval and before the act
    (changed: the gate asks again with the new facts)."""
    check = tool.precheck
    return {
        "approvals": tool.approvals,
        "precheck": None if check is None else functools.partial(check, dict(args)),
    }


_TOOLS: dict[str, Tool[Any]] = {}


def register(made: Tool[Any]) -> None:
    """Register `made` under its name, as building it did (the newest of a name wins)."""
    _TOOLS[made.name] = made


def lookup(name: str) -> Tool[Any] | None:
    """The tool registered under `name` in this process (compensation finds inverses here)."""
    return _TOOLS.get(name)


def registered() -> list[Tool[Any]]:
    """Every tool registered in this process, by name."""
    return [_TOOLS[name] for name in sorted(_TOOLS)]
