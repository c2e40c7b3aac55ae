"""The pictures of one run: a registry of named views (timeline, tree, recovery, ...), each a
page shell the inspector serves at `/runs/RUN?view=NAME` and the JSON its script draws from at
`/api/views/NAME?run=RUN`.

A view owns its module under `web/` and registers itself here with `register`; the run page
links every registered view, so adding one is one module and one import in `VIEWS_MODULES`.
The shell is server-rendered HTML (escaped by `html`, readable without script: a table of what
the picture shows); the picture is drawn by a static script (`static/NAME.js`, no inline script:
the CSP allows scripts from the inspector only) with the vendored chart library. A view's root
element is `#view`; its script sets `data-ready="1"` on it once drawn, which the browser tests
and `benchmarks/web.py` wait for.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from ..book import Daybook
from .html import Markup, join, link, tag

# The chart library every view draws with (Apache ECharts, vendored: no CDN at run time).
CHART_JS = "/static/vendor/echarts-6.1.0.min.js"
# What the views' scripts share (`window.daybookViews`: fetching `#view[data-src]`, the canvas
# tooltips, data-ready), loaded before each view's own script.
VIEWS_JS = "/static/views.js"

Query = Mapping[str, str]
Shell = Callable[[Daybook, str, Query], Markup]
Data = Callable[[Daybook, str, Query], Any]


@dataclass(frozen=True)
class View:
    """One picture of a run: `shell` renders its HTML (with the no-script table), `data` its
    JSON, `script` names its file under `/static` (None: the shell is the whole view)."""

    name: str
    title: str
    shell: Shell
    data: Data | None = None
    script: str | None = None


VIEWS: dict[str, View] = {}
# The modules that register views, imported once on first use (a view imports `pages` helpers;
# importing it from here at module load would be a cycle).
VIEWS_MODULES: tuple[str, ...] = (
    "daybook.web.timeline",
    "daybook.web.decisions",
    "daybook.web.frontiers",
    "daybook.web.cost",
    "daybook.web.tree",
    "daybook.web.recovery",
)
_loaded = False


def register(view: View) -> View:
    if view.name in VIEWS:
        raise ValueError(f"a view named {view.name!r} is registered twice")
    VIEWS[view.name] = view
    return view


def _load() -> None:
    global _loaded
    if not _loaded:
        for module in VIEWS_MODULES:
            importlib.import_module(module)
        _loaded = True


def names() -> list[str]:
    _load()
    return list(VIEWS)


def find(name: str) -> View:
    """The view named `name`; a ValueError (a 400 from the inspector) naming the known ones."""
    _load()
    try:
        return VIEWS[name]
    except KeyError:
        raise ValueError(f"no view named {name!r}; the views are: {', '.join(VIEWS) or 'none'}") from None


def href(run_id: str, name: str, **query: str) -> str:
    return "/runs/" + quote(run_id, safe="") + "?" + urlencode({"view": name, **query})


def data_href(run_id: str, name: str) -> str:
    return f"/api/views/{quote(name, safe='')}?" + urlencode({"run": run_id})


def tabs(run_id: str, current: str | None = None) -> Markup:
    """The links from a run's page to each of its views (and back to the page)."""
    parts: list[Any] = [
        tag("strong", "journal") if current is None else link("/runs/" + quote(run_id, safe=""), "journal")
    ]
    for name in names():
        view = VIEWS[name]
        parts.append(" ")
        parts.append(tag("strong", view.title) if name == current else link(href(run_id, name), view.title))
    return tag("nav", *parts, id="views", class_="views")


def view_page(book: Daybook, run_id: str, name: str, query: Query) -> Markup:
    """The page of view `name` of a run: the tabs, the shell in `#view`, the scripts."""
    view = find(name)
    book.get_run(run_id)  # RunNotFound (a 404) before anything is drawn
    body: list[Any] = [
        tabs(run_id, name),
        tag(
            "div",
            view.shell(book, run_id, query),
            id="view",
            data_view=name,
            data_run=run_id,
            data_src=data_href(run_id, name) if view.data is not None else "",
            data_ready="" if view.script else "1",
        ),
    ]
    if view.script:
        body.append(Markup(f'<script src="{CHART_JS}"></script>'))
        body.append(Markup(f'<script src="{VIEWS_JS}"></script>'))
        body.append(Markup(f'<script src="/static/{quote(view.script)}"></script>'))
    return join(body)


def view_data(book: Daybook, run_id: str, name: str, query: Query) -> Any:
    view = find(name)
    if view.data is None:
        raise ValueError(f"the view {name!r} has no data to fetch")
    book.get_run(run_id)
    return view.data(book, run_id, query)
