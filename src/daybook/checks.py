"""The arguments of the public API, checked where they come in: one table of what each
parameter name takes, applied to every public method of a class (`checked`).

Wrong-typed ids used to reach the database driver (a raw `ProgrammingError`, `IntegrityError`
or `OverflowError`), a NaN timeout blocked a caller for good, and a non-string step name inside
a workflow read as a store failure that a worker retried for ever. Checked at the boundary, a
bad call is a `ConfigError` (or `NotSerializable`, for text no store can hold) that names the
parameter and says what to pass, before anything is written or waited for.

A parameter is checked by its name (`run_id`, `timeout`, `by`, ...), the same meaning on every
method that has it; a value equal to an optional parameter's `None` default is always allowed.
"""

from __future__ import annotations

import datetime
import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from .errors import ConfigError
from .records import bounded, check_json, check_text

C = TypeVar("C", bound=type)
Check = Callable[[Any, str], object]

# An id or a name is a key in an index: PostgreSQL refuses an index row past ~2.7 KB.
MAX_ID = 1000
# A day: the longest a caller may block on one call (update, resume's wait, steer).
MAX_BLOCK = 86_400.0
# A hundred years: a retention or sweep age past this is a typo.
MAX_AGE = 100 * 365 * 86_400.0
# A budget amount past this is a typo (and beyond what a float holds to the cent).
MAX_AMOUNT = 1e15


def _shown(value: object) -> str:
    try:
        text = repr(value)
    except Exception:  # a repr that raises is still a bad value
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."


def text_id(value: object, what: str) -> str:
    """A name or an id: a string short enough for an indexed column. What its text may hold
    (no NUL, no lone surrogate; whether it may be empty) the method itself checks, in its
    own words."""
    if not isinstance(value, str):
        raise ConfigError(f"{what} must be a string, got {type(value).__name__} {_shown(value)}")
    if len(value) > MAX_ID:
        raise ConfigError(f"{what} must be at most {MAX_ID} characters, got {len(value)}")
    return value


def storable_id(value: object, what: str) -> str:
    """An id no method checks further: text every store holds."""
    check_text(text_id(value, what), what)
    return value  # type: ignore[return-value]


def key_text(value: object, what: str) -> str:
    """An approver's token or private key (of any length): text that encodes."""
    check_text(free_text(value, what), what)
    return value  # type: ignore[return-value]


def free_text(value: object, what: str) -> str:
    """A reason, a message, a steering text: a string (empty allowed; its size and text the
    payload checks judge)."""
    if not isinstance(value, str):
        raise ConfigError(f"{what} must be a string, got {type(value).__name__} {_shown(value)}")
    return value


def seconds(high: float) -> Check:
    """A duration in seconds: a finite number from 0 to `high` (NaN and infinity never end)."""
    return lambda value, what: bounded(value, f"{what} (seconds)", low=0.0, high=high)


def whole_number(value: object, what: str) -> int:
    """A count or a step: an int (its range, the method checks in its own words)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{what} must be a whole number, got {type(value).__name__} {_shown(value)}")
    return value


def moment(value: object, what: str) -> object:
    """A time to search from or to: epoch seconds, a datetime or ISO 8601 text."""
    if isinstance(value, bool) or not isinstance(value, int | float | str | datetime.datetime):
        raise ConfigError(
            f"{what} must be a time: epoch seconds, a datetime or ISO 8601 text, got {_shown(value)}"
        )
    return value


def workflow_name(value: object, what: str) -> object:
    """`workflow`: a workflow object (run, submit) or, to filter by, its name."""
    return text_id(value, what) if isinstance(value, str) or value is None else value


def run_ids(value: object, what: str) -> object:
    if not isinstance(value, list | tuple):
        raise ConfigError(f"{what} must be a list of run ids, got {_shown(value)}")
    for item in value:
        text_id(item, f"each of {what}")
    return value


def apps(value: object, what: str) -> object:
    """`app`: a module or script, or a list of them."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise ConfigError(
            f"{what} must be a module name or script path, or a list of them, got {_shown(value)}"
        )
    for item in items:
        text_id(item, f"{what} entry")
    return value


