"""A run's timeline: the view that draws every step of one run as a bar on the lane of its kind
(decisions and model calls, effects, waits and gates, transactions, subtasks, obligations), from
its first journal row (an intent, a reservation, a wait set) to its last (an outcome, a verdict,
a transaction's end), coloured by what became of it, with the run's executions marked (started,
crashed, resumed, paused, retried, recovered, ended). It owns how journal rows become bars and
marks (`bars_of`), the page shell (a table of counts readable without script) and the compact
JSON `static/timeline.js` draws with ECharts; the rows of one bar come from the same endpoint
with `&bar=N`.

Nothing here writes; a timeline is a read of the journal (`Daybook.journal`), safe on a live
run. The page's shell and its JSON (asked for at once, the page preloads it) and each bar's rows
need the same model: the latest few are kept (`_built`), by the journal they were built from. A
bar's index is its place in the order of its first row, so bars already drawn keep their index
while a live run appends rows.
"""

from __future__ import annotations

import json
import threading
from collections import Counter, OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..book import Daybook
from ..journal.decision import RESERVED, is_model_call
from ..journal.keys import COMP
from ..records import Event, Kind, Status
from . import views
from .html import Markup, esc, join, link, status, table, tag

LANES = (
    "decisions and model calls",
    "effects",
    "waits and gates",
    "transactions",
    "subtasks",
    "obligations",
)
DECISIONS, EFFECTS, WAITS, TRANSACTIONS, SUBTASKS, OBLIGATIONS = range(len(LANES))

# What became of a step. `resolved`: its outcome was unknown (a crash, a timeout) and later
# settled as confirmed; `compensated`: confirmed, then undone by its inverse (or its
# transaction aborted); `superseded`: a journal branch (a retry after a fix, a recovery, a
# fork) ran the step again, these rows are history; `open`: in flight, waiting or owed.
STATUSES = ("confirmed", "resolved", "failed", "unknown", "compensated", "superseded", "open", "cancelled")
CONFIRMED, RESOLVED, FAILED, UNKNOWN, COMPENSATED, SUPERSEDED, OPEN, CANCELLED = range(len(STATUSES))

# The columns of a bar and of a mark in the JSON (arrays, not objects: a 10,000-step run's
# data stays small and parses fast).
BAR_COLUMNS = ("lane", "status", "start", "end", "first_seq", "last_seq", "step", "name", "rows", "track")
MAX_TRACKS = 4  # rows within a lane for bars that overlap (more overlap shares the last ones)
MARK_COLUMNS = ("kind", "at", "seq", "text")
ROW_COLUMNS = ("seq", "step", "kind", "name", "key", "status", "attempt", "at", "data")
NOTABLE = 100  # steps not confirmed the page lists (for a reader without script)
ROW_DATA_MAX = 4000  # characters of one row's data the panel shows (the run page shows it all)
_PLACES = 5  # decimals of the seconds sent (10 microseconds)

_ENDS = {
    Kind.RUN_COMPLETED.value: "completed",
    Kind.RUN_FAILED.value: "failed",
    Kind.RUN_CANCELLED.value: "cancelled",
    Kind.RUN_EXPIRED.value: "expired",
    Kind.RUN_ATTENTION.value: "needs attention",
    Kind.RUN_PAUSED.value: "paused",
}
# The status of a wait or an obligation by its latest row's (else it is open).
_WAITING: dict[str, dict[str, int]] = {
    Kind.TIMER.value: {"fired": CONFIRMED},
    Kind.SIGNAL.value: {"received": CONFIRMED, "timeout": FAILED},
    Kind.OBLIGATION.value: {"fulfilled": CONFIRMED, "cancelled": CANCELLED},
}
_STOPS = frozenset({*_ENDS.values(), "retried", "recovered"})
_IN_FLIGHT = "in flight when the process that sent it stopped"  # journal/lifecycle.py


