"""Semantic recovery (DART) in daybook: roll back only the failed subtask, to a checkpoint nothing
committed depends on.

A scheduler resolves three slots (slot[1] reads slot[0]), sends the invitation (irreversible),
then goes back to slot[0] to confirm it with the calendar, which refuses once. Restoring slot[0]'s
entry would undo the value slot[1] and the invitation were built on, so recovery restores its
commit checkpoint instead: one action runs again, nothing upstream, the invitation is not re-sent.

    python examples/semantic_recovery.py [DB_URL]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import daybook

CONFIRMED: list[str] = []  # the calendar's own books
INVITATIONS: list[str] = []  # the mail server's own books
REFUSALS = [1]  # the calendar refuses the first confirmation (a stale cache)
SLOT = daybook.Skeleton("ResolveSlot", outputs=("{entity}",))


@daybook.tool(idempotent=True, irreversible=False)
def confirm(slot: str, hour: int, idempotency_key: str) -> str:
    if REFUSALS:
        REFUSALS.pop()
        raise RuntimeError("calendar cache stale: confirmation refused")
    CONFIRMED.append(f"{slot}@{hour}")
    return CONFIRMED[-1]


@daybook.tool(irreversible=True)
def invite(hours: dict[str, int], idempotency_key: str) -> None:
    INVITATIONS.append(f"{hours} ({idempotency_key})")


@daybook.workflow
def schedule(ctx: daybook.Context) -> dict[str, object]:
    hours: dict[str, int] = {}
    with ctx.subtask(SLOT, "slot[0]") as u:  # entry checkpoint of ResolveSlot::slot[0]::0
        hours["slot[0]"] = ctx.decide("pick", lambda: 9).value
        u.commit(**{"slot[0]": hours["slot[0]"]})  # commit checkpoint: slot[0] is stable
    with ctx.subtask(SLOT, "slot[1]", reads=["slot[0]"]) as u:  # a consumer of slot[0]
        hours["slot[1]"] = ctx.decide("pick", lambda: hours["slot[0]"] + 1).value
        u.exit(**{"slot[1]": hours["slot[1]"]})
    with ctx.subtask(SLOT, "slot[2]", reads=[]) as u:  # reads nothing: declared, so not a consumer
        hours["slot[2]"] = ctx.decide("pick", lambda: 14).value
        u.exit(**{"slot[2]": hours["slot[2]"]})
    ctx.effect(invite, hours=hours)  # irreversible: it went out
    with ctx.subtask(SLOT, "slot[0]") as u:  # slot[0] again (still active): confirm it
        done = ctx.effect(confirm, slot="slot[0]", hour=hours["slot[0]"])
        u.exit()
    return {"hours": hours, "confirmed": done}


def main() -> None:
    url = sys.argv[1] if len(sys.argv) > 1 else f"sqlite:///{Path(tempfile.mkdtemp()) / 'journal.db'}"
    with daybook.Daybook(url) as book:
        try:
            book.run(schedule, run_id="meeting")
        except daybook.RunFailed as exc:
            print(f"the run failed: {exc}")
        plan = book.recover("meeting", dry_run=True)
        for v in plan.verdicts:
            print(f"  checkpoint {v['checkpoint']}: {v['reason']} {v['consumers'] or ''}")
        rec = book.recover("meeting")
        print(
            f"recovered: {rec.action} {rec.instance} at {rec.checkpoint}; replayed {rec.replayed}, "
            f"upstream {rec.upstream}, preserved {rec.preserved}; result {rec.result}"
        )
    print(f"the calendar confirmed {CONFIRMED}; the mail server got {len(INVITATIONS)} invitation(s)")


if __name__ == "__main__":
    main()
