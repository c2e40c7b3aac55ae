"""The scripted agent: one daybook workflow that plays a case's script, and its tools.

A case is data (`Case.blocks`): subtask instances in execution order, each a list of ops
(decide, effect, mail, commit, exit). The "planner" is the script, so the same case runs the same
way under every recovery policy; the only nondeterminism is the world (a stale cache refreshed
when a fault fires). Decisions sleep a seeded think delay (the stand-in for LLM time) and are
counted: each live decision or effect after a failure is one the paper's agent would re-take.
"""

from __future__ import annotations

import json
import math
import random
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import dart_resources as rs

import daybook
from daybook import Context, Skeleton
from daybook.adapters.email import Outbox

SENDER = "dartb@daybook.test"


@dataclass
class Think:
    """The per-decision delay (lognormal around `d` seconds, seeded) and the live-action count."""

    d: float = 0.0
    seed: int = 0
    sigma: float = 0.25
    live: int = 0
    rng: random.Random = field(default_factory=random.Random)

    def reset(self, d: float, seed: int, sigma: float = 0.25) -> None:
        self.d, self.seed, self.sigma, self.live = d, seed, sigma, 0
        self.rng = random.Random(seed)

    def pause(self) -> None:
        self.live += 1
        if self.d > 0:
            time.sleep(self.d * math.exp(self.rng.gauss(0.0, self.sigma)))


THINK = Think()


def _http(url: str, path: str, body: dict[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url + path, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=rs.TIMEOUT_S) as resp:
        return json.loads(resp.read())["result"]  # a body without it: KeyError (missing field)


def query(res: dict[str, str], run: str, entity: str) -> list[str]:
    """The producer's query: candidates for `entity` at the counterparty's current data."""
    THINK.pause()
    if "url" in res:
        return list(_http(res["url"], f"/candidates?run={run}&entity={entity}"))
    return rs.candidates(entity, rs.version(res["db"], run))


def choose(res: dict[str, str], run: str, cands: list[str]) -> str:
    THINK.pause()
    return cands[0]


def derive(res: dict[str, str], run: str, entity: str, *inputs: str) -> str:
    """A consumer's decision built on what it read."""
    THINK.pause()
    return f"{entity}<-" + "+".join(inputs)


def step(res: dict[str, str], run: str, entity: str, n: int) -> str:
    """A filler planning step (look at a form field, a check result, a file listing)."""
    THINK.pause()
    return f"{entity}#{n}"


DECIDERS: dict[str, Callable[..., Any]] = {"query": query, "choose": choose, "derive": derive, "step": step}


def _post(res: dict[str, str], path: str, body: dict[str, Any]) -> str:
    THINK.pause()
    if "url" in res:
        return str(_http(res["url"], path, body))
    raw = rs.trip(res["db"], body["run"], body.get("site", ""))
    if raw is not None:
        rs.raise_raw(raw, body.get("site", path))
    out = rs.store(res["db"], path.strip("/"), body)
    if "files" in res and path == "/confirm":  # ETL: the load also lands as a file
        with open(f"{res['files']}/{body['run']}.{body['entity']}.out", "w") as fh:
            fh.write(body["value"])
    return out


def _record(
    *, res: dict[str, str], run: str, site: str, entity: str, value: str, based_on: str, idempotency_key: str
) -> str:
    body = {"run": run, "site": site, "entity": entity, "value": value, "based_on": based_on}
    return _post(res, "/record", {**body, "key": idempotency_key})


def _confirm(
    *, res: dict[str, str], run: str, site: str, entity: str, value: str, idempotency_key: str
) -> str:
    body = {"run": run, "site": site, "entity": entity, "value": value, "key": idempotency_key}
    return _post(res, "/confirm", body)


def _act(*, res: dict[str, str], run: str, site: str, what: str, body: str, idempotency_key: str) -> str:
    return _post(res, "/act", {"run": run, "site": site, "what": what, "body": body, "key": idempotency_key})


def register(prefix: str) -> dict[str, Any]:
    """The domain's tools under names of its own (the tool registry is global): consumer records
    (idempotent upserts), the producer's confirmation, and an irreversible act."""
    return {
        "record": daybook.tool(name=f"dartb_{prefix}_record", idempotent=True, irreversible=False)(_record),
        "confirm": daybook.tool(name=f"dartb_{prefix}_confirm", idempotent=True, irreversible=False)(
            _confirm
        ),
        "act": daybook.tool(name=f"dartb_{prefix}_act", irreversible=True)(_act),
    }


TOOLS: dict[str, dict[str, Any]] = {p: register(p) for p in ("nav", "sched", "diag", "etl", "travel")}


def _val(a: Any, env: dict[str, Any]) -> Any:
    return env[a[1:]] if isinstance(a, str) and a.startswith("$") else a


def play(ctx: Context, u: Any, op: dict[str, Any], env: dict[str, Any], spec: dict[str, Any]) -> None:
    """One op of the script."""
    kind, res, run = op["op"], spec["res"], spec["run"]
    args = [_val(a, env) for a in op.get("args", [])]
    if kind == "decide":
        env[op["out"]] = ctx.decide(op["name"], DECIDERS[op["fn"]], res, run, *args).value
    elif kind == "effect":
        kw = {k: _val(v, env) for k, v in op["kw"].items()}
        env[op.get("out", "_")] = ctx.effect(TOOLS[spec["domain"]][op["tool"]], res=res, run=run, **kw)
    elif kind == "mail":
        box = Outbox(res["smtp_host"], int(res["smtp_port"]), SENDER)
        box.queue(
            ctx, op["to"], op["subject"], f"run={run}; " + json.dumps([_val(a, env) for a in op["args"]])
        )
        box.release(ctx)
    elif u is not None and kind in ("commit", "exit"):
        getattr(u, kind)(**{k: env[k] for k in op["keys"]})


@daybook.workflow(name="dartb_case")
def dartb_case(ctx: Context, spec: dict[str, Any]) -> dict[str, Any]:
    """Play a case's script; `spec["plain"]`: the same ops without subtask bookkeeping (T11)."""
    env: dict[str, Any] = {}
    for block in spec["blocks"]:
        if spec.get("plain"):
            for op in block["ops"]:
                play(ctx, None, op, env, spec)
            continue
        skel = Skeleton(block["skel"], outputs=tuple(block.get("outputs", ("{entity}",))))
        with ctx.subtask(skel, block["entity"], reads=block.get("reads", [])) as u:
            for op in block["ops"]:
                play(ctx, u, op, env, spec)
    env.pop("_", None)
    return env
