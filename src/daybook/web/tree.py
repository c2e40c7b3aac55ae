"""The run tree view (`/runs/RUN?view=tree`): every run that belongs with a run, and the
branches inside each, as one graph with a status per node.

Each relation is read where the store keeps it, never guessed from a name alone:

- a child (`ctx.child`) names its parent in its header (`parent_run`);
- a continue-as-new segment `R~n` is the run its predecessor's result hands on to
  (`{daybook.continued_as: R~n}`), checked on that predecessor;
- a fork's first row names the run and step it branches from (`fork_of`, `at`);
- a recovery run (workflow `daybook.recover`: a recovery's or a fork's undos) names the run it
  undoes for in its header (`parent_run`) and input (`recovers`);
- inside a run: a speculation is its `tx:speculate` row (the branches), `tx:cut` and `tx:choose`
  (cut and winner) and each branch's transaction header (committed or aborted); a journal branch
  of a recovery or a retry is a `run_retried` row with `supersede`; a steering revision is a
  `revisions` signal row.

Upward, every link is one read. Downward, children and recovery runs are one indexed query per
run (`parent`); forks are found by their default id (`R~fork-...`) and, for a fork given an id
of its own, among the latest `FORK_SCAN` runs of the same workflow started after the tree's
root (a fork always knows its origin; the origin keeps no list of its forks).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from ..book import Daybook
from ..records import Event, Kind, RunInfo, RunStatus
from ..recovery.undo import WORKFLOW as RECOVER_WORKFLOW
from ..runtime.chain import next_id
from ..runtime.fork import FORK_OF
from ..store import Store
from ..tx.frontier import listing
from ..tx.speculate import BLOCK, CUT, SPECULATE
from . import views
from .html import Markup, join, link, status, table, tag
from .pages import run_href

MAX_RUNS = 500  # runs one tree shows; past it the view says how many it left out
FORK_SCAN = 200  # runs of a workflow read for forks given an id of their own
_SEGMENT = re.compile(r"^(.*)~(\d+)$")
_UNDO = re.compile(r"^~(?:recover(\d+)|undo@(\d+))$")  # `recovery.undo.run_id_of`, `forking.undo_run_id`


@dataclass
class Node:
    """One node of the tree: a run, or a branch inside one. `parent` is the node it belongs to
    (None: the root); `relation` says how (child, segment, fork, recovery, speculation, ...)."""

    id: str
    kind: str  # run | speculation | branch | journal-branch | revision
    label: str
    status: str
    relation: str
    parent: str | None
    href: str
    run_id: str
    detail: str = ""
    current: bool = False
    children: list[Node] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["children"] = [c.as_dict() for c in self.children]
        return out


def _first(store: Store, run_id: str) -> Event | None:
    rows = store.load(run_id, 0, 1)
    return rows[0] if rows else None


def up(store: Store, info: RunInfo, first: Event | None) -> tuple[str, str, str] | None:
    """How `info` belongs to another run: (relation, that run, detail); None for a root."""
    data = first.data if first is not None and first.kind == Kind.RUN_STARTED else {}
    origin = data.get(FORK_OF)
    if isinstance(origin, str):
        took = " (took over its later steps)" if data.get("supersede") is not None else ""
        return "fork", origin, f"fork at step {data.get('at')}{took}"
    if info.workflow == RECOVER_WORKFLOW and info.parent_run:
        undo = _UNDO.match(info.run_id.removeprefix(info.parent_run))
        why = (
            f"a fork at step {undo.group(2)}"
            if undo and undo.group(2)
            else f"recovery {undo.group(1)}"
            if undo
            else "a recovery"
        )
        return "recovery", info.parent_run, f"undoes acts of {info.parent_run} for {why}"
    found = _SEGMENT.match(info.run_id)
    if found:
        n = int(found.group(2))
        before = found.group(1) if n == 2 else f"{found.group(1)}~{n - 1}"
        prev = store.get_run(before)
        if prev is not None and prev.status == RunStatus.COMPLETED and next_id(prev.result) == info.run_id:
            return "segment", before, f"continue-as-new segment {n}"
    if info.parent_run:
        return "child", info.parent_run, "child of " + info.parent_run
    return None


def root_of(store: Store, run_id: str) -> str:
    """The top of the tree `run_id` belongs to, following every upward link."""
    seen = [run_id]
    current = run_id
    while len(seen) < MAX_RUNS:
        info = store.get_run(current)
        if info is None:
            break
        link_up = up(store, info, _first(store, current))
        if link_up is None or link_up[1] in seen or store.get_run(link_up[1]) is None:
            break
        current = link_up[1]
        seen.append(current)
    return current


class _Scan:
    """The reads that find forks, each done once per tree: the runs with a fork's default id
    (`R~fork-...`) and, per workflow, its latest FORK_SCAN runs (a fork keeps its origin's
    workflow), both since the root started."""

    def __init__(self, store: Store, since: float) -> None:
        self.store, self.since = store, since
        self.default_ids = store.runs_page({"text": "~fork-", "since": since}, MAX_RUNS)
        self.by_workflow: dict[str, list[RunInfo]] = {}

    def forks_of(self, info: RunInfo) -> list[RunInfo]:
        if info.workflow not in self.by_workflow:
            self.by_workflow[info.workflow] = self.store.search_runs(
                {"workflow": info.workflow, "since": self.since}, FORK_SCAN
            )
        named = [r for r in self.default_ids if r.run_id.startswith(info.run_id + "~fork-")]
        return named + [r for r in self.by_workflow[info.workflow] if r.created_at >= info.created_at]


def _below(store: Store, info: RunInfo, scan: _Scan) -> list[RunInfo]:
    """The runs that may belong directly under `info` (each checked by `up` afterwards)."""
    found = {r.run_id: r for r in store.search_runs({"parent": info.run_id}, MAX_RUNS)}
    after = next_id(info.result) if info.status == RunStatus.COMPLETED else None
    if after:
        nxt = store.get_run(after)
        if nxt is not None:
            found[after] = nxt
    for r in scan.forks_of(info):
        found.setdefault(r.run_id, r)
    return [r for r in found.values() if r.run_id != info.run_id]


def tree(book: Daybook, run_id: str) -> tuple[Node, int]:
    """The tree `run_id` belongs to, from its root; and how many runs were left out (MAX_RUNS)."""
    store = book.store
    root_id = root_of(store, run_id)
    info = book.get_run(root_id)
    root = _run_node(store, info, None, run_id)
    nodes = {root_id: root}
    todo = [info]
    scan = _Scan(store, info.created_at)
    links: dict[str, tuple[str, str, str] | None] = {}  # each candidate's upward link, read once
    left_out = 0
    while todo:
        here = todo.pop(0)
        for cand in sorted(_below(store, here, scan), key=lambda r: (r.created_at, r.run_id)):
            if cand.run_id in nodes:
                continue
            if cand.run_id not in links:
                links[cand.run_id] = up(store, cand, _first(store, cand.run_id))
            link_up = links[cand.run_id]
            if link_up is None or link_up[1] != here.run_id:
                continue
            if len(nodes) >= MAX_RUNS:
                left_out += 1
                continue
            relation, _, detail = link_up
            node = _run_node(store, cand, (relation, detail, here.run_id), run_id)
            nodes[cand.run_id] = node
            nodes[here.run_id].children.append(node)
            todo.append(cand)
    return root, left_out


def _run_node(store: Store, info: RunInfo, above: tuple[str, str, str] | None, current: str) -> Node:
    relation, detail, parent = above if above is not None else ("root", "", None)
    node = Node(
        id=info.run_id,
        kind="run",
        label=info.run_id,
        status=info.status,
        relation=relation,
        parent=parent,
        href=run_href(info.run_id),
        run_id=info.run_id,
        detail=detail or info.workflow,
        current=info.run_id == current,
    )
    node.children.extend(inside(store, info.run_id, store.load(info.run_id)))
    return node


def inside(store: Store, run_id: str, events: list[Event]) -> list[Node]:
    """The branches inside a run's journal: speculations (with their branches), journal
    branches (recoveries, retries) and steering revisions, in journal order."""
    out: list[Node] = []
    decisions = {ev.step: ev for ev in events if ev.kind == Kind.DECISION and ev.step is not None}
    txs: list[dict[str, Any]] | None = None
    for ev in events:
        if ev.kind == Kind.DECISION and ev.name == SPECULATE and ev.step is not None:
            if txs is None:
                txs = listing(store, run_id)
            out.append(_speculation(run_id, ev, events, decisions, txs))
        elif ev.kind == Kind.RUN_RETRIED and ev.data.get("supersede"):
            out.append(_journal_branch(run_id, ev))
        elif ev.kind == Kind.SIGNAL and ev.name == "revisions" and ev.step is not None:
            out.append(_revision(run_id, ev))
    return out


def _speculation(
    run_id: str, ev: Event, events: list[Event], decisions: dict[int, Event], txs: list[dict[str, Any]]
) -> Node:
    step = int(ev.step or 0)
    names = [str(n) for n in (ev.data.get("value") or {}).get("branches") or []]
    cut_step = step + (len(names) + 1) * BLOCK
    cut_row = decisions.get(cut_step)
    cut = (
        [str(n) for n in cut_row.data.get("value") or []]
        if cut_row is not None and cut_row.name == CUT
        else []
    )
    chose = decisions.get(cut_step + 1)
    winner = chose.data.get("value") if chose is not None and chose.name == "tx:choose" else None
    nid = f"{run_id}#spec{step}"
    node = Node(
        id=nid,
        kind="speculation",
        label=f"speculation at step {step}",
        status="chosen" if winner is not None else "running",
        relation="speculation",
        parent=run_id,
        href=run_href(run_id),
        run_id=run_id,
        detail=f"{len(names)} branches" + (f", {winner!s} chosen" if winner is not None else ""),
    )
    group = f"{run_id}/spec/{step}/"
    for i, name in enumerate(names):
        first, last = step + (i + 1) * BLOCK, step + (i + 2) * BLOCK
        tx = [
            t
            for t in txs
            if str(t["tx_id"]).startswith(group) and _in_block(str(t["tx_id"]), group, first, last)
        ]
        steps = len({ev.step for ev in events if ev.step is not None and first <= ev.step < last})
        if winner is None:
            state = "running"
        elif name == winner:
            state = "won"
        elif name in cut:
            state = "cut"
        else:
            state = "lost"
        tx_state = f", transaction {tx[-1]['status']}" if tx else ""
        node.children.append(
            Node(
                id=f"{nid}/{name}",
                kind="branch",
                label=f"branch {name}",
                status=state,
                relation="speculation branch",
                parent=nid,
                href=run_href(run_id),
                run_id=run_id,
                detail=f"steps from {first}{tx_state}" + f"; {steps} steps",
            )
        )
    return node


def _in_block(tx_id: str, group: str, first: int, last: int) -> bool:
    tail = tx_id[len(group) :]
    return tail.isdigit() and first <= int(tail) < last


def _journal_branch(run_id: str, ev: Event) -> Node:
    branch = int(ev.data.get("branch") or 1)
    rec = ev.data.get("recovery")
    steps = list(ev.data.get("supersede") or [])
    if isinstance(rec, dict) and rec.get("action") == "restore":
        label, state = f"recovery {branch}: restore at {rec.get('checkpoint')}", "restored"
        detail = f"{rec.get('instance')} ({rec.get('policy')})"
    elif isinstance(rec, dict):
        label, state = f"recovery {branch}: re-run", "rerun"
        detail = f"whole task ({rec.get('policy')}: {rec.get('reason')})"
    else:
        label, state, detail = f"retry {branch}", "retried", f"by {ev.data.get('by')}"
    return Node(
        id=f"{run_id}#r{branch}",
        kind="journal-branch",
        label=label,
        status=state,
        relation="journal branch",
        parent=run_id,
        href=views.href(run_id, "recovery", branch=f"r{branch}"),
        run_id=run_id,
        detail=f"{detail}; steps {_span(steps)} run again",
    )


def _revision(run_id: str, ev: Event) -> Node:
    revs = [r for r in ev.data.get("revisions") or [] if isinstance(r, dict)]
    said = "; ".join(f"{r.get('kind')} {str(r.get('text'))[:40]!r}" for r in revs)
    return Node(
        id=f"{run_id}#s{ev.step}",
        kind="revision",
        label=f"revision at step {ev.step}",
        status="conflict" if ev.data.get("conflicts") else "read",
        relation="steering revision",
        parent=run_id,
        href=views.href(run_id, "recovery", branch=f"s{ev.step}"),
        run_id=run_id,
        detail=said + (" by " + ", ".join(sorted({str(r.get("author")) for r in revs})) if revs else ""),
    )


def _span(steps: list[Any]) -> str:
    nums = sorted(int(s) for s in steps)
    if not nums:
        return "-"
    if nums == list(range(nums[0], nums[-1] + 1)) and len(nums) > 2:
        return f"{nums[0]}-{nums[-1]}"
    return ", ".join(map(str, nums))


def flat(root: Node, depth: int = 0) -> Iterable[tuple[Node, int]]:
    """The nodes parents first (depth first, in the order they were found), with their depth."""
    yield root, depth
    for child in root.children:
        yield from flat(child, depth + 1)


def data(book: Daybook, run_id: str, query: views.Query) -> dict[str, Any]:
    root, left_out = tree(book, run_id)
    return {"run": run_id, "root": root.as_dict(), "left_out": left_out}


def shell(book: Daybook, run_id: str, query: views.Query) -> Markup:
    root, left_out = tree(book, run_id)
    nodes = list(flat(root))
    rows = [
        [
            tag(
                "span",
                Markup("&nbsp;" * 3 * depth),
                link(n.href, n.label),
                tag("strong", " (this run)") if n.current else "",
                class_=f"tree-kind-{n.kind}",
            ),
            n.relation,
            status(n.status),
            n.detail,
        ]
        for n, depth in nodes
    ]
    runs = sum(1 for n, _ in nodes if n.kind == "run")
    note = f" ({left_out} more runs left out)" if left_out else ""
    return join(
        [
            tag(
                "p",
                f"{runs} runs and {len(nodes) - runs} branches in the tree of ",
                link(run_href(root.id), root.id),
                note,
                ". Click a node for its page.",
                id="tree-summary",
            ),
            tag("div", "", id="tree-chart", class_="tree-chart"),
            table(["node", "relation", "status", "detail"], rows, id="tree-nodes"),
        ]
    )


views.register(views.View("tree", "Run tree", shell, data, "tree.js"))
