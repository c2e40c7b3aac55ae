"""Diagnosis: checks and a repair endpoint with a durable effect, on an HTTP service on 127.0.0.1.

The producer resolves which check explains the fault and commits it; the repair plan built on it
records its repair with the service (a durable, irreversible act); an independent check runs;
then the producer's verification step and its confirmation, which fails once (a stale reading).
"""

from __future__ import annotations

import dart_resources as rs
from cases import Shape

from . import Domain, Fsm

SHAPE = Shape(
    "diag",
    "ResolveCheck",
    "PlanRepair",
    "RunCheck",
    None,
    official=4,
    commit=6,
    dep=1,
    effect=1,
    post=1,
    act_effect=True,
)

_C = ["SYMPTOM", "CHECK_PENDING", "CHECKING", "WAITING_CHECK_SELECTION", "WAITING_CHECK_REFINEMENT"]
_R = ["REPAIR_PENDING", "REPAIRING", "REPAIRED"]
_V = ["VERIFYING", "VERIFIED", "DONE"]
FSM = Fsm(
    transitions=[
        ("SYMPTOM", "CHECK_PENDING"),
        ("CHECK_PENDING", "CHECKING"),
        ("CHECKING", "WAITING_CHECK_SELECTION"),
        ("WAITING_CHECK_SELECTION", "WAITING_CHECK_REFINEMENT"),
        ("WAITING_CHECK_REFINEMENT", "CHECKING"),
        ("WAITING_CHECK_REFINEMENT", "CAUSE_READY"),
        ("WAITING_CHECK_REFINEMENT", "REPAIR_PENDING"),
        ("WAITING_CHECK_REFINEMENT", "DONE"),
        ("WAITING_CHECK_SELECTION", "CAUSE_READY"),
        ("CAUSE_READY", "REPAIR_PENDING"),
        ("REPAIR_PENDING", "REPAIRING"),
        ("REPAIRING", "REPAIRED"),
        ("REPAIRED", "VERIFYING"),
        ("VERIFYING", "VERIFIED"),
        ("VERIFIED", "DONE"),
        ("VERIFYING", "CHECKING"),
    ],
    skeletons={
        "ResolveCheck": {
            "states": _C,
            "commits": ["WAITING_CHECK_REFINEMENT"],
            "resolved": ["WAITING_CHECK_REFINEMENT"],
        },
        "PlanRepair": {"states": _R, "commits": ["REPAIRED"], "resolved": ["REPAIRED"]},
        "VerifyRepair": {"states": _V, "commits": ["VERIFIED"], "resolved": ["VERIFIED"]},
    },
    open_edges=[("WAITING_CHECK_SELECTION", "CAUSE_READY")],
)


def setup(workdir: str) -> rs.Counterparty:
    db = f"{workdir}/diag.db"
    rs.create(db)
    svc = rs.Service(db).start()
    return rs.Counterparty({"url": svc.url, "db": db}, svc.stop)


DOMAIN = Domain("diag", "Diagnosis", SHAPE, setup, effect_audit=True, prefix_audit=False, llm=True, fsm=FSM)
