"""The decisions view of a run (`/runs/RUN?view=decisions`): each act (an effect) next to its
why, the recorded decision it followed (its value, policy and version, observation,
alternatives, and for a model's decision the model and tokens), or the run's mandate when no
decision came before it; and the obligations that decision opened (a refund promised beside the
refund sent). A graph draws decision -> act and decision -> obligation for the latest `GRAPH`
acts only (what can be read in one picture, and drawn at once on a long run); the page's table
lists the latest `ROWS`.

Everything is read from the journal as stored (`books.why.decisions`, the effect and obligation
ledgers): a secret is its keyed digest there, and that is what is shown; nothing is revealed.
"""

from __future__ import annotations

from typing import Any

from ..book import Daybook
from ..books.why import decisions as decisions_of
from ..journal.decision import NOT_REASONS
from ..records import JSON
from .html import Markup, esc, join, payload, status, table, tag, when
from .views import Query, View, data_href, register

ROWS = 500  # acts a page shows (the latest); `daybook effects RUN` lists every one
# Acts the graph draws (the latest), with their decisions and obligations, and decisions no act
# followed: past a few dozen nodes per column the labels overlap and nothing can be read, and
# drawing 500 acts took the browser about half a second on a 10,000-step run.
GRAPH = 40
REASONS = ("policy", "version", "observation", "alternatives", "note")


def data(book: Daybook, run_id: str, query: Query) -> dict[str, Any]:
    """What the graph draws: the latest `GRAPH` acts with the decision each followed and the
    obligations those decisions opened, and the latest `GRAPH` decisions no act followed.
    `drawn`, `shown` and `total` count the acts drawn, in the page's table, and in the run."""
    return _drawn(_found(book, run_id))


def _drawn(found: dict[str, Any]) -> dict[str, Any]:
    """`found` cut to what the graph draws."""
    acts = found["acts"][-GRAPH:]
    kept = {str(a["decision"]) for a in acts if a["decision"]}
    decided = {str(d["id"]) for d in found["decisions"]}
    # An obligation of a drawn decision, or one of the latest not tied to any decision shown.
    owed = [o for o in found["obligations"] if str(o.get("decision") or "") in kept]
    loose = [o for o in found["obligations"] if str(o.get("decision") or "") not in decided]
    owed += loose[-GRAPH:]
    kept |= {str(o["decision"]) for o in owed if o.get("decision")}
    return {
        **found,
        "acts": acts,
        "drawn": len(acts),
        "decisions": [d for d in found["decisions"] if str(d["id"]) in kept],
        "obligations": owed,
        "idle": found["idle"][-GRAPH:],
    }


def _found(book: Daybook, run_id: str) -> dict[str, Any]:
    """The run's latest `ROWS` acts with the decision each followed and the obligations it
    opened, and the latest `ROWS` decisions no act followed."""
    info = book.get_run(run_id)
    events = book.journal(run_id)
    made = decisions_of(events)
    owed = [o for o in book.obligations() if o.get("run_id") == run_id]
    effects = book.effects(run_id)
    acts = [
        {
            "step": e["step"],
            "tool": e["tool"],
            "key": e["key"],
            "status": e["status"],
            "args": e["request"],
            "ref": e["ref"],
            "decision": e["decision"] if e["decision"] in made else None,
        }
        for e in effects[-ROWS:]
    ]
    used = {str(a["decision"]) for a in acts if a["decision"]} | {
        str(o["decision"]) for o in owed if o.get("decision") in made
    }
    # Decisions no act followed (a model that chose to do nothing), bookkeeping steps left out.
    idle = [
        d
        for d_id, d in made.items()
        if d_id not in used and str(d["name"]) not in NOT_REASONS and ":" not in str(d["name"])
    ][-ROWS:]
    return {
        "run": run_id,
        "mandate": {"workflow": info.workflow, "input": info.input, "code_version": info.code_version},
        "acts": acts,
        "shown": len(acts),
        "total": len(effects),
        "decisions": [made[d] for d in sorted(used, key=lambda d: int(made[d]["seq"] or 0))],
        "obligations": [_obligation(o) for o in owed],
        "idle": idle,
    }


def _obligation(row: dict[str, JSON]) -> dict[str, JSON]:
    keep = ("id", "kind", "owner", "due", "about", "decision", "state", "opened", "settled")
    return {k: row.get(k) for k in keep}


