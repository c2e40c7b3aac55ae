"""Workflows: plain functions `fn(ctx, *args)` made durable, and how another process finds them.

A run stores its workflow's name and an import reference (`module:qualname`, or `/path/file.py:
qualname` for a script). Another process finds the code in its own registry (workflows already
imported there) or in the modules the operator names (`--app`, `app=`, `$DAYBOOK_APP`); the
stored reference is only shown in the error, never imported (a row must not run code).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, overload

from ..errors import ConfigError

R = TypeVar("R")


@dataclass(frozen=True)
class Workflow(Generic[R]):
    fn: Callable[..., R]
    name: str
    ref: str
    version: str = ""
    # Exceptions this workflow raises on purpose: they end a run as `failed`, not parked.
    fail_on: tuple[type[BaseException], ...] = ()
    # Seconds from the run's creation after which it fails with `TimedOut` (None: no limit).
    timeout: float | None = None
    # Semantic recovery on failure, in the process that saw it (`daybook.recovery`): the policy
    # ("dart", "entry", "coarse", "retry"; None: off) and how many times per run.
    recover: str | None = None
    recoveries: int = 3

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.fn)

    def __call__(self, *args: Any, **kwargs: Any) -> R:
        return self.fn(*args, **kwargs)


_REGISTRY: dict[str, Workflow[Any]] = {}


def _ref_of(fn: Callable[..., Any]) -> str:
    module = getattr(fn, "__module__", None) or ""
    qualname = getattr(fn, "__qualname__", getattr(fn, "__name__", "workflow"))
    mod = sys.modules.get(module)
    path = getattr(mod, "__file__", None)
    # A script run as __main__ (or loaded by path) cannot be imported by module name elsewhere.
    if path and (module == "__main__" or module.startswith("_daybook_app_")):
        return f"{os.path.abspath(path)}:{qualname}"
    return f"{module}:{qualname}"


FailOn = tuple[type[BaseException], ...]


# The recovery policies a workflow may name (`daybook.recovery.select` builds them).
RECOVER_POLICIES = ("dart", "entry", "coarse", "retry")


def _check_recover(recover: str | None, recoveries: int) -> None:
    if recover is not None and recover not in RECOVER_POLICIES:
        raise ConfigError(f"workflow recover={recover!r}: use one of {', '.join(RECOVER_POLICIES)}, or None")
    if isinstance(recoveries, bool) or not isinstance(recoveries, int) or recoveries < 1:
        raise ConfigError(f"workflow recoveries={recoveries!r}: use a whole number >= 1")


@overload
def workflow(fn: Callable[..., R], /) -> Workflow[R]: ...


@overload
def workflow(
    *,
    name: str | None = None,
    version: str = "",
    fail_on: FailOn = (),
    timeout: float | None = None,
    recover: str | None = None,
    recoveries: int = 3,
) -> Callable[[Callable[..., R]], Workflow[R]]: ...


@overload
def workflow(
    fn: Callable[..., R],
    /,
    *,
    name: str | None = None,
    version: str = "",
    fail_on: FailOn = (),
    timeout: float | None = None,
    recover: str | None = None,
    recoveries: int = 3,
) -> Workflow[R]: ...


def workflow(
    fn: Callable[..., R] | None = None,
    /,
    *,
    name: str | None = None,
    version: str = "",
    fail_on: FailOn = (),
    timeout: float | None = None,
    recover: str | None = None,
    recoveries: int = 3,
) -> Any:
    """Register a workflow so any process can resume its runs. Use bare or with `name=`;
    `version` labels the code a run starts on (shown by `daybook versions`); `fail_on` lists
    exceptions the workflow raises on purpose, which end a run as `failed` (any other exception
    parks it as `needs_attention`, to be retried after a fix); `timeout` is the run's execution
    timeout in seconds from its creation: past it the run fails with `TimedOut` at its next step
    (a suspended run is woken for it); `recover` ("dart", "entry", "coarse" or "retry") makes a
    failure inside a `ctx.subtask` recover at once, in this process, as `book.recover` would,
    up to `recoveries` times per run."""
    _check_recover(recover, recoveries)
    if timeout is not None and not 0 < timeout < float("inf"):
        raise ConfigError(f"workflow timeout={timeout!r}: use seconds > 0, or None for no limit")
    if not isinstance(fail_on, tuple) or not all(
        isinstance(t, type) and issubclass(t, BaseException) for t in fail_on
    ):
        raise ConfigError(f"fail_on must be a tuple of exception classes, not {fail_on!r}")

    def wrap(f: Callable[..., R]) -> Workflow[R]:
        wf = Workflow(
            fn=f,
            name=name or f.__name__,
            ref=_ref_of(f),
            version=version,
            fail_on=fail_on,
            timeout=timeout,
            recover=recover,
            recoveries=recoveries,
        )
        _REGISTRY[wf.name] = wf
        return wf

    return wrap(fn) if fn is not None else wrap


def as_workflow(obj: Any) -> Workflow[Any]:
    if isinstance(obj, Workflow):
        return obj
    if callable(obj):
        found = _REGISTRY.get(getattr(obj, "__name__", ""))
        if found is not None and found.fn is obj:
            return found
        wf: Workflow[Any] = workflow(obj)
        return wf
    raise ConfigError(f"{obj!r} is not a workflow: pass a function decorated with @daybook.workflow")


APP_ENV = "DAYBOOK_APP"
# The code an operator names for a process: one module or script, several, or none.
Apps = str | Sequence[str] | None


def allowed_apps(app: Apps = None) -> list[str]:
    """The code the operator named for this process: `app` (one module or script, or several),
    then the allow-list in $DAYBOOK_APP (entries separated by commas or the OS path separator)."""
    given = [app] if isinstance(app, str) else list(app or ())
    env = os.environ.get(APP_ENV, "")
    for part in env.replace(os.pathsep, ",").split(","):
        if part.strip() and part.strip() not in given:
            given.append(part.strip())
    return [a for a in given if a]


def load(name: str, ref: str, app: Apps = None) -> Workflow[Any]:
    """Find the workflow a stored run names: in this process's registry, else in the code the
    operator named (`app`, then $DAYBOOK_APP). The stored `ref` is only a hint for the error: it
    is never imported, so a row in the store cannot make this process run code (D5)."""
    if name in _REGISTRY:
        return _REGISTRY[name]
    for target in allowed_apps(app):
        _import(target.rsplit(":", 1)[0] if _is_ref(target) else target)
        if name in _REGISTRY:
            return _REGISTRY[name]
    raise ConfigError(missing_message(name, ref, allowed_apps(app)))


def _is_ref(target: str) -> bool:
    """`module:qualname` or `path.py:qualname` (a Windows drive letter `C:` is not a ref)."""
    head, sep, tail = target.rpartition(":")
    return bool(sep) and len(head) > 1 and tail.isidentifier()


def app_of(ref: str) -> str:
    """The `--app` value that would load a stored reference (`mod:fn` -> `mod`)."""
    return ref.rsplit(":", 1)[0] if _is_ref(ref) else ref


def missing_message(name: str, ref: str, tried: Sequence[str] = ()) -> str:
    """What to say when the workflow a run names is not loaded: the workflow by name, and the
    stored reference only as untrusted data (anyone who can write the store wrote it), never as
    a ready-to-run `--app` command."""
    looked = f" (looked in {', '.join(repr(t) for t in tried)})" if tried else ""
    stored = (
        f"; the run's stored reference is {ref!r}, which is data from the store, not checked by "
        "anyone: daybook never imports it, and neither should you unless you know that file is "
        "your own code"
        if ref
        else ""
    )
    return (
        f"workflow {name!r} is not registered in this process{looked}{stored}; pass the module "
        f"or script that defines workflow {name!r} with --app MODULE|FILE.py on the command "
        f"line, app=... in Python, or list it in ${APP_ENV} (only code you name runs)"
    )


def trusted_ref(name: str, ref: str) -> bool:
    """True when this process registered workflow `name` from code at `ref`: the stored
    reference then names code the operator already runs, and may be shown as an `--app`."""
    found = _REGISTRY.get(name)
    return found is not None and found.ref == ref


def load_app(target: str) -> None:
    """Import a module (`pkg.agents`) or script (`path/agent.py`) so its workflows register."""
    _import(target)


def _import(target: str) -> None:
    digest = hashlib.blake2b(target.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()
    modname = "_daybook_app_" + digest
    try:
        if target.endswith(".py") or os.sep in target:
            if not os.path.exists(target):
                raise ConfigError(f"workflow file {target!r} does not exist")
            if modname in sys.modules:
                return
            spec = importlib.util.spec_from_file_location(modname, target)
            if spec is None or spec.loader is None:
                raise ConfigError(f"cannot load workflow file {target!r}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[modname] = module
            spec.loader.exec_module(module)
        else:
            importlib.import_module(target)
    except ConfigError:
        raise
    except (Exception, SystemExit) as exc:  # a SyntaxError, a failing or exiting import in user code
        sys.modules.pop(modname, None)
        what = (
            f"it called sys.exit({exc.code!r}) while being imported"
            if isinstance(exc, SystemExit)
            else (f"{type(exc).__name__}: {exc}")
        )
        raise ConfigError(f"cannot import {target!r} to find the workflow: {what}") from None
