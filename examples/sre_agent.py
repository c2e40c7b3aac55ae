"""An SRE agent that restarts a service only behind an approval gate (replay mode: payments-like:
skip completed effects; the restart is keyed by its decision, so a crash never restarts twice).

    python examples/sre_agent.py            # runs the whole story against a local ops API

The agent observes the error rate, the (scripted) model proposes `restart_service`, the policy
gates it for on-call, the run suspends (no process held) until on-call approves through
`daybook approve`, the precondition (still failing?) is re-checked, then the restart happens once.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Any

import daybook
from daybook.demo.agent import http_json, status_of
from daybook.demo.bank import Bank

ERROR_RATE = {"api": 0.12}  # what monitoring reports; the ops API below is the counterparty


@daybook.tool(reconcile=status_of("restarts", url_arg="ops"))
def restart_service(*, ops: str, service: str, idempotency_key: str) -> Any:
    return http_json("POST", f"{ops}/restarts", {"service": service}, idempotency_key)


def _reply(prompt: str) -> str:
    asked = json.loads(prompt)
    if asked["restarted"]:
        return json.dumps({"tool": "stop"})
    return json.dumps(
        {
            "tool": "restart_service",
            "args": {"ops": asked["observation"]["ops"], "service": "api"},
            "why": "error rate above 5% for 10 minutes",
        }
    )


def agent(ops: str) -> daybook.AgentLoop:
    return daybook.AgentLoop(
        llm=daybook.ScriptedLLM(_reply, model="scripted-sre-1"),
        tools={"restart_service": restart_service},
        observe=lambda: {"error_rate": ERROR_RATE["api"], "ops": ops},
        prompt=lambda goal, obs, history: json.dumps(
            {
                "goal": goal,
                "observation": obs,
                "restarted": any(h.get("state") == "done" for h in history),
            }
        ),
        verify=lambda action, fresh: fresh["error_rate"] > 0.05,  # still broken after the wait?
        judge=lambda goal, history: daybook.Judgement(
            passed=any(h.get("state") == "done" for h in history), note="restart issued"
        ),
        policy=daybook.Policy(gated=["restart_service"], approvers=["oncall"], gate_timeout=15 * 60),
    )


@daybook.workflow(name="sre_incident")
def sre_incident(ctx: daybook.Context, ops: str) -> dict[str, Any]:
    return agent(ops).run(ctx, "bring api error rate under 5%").as_dict()


def main() -> int:
    db = os.environ.get("DAYBOOK_DB") or f"sqlite:///{tempfile.mkdtemp()}/sre.db"
    with Bank() as ops, daybook.Daybook(db, inline_wait=0.2) as book:
        token = book.add_approver("oncall")
        try:
            book.run(sre_incident, ops.url, run_id="incident-42")
        except daybook.Suspended as exc:
            print(f"[1] {exc}")
        for gate in book.approvals():
            print(f"[2] waiting: {gate['action']} (gate {gate['gate_id']}); on-call approves")
            book.approve(
                "incident-42",
                str(gate["gate_id"]),
                approver="oncall",
                token=token,
                reason="confirmed on the dashboard",
            )
        result = book.resume("incident-42")
        print(
            f"[3] outcome {result['outcome']}; restarts executed by the ops API: "
            f"{ops.stats()['executed'].get('restarts', 0)}"
        )
        return 0 if result["outcome"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
