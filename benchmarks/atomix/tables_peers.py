"""The peers the paper lacked: DBOS and LangGraph on the Table 10 and Table 9 workloads as real
No-Tx systems (durable steps with retries, effects immediate), each driven in a subprocess by
peers.py and counted by the same SMTP sink and the same SQLite counter check."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from report import Config, Report, progress
from smtp import SmtpSink
from stats import percent
from workloads import Lab

HERE = Path(__file__).resolve().parent
SYSTEMS = ("dbos", "langgraph")


def _drive(system: str, spec: dict[str, object]) -> dict[str, object] | str:
    """Run peers.py for one system; its JSON result, or why it could not run."""
    env = os.environ | {
        "PYTHONPATH": os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(HERE)) if p)
    }
    try:
        done = subprocess.run(
            [sys.executable, str(HERE / "peers.py"), system, json.dumps(spec)],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return "timed out after 300 s"
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return (done.stderr.strip().splitlines() or ["no output"])[-1]
    result: dict[str, object] = json.loads(lines[-1])
    return result


def _emails(sink: SmtpSink, system: str) -> dict[str, int]:
    sent = [d for d in sink.deliveries() if d.run.startswith(system + "-")]
    per = Counter(d.logical for d in sent)
    return {"delivered": len(sent), "duplicates": sum(c - 1 for c in per.values())}


def table_peers(cfg: Config) -> Report:
    n = cfg.n(15, 3)
    rep = Report(
        "peers",
        f"Peers — DBOS and LangGraph on the Table 10 run ({6 * n} runs, {12 * n} emails expected) "
        "and the Table 9 shared counter (50 ops/agent)",
        [
            "system",
            "leaked",
            "gated",
            "confirmed",
            "duplicates",
            "delivered",
            "failed runs",
            "shared counter correct %",
        ],
        definitions=[
            "as in Table 10 and Table 9; a peer has no release gate, so every delivery is leaked; steps are "
            "retried up to 4 attempts (the peers' own retry), p_post 0.5, the same fault draws as Table 10",
        ],
    )
    if cfg.quick:  # each peer's launch alone takes seconds: --quick leaves them out
        rep.notes.append("Skipped under --quick; run `--only peers`.")
        return rep
    lab = Lab(cfg.pg_url)
    sink = SmtpSink(lab.root / "smtp")
    agents = [2] if cfg.quick else [2, 4, 8]
    try:
        for system in SYSTEMS:
            progress(f"peers: {system} ({6 * n} Table 10 runs, shared counter x{agents})")
            (lab.root / system).mkdir()
            spec = {
                "root": str(lab.root / system),
                "port": sink.port,
                "fps": [0.1, 0.3, 0.5],
                "n": n,
                "agents": agents,
                "t9_runs": cfg.n(2, 1),
            }
            got = _drive(system, spec)
            _peer_rows(rep, system, got, _emails(sink, system), n)
    finally:
        sink.stop()
        lab.close()
    return rep


def _peer_rows(rep: Report, system: str, got: dict[str, object] | str, mail: dict[str, int], n: int) -> None:
    if isinstance(got, str):
        rep.row(system, "—", "—", "—", "—", "—", "—", f"could not run: {got}")
        rep.notes.append(f"{system} did not run: {got}")
        return
    t10, t9 = got["t10"], got["t9"]
    assert isinstance(t10, dict) and isinstance(t9, dict)
    counter = "; ".join(f"x{a}: {percent(v).cell(0)}" for a, v in t9.items())
    rep.row(system, mail["delivered"], 0, 0, mail["duplicates"], mail["delivered"], t10["failed"], counter)
    rep.data[system] = {"t10": t10 | mail, "t9": t9}
    rep.check(mail["delivered"] > 0, f"{system}: every delivery leaks (no gate): {mail['delivered']} leaked")
    rep.check(
        mail["duplicates"] > 0,
        f"{system}: lost replies retried by the peer re-send ({mail['duplicates']} duplicates)",
    )
    worst = max(percent(v).value for v in t9.values())
    rep.check(
        worst <= 5, f"{system}: shared counter ≤ 5% correct at every agent count (highest {worst:.0f}%)"
    )


TABLES = {"peers": table_peers}
