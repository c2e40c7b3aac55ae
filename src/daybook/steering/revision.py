"""The revision channel: people steer a live run by addition, revision or retraction.

`book.steer` appends a revision (kind, text, optional target, author) to the run's inbox as a
`steer:` signal: durable, totally ordered, waking a suspended run. The run reads the new ones at a
step boundary with `ctx.revisions()`, a recorded step whose row is the acknowledgement (`steer`
waits for it): it lists what was read and any conflict (a retraction against an addition or a
revision of the same target, now or earlier in the run), never merged silently. The step is
written only when something new arrived, so a run nobody steers journals nothing extra, and
replay mirrors it: at a recorded position the row is read back; at any other it is skipped.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import ConfigError
from ..gates import identity, roster
from ..journal.decision import Decisions
from ..journal.execution import Execution, step_fingerprint
from ..journal.facet import Facet
from ..records import JSON, Kind, Why, check_text
from ..runtime.chain import live
from ..runtime.claim import STEER_SIGNAL, Claims
from ..runtime.inbox import send

PRIMER = "primer"
KINDS = ("add", "revise", "retract")
LABEL = "revisions"


@dataclass(frozen=True)
class Revision:
    """One revision of a run, as the run read it: `kind` add | revise | retract."""

    id: int  # its inbox id: the total order of revisions to this run
    kind: str
    text: str
    author: str
    at: float
    target: str | None = None
    # True only when the revision carries its author's signature and the author is a registered
    # operator (`gates.identity`); any other author is a name taken on trust.
    authenticated: bool = False
    # Whether a retraction may stop a running call and undo confirmed effects: its author is
    # authenticated, or no operator is registered in the approvers file (a deployment without
    # identities keeps retractions as they were). Read and journaled when the run reads it, so
    # replay sees the same answer; True for revisions journaled before this field existed.
    binding: bool = True


class Revisions(Facet):
    """`ctx.revisions()`."""

    def __init__(self, exe: Execution) -> None:
        super().__init__(exe)
        self._steered: list[Revision] = []  # what this execution has read, for the conflicts

    def revisions(self) -> list[Revision]:
        """The revisions sent to this run (`book.steer`, `daybook steer`) since the last call, in
        the order they were sent; [] when none. Reading them is a recorded step (the
        acknowledgement the sender waits for), written only when there is something new."""
        exe = self._exe
        step = exe.next_step
        recorded = exe.steps.get(step)
        if recorded:
            if recorded[0].kind != Kind.SIGNAL or recorded[0].name != LABEL:
                return []  # replay: nothing was read at this point
            exe.alloc()
            exe.expect(step, Kind.SIGNAL, LABEL, recorded[0].fp or "")
            return self._remember(recorded[0].data)
        if step <= exe.recorded_steps or exe.read_only:
            return []
        new = _unread(exe.store, exe.run_id, exe.consumed)
        if not new:
            return []
        step = exe.alloc()
        data: dict[str, JSON] = {
            "inbox_ids": [r.id for r in new],
            "revisions": [asdict(r) for r in new],
            "conflicts": _conflicts(self._steered, new),
        }
        fp = step_fingerprint(None, step, LABEL)
        exe.append(Kind.SIGNAL, step, LABEL, status="received", fp=fp, data=data)
        exe.consume(r.id for r in new)
        return self._remember(data)

    def _remember(self, data: dict[str, Any]) -> list[Revision]:
        got = [Revision(**r) for r in data.get("revisions") or []]
        self._steered.extend(got)
        return got


class Primers(Facet):
    """`ctx.primer`."""

    def __init__(self, exe: Execution, decisions: Decisions) -> None:
        super().__init__(exe)
        self._decisions = decisions

    def primer(self, after: float, summarize: Callable[[float], str]) -> str | None:
        """After a pause longer than `after` seconds, once, at the first step boundary of the
        resumed run: `summarize(paused_seconds)` as a recorded decision `primer` (its text also
        in the decision ledger's note), for the next decision to start from; None otherwise. Like
        `revisions`, the step exists only when a primer was made, and replay mirrors it."""
        exe = self._exe
        step = exe.next_step
        recorded = exe.steps.get(step)
        if recorded:
            if recorded[0].kind != Kind.DECISION or recorded[0].name != PRIMER:
                return None
            return str(self._decisions.decide(PRIMER, summarize, 0.0).value)
        if step <= exe.recorded_steps or exe.read_only:
            return None
        paused_at = exe.take_paused_at()  # once per resume
        if paused_at is None:
            return None
        paused = exe.clock() - paused_at
        if paused <= after:
            return None
        text = str(summarize(paused))
        return str(self._decisions.decide(PRIMER, lambda _: text, 0.0, why=Why(note=text)).value)


def _unread(store: Any, run_id: str, consumed: set[int]) -> list[Revision]:
    new = []
    for inbox_id, name, payload, sender, at in store.inbox(run_id):
        if name != STEER_SIGNAL or inbox_id in consumed:
            continue
        body = json.loads(payload)
        kind, text, target = str(body["kind"]), str(body["text"]), body.get("target")
        sure = signed(store, run_id, sender, body)
        binds = sure or not roster.has_operators(store)
        new.append(Revision(inbox_id, kind, text, sender, at, target, sure, binds))
    return new


def binding(store: Any, run_id: str, sender: str, body: Any) -> bool:
    """Whether a retraction may stop a running call (`Claims.trusted`): signed by a registered
    operator, or sent while no operator is registered (see `Revision.binding`)."""
    return signed(store, run_id, sender, body) or not roster.has_operators(store)


def signed(store: Any, run_id: str, sender: str, body: Any) -> bool:
    """Whether a revision's body carries its sender's signature over its content, and the sender
    is a registered operator: only such a retraction stops a running call or undoes confirmed
    effects (the heartbeat asks through `Claims.trusted`; `AgentLoop` reads `.authenticated`)."""
    if not isinstance(body, dict):
        return False
    target = body.get("target")
    act = _act(str(body.get("kind")), str(body.get("text")), target if isinstance(target, str) else None)
    return identity.verify(store, act, run_id, sender, body.get("identity"))


def _act(kind: str, text: str, target: str | None) -> str:
    """What an author's signature on a revision covers: its content, so it cannot be moved."""
    body = json.dumps([kind, text, target], ensure_ascii=False)
    return f"steer:{hashlib.sha256(body.encode()).hexdigest()[:32]}"


def _conflicts(before: list[Revision], new: list[Revision]) -> list[JSON]:
    """Pairs of revision ids that pull one target two ways: a retraction against an addition or
    a revision of the same target (each new one against all before it)."""
    found: list[JSON] = []
    seen = list(before)
    for rev in new:
        for other in seen:
            opposed = (rev.kind == "retract") != (other.kind == "retract")
            if rev.target is not None and rev.target == other.target and opposed:
                found.append({"ids": [other.id, rev.id], "target": rev.target})
        seen.append(rev)
    return found


def steer(
    claims: Claims,
    run_id: str,
    kind: str,
    text: str,
    *,
    author: str | None,
    target: str | None,
    wait: float,
    token: str | None = None,
) -> dict[str, JSON]:
    """Send a revision and wait up to `wait` seconds for the run to acknowledge it. Returns
    {"id", "acked", "step", "conflicts", "authenticated"}: `step` is where the run read it,
    `conflicts` what the acknowledgement reported about it. An `author` who is a registered
    approver needs its `token` (and the operator role); any other is journaled unauthenticated
    (`gates.identity`)."""
    if kind not in KINDS:
        raise ConfigError(f"a revision is one of {', '.join(KINDS)}, not {kind!r}")
    check_text(text, "the revision text")
    if target is not None:
        check_text(target, "the revision target")
    run_id = live(claims, run_id)
    author, who = identity.actor(claims.store, author, token, _act(kind, text, target), run_id)
    body: JSON = {"kind": kind, "text": text, "target": target, "identity": who}
    inbox_id = send(claims, run_id, STEER_SIGNAL, body, author, internal=True)
    deadline = time.monotonic() + wait
    ack: dict[str, JSON] = {"id": inbox_id, "authenticated": bool(who["authenticated"])}
    while True:
        for ev in claims.store.load(run_id):
            ids = ev.data.get("inbox_ids") if ev.kind == Kind.SIGNAL and ev.name == LABEL else None
            if isinstance(ids, list) and inbox_id in ids:
                mine = [c for c in ev.data.get("conflicts") or [] if inbox_id in c["ids"]]
                return {**ack, "acked": True, "step": ev.step, "conflicts": mine}
        if time.monotonic() >= deadline:
            return {**ack, "acked": False, "step": None, "conflicts": []}
        time.sleep(0.05)
