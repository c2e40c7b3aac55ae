"""The transactions view of a run (`/runs/RUN?view=transactions`): who holds which scope, who
waits on whom and for how long (a waits-for graph: an arrow from each open transaction to the
earlier open one on an overlapping scope it waits for, as `daybook frontiers` reads the store's
headers), and each of the run's attempts: its epoch, its stage (begun, calls staged or held,
committing, aborting) and how it ended (committed, aborted, stuck), row by row from its journal.

The graph shows the run's own open attempts and every open transaction linked to them through
waits (the holders it waits for, the waiters behind it), each with its run's status and lease.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ..book import Daybook
from ..records import JSON, Event, Kind
from ..tx.frontier import frontiers
from .html import Markup, join, payload, status, table, tag, when
from .views import Query, View, register

ROWS = 500  # attempts a page shows (the latest); `daybook tx RUN` lists every one
STAGES = {
    "tx:begin": "begin",
    "tx:stage": "stage",
    "tx:commit": "commit",
    "tx:abort": "abort",
    "tx:end": "end",
}


def data(book: Daybook, run_id: str, query: Query) -> dict[str, Any]:
    """The run's attempts with their journal rows, and the waits-for graph around them."""
    book.get_run(run_id)
    now = time.time()
    every = book.transactions(run_id)
    attempts = every[-ROWS:]
    rows = _rows_by_tx(book.journal(run_id))
    held = frontiers(book.store)
    # Every open header once (its run, epoch, since when), and the waits among them.
    open_tx: dict[str, dict[str, Any]] = {}
    for row in book.store.tx_rows(open_only=True):
        open_tx[row[0]] = {
            "tx_id": row[0],
            "run_id": row[1],
            "epoch": row[2],
            "scopes": json.loads(row[3]),
            "status": row[4],
            "since": row[7],
        }
    waits: dict[tuple[str, str], list[str]] = {}
    for f in held:
        for w in f["waiting"]:
            waits.setdefault((w["tx_id"], f["held_by"]["tx_id"]), []).append(f["scope"])
    shown = _linked({t["tx_id"] for t in attempts if t["tx_id"] in open_tx}, waits)
    nodes = []
    for tx_id in sorted(shown, key=lambda t: open_tx[t]["epoch"] if t in open_tx else 0):
        head = open_tx.get(tx_id)
        if head is None:
            continue  # ended between the two reads
        info = book.store.get_run(head["run_id"])
        waiting = [h for (w, h) in waits if w == tx_id]
        nodes.append(
            {
                **head,
                "mine": head["run_id"] == run_id,
                "waits_for": waiting,
                "role": "waiting" if waiting else "holding",
                "open_for": max(now - float(head["since"] or now), 0.0),
                "run_status": info.status if info else None,
                "lease_owner": info.lease_owner if info else None,
                "lease_expires": info.lease_expires if info else None,
            }
        )
    edges = [
        {
            "from": w,
            "to": h,
            "scopes": scopes,
            "waited": max(now - float(open_tx[w]["since"] or now), 0.0),
        }
        for (w, h), scopes in waits.items()
        if w in shown and h in shown and w in open_tx
    ]
    scopes = [
        f for f in held if f["held_by"]["tx_id"] in shown or any(w["tx_id"] in shown for w in f["waiting"])
    ]
    for f in scopes:
        for w in f["waiting"]:
            since = open_tx.get(w["tx_id"], {}).get("since")
            w["waited"] = max(now - float(since), 0.0) if since else None
    return {
        "run": run_id,
        "now": now,
        "attempts": [
            {**t, "stage": _stage(t, rows.get(str(t["tx_id"]), [])), "rows": rows.get(str(t["tx_id"]), [])}
            for t in attempts
        ],
        "nodes": nodes,
        "edges": edges,
        "scopes": scopes,
        "total": len(every),
    }


def _linked(start: set[str], waits: dict[tuple[str, str], list[str]]) -> set[str]:
    """`start` and every transaction reachable from it by waits, either way."""
    seen = set(start)
    todo = list(start)
    while todo:
        t = todo.pop()
        for w, h in waits:
            for other in (h if w == t else None, w if h == t else None):
                if other is not None and other not in seen:
                    seen.add(other)
                    todo.append(other)
    return seen


