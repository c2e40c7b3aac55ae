"""Navigation: POI search and route planning against an HTTP service on 127.0.0.1.

The producer resolves a stop (search POIs, choose one) and commits it; a downstream stop plans
from it and records its leg with the service; an independent stop is planned; then finalizing the
first stop's route fails once with the service's cache refresh (a 500 by default).
"""

from __future__ import annotations

import dart_resources as rs
from cases import Shape

from . import Domain, Fsm

SHAPE = Shape(
    "nav", "ResolveStop", "PlanLeg", "ResolveOther", None, official=4, commit=8, dep=1, effect=0, post=0
)

_S = ["IDLE", "WAITING_QUERY", "SEARCHING", "WAITING_POI_SELECTION", "WAITING_QUERY_REFINEMENT"]
_L = ["LEG_PENDING", "ROUTING", "ROUTES_PLANNED"]
_F = ["FINALIZING", "ROUTE_CONFIRMED", "DONE"]
FSM = Fsm(
    transitions=[
        ("IDLE", "WAITING_QUERY"),
        ("WAITING_QUERY", "SEARCHING"),
        ("SEARCHING", "WAITING_POI_SELECTION"),
        ("SEARCHING", "WAITING_QUERY_REFINEMENT"),
        ("WAITING_POI_SELECTION", "WAITING_QUERY_REFINEMENT"),
        ("WAITING_QUERY_REFINEMENT", "SEARCHING"),
        ("WAITING_QUERY_REFINEMENT", "STOP_READY"),
        ("WAITING_QUERY_REFINEMENT", "ROUTES_PLANNED"),
        ("WAITING_QUERY_REFINEMENT", "DONE"),
        ("WAITING_POI_SELECTION", "STOP_READY"),
        ("STOP_READY", "LEG_PENDING"),
        ("LEG_PENDING", "ROUTING"),
        ("ROUTING", "ROUTES_PLANNED"),
        ("ROUTES_PLANNED", "FINALIZING"),
        ("ROUTING", "LEG_PENDING"),
        ("FINALIZING", "ROUTE_CONFIRMED"),
        ("ROUTE_CONFIRMED", "DONE"),
        ("FINALIZING", "ROUTES_PLANNED"),
    ],
    skeletons={
        "ResolveStop": {
            "states": _S,
            "commits": ["WAITING_QUERY_REFINEMENT"],
            "resolved": ["WAITING_QUERY_REFINEMENT"],
        },
        "PlanLeg": {"states": _L, "commits": ["ROUTES_PLANNED"], "resolved": ["ROUTES_PLANNED"]},
        "FinalizeRoute": {"states": _F, "commits": ["ROUTE_CONFIRMED"], "resolved": ["ROUTE_CONFIRMED"]},
    },
    open_edges=[("WAITING_POI_SELECTION", "STOP_READY")],
)


def setup(workdir: str) -> rs.Counterparty:
    db = f"{workdir}/nav.db"
    rs.create(db)
    svc = rs.Service(db).start()
    return rs.Counterparty({"url": svc.url, "db": db}, svc.stop)


DOMAIN = Domain("nav", "Navigation", SHAPE, setup, effect_audit=False, prefix_audit=False, llm=True, fsm=FSM)
