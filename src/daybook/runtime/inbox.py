"""A run's inbox: signals sent from outside, kept in order until a wait consumes them.

Sending a signal to a finished run is refused; sending one to the first segment of a
continue-as-new chain reaches the live segment. A signal wakes a suspended run.
"""

from __future__ import annotations

import getpass
import time

from ..errors import ConfigError
from ..journal.resolution import RESOLVE_SIGNAL
from ..records import JSON, RunInfo, RunStatus, check_json, check_text, dumps
from ..store import Store
from .chain import live
from .claim import Claims

# Names daybook gives its own signals. A plain signal may not take them: a verdict is written only
# by `approve` after the token check, an update by `update`, a budget raise by `raise_budget`.
RESERVED = (
    "verdict:",
    "late-verdict:",
    "refused-verdict:",
    "update:",
    "budget:",
    "pause:",
    "steer:",
    "child:",
    RESOLVE_SIGNAL,
)
# A child run that ended wakes its parent with this signal (`coordination.child`).
CHILD_SIGNAL = "child:"
ENDED = (
    RunStatus.COMPLETED.value,
    RunStatus.FAILED.value,
    RunStatus.CANCELLED.value,
    RunStatus.EXPIRED.value,
)


def notify(store: Store, info: RunInfo) -> None:
    """Wake the parent of a child run that just ended (best effort: the parent also asks)."""
    if info.parent_run is None or info.status not in ENDED:
        return
    body = dumps({"status": info.status}, "child signal")
    store.signal(info.parent_run, CHILD_SIGNAL + info.run_id, body, info.run_id, time.time())


def send(
    claims: Claims,
    run_id: str,
    name: str,
    payload: JSON = None,
    sender: str | None = None,
    *,
    internal: bool = False,
) -> int:
    """Put signal `name` in the live segment's inbox; returns its inbox id. `internal`: one of
    daybook's own (reserved) names, sent by the API that owns it."""
    if not name:
        raise ConfigError("a signal needs a name")
    sender = sender or getpass.getuser()
    check_text(name, "the signal name")
    check_text(sender, f"the sender of signal {name!r}")
    if not internal and name.startswith(RESERVED):
        raise ConfigError(
            f"signal name {name!r} is reserved for daybook's own signals ({', '.join(RESERVED)}); "
            "approve or deny a gate with `daybook approve|deny RUN GATE` (book.approve), send an "
            "update with book.update, raise a budget with `daybook budget RUN --raise`, resolve an "
            "effect with `daybook resolve` (book.resolve)"
        )
    what = f"signal {name!r} payload"
    check_json(payload, what)
    text = dumps(payload, what)
    target = live(claims, run_id)
    while True:
        inbox_id = claims.store.signal(target, name, text, sender, time.time())
        if inbox_id is not None:
            return inbox_id
        # The segment may have handed off (continue-as-new) between the lookup and the send:
        # the signal goes to the next one; only a chain that really ended refuses it.
        newer = live(claims, run_id)
        if newer == target:
            break
        target = newer
    info = claims.get_run(target)  # raises RunNotFound for an unknown id
    raise ConfigError(f"run {target!r} is {info.status}; a finished run takes no more signals")
