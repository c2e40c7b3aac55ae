"""Crash points for the tests' child processes: SIGKILL this process at the N-th call of some
function (a journal write, a rename, a `git update-ref`, a SQL statement), and report how a run
ended as one JSON line the test reads."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

import daybook


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def take(argv: list[str], flag: str) -> str | None:
    """Remove `flag VALUE` from argv and return VALUE (None if the flag is absent)."""
    if flag not in argv:
        return None
    i = argv.index(flag)
    value = argv[i + 1]
    del argv[i : i + 2]
    return value


def ready_then_go(argv: list[str]) -> None:
    """Honour `--ready-go` in argv: print `ready` once this process has started, imported and
    opened its store, then block until a line arrives on stdin. The test lets its racers go
    together, however long each took to start on a loaded machine."""
    if "--ready-go" not in argv:
        return
    argv.remove("--ready-go")
    print("ready", flush=True)
    sys.stdin.readline()


def kill_at_call(
    real: Callable[..., Any],
    n: int,
    *,
    before: bool = False,
    counts: Callable[..., bool] = lambda *args, **kwargs: True,
) -> Callable[..., Any]:
    """`real`, but the process dies just before (or after) its n-th call that `counts`."""
    seen = 0
    lock = threading.Lock()  # parallel runs write the journal from many threads

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nonlocal seen
        mine = 0
        if counts(*args, **kwargs):
            with lock:
                seen += 1
                mine = seen
        if mine == n and before:
            die()
        out = real(*args, **kwargs)
        if mine == n and not before:
            die()
        return out

    return wrapper


def kill_at_journal_write(book: daybook.Daybook, argv: list[str]) -> None:
    """Honour `--kill-before KIND:N` / `--kill-after KIND:N` in argv: die just before (or after)
    the commit that makes the N-th journal row of KIND this process writes durable ('any' counts
    every kind). A row held back for the run's next row (`defer_outcomes`) becomes durable in
    that row's commit (`store.append_batch`): its rows count there, one by one, in order."""
    for flag in ("--kill-before", "--kill-after"):
        spec = take(argv, flag)
        if spec is None:
            continue
        kind, n = spec.rsplit(":", 1)
        _kill_around_rows(book.store, kind, int(n), before=flag == "--kill-before")


def _kill_around_rows(store: Any, kind: str, n: int, before: bool) -> None:
    seen = 0
    lock = threading.Lock()  # parallel runs write the journal from many threads

    def hit(events: list[Any]) -> bool:
        nonlocal seen
        with lock:
            for event in events:
                if kind in ("any", event.kind):
                    seen += 1
                    if seen == n:
                        return True
        return False

    def wrap(real: Callable[..., Any], rows: Callable[..., list[Any]]) -> Callable[..., Any]:
        def wrapper(*args: Any) -> Any:
            mine = hit(rows(*args))
            if mine and before:
                die()
            out = real(*args)
            if mine and not before:
                die()
            return out

        return wrapper

    store.append = wrap(store.append, lambda event: [event])
    store.append_batch = wrap(store.append_batch, list)
    # Rows held for a run's end are durable in the commit that ends it (`finish`'s `held`), and
    # a one-act run's first act in the commit that creates it (`create_run`'s `more`): they
    # count there, as above (the end row and `run_started` themselves, as before, do not).
    store.finish = wrap(store.finish, lambda *a: list(a[7]) if len(a) > 7 else [])
    store.create_run = wrap(store.create_run, lambda _info, _first, more=(): list(more))


def report(run: Callable[[], Any]) -> None:
    """Run, then print `{"result": ...}`; or `{"error", "message"}` and exit 3 (4 if another
    process holds the run's lease)."""
    try:
        result = run()
    except daybook.RunLeased as exc:
        print(json.dumps({"leased": str(exc)}))
        sys.exit(4)
    except daybook.DaybookError as exc:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
        sys.exit(3)
    print(json.dumps({"result": result}))
