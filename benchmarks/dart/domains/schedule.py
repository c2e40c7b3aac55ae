"""Schedule: calendar slots in SQLite, invitations through daybook's email adapter to an SMTP
server on 127.0.0.1 (the irreversible effect).

`ResolveSlot::p0` picks the first slot and commits it; `ResolveSlot::c0` (the second slot) is
picked after it; three independent slots; `FinalizeSchedule::final` reads the slots and sends the
invitation; then p0's confirmation with the calendar fails once (a stale cache).
"""

from __future__ import annotations

import dart_resources as rs
from cases import Shape

from . import Domain, Fsm

SHAPE = Shape(
    "sched",
    "ResolveSlot",
    "ResolveSlot",
    "ResolveSlot",
    "FinalizeSchedule",
    official=4,
    commit=7,
    dep=1,
    effect=1,
    others=3,
)

_R = ["SLOT_PENDING", "QUERYING", "WAITING_SLOT_SELECTION", "WAITING_SLOT_REFINEMENT"]
_F = ["REVIEW_READY", "SENDING", "SENT", "DONE"]
FSM = Fsm(
    transitions=[
        ("SLOT_PENDING", "QUERYING"),
        ("QUERYING", "WAITING_SLOT_SELECTION"),
        ("WAITING_SLOT_SELECTION", "WAITING_SLOT_REFINEMENT"),
        ("WAITING_SLOT_REFINEMENT", "QUERYING"),
        ("WAITING_SLOT_REFINEMENT", "SLOT_READY"),
        ("WAITING_SLOT_REFINEMENT", "REVIEW_READY"),
        ("WAITING_SLOT_REFINEMENT", "DONE"),
        ("WAITING_SLOT_SELECTION", "SLOT_READY"),
        ("SLOT_READY", "SLOT_PENDING"),
        ("SLOT_READY", "REVIEW_READY"),
        ("REVIEW_READY", "SENDING"),
        ("SENDING", "SENT"),
        ("SENT", "DONE"),
        ("REVIEW_READY", "SLOT_PENDING"),
    ],
    skeletons={
        "ResolveSlot": {
            "states": _R,
            "commits": ["WAITING_SLOT_REFINEMENT"],
            "resolved": ["WAITING_SLOT_REFINEMENT"],
        },
        "FinalizeSchedule": {"states": _F, "commits": ["SENT"], "resolved": ["SENT"]},
    },
    open_edges=[("WAITING_SLOT_SELECTION", "SLOT_READY")],
)


def setup(workdir: str) -> rs.Counterparty:
    db = f"{workdir}/sched.db"
    rs.create(db)
    sink = rs.Sink().start()
    res = {"db": db, "smtp_host": "127.0.0.1", "smtp_port": str(sink.port)}
    return rs.Counterparty(res, sink.stop, sink)


DOMAIN = Domain("sched", "Schedule", SHAPE, setup, effect_audit=True, prefix_audit=False, llm=True, fsm=FSM)
