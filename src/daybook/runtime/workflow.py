"""Workflows: plain functions `fn(ctx, *args)` made durable, and how another process finds them.

A run stores its workflow's name and an import reference (`module:qualname`, or `/path/file.py:
qualname` for a script), so `daybook resume RUN` in a fresh process can load the code again.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable
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


@overload
def workflow(fn: Callable[..., R], /) -> Workflow[R]: ...


@overload
def workflow(
    *, name: str | None = None, version: str = "", fail_on: FailOn = ()
) -> Callable[[Callable[..., R]], Workflow[R]]: ...


@overload
def workflow(
    fn: Callable[..., R], /, *, name: str | None = None, version: str = "", fail_on: FailOn = ()
) -> Workflow[R]: ...


def workflow(
    fn: Callable[..., R] | None = None,
    /,
    *,
    name: str | None = None,
    version: str = "",
    fail_on: FailOn = (),
) -> Any:
    """Register a workflow so any process can resume its runs. Use bare or with `name=`;
    `version` labels the code a run starts on (shown by `daybook versions`); `fail_on` lists
    exceptions the workflow raises on purpose, which end a run as `failed` (any other exception
    parks it as `needs_attention`, to be retried after a fix)."""
    if not isinstance(fail_on, tuple) or not all(
        isinstance(t, type) and issubclass(t, BaseException) for t in fail_on
    ):
        raise ConfigError(f"fail_on must be a tuple of exception classes, not {fail_on!r}")

    def wrap(f: Callable[..., R]) -> Workflow[R]:
        wf = Workflow(fn=f, name=name or f.__name__, ref=_ref_of(f), version=version, fail_on=fail_on)
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


def load(name: str, ref: str, app: str | None = None) -> Workflow[Any]:
    """Find the workflow a stored run names: registry first, then `app`, then the stored ref."""
    if name in _REGISTRY:
        return _REGISTRY[name]
    for target in filter(None, [app, ref]):
        modpart = target.rsplit(":", 1)[0] if ":" in target else target
        _import(modpart)
        if name in _REGISTRY:
            return _REGISTRY[name]
    raise ConfigError(
        f"workflow {name!r} (stored as {ref!r}) is not importable in this process; pass the module "
        "or script that defines it (CLI: --app mypkg.agents or --app path/to/agent.py)"
    )


def load_app(target: str) -> None:
    """Import a module (`pkg.agents`) or script (`path/agent.py`) so its workflows register."""
    _import(target)


def _import(target: str) -> None:
    try:
        if target.endswith(".py") or os.sep in target:
            if not os.path.exists(target):
                raise ConfigError(f"workflow file {target!r} does not exist")
            modname = "_daybook_app_" + hashlib.blake2b(target.encode(), digest_size=6).hexdigest()
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
    except Exception as exc:  # a SyntaxError or a failing import-time statement in user code
        sys.modules.pop("_daybook_app_" + hashlib.blake2b(target.encode(), digest_size=6).hexdigest(), None)
        raise ConfigError(
            f"cannot import {target!r} to find the workflow: {type(exc).__name__}: {exc}"
        ) from None
