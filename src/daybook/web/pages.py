"""The inspector's read-only pages: the runs list, a run's timeline and books, the approvals
inbox and the attention panel. Each returns HTML built by `html` (everything escaped); the forms
on them post to `actions`."""

from __future__ import annotations

import re
import time
from datetime import date
from typing import Any
from urllib.parse import quote, urlencode

from ..book import MAX_LIMIT, Daybook
from ..records import Event, Kind, RunInfo, RunStatus
from ..runtime.chain import next_id
from ..workspace.rewind import EDIT
from . import views
from .approvals import gate_section
from .cost import cost_section
from .html import Markup, field, form, join, link, payload, status, table, tag, when

PAGE = 50  # runs per page of the list


def run_href(run_id: str) -> str:
    return "/runs/" + quote(run_id, safe="")


def runs_list(book: Daybook, query: dict[str, str], csrf: str | None) -> Markup:
    """Runs newest first, filtered by status, workflow, text (run id, input, or a key) and
    time; paged. Reads one page of headers and the counts, never every header."""
    text = query.get("q", "")
    keyed = book.store.find_intent(text) if text else None  # the run that made an effect with that key
    filters = {
        "status": query.get("status", ""),
        "workflow": query.get("workflow", ""),
        "text": text,
        "since": _since(query.get("since", "")),
        "run": keyed.run_id if keyed is not None else "",
    }
    page_no = max(int(query.get("page") or 1), 1)
    counts = book.store.run_counts({})
    found = book.store.run_counts(filters) if any(filters.values()) else counts
    total = sum(found.values())
    rows = book.store.runs_page(filters, PAGE, (page_no - 1) * PAGE)
    count_line = tag(
        "p",
        *(
            tag("span", link("/?" + urlencode({"status": s}), status(s)), f" {counts[s]}")
            for s in sorted(counts)
        ),
        class_="counts",
        id="counts",
    )
    form_ = tag(
        "form",
        field("q", "text", value=query.get("q", "")),
        field("workflow", "workflow", value=query.get("workflow", "")),
        tag("label", "status ", _status_select(query.get("status", ""))),
        field("since", "since (YYYY-MM-DD)", value=query.get("since", "")),
        tag("button", "Filter", type="submit"),
        method="get",
        action="/",
    )
    body = table(
        ["run", "workflow", "status", "created", "updated"],
        (
            [
                link(run_href(r.run_id), r.run_id),
                r.workflow,
                status(r.status),
                when(r.created_at),
                when(r.updated_at),
            ]
            for r in rows
        ),
        id="runs",
    )
    return join([count_line, form_, body, _pager(query, page_no, total)])


def _since(text: str) -> float | None:
    """The `since` filter (a local date, as the list shows times) as the time its day starts."""
    if not text:
        return None
    day = date.fromisoformat(text)  # ValueError: a 400 that says so
    return time.mktime(day.timetuple())


def _status_select(chosen: str) -> Markup:
    options = [tag("option", "any", value="")]
    for s in RunStatus:
        options.append(
            Markup(f'<option value="{s.value}"{" selected" if s.value == chosen else ""}>{s.value}</option>')
        )
    return tag("select", *options, name="status")