@dataclass
class Bar:
    lane: int
    name: str
    step: int | None
    rows: list[Event] = field(default_factory=list)
    status: int = OPEN
    closed: bool = False  # a journal branch superseded it: a later row of its step starts anew


@dataclass
class Mark:
    kind: str
    at: float
    seq: int
    text: str


@dataclass
class Timeline:
    bars: list[Bar]
    marks: list[Mark]
    start: float
    end: float


def lane_of(ev: Event) -> int:
    """The lane of a stepped row by its kind and name."""
    if ev.kind in (Kind.INTENT, Kind.ATTEMPT, Kind.OUTCOME):
        return EFFECTS
    if ev.kind in (Kind.TIMER, Kind.SIGNAL):
        return WAITS
    if ev.kind == Kind.OBLIGATION:
        return OBLIGATIONS
    if ev.name.startswith("tx:"):
        return TRANSACTIONS
    if ev.name in ("child", "child-result") or ev.name.startswith("subtask:"):
        return SUBTASKS
    if ev.name.startswith("gate:"):
        return WAITS
    return DECISIONS


class _Builder:
    """Folds journal rows, in order, into bars and marks."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.bars: list[Bar] = []
        self.marks: list[Mark] = []
        self.by_step: dict[int, Bar] = {}  # the current bar of each step
        self.soft: set[int] = set()  # steps a branch re-runs only if asked for another act
        self.named: dict[str, Bar] = {}  # transactions by tx_id, children by run id, obligations by id
        self.gates: list[Bar] = []  # gates waiting for their verdict, latest last
        self.last: Event | None = None

    def add(self, ev: Event) -> None:
        if ev.step is None:
            self._unstepped(ev)
        else:
            self._stepped(ev)
        self.last = ev

    # -- rows without a step: the run's life ---------------------------------------------------

    def _unstepped(self, ev: Event) -> None:
        data = ev.data
        if ev.kind == Kind.RUN_STARTED:
            if data.get("supersede") is not None:
                self._supersede(ev, [int(s) for s in data["supersede"]], set())
                self._mark("forked", ev, f"forked from {data.get('fork_of') or 'its parent'}")
            elif ev.run_id == self.run_id:
                self._mark("started", ev, f"started by {data.get('by') or 'unknown'}")
        elif ev.kind == Kind.RUN_RETRIED:
            steps = [int(s) for s in data.get("supersede") or ()]
            if steps:
                self._supersede(ev, steps, {int(s) for s in data.get("soft") or ()})
                how = "recovered" if data.get("recovery") else "retried"
                self._mark(how, ev, f"{how} by {data.get('by')}: steps {_steps(steps)} run again")
            else:
                self._mark("retried", ev, f"retried by {data.get('by')} (was {data.get('from')})")
        elif ev.kind == Kind.RUN_REPLAYED:
            # A new execution (after a crash, a suspend, a transaction's retry): a crash found
            # next (`_crashed`) turns this mark into the resume.
            calls = int(float(data.get("calls") or 0))
            self._mark("replayed", ev, f"an execution began again, replaying {calls} model call(s)")
        elif ev.kind in _ENDS:
            self._mark(_ENDS[ev.kind], ev, _ENDS[ev.kind] + (f" by {data['by']}" if data.get("by") else ""))
        elif ev.kind == Kind.TX_RELEASED:
            self._mark("released", ev, f"transaction {data.get('tx_id')} released by {data.get('by')}")

    def _mark(self, kind: str, ev: Event, text: str) -> None:
        self.marks.append(Mark(kind, ev.at, ev.seq, text))

    def _supersede(self, ev: Event, steps: list[int], soft: set[int]) -> None:
        """A journal branch: the steps listed run again; a soft one (a confirmed effect) only if
        the re-run asks for another act (a later row of that step), else it is replayed."""
        for step in steps:
            bar = self.by_step.get(step)
            if bar is None:
                continue
            if step in soft:
                self.soft.add(step)
            else:
                bar.status, bar.closed = SUPERSEDED, True

    # -- rows of a step --------------------------------------------------------------------------

    def _stepped(self, ev: Event) -> None:
        assert ev.step is not None
        step = ev.step
        current = self.by_step.get(step)
        if current is not None and step in self.soft:
            self.soft.discard(step)
            current.status, current.closed = SUPERSEDED, True
        if current is not None and not current.closed:
            current.rows.append(ev)
            self._settle(current, ev)
            return
        bar = self._joined(ev)
        if bar is None:
            bar = Bar(lane_of(ev), _name(ev), step, [ev])
            self.bars.append(bar)
            self._open(bar, ev)
        else:
            bar.rows.append(ev)
        self.by_step[step] = bar
        self._settle(bar, ev)

    def _joined(self, ev: Event) -> Bar | None:
        """The bar of another step this row belongs to: a transaction's later rows join its
        begin, a child's result its start, a gate's verdict its request, a fulfilment its
        obligation. Never a bar a journal branch superseded: the branch's rows are its own."""
        value = ev.data.get("value")
        found: Bar | None = None
        if ev.kind == Kind.DECISION and ev.name.startswith("tx:") and ev.name != "tx:begin":
            found = self.named.get("tx:" + str(value.get("tx_id"))) if isinstance(value, dict) else None
        elif ev.kind == Kind.DECISION and ev.name == "child-result" and isinstance(value, dict):
            found = self.named.get("child:" + str(value.get("run_id")))
        elif ev.kind == Kind.SIGNAL and ev.name.startswith("signal:verdict:") and self.gates:
            found = self.gates.pop()
        elif ev.kind == Kind.OBLIGATION and ev.data.get("obligation"):
            found = self.named.get("obligation:" + str(ev.data["obligation"]))
        return None if found is None or found.closed else found

    def _open(self, bar: Bar, ev: Event) -> None:
        value = ev.data.get("value")
        if ev.name == "tx:begin" and isinstance(value, dict):
            bar.name = f"transaction {value.get('tx_id')} (attempt {value.get('attempt', 1)})"
            self.named["tx:" + str(value.get("tx_id"))] = bar
        elif ev.name == "child" and isinstance(value, dict):
            bar.name = f"child run {value.get('run_id')}"
            self.named["child:" + str(value.get("run_id"))] = bar
        elif ev.name.startswith("gate:"):
            self.gates.append(bar)
        elif ev.kind == Kind.OBLIGATION:
            self.named[f"obligation:{ev.run_id}/{ev.step}"] = bar

    def _settle(self, bar: Bar, ev: Event) -> None:
        """The bar's status after row `ev`."""
        if ev.kind == Kind.OUTCOME:
            self._outcome(bar, ev)
        elif ev.kind == Kind.DECISION:
            self._decision(bar, ev)
        elif ev.kind in _WAITING:
            bar.status = _WAITING[ev.kind].get(ev.status or "", OPEN)
        else:  # an intent or an attempt: the act is in flight
            bar.status = OPEN

    def _outcome(self, bar: Bar, ev: Event) -> None:
        if ev.status == Status.UNKNOWN and ev.data.get("reason") == _IN_FLIGHT:
            self._crashed(bar, ev)
        bar.status = _effect_status(bar, ev)
        if ev.status == Status.CONFIRMED and ev.key and ev.key.startswith(COMP):
            undone = self._effect_of(ev.key[len(COMP) :])
            if undone is not None:
                undone.status = COMPENSATED

    def _decision(self, bar: Bar, ev: Event) -> None:
        value = ev.data.get("value")
        if ev.status == RESERVED:
            if len(bar.rows) >= 2 and bar.rows[-2].status == RESERVED and not self._stopped(bar.rows[-2]):
                self._crashed(bar, ev)  # reserved again: the call before never completed
            bar.status = OPEN
        elif bar.rows[0].name == "tx:begin":  # a transaction attempt: open until its end
            bar.status = _tx_status(ev, bar.status)
        elif ev.name == "child-result" and isinstance(value, dict):
            bar.status = CONFIRMED if value.get("status") == "completed" else FAILED
        elif ev.name.startswith("gate:"):
            bar.status = OPEN  # its verdict (a signal row) settles it
        else:
            if is_model_call(ev) and ev.status == Status.RECORDED:
                bar.name = _name(ev)  # the model is named in the completion's row
            bar.status = FAILED if ev.status == Status.FAILED else CONFIRMED

    def _stopped(self, since: Event) -> bool:
        """Whether the run stopped on purpose after row `since` (parked, paused, retried...):
        then a step begun again is not the mark of a crash."""
        for mark in reversed(self.marks):
            if mark.seq <= since.seq:
                return False
            if mark.kind in _STOPS:
                return True
        return False

    def _effect_of(self, key: str) -> Bar | None:
        for bar in reversed(self.bars):
            if bar.lane == EFFECTS and bar.rows and bar.rows[0].key == key:
                return bar
        return None

    def _crashed(self, bar: Bar, ev: Event) -> None:
        """The process that wrote the bar's previous row stopped before its next: mark its last
        row as the crash and the first row of the next execution as the resume."""
        before = self.last
        if before is not None and before.kind == Kind.RUN_REPLAYED:
            # The next execution's first row was its replay tally: it resumed there.
            resumed_at: Event = before
            if self.marks and self.marks[-1].seq == before.seq:
                self.marks.pop()
            before = None
        else:
            resumed_at = ev
        dead = bar.rows[-2] if len(bar.rows) >= 2 else before
        if dead is not None:
            self._mark("crashed", dead, f"the process stopped during step {bar.step} ({bar.name})")
        self._mark("resumed", resumed_at, f"resumed: step {bar.step} ({bar.name}) was found in flight")