def json_list(value: object, what: str) -> object:
    if not isinstance(value, list | tuple):
        raise ConfigError(f"{what} must be a list of JSON values, got {_shown(value)}")
    check_json(list(value), what)
    return value


def json_value(value: object, what: str) -> object:
    check_json(value, what)
    return value


def json_object(value: object, what: str) -> object:
    if not isinstance(value, dict):
        raise ConfigError(f"{what} must be a dict of JSON values with string keys, got {_shown(value)}")
    check_json(value, what)
    return value


def key_material(value: object, what: str) -> object:
    """A secret key: text or bytes, not empty."""
    if isinstance(value, str):
        return storable_id(value, what) if len(value) <= MAX_ID else value
    if isinstance(value, bytes) and value:
        return value
    raise ConfigError(f"{what} must be a non-empty str or bytes, got {type(value).__name__}")


def store_url(value: object, what: str) -> object:
    if not isinstance(value, str):
        raise ConfigError(
            f"{what} must be a store URL string (sqlite:///path.db or postgresql://...), "
            f"got {type(value).__name__}"
        )
    check_text(value, what)
    return value


def amount(value: object, what: str) -> float:
    return bounded(value, what, low=0.0, high=MAX_AMOUNT)


# What each parameter name takes, on every method that has it.
_IDS = (
    "run_id", "new_run_id", "gate_id", "name", "approver", "token", "effect", "collection", "record_id",
    "kind", "queue", "partition", "instance", "target", "status", "tool", "day", "sender", "by",
    "author", "cron", "parent", "cursor", "agent", "action", "key",
)  # fmt: skip
_COUNTS = ("step", "limit", "concurrency", "per_worker", "priority", "retries")
_TEXTS = ("message", "reason", "text", "failed", "evidence")
RULES: dict[str, Check] = {
    **dict.fromkeys(_IDS, text_id),
    **dict.fromkeys(_TEXTS, free_text),
    "workflow": workflow_name,
    "since": moment,
    "until": moment,
    **dict.fromkeys(_COUNTS, whole_number),
    "wait": seconds(MAX_BLOCK),
    "timeout": seconds(MAX_BLOCK),
    "older_than": seconds(MAX_AGE),
    "run_ids": run_ids,
    "app": apps,
    "args": json_list,
    "kwargs": json_object,
    "attributes": json_object,
    "url": store_url,
    "secret_key": key_material,
    "token": key_text,
    # Where a name means something else on one method: `method.param`.
    "update.args": json_value,
}

# How a message names a parameter (the words the methods' own checks use).
HUMAN = {
    "run_id": "run id", "new_run_id": "new run id", "gate_id": "gate id", "approver": "approver name",
    "agent": "claiming agent", "record_id": "record id", "secret_key": "secret key", "url": "store URL",
    "app": "app", "run_ids": "run ids",
}  # fmt: skip

# Inside a workflow (`ctx`): the names and keys a step is journaled under. A bad one used to
# read as a store failure, and the run was retried for ever; refused here, it parks the run.
CONTEXT_RULES: dict[str, Check] = dict.fromkeys(
    ("name", "key", "run_id", "action", "kind", "obligation_id"), text_id
)

# `**amounts`, `**caps`: every value a budget amount.
AMOUNTS = ("amounts", "caps")


def checked(cls: C, rules: Mapping[str, Check] = RULES, prefix: str = "") -> C:
    """`cls` with every public method (and `__init__`) checking its arguments against `rules`
    by parameter name before it runs. Messages name the call as `prefix.method(param=)` (the
    class name by default; `ctx` for the workflow context)."""
    prefix = prefix or cls.__name__
    for attr in ["__init__", *(n for n in dir(cls) if not n.startswith("_"))]:
        fn = inspect.getattr_static(cls, attr, None)
        if not inspect.isfunction(fn) or getattr(fn, "__checked__", False):
            continue
        label = f"{prefix}.{attr}" if attr != "__init__" else cls.__name__
        wrapped = _wrap(fn, label, {**rules, **_own_rules(rules, attr)})
        if wrapped is not None:
            setattr(cls, attr, wrapped)
    return cls


