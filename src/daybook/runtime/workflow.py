"""Workflows: plain functions `fn(ctx, *args)` made durable, and how another process finds them.

A run stores its workflow's name and an import reference (`module:qualname`, or `/path/file.py:
qualname` for a script). Another process finds the code in its own registry (workflows already
imported there) or in the modules the operator names (`--app`, `app=`, `$DAYBOOK_APP`); the
stored reference is only shown in the error, never imported (a row must not run code).
A workflow's identity is its reference, or the name given with `name=`: two functions of one
bare name in two modules are two workflows, and a run resumes with its own (`same_code`).
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
    # `name=` was given: the user's stable name is the workflow's identity, wherever its code
    # lives; otherwise its identity is its code reference (`ref`), so two functions of one bare
    # name in two modules are two workflows.
    named: bool = False
    # Its body is one act and nothing after it (the MCP proxy's calls, which set it): a new run
    # started with an id is created with its first act, and the act's confirmed outcome is
    # written with the run's end (`start.OneAct`: two commits, not four).
    one_act: bool = False

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.fn)

    def __call__(self, *args: Any, **kwargs: Any) -> R:
        return self.fn(*args, **kwargs)


# Name -> code reference ("" for the one that declares the name) -> workflow: two modules may
# each define a `refund`.
_REGISTRY: dict[str, dict[str, Workflow[Any]]] = {}


def same_code(a: str, b: str) -> bool:
    """Whether two stored references name the same function: equal, or one by module
    (`billing.refund:fn`) and one by the path of that module's file (`/src/billing/refund.py:fn`,
    a script loaded by path or run as `__main__`)."""
    if a == b:
        return True
    (mod_a, _, fn_a), (mod_b, _, fn_b) = a.rpartition(":"), b.rpartition(":")
    if fn_a != fn_b or not mod_a or not mod_b:
        return False
    path, module = (mod_a, mod_b) if mod_a.endswith(".py") else (mod_b, mod_a)
    if not path.endswith(".py") or module.endswith(".py"):
        return False
    tail = module.replace(".", "/")
    norm = path.replace(os.sep, "/")
    return norm.endswith(f"/{tail}.py") or norm.endswith(f"/{tail}/__init__.py")


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

    if name is not None:
        _check_name(name)

    def wrap(f: Callable[..., R]) -> Workflow[R]:
        wf = Workflow(
            fn=f,
            named=name is not None,
            name=name or f.__name__,
            ref=_ref_of(f),
            version=version,
            fail_on=fail_on,
            timeout=timeout,
            recover=recover,
            recoveries=recoveries,
        )
        # A named workflow is its name: a later definition of it replaces the earlier (new code).
        _REGISTRY.setdefault(wf.name, {})["" if wf.named else wf.ref] = wf
        return wf

    return wrap(fn) if fn is not None else wrap


def as_workflow(obj: Any) -> Workflow[Any]:
    if isinstance(obj, Workflow):
        return obj
    if callable(obj):
        for found in _REGISTRY.get(getattr(obj, "__name__", ""), {}).values():
            if found.fn is obj:
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
    found = _registered(name, ref)
    for target in allowed_apps(app):
        if found is not None:
            break
        _import(target.rsplit(":", 1)[0] if _is_ref(target) else target)
        found = _registered(name, ref)
    if found is None and _REGISTRY.get(name):
        raise ConfigError(_another_message(name, ref))
    if found is None:
        raise ConfigError(missing_message(name, ref, allowed_apps(app)))
    return found


def registered(name: str) -> list[Workflow[Any]]:
    """Every workflow this process registered under `name` (one per code reference)."""
    return list(_REGISTRY.get(name, {}).values())


def registered_as(name: str, ref: str) -> Workflow[Any] | None:
    """The workflow a run names, if this process registered it (nothing is imported)."""
    return _registered(name, ref)


def _registered(name: str, ref: str) -> Workflow[Any] | None:
    """The registered workflow a run names: the one of its code reference; else the one that
    declares that name explicitly (`name=`: its code may have moved). Anything else of that
    name is another workflow: None."""
    candidates = _REGISTRY.get(name, {})
    if not ref:  # asked by name alone (a schedule named on the command line): only if unique
        return next(iter(candidates.values())) if len(candidates) == 1 else None
    exact = [wf for wf in candidates.values() if not wf.named and same_code(wf.ref, ref)]
    return exact[-1] if exact else candidates.get("")


def _another_message(name: str, ref: str) -> str:
    refs = ", ".join(sorted(wf.ref for wf in _REGISTRY.get(name, {}).values()))
    if not ref:
        return (
            f"several workflows are named {name!r} ({refs}): give each its own name "
            "(@daybook.workflow(name=...)) so it can be named alone"
        )
    # The stored reference is data anyone with write access to the store wrote: it is shown,
    # never pasted into an `--app` an operator could run as it stands.
    return (
        f"the run belongs to workflow {name!r}, stored with the reference {ref!r} (data from "
        f"the store, not checked by anyone); this process has {refs} of that name, which is "
        f"another workflow. Pass the code that defines the run's workflow with --app "
        f"MODULE|FILE.py; if that code moved, declare its name where it now is "
        f"(@daybook.workflow(name={name!r})) so the run resumes with it"
    )


def _check_name(name: object) -> None:
    if not isinstance(name, str) or not name.strip() or len(name) > 200 or not name.isprintable():
        raise ConfigError(
            f"workflow name={name!r}: use a non-empty, printable string of at most 200 characters "
            "(a stable name for the workflow, kept by its runs whatever module it moves to)"
        )


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
    return any(wf.ref == ref for wf in _REGISTRY.get(name, {}).values())


def load_app(target: str) -> None:
    """Import a module (`pkg.agents`) or script (`path/agent.py`) so its workflows register."""
    _import(target)


def _search_first(directory: str) -> None:
    """Put `directory` first on the import path, as Python itself does: `python path/agent.py`
    for the script's folder (so the script imports its siblings), `python -m agent` for the
    working directory (so the module named is found there). The console script `daybook` has
    neither, so daybook's own hints (`--app wf`) failed with ModuleNotFoundError."""
    if directory not in sys.path:
        sys.path.insert(0, directory)


def _import(target: str) -> None:
    digest = hashlib.blake2b(target.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()
    modname = "_daybook_app_" + digest
    try:
        if target.endswith(".py") or os.sep in target:
            if not os.path.exists(target):
                raise ConfigError(f"workflow file {target!r} does not exist")
            if modname in sys.modules:
                return
            _search_first(os.path.dirname(os.path.abspath(target)))
            spec = importlib.util.spec_from_file_location(modname, target)
            if spec is None or spec.loader is None:
                raise ConfigError(f"cannot load workflow file {target!r}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[modname] = module
            spec.loader.exec_module(module)
        else:
            if "" not in sys.path:  # "" is the working directory already (python -m, -c)
                _search_first(os.getcwd())
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