def _effect_status(bar: Bar, ev: Event) -> int:
    if ev.status == Status.CONFIRMED:
        was_unknown = any(r.kind == Kind.OUTCOME and r.status == Status.UNKNOWN for r in bar.rows)
        return RESOLVED if was_unknown else CONFIRMED
    if ev.status == Status.FAILED:
        return FAILED if ev.data.get("final", True) else OPEN
    if ev.status == Status.UNKNOWN:
        return UNKNOWN
    return OPEN


def _tx_status(ev: Event, before: int) -> int:
    value = ev.data.get("value")
    if ev.name != "tx:end" or not isinstance(value, dict):
        return before
    return {"committed": CONFIRMED, "aborted": COMPENSATED, "stuck": FAILED}.get(
        str(value.get("status")), before
    )


def _name(ev: Event) -> str:
    """A bar's name: the step's, with the model that answered for a model call."""
    if ev.kind == Kind.DECISION and is_model_call(ev):
        for part in ("why", "usage", "value"):
            found = ev.data.get(part)
            if isinstance(found, dict) and found.get("model"):
                return f"{ev.name} ({found['model']})"
    return ev.name


def _steps(steps: list[int]) -> str:
    shown = ", ".join(str(s) for s in steps[:8])
    return shown + (f" and {len(steps) - 8} more" if len(steps) > 8 else "")