def _pager(query: dict[str, str], page_no: int, total: int) -> Markup:
    last = max((total + PAGE - 1) // PAGE, 1)
    parts: list[Any] = [f"page {page_no} of {last} ({total} runs) "]
    for label, target in (("previous", page_no - 1), ("next", page_no + 1)):
        if 1 <= target <= last:
            parts.append(link("/?" + urlencode({**query, "page": target}), label))
            parts.append(" ")
    return tag("p", *parts, id="pager")


def run_page(book: Daybook, run_id: str, csrf: str | None, query: dict[str, str] | None = None) -> Markup:
    """A run: its header, the chain, what to do, its timeline (a window of `ROWS` rows: the
    latest, or from `?start=SEQ`) and its books."""
    info = book.get_run(run_id)
    events = book.journal(run_id)
    shown, pager = _window(run_id, events, (query or {}).get("start", ""))
    sections = [
        _header(info),
        views.tabs(run_id),
        _chain(book, info),
        _acts(info, csrf),
        _rewind_form(run_id, events, csrf),
        tag(
            "section",
            tag("h2", "Timeline"),
            pager,
            timeline(shown, events[0].at if events else 0.0),
            id="timeline-section",
        ),
        _effects(book, run_id, csrf),
        gate_section(book, run_id, events),
        _obligations(book, run_id),
        _budget(book, run_id),
        cost_section(book, run_id),
        _transactions(book, run_id),
        _traceback(info),
    ]
    last = events[-1].seq if events else 0
    live = Markup(
        f'<div id="live" data-run="{quote(run_id, safe="")}" data-after="{last}"></div>'
        '<script src="/static/live.js"></script>'
    )
    return join([*sections, live])


def _rewind_form(run_id: str, events: list[Event], csrf: str | None) -> Markup:
    """For a run that edited a checkout (`daybook.Checkout`) and an operator: put its files back
    to after one of its edits, as `daybook rewind RUN --to STEP` (a dry run first, if asked)."""
    edits = sorted(
        {e.step for e in events if e.kind == Kind.INTENT and e.name == EDIT and e.step is not None}
    )
    if csrf is None or not edits:
        return Markup("")
    options = [tag("option", "before the first edit (0)", value="0")]
    options += [
        tag("option", f"after edit {n} (step {step})", value=str(step)) for n, step in enumerate(edits, 1)
    ]
    rewind = form(
        run_href(run_id) + "/rewind",
        csrf,
        tag("label", "to ", tag("select", *options, name="to")),
        tag("label", Markup('<input type="checkbox" name="dry_run" value="1" checked>'), " dry run"),
        tag(
            "label", Markup('<input type="checkbox" name="force" value="1">'), " overwrite changes made since"
        ),
        button="Rewind",
        id="rewind",
    )
    note = tag("p", "Ignored paths (dependencies, .env, build output) are live state: never restored.")
    return tag("section", tag("h2", "Rewind the checkout"), rewind, note, id="rewind-section")


def _header(info: RunInfo) -> Markup:
    return tag(
        "section",
        tag(
            "p",
            "run ",
            tag("code", info.run_id),
            " workflow ",
            tag("code", info.workflow),
            " status ",
            tag("span", status(info.status), id="run-status"),
        ),
        tag(
            "p",
            f"created {when(info.created_at)}, updated {when(info.updated_at)}, "
            f"lease {info.lease_owner or 'free'}, code version {info.code_version or '-'}",
        ),
        tag("p", "input ", payload(info.input)),
        tag("p", "result ", payload(info.result)) if info.result is not None else "",
        tag("p", "error ", payload(_without_trace(info.error))) if info.error else "",
    )


def _without_trace(error: Any) -> Any:
    return {k: v for k, v in error.items() if k != "traceback"} if isinstance(error, dict) else error


_SEGMENT = re.compile(r"^(.*)~(\d+)$")


def _chain(book: Daybook, info: RunInfo) -> Markup:
    """The continue-as-new chain around this segment: the one before, the one after."""
    parts: list[Any] = []
    found = _SEGMENT.match(info.run_id)
    if found:
        n = int(found.group(2))
        before = found.group(1) if n == 2 else f"{found.group(1)}~{n - 1}"
        parts += ["continued from ", link(run_href(before), before), " "]
    after = next_id(info.result) if info.status == RunStatus.COMPLETED else None
    if after:
        parts += ["continued as ", link(run_href(after), after)]
    return tag("p", *parts, class_="chain") if parts else Markup("")


def _acts(info: RunInfo, csrf: str | None) -> Markup:
    """Pause, resume, steer, retry, cancel, raise a budget: what a signed-in operator may do to this run."""
    if csrf is None:
        # Not signed in, signed in without the operator role, or a read-only inspector (its
        # banner says so): no form to post.
        return tag(
            "p",
            link("/login", "Sign in"),
            " as an operator to pause, steer, retry, cancel or raise its budget.",
            id="no-acts",
        )
    base = run_href(info.run_id)
    steer = form(
        base + "/steer",
        csrf,
        Markup(
            '<select name="kind"><option>add</option><option>revise</option><option>retract</option></select>'
        ),
        field("text", "text"),
        field("target", "target"),
        button="Steer",
        id="steer",
    )
    buttons = [
        form(base + "/pause", csrf, button="Pause"),
        form(base + "/resume", csrf, button="Resume"),
        form(base + "/retry", csrf, button="Retry"),
        form(base + "/cancel", csrf, button="Cancel"),
        form(
            base + "/cancel",
            csrf,
            Markup('<input type="hidden" name="compensate" value="1">'),
            button="Cancel and compensate",
        ),
    ]
    budget = form(
        base + "/raise-budget",
        csrf,
        field("quantity", "raise cap", value="usd"),
        field("amount", "by"),
        button="Raise budget",
        id="raise-budget",
    )
    return tag("section", tag("h2", "Act"), *buttons, tag("div", steer), tag("div", budget))


def event_cells(ev: Event, start: float) -> list[Any]:
    """One timeline row: what the journal row says, its data folded when long."""
    return [
        ev.seq,
        "" if ev.step is None else ev.step,
        ev.kind,
        ev.name,
        ev.key or "",
        status(ev.status) if ev.status else "",
        f"+{ev.at - start:.3f}s",
        _why(ev),
    ]


def _why(ev: Event) -> Markup:
    """A row's data, with a decision's reasons first (its why)."""
    data = dict(ev.data)
    reasons = data.pop("why", None) if ev.kind == Kind.DECISION else None
    shown = payload(data) if data else Markup("")
    return join([tag("em", "why: ", payload(reasons), " ") if reasons else "", shown])


ROWS = 500  # journal rows a run page shows at once


def _window(run_id: str, events: list[Event], start_text: str) -> tuple[list[Event], Markup]:
    """The rows to show (the latest ROWS, or ROWS from seq `start`) and links to the others."""
    if len(events) <= ROWS:
        return events, Markup("")
    first = int(start_text) if start_text else events[-1].seq - ROWS + 1
    first = min(max(first, 1), events[-1].seq - ROWS + 1)
    shown = [ev for ev in events if first <= ev.seq < first + ROWS]
    links: list[Any] = [f"rows {first} to {first + len(shown) - 1} of {len(events)} "]
    if first > 1:
        links += [link(f"{run_href(run_id)}?start={max(first - ROWS, 1)}", "earlier"), " "]
    if first + ROWS <= events[-1].seq:
        links += [link(f"{run_href(run_id)}?start={first + ROWS}", "later"), " "]
    return shown, tag("p", *links, id="timeline-pager")


def timeline(events: list[Event], start: float = 0.0) -> Markup:
    return table(
        ["seq", "step", "kind", "name", "key", "status", "at", "data"],
        (event_cells(ev, start) for ev in events),
        id="timeline",
        data_start=f"{start}",
    )


def _effects(book: Daybook, run_id: str, csrf: str | None) -> Markup:
    """The run's effects (the latest ROWS; `daybook effects RUN` lists all)."""
    rows = []
    found = book.effects(run_id)
    for e in found[-ROWS:]:
        history = join(
            tag(
                "div",
                f"{h.get('status') or h.get('kind')} {when(h.get('at'))}",
                f" by {h['by']}" if h.get("by") else "",
                f" ({h['resolved_by']})" if h.get("resolved_by") else "",
            )
            for h in e["history"] or []
        )
        rows.append(
            [
                e["step"],
                e["tool"],
                e["key"],
                status(e["status"]),
                payload(e["ref"]),
                payload(e["request"]),
                history,
                resolve_form(run_id, e, csrf),
            ]
        )
    return tag(
        "section",
        tag("h2", "Effects"),
        table(["step", "tool", "key", "status", "reference", "request", "history", ""], rows, id="effects"),
    )


def resolve_form(run_id: str, effect: dict[str, Any], csrf: str | None) -> Markup:
    """For an effect whose outcome is unknown: confirmed (with a reference) or absent, with evidence."""
    if csrf is None or effect["status"] not in ("unknown", "in flight"):
        return Markup("")
    return form(
        run_href(run_id) + "/resolve",
        csrf,
        Markup(f'<input type="hidden" name="step" value="{int(effect["step"])}">'),
        Markup(
            '<select name="outcome"><option>confirmed</option><option>absent</option>'
            "<option>failed</option></select>"
        ),
        field("ref", "reference"),
        field("evidence", "evidence"),
        button="Resolve",
        class_="resolve",
    )


def _obligations(book: Daybook, run_id: str) -> Markup:
    mine = [o for o in book.obligations() if o.get("run_id") == run_id]
    if not mine:
        return Markup("")
    keys = sorted({k for o in mine for k in o if k != "run_id"})
    return tag(
        "section", tag("h2", "Obligations"), table(keys, ([payload(o.get(k)) for k in keys] for o in mine))
    )


def _budget(book: Daybook, run_id: str) -> Markup:
    state = book.budget(run_id)
    names = sorted(set(state["caps"]) | set(state["spent"]))
    if not names:
        return Markup("")
    rows = (
        [n, f"{state['spent'].get(n, 0.0):g}", f"{state['caps'][n]:g}" if n in state["caps"] else "-"]
        for n in names
    )
    return tag("section", tag("h2", "Budget"), table(["quantity", "spent", "cap"], rows))


def _transactions(book: Daybook, run_id: str) -> Markup:
    found = book.transactions(run_id)
    if not found:
        return Markup("")
    keys = sorted({k for t in found for k in t})
    return tag(
        "section", tag("h2", "Transactions"), table(keys, ([payload(t.get(k)) for k in keys] for t in found))
    )


def _traceback(info: RunInfo) -> Markup:
    trace = info.error.get("traceback") if isinstance(info.error, dict) else None
    if not trace:
        return Markup("")
    return tag("section", tag("h2", "Traceback (the workflow raised)"), tag("pre", trace), id="traceback")


def attention_page(book: Daybook, csrf: str | None) -> Markup:
    """Runs that need a person (needs_attention, stuck) and effects whose outcome is unknown."""
    runs = [r for s in (RunStatus.NEEDS_ATTENTION, RunStatus.STUCK) for r in book.runs(s.value, MAX_LIMIT)]
    run_rows = [
        [
            link(run_href(r.run_id), r.run_id),
            status(r.status),
            _message(r.error),
            _plan(book, r),
            _run_acts(r, csrf),
        ]
        for r in runs
    ]
    unknown_rows = [
        [
            link(run_href(str(u["run_id"])), u["run_id"]),
            u["step"],
            u["tool"],
            u["key"],
            status(str(u.get("state", ""))),
            resolve_form(str(u["run_id"]), {**u, "status": "unknown"}, csrf),
        ]
        for u in book.unknowns()
    ]
    return join(
        [
            tag("h2", "Runs that need a person"),
            table(["run", "status", "why", "compensation plan", ""], run_rows, id="attention")
            if run_rows
            else tag("p", "None."),
            tag("h2", "Unknown outcomes"),
            table(["run", "step", "tool", "key", "state", "resolve"], unknown_rows, id="unknowns")
            if unknown_rows
            else tag("p", "None."),
        ]
    )


def _plan(book: Daybook, info: RunInfo) -> Markup:
    """The compensation plan: the run's confirmed effects newest first, each with its inverse
    handle (what `cancel --compensate` would undo), and those that cannot be undone."""
    done = [e for e in book.effects(info.run_id) if e["status"] == "confirmed"]
    items = [
        tag(
            "li",
            f"step {e['step']} {e['tool']}: ",
            payload(e["compensation"]) if e["compensation"] else "no inverse",
        )
        for e in reversed(done)
    ]
    return tag("ol", *items) if items else Markup("nothing to undo")


def _run_acts(info: RunInfo, csrf: str | None) -> Markup:
    if csrf is None:
        return Markup("")
    base = run_href(info.run_id)
    return join([form(base + "/retry", csrf, button="Retry"), form(base + "/cancel", csrf, button="Cancel")])


def _message(error: Any) -> Any:
    """What stopped a run, in its own words (the whole error is on the run's page)."""
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return tag("span", error["message"], title=str(error.get("type", "")))
    return payload(_without_trace(error))