def _own_rules(rules: Mapping[str, Check], method: str) -> dict[str, Check]:
    """The `method.param` entries of `rules`, as `param`."""
    head = method + "."
    return {k[len(head) :]: v for k, v in rules.items() if k.startswith(head)}


# A checked argument of a call shape: its rule, how a message names it, and where the call has
# it (its index among the positional arguments, or -1: the keyword `name`).
_Where = tuple[Callable[[Any, str], None], str, int, str]
# Where the checked arguments sit, by call shape (how many positional, which keyword names).
_Shapes = dict[tuple[int, tuple[str, ...]], tuple[_Where, ...]]


def _wrap(fn: Callable[..., Any], label: str, rules: Mapping[str, Check]) -> Callable[..., Any] | None:
    sig = inspect.signature(fn)
    plan = _plan(sig, rules)
    if not plan:
        return None
    check, shapes = _checker(sig, plan, label)

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        # A shape seen before, inline (every `ctx.effect` comes through here).
        where = shapes.get((len(args), tuple(kwargs)))
        if where is None:
            check(args, kwargs)
        else:
            for rule, what, i, name in where:
                rule(args[i] if i >= 0 else kwargs[name], what)
        return fn(*args, **kwargs)

    @functools.wraps(fn)
    async def call_async(*args: Any, **kwargs: Any) -> Any:
        check(args, kwargs)
        return await fn(*args, **kwargs)

    # An async method stays one (code that asks `iscoroutinefunction` gets the same answer).
    wrapper: Callable[..., Any] = call_async if inspect.iscoroutinefunction(fn) else call
    setattr(wrapper, "__checked__", True)  # noqa: B010 - a mark on a function object
    return wrapper


def _checker(
    sig: inspect.Signature, plan: dict[str, Callable[[Any, str], None]], label: str
) -> tuple[Callable[[tuple[Any, ...], dict[str, Any]], None], _Shapes]:
    """The check of a call's arguments against `plan`, by their names in `sig`, and the cache
    of where the checked arguments sit by call shape (the caller may look there first).

    Whether a call binds, and where each checked argument sits, depend only on the call's
    shape (how many positional arguments, which keyword names), not on its values: so
    `Signature.bind` runs once per shape (it cost more than the rest of a `ctx.effect`'s own
    bookkeeping), and later calls of that shape look their checked arguments up directly.
    `**amounts` rules take the extra keywords as one dict: those methods bind every call."""
    order = list(sig.parameters)
    cacheable = all(sig.parameters[name].kind is not inspect.Parameter.VAR_KEYWORD for name in plan)
    shapes: _Shapes = {}

    def check(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        shape = (len(args), tuple(kwargs))
        where = shapes.get(shape)
        if where is not None:
            for rule, what, i, name in where:
                rule(args[i] if i >= 0 else kwargs[name], what)
            return
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as exc:
            raise ConfigError(f"{label}(): {exc}") from None
        found: list[_Where] = []
        for name, value in bound.arguments.items():
            planned = plan.get(name)
            if planned is not None:
                what = f"{label}(): {HUMAN.get(name, name)}"
                found.append((planned, what, -1 if name in kwargs else order.index(name), name))
                planned(value, what)
        if cacheable and len(shapes) < 64:
            shapes[shape] = tuple(found)

    return check, shapes


def _plan(sig: inspect.Signature, rules: Mapping[str, Check]) -> dict[str, Callable[[Any, str], None]]:
    plan: dict[str, Callable[[Any, str], None]] = {}
    for name, param in sig.parameters.items():
        if param.kind is param.VAR_KEYWORD and name in AMOUNTS:
            plan[name] = _each_amount
        elif param.kind in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY) and name in rules:
            plan[name] = _optional(rules[name]) if param.default is None else _required(rules[name])
    return plan


def _optional(check: Check) -> Callable[[Any, str], None]:
    def run(value: Any, what: str) -> None:
        if value is not None:
            check(value, what)

    return run


def _required(check: Check) -> Callable[[Any, str], None]:
    def run(value: Any, what: str) -> None:
        check(value, what)

    return run


def _each_amount(values: Any, what: str) -> None:
    for name, value in values.items():
        amount(value, f"{what.split('(')[0]}({name}=)")