# The timelines built last, by (store, run, rows, last seq and its time): the journal is
# append-only, so the same number of rows ending at the same row are the same rows, and the model
# built from them is the same (the time tells a store file deleted and made again apart).
# Building it was about 40% of the view's time on a 10,000-step run, done once for the shell and
# again for its JSON (and again for each bar clicked).
_KEEP = 4
_BUILT: OrderedDict[tuple[int, str, str, int, int, float], Timeline] = OrderedDict()
_BUILT_LOCK = threading.Lock()


def _built(book: Daybook, run_id: str, events: list[Event]) -> Timeline:
    """The timeline of `events` (the whole journal of `run_id`), built once for that journal."""
    last = (events[-1].seq, events[-1].at) if events else (0, 0.0)
    key = (id(book.store), book.store.url, run_id, len(events), *last)
    with _BUILT_LOCK:
        found = _BUILT.get(key)
        if found is not None:
            _BUILT.move_to_end(key)
            return found
    made = build(run_id, events)
    with _BUILT_LOCK:
        _BUILT[key] = made
        while len(_BUILT) > _KEEP:
            _BUILT.popitem(last=False)
    return made


def build(run_id: str, events: list[Event]) -> Timeline:
    """The bars and marks of a run's journal (`events`, in order)."""
    builder = _Builder(run_id)
    for ev in events:
        builder.add(ev)
    start = events[0].at if events else 0.0
    end = events[-1].at if events else 0.0
    return Timeline(builder.bars, builder.marks, start, end)