def shell(book: Daybook, run_id: str, query: Query) -> Markup:
    """The acts as a table (one row per act: what was done, then why), the graph's place."""
    found = _found(book, run_id)
    # The graph's data is fetched while the chart library loads (the script asks for the same
    # URL and gets this response), as the timeline's.
    href = esc(data_href(run_id, "decisions"))
    parts: list[Any] = [
        Markup(f'<link rel="preload" as="fetch" crossorigin="anonymous" href="{href}">'),
        _mandate(found["mandate"]),
        tag("div", id="decisions-chart", class_="chart", role="img", aria_label="decisions and their acts"),
    ]
    if found["shown"] > GRAPH:
        parts.append(
            tag(
                "p",
                f"The graph draws the latest {GRAPH} acts; the other {found['shown'] - GRAPH} "
                "below are in the table only.",
                id="decisions-drawn",
            )
        )
    if found["total"] > found["shown"]:
        parts.append(
            tag(
                "p",
                f"the latest {found['shown']} of {found['total']} acts; `daybook effects {run_id}` lists all",
            )
        )
    parts.append(_acts_table(found))
    loose = [
        o
        for o in found["obligations"]
        if not any(str(o.get("decision") or "") == str(a["decision"] or "") for a in found["acts"])
    ]
    if loose:
        parts.append(tag("h2", "Obligations with no act"))
        parts.append(_obligations_table(loose, "obligations"))
    if found["idle"]:
        parts.append(tag("h2", "Decisions no act followed"))
        parts.append(_idle_table(found["idle"]))
    return join(parts)


def _mandate(mandate: dict[str, Any]) -> Markup:
    """The run's mandate (workflow and input): what an act with no decision before it came from."""
    return tag(
        "p",
        "mandate: workflow ",
        tag("code", mandate["workflow"]),
        " input ",
        payload(mandate["input"]),
        " (what an act with no decision before it came from)",
        id="mandate",
    )


def _acts_table(found: dict[str, Any]) -> Markup:
    """One row per act: what was done, the decision it followed, the obligations that opened."""
    made = {str(d["id"]): d for d in found["decisions"]}
    owed_by: dict[str, list[dict[str, JSON]]] = {}
    for o in found["obligations"]:
        owed_by.setdefault(str(o.get("decision") or ""), []).append(o)
    rows = [
        _act_row(a, made.get(str(a["decision"])), owed_by.get(str(a["decision"] or ""), []))
        for a in found["acts"]
    ]
    if not rows:
        return tag("p", "This run took no act (no effect).", id="acts-none")
    return table(
        [
            "step",
            "act",
            "status",
            "decision",
            "model",
            "tokens",
            "usd",
            "value",
            "reasons",
            "obligations opened",
        ],
        rows,
        id="acts",
    )


def _idle_table(idle: list[dict[str, JSON]]) -> Markup:
    """The decisions no act followed, with their model, tokens, usd, value and reasons."""
    return table(
        ["decision", "model", "tokens", "usd", "value", "reasons"],
        (
            [
                join([tag("code", d["id"]), f" {d['name']}"]),
                d.get("model") or "",
                "" if d.get("tokens") is None else str(d["tokens"]),
                _usd(d),
                payload(d.get("value")),
                _reasons(d),
            ]
            for d in idle
        ),
        id="idle",
    )


def _act_row(act: dict[str, Any], decision: dict[str, JSON] | None, owed: list[dict[str, JSON]]) -> list[Any]:
    what = join([tag("strong", act["tool"]), " ", tag("code", act["key"] or ""), " ", payload(act["args"])])
    if decision is None:
        return [
            act["step"],
            what,
            status(act["status"]),
            "mandate (no decision before it)",
            "",
            "",
            "",
            "",
            "",
            _owed(owed),
        ]
    return [
        act["step"],
        what,
        status(act["status"]),
        join([tag("code", decision["id"]), f" {decision['name']}"]),
        decision.get("model") or "",
        "" if decision.get("tokens") is None else str(decision["tokens"]),
        _usd(decision),
        payload(decision.get("value")),
        _reasons(decision),
        _owed(owed),
    ]


def _usd(decision: dict[str, JSON]) -> str:
    """What a model call's row says it was charged in USD ("" for any other decision)."""
    charged = decision.get("charged")
    usd = charged.get("usd") if isinstance(charged, dict) else None
    return f"{usd:.6f}" if isinstance(usd, int | float) else ""


def _reasons(decision: dict[str, JSON]) -> Markup:
    """A decision's reasons as `Why(...)` recorded them (policy, version, observation, ...)."""
    return join(
        tag("div", tag("em", f"{k}: "), payload(decision[k]))
        for k in REASONS
        if decision.get(k) not in (None, "", [])
    )


def _owed(owed: list[dict[str, JSON]]) -> Markup:
    return join(
        tag(
            "div",
            tag("strong", str(o.get("kind"))),
            f" owed by {o.get('owner')}, due {when(o['due'] if isinstance(o.get('due'), float) else None)} ",
            status(str(o.get("state"))),
            class_="obligation",
        )
        for o in owed
    )


def _obligations_table(owed: list[dict[str, JSON]], id_: str) -> Markup:
    return table(
        ["id", "kind", "owner", "due", "state", "about"],
        (
            [
                o.get("id"),
                o.get("kind"),
                o.get("owner"),
                when(o["due"] if isinstance(o.get("due"), float) else None),
                status(str(o.get("state"))),
                payload(o.get("about")),
            ]
            for o in owed
        ),
        id=id_,
    )


VIEW = register(View("decisions", "Decisions", shell, data, "decisions.js"))
