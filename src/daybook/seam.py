"""The integration seam: what an integration (a framework's tools and model calls journaled by
daybook) needs from the core, as public names, so it keeps only its framework's glue.

- `current()`: the running workflow's `ctx`, from anywhere the body calls (sync or async);
  `in_run()` says whether there is one. The runtime sets it while a workflow body runs.
- `idempotency_key()`: inside a tool's call that daybook executes, the key naming the act, to
  hand the counterparty (as Temporal's `activity.info()`).
- `journaled_call(ctx, name, key, fn, ...)`: one framework call as an effect of the run: a tool
  built by `daybook.tool(...)` (its checks and effect-class inference apply), journaled by
  `ctx.effect` (intent before, outcome after, secrets concealed).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .context import Context
from .errors import ConfigError, NotInRun
from .journal import current as _current
from .journal.tool import ReconcileResult, Tool, register, tool

Status = Callable[[str, dict[str, Any]], ReconcileResult]

# The tools `journaled_call` built, by fn and profile, newest last: an integration calls the
# same fn for every call of one tool (the MCP proxy: one per upstream tool), and building the
# `Tool` again (its checks, `inspect.signature`) cost as much as one of the call's SQL
# statements. Bounded: a caller that passes a new closure each time only misses.
_BUILT: dict[tuple[Any, ...], Tool[Any]] = {}
_BUILT_MAX = 256


def current() -> Context:
    """The `ctx` of the workflow whose body is running here (in this thread or task, or a tool
    it called). Outside a workflow body: `NotInRun`."""
    ctx = _current.context()
    if not isinstance(ctx, Context):
        raise NotInRun(
            "daybook.current() was called outside a workflow body: call it from a @daybook.workflow "
            "(or code the body calls, in its thread or its asyncio tasks), or check daybook.in_run() first"
        )
    return ctx


def in_run() -> bool:
    """Whether a workflow body is running here (`current()` then returns its `ctx`)."""
    return isinstance(_current.context(), Context)


def idempotency_key() -> str:
    """Inside a tool's call that daybook executes (`ctx.effect`, `journaled_call`): the key
    naming the act, to hand the counterparty. Elsewhere: `NotInRun`."""
    key = _current.key()
    if key is None:
        raise NotInRun(
            "daybook.idempotency_key() was called outside a tool's call: it names the act daybook "
            "is executing, so call it from a tool run by ctx.effect or daybook.journaled_call"
        )
    return key


def journaled_call(
    ctx: Context,
    name: str,
    key: str | None,
    fn: Callable[..., Any],
    /,
    *,
    args: Mapping[str, Any] | None = None,
    status: Status | None = None,
    idempotent: bool = False,
    irreversible: bool | None = None,
    effect_class: str | None = None,
    secrets: Sequence[str] = (),
    certain: tuple[type[BaseException] | int, ...] = (),
) -> Any:
    """`fn(**args)` as an effect of the run `ctx` stands for, named `name` (the tool's name in
    the journal, e.g. `"agents:refund"`), under `key` (None: `<run id>/<step>`, as `ctx.effect`).

    The profile is `daybook.tool`'s: `status(key, args)` asks the counterparty about an unknown
    outcome; `idempotent=True` allows a re-send under the key; with neither the call is
    irreversible (an unknown waits for `daybook resolve`), unless `irreversible=False`;
    `effect_class` as `daybook.tool` takes it (inferred when unset, never spelled out here).
    `secrets`: argument names journaled as a keyed digest (`fn` gets the values); `certain`:
    exceptions that prove the act did not happen. `args` must be JSON (a `daybook.Secret` in
    them is concealed too). Inside `fn`, `daybook.idempotency_key()` is the key. An `async def`
    `fn` makes the call awaitable, as `ctx.effect` does for an async tool."""
    if not isinstance(ctx, Context):
        raise ConfigError(f"journaled_call needs the run's ctx (daybook.current()), got {ctx!r}")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"journaled_call needs a tool name (e.g. 'agents:refund'), got {name!r}")
    if key is not None and (not isinstance(key, str) or not key):
        raise ConfigError(
            f"journaled_call: key must be a non-empty string naming the call, or None; got {key!r}"
        )
    if not callable(fn):
        raise ConfigError(f"journaled_call: fn must be callable, got {fn!r}")
    given = dict(args or {})
    bad = [k for k in given if not isinstance(k, str) or k == "idempotency_key"]
    if bad:
        raise ConfigError(
            f"journaled_call {name!r}: args are keyword arguments of fn, by name (not "
            f"'idempotency_key', which daybook.idempotency_key() gives inside fn); got {bad!r}"
        )
    return ctx.effect(
        _built(name, fn, status, idempotent, irreversible, effect_class, secrets, certain), key=key, **given
    )


def _built(
    name: str,
    fn: Callable[..., Any],
    status: Status | None,
    idempotent: bool,
    irreversible: bool | None,
    effect_class: str | None,
    secrets: Sequence[str],
    certain: tuple[type[BaseException] | int, ...],
) -> Tool[Any]:
    """The tool for `fn` under this profile: built once, registered under its name each call
    (as a build would), so `lookup(name)` finds the tool the run last called."""
    profile: tuple[Any, ...] = (name, fn, status, idempotent, irreversible, effect_class)
    profile += (tuple(secrets), certain)
    try:
        act = _BUILT.get(profile)
    except TypeError:  # an unhashable part (a list of secret names): built each time
        act, profile = None, ()
    if act is None:
        act = tool(
            name=name,
            status=status,
            idempotent=idempotent,
            irreversible=irreversible,
            effect_class=effect_class,
            secrets=tuple(secrets),
            certain=certain,
        )(_acting(fn))
        if profile:
            if len(_BUILT) >= _BUILT_MAX:
                del _BUILT[next(iter(_BUILT))]
            _BUILT[profile] = act
        return act
    register(act)
    return act


def _acting(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` as a tool: called with the journaled arguments; the key is `idempotency_key()`."""
    if inspect.iscoroutinefunction(fn):

        async def act_async(idempotency_key: str, **args: Any) -> Any:
            return await fn(**args)

        return act_async

    def act(idempotency_key: str, **args: Any) -> Any:
        out = fn(**args)
        if inspect.isawaitable(out):
            if inspect.iscoroutine(out):
                out.close()  # never started: nothing was done
            raise ConfigError(
                "journaled_call: fn returned an awaitable from a plain def; make it `async def` "
                "so daybook awaits it inside the effect"
            )
        return out

    return act
