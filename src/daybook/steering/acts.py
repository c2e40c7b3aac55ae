"""Messages people send a run by name, through the one identity rule (`gates.identity`).

A signal (`book.signal`, `daybook signal`), an update (`book.update`) and a budget raise
(`book.raise_budget`, `daybook budget --raise`) each name who sends it. A registered approver's
name needs its key (a signal: any role; an update or a budget raise: `operator`), else
`NotAuthorized` and nothing is sent; any other name is taken as given. Either way the inbox row
stores the payload beside the identity record (`journal.wait.envelope`), and the run journals it
when it reads the message, with `authenticated` as the approvers file checks it then.
"""

from __future__ import annotations

from ..coordination.budget import paused_at, paused_below
from ..errors import ConfigError
from ..gates import identity
from ..records import JSON
from ..runtime.claim import Claims
from ..runtime.inbox import Identify, send

# The inbox name of a budget raise (`coordination.budget` waits for it).
BUDGET_RAISE = "budget:raise"


def identify(claims: Claims, name: str | None, token: str | None, role: str | None) -> Identify:
    """The identity rule for one message: called by `send` once the message is known valid
    (the name and key themselves are checked now)."""
    identity.check(name, token)

    def who(run_id: str, act: str) -> tuple[str, JSON]:
        return identity.actor(claims.store, name, token, act, run_id, role)

    return who


def signal(
    claims: Claims, run_id: str, name: str, payload: JSON, sender: str | None, token: str | None
) -> int:
    """Send signal `name`; a registered approver's name as `sender` needs its `token`."""
    return send(claims, run_id, name, payload, sender, identify=identify(claims, sender, token, None))


def raise_budget(
    claims: Claims, run_id: str, amounts: dict[str, float], by: str | None, token: str | None
) -> int:
    """Raise caps of a run by `amounts` (and wake the runs below it waiting at its cap); a
    registered approver's name as `by` needs its `token` and the operator role."""
    if not amounts or any(not _positive(v) for v in amounts.values()):
        raise ConfigError("raise_budget needs positive amounts, e.g. usd=10")
    who = identify(claims, by, token, identity.ROLE)
    events = claims.store.load(run_id)
    owner = paused_at(events)
    if owner is not None and paused_at(events, woken=True) is None:
        # A run only its parent continues (a LangGraph model call's) waits at an ancestor's cap
        # for no signal: the raise goes to the cap's run, which wakes the one driving it.
        run_id = owner
    sent = send(claims, run_id, BUDGET_RAISE, dict(amounts), by, internal=True, identify=who)
    # The runs below waiting at this run's cap for its tree count the raise from now on
    # (`budget.pending_raises`); each is woken by an empty raise of its own, to look again.
    for below in paused_below(claims.store, run_id, woken=True):
        send(claims, below, BUDGET_RAISE, {}, by, internal=True, identify=who)
    return sent


def _positive(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < float("inf")