# -- the page ------------------------------------------------------------------------------------


def shell(book: Daybook, run_id: str, query: Mapping[str, str]) -> Markup:
    """The chart's place, the rows panel, and (for a reader without script) the counts of bars
    by lane and status and the list of the run's marks."""
    tl = _built(book, run_id, book.journal(run_id))
    notable = [(i, b) for i, b in enumerate(tl.bars) if b.status != CONFIRMED][:NOTABLE]
    href = views.data_href(run_id, "timeline")
    # The data is fetched while the chart library loads (the script asks for the same URL and
    # gets this response): a 10,000-step run's JSON takes about as long as the library.
    preload = Markup(f'<link rel="preload" as="fetch" crossorigin="anonymous" href="{esc(href)}">')
    return join(
        [
            preload,
            _controls(),
            tag("div", "", id="timeline-chart", role="img", aria_label=f"timeline of run {run_id}"),
            tag(
                "section",
                tag("h2", "Rows"),
                tag("p", "Click a bar to see its journal rows."),
                id="timeline-rows",
            ),
            tag(
                "section",
                tag("h2", "Steps by lane and status"),
                tag("p", f"{len(tl.bars)} bars, {len(tl.marks)} marks."),
                _summary(tl),
                tag("h2", "Executions"),
                _marks_table(tl),
                tag("h2", "Steps not confirmed"),
                tag("p", f"The first {NOTABLE} of them." if len(notable) == NOTABLE else ""),
                _notable_table(notable, href) if notable else tag("p", "None: every step was confirmed."),
                id="timeline-table",
            ),
        ]
    )


def _controls() -> Markup:
    """The x axis buttons (time or journal order) and how to zoom, pan and open a bar."""
    return tag(
        "p",
        "x axis: ",
        tag("button", "time", type="button", id="axis-time", data_axis="time"),
        " ",
        tag("button", "journal order", type="button", id="axis-order", data_axis="order"),
        " (scroll or drag to zoom and pan; click a bar for its rows)",
        id="timeline-controls",
    )


def _summary(tl: Timeline) -> Markup:
    """Per lane, how many bars ended in each status seen (the statuses no bar has left out)."""
    counts = Counter((b.lane, b.status) for b in tl.bars)
    used = [s for s in range(len(STATUSES)) if any(counts[(lane, s)] for lane in range(len(LANES)))]
    return table(
        ["lane", *(STATUSES[s] for s in used), "bars"],
        (
            [name, *(counts[(lane, s)] for s in used), sum(counts[(lane, s)] for s in range(len(STATUSES)))]
            for lane, name in enumerate(LANES)
        ),
        id="timeline-summary",
    )


def _marks_table(tl: Timeline) -> Markup:
    """The run's marks in order: seq, time since the start, kind, what."""
    return table(
        ["seq", "at", "mark", "what"],
        ([m.seq, f"+{m.at - tl.start:.3f}s", m.kind, m.text] for m in tl.marks),
        id="timeline-marks",
    )