def _rows_by_tx(events: list[Event]) -> dict[str, list[dict[str, JSON]]]:
    """Each attempt's own journal rows (begin, each staged or held call, commit or abort, end;
    a release or a leaving), by tx id."""
    out: dict[str, list[dict[str, JSON]]] = {}
    for ev in events:
        raw = ev.data.get("value")
        value: dict[str, Any] = raw if isinstance(raw, dict) else {}
        tx_id = value.get("tx_id") or ev.data.get("tx_id")
        if not tx_id or (ev.kind == Kind.DECISION and ev.name not in STAGES):
            continue
        row: dict[str, JSON] = {
            "seq": ev.seq,
            "step": ev.step,
            "stage": STAGES.get(ev.name, ev.kind),
            "at": ev.at,
        }
        if ev.name == "tx:begin":
            row["epoch"] = ev.data.get("epoch")
            row["attempt"] = value.get("attempt")
        elif ev.name == "tx:stage":
            row.update(tool=value.get("tool"), key=value.get("key"), treatment=value.get("treatment"))
        elif ev.name in ("tx:commit", "tx:abort", "tx:end"):
            row["status"] = value.get("status")
            if value.get("error"):
                row["error"] = (
                    (value["error"] or {}).get("message")
                    if isinstance(value["error"], dict)
                    else value["error"]
                )
            if "retry" in value:
                row["retry"] = value.get("retry")
        else:
            row.update({k: ev.data[k] for k in ("by", "reason", "status") if k in ev.data})
        out.setdefault(str(tx_id), []).append(row)
    return out


def _stage(attempt: dict[str, JSON], rows: list[dict[str, JSON]]) -> str:
    """Where an attempt is: its ending, or for an open one what its body has done so far."""
    if attempt["status"] != "open":
        return str(attempt["status"])
    staged = [r for r in rows if r["stage"] == "stage"]
    held = [r for r in staged if r.get("treatment") == "held"]
    if held:
        return f"holding {len(held)} call(s), {len(staged) - len(held)} buffered"
    if staged:
        return f"{len(staged)} call(s) staged"
    return "begun"


def shell(book: Daybook, run_id: str, query: Query) -> Markup:
    """The waits (who waits on whom, since when), the scopes held, and the run's attempts."""
    found = data(book, run_id, query)
    nodes = {n["tx_id"]: n for n in found["nodes"]}
    waits = [
        [
            _who(nodes.get(e["from"])),
            "waits for",
            _who(nodes.get(e["to"])),
            ", ".join(e["scopes"]),
            f"{e['waited']:.1f}s",
        ]
        for e in found["edges"]
    ]
    held = [
        [
            f["scope"],
            f["frontier"],
            join(
                [
                    tag("code", f["held_by"]["tx_id"]),
                    f" (run {f['held_by']['run_id']}, {f['held_by']['status']})",
                ]
            ),
            join(
                tag(
                    "div",
                    tag("code", w["tx_id"]),
                    f" epoch {w['epoch']} (run {w['run_id']})",
                    f", waiting {w['waited']:.1f}s" if w.get("waited") is not None else "",
                )
                for w in f["waiting"]
            )
            or "nobody",
        ]
        for f in found["scopes"]
    ]
    attempts = [
        [
            tag("code", t["tx_id"]),
            t["epoch"],
            f"{t['attempt']}/{int(t['retries'] or 0) + 1}",
            payload(t["scopes"]),
            status(str(t["status"])),
            t["stage"],
            join(tag("div", _row_text(r)) for r in t["rows"]),
            when(t["created_at"]),
            when(t["updated_at"]),
        ]
        for t in found["attempts"]
    ]
    return join(
        [
            tag("h2", "Waits"),
            tag("div", id="transactions-chart", class_="chart", role="img", aria_label="who waits on whom"),
            table(["waiting", "", "holder", "on scopes", "waited"], waits, id="tx-waits")
            if waits
            else tag("p", "No transaction of this run waits, and none waits on it.", id="tx-waits"),
            tag("h2", "Scopes held"),
            table(["scope", "frontier (epoch)", "held by", "waiting"], held, id="tx-scopes")
            if held
            else tag("p", "This run holds no scope now.", id="tx-scopes"),
            tag("h2", "Attempts"),
            tag("p", f"the latest {ROWS} of {found['total']} attempts; `daybook tx {run_id}` lists all")
            if found["total"] > ROWS
            else "",
            table(
                [
                    "transaction",
                    "epoch",
                    "attempt",
                    "scopes",
                    "status",
                    "stage",
                    "rows",
                    "began",
                    "last change",
                ],
                attempts,
                id="tx-attempts",
            )
            if attempts
            else tag("p", "This run opened no transaction.", id="tx-attempts"),
        ]
    )


def _who(node: dict[str, Any] | None) -> Markup:
    if node is None:
        return Markup("?")
    lease = f", lease {node['lease_owner']}" if node.get("lease_owner") else ""
    return join(
        [
            tag("code", node["tx_id"]),
            f" epoch {node['epoch']} (run {node['run_id']} ",
            status(str(node["run_status"])),
            f"{lease})",
        ]
    )


def _row_text(row: dict[str, JSON]) -> str:
    stage = str(row["stage"])
    extra = {k: v for k, v in row.items() if k not in ("seq", "step", "stage", "at") and v not in (None, "")}
    said = " ".join(f"{k}={v}" for k, v in extra.items())
    return f"#{row['seq']} {stage} {said}".rstrip()


VIEW = register(View("transactions", "Transactions", shell, data, "transactions.js"))