def _notable_table(notable: list[tuple[int, Bar]], href: str) -> Markup:
    """The steps not confirmed, each with a link to its rows as JSON."""
    return table(
        ["step", "lane", "name", "status", "rows", ""],
        (
            [
                "" if b.step is None else b.step,
                LANES[b.lane],
                b.name,
                status(STATUSES[b.status]),
                f"{b.rows[0].seq} to {b.rows[-1].seq}",
                link(f"{href}&bar={i}", "its rows (JSON)"),
            ]
            for i, b in notable
        ),
        id="timeline-notable",
    )


def data(book: Daybook, run_id: str, query: Mapping[str, str]) -> Any:
    """The bars and marks as arrays (`BAR_COLUMNS`, `MARK_COLUMNS`), or with `bar=N` the rows of
    bar N (`ROW_COLUMNS`)."""
    events = book.journal(run_id)
    tl = _built(book, run_id, events)
    if "bar" in query:
        return _rows_of(tl, query["bar"])
    names: dict[str, int] = {}
    bars = []
    ends: list[list[int]] = [[] for _ in LANES]  # per lane, the last seq on each track
    for b in tl.bars:
        first, last = b.rows[0], b.rows[-1]
        running = b.status in (OPEN, UNKNOWN) and not b.closed
        end = tl.end if running else last.at
        last_seq = events[-1].seq if running else last.seq
        bars.append(
            [
                b.lane,
                b.status,
                round(first.at - tl.start, _PLACES),
                round(end - tl.start, _PLACES),
                first.seq,
                last_seq,
                b.step,
                names.setdefault(b.name, len(names)),
                len(b.rows),
                _track(ends[b.lane], first.seq, last_seq),
            ]
        )
    info = book.get_run(run_id)
    return {
        "run": run_id,
        "status": info.status,
        "start": tl.start,
        "end": round(tl.end - tl.start, _PLACES),
        "last_seq": events[-1].seq if events else 0,
        "lanes": list(LANES),
        "tracks": [max(len(t), 1) for t in ends],
        "statuses": list(STATUSES),
        "names": list(names),
        "bar_columns": list(BAR_COLUMNS),
        "bars": bars,
        "mark_columns": list(MARK_COLUMNS),
        "marks": [[m.kind, round(m.at - tl.start, _PLACES), m.seq, m.text] for m in tl.marks],
    }


def _track(ends: list[int], first: int, last: int) -> int:
    """The track within its lane a bar spanning rows `first` to `last` goes on: the first one
    free by then (bars come in the order of their first row), a new one while fewer than
    MAX_TRACKS, else the one that frees first. Rows are in time order, so bars apart in rows
    are apart in time too."""
    for i, end in enumerate(ends):
        if end < first:
            ends[i] = last
            return i
    if len(ends) < MAX_TRACKS:
        ends.append(last)
        return len(ends) - 1
    i = min(range(len(ends)), key=ends.__getitem__)
    ends[i] = max(ends[i], last)
    return i


def _rows_of(tl: Timeline, which: str) -> dict[str, Any]:
    if not (which.isascii() and which.isdigit()) or int(which) >= len(tl.bars):
        raise ValueError(f"bar={which!r}: give a bar's number, 0 to {len(tl.bars) - 1}")
    bar = tl.bars[int(which)]
    rows = []
    for ev in bar.rows:
        text = json.dumps(ev.data, ensure_ascii=False, indent=1, default=str)
        if len(text) > ROW_DATA_MAX:
            text = text[:ROW_DATA_MAX] + f"\n... ({len(text)} characters; the run page shows all)"
        rows.append(
            [
                ev.seq,
                ev.step,
                ev.kind,
                ev.name,
                ev.key,
                ev.status,
                ev.attempt,
                round(ev.at - tl.start, _PLACES),
                text,
            ]
        )
    return {
        "bar": int(which),
        "name": bar.name,
        "lane": LANES[bar.lane],
        "status": STATUSES[bar.status],
        "row_columns": list(ROW_COLUMNS),
        "rows": rows,
    }


VIEW = views.register(views.View("timeline", "Timeline", shell, data, "timeline.js"))
