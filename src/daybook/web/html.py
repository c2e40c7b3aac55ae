"""Server-rendered HTML for the inspector: every value passes through `esc` (html.escape) before
it reaches a page; nothing from the store is ever interpolated raw (a tool's result, a model's
text, a run id may hold markup). Large JSON payloads are collapsed in a <details> element.
Secrets never reach here in clear: the journal holds only their keyed digest (store/secrets.py),
and that digest is what a page shows."""

from __future__ import annotations

import html
import json
import time
from collections.abc import Iterable, Sequence
from typing import Any

COLLAPSE_OVER = 240  # characters of JSON shown inline; longer payloads are folded


class Markup(str):
    """HTML this module built from escaped parts: `esc` passes it through unchanged."""

    __slots__ = ()


def esc(value: Any) -> Markup:
    """`value` as text safe in HTML content and in a quoted attribute."""
    if isinstance(value, Markup):
        return value
    text = value if isinstance(value, str) else str(value)
    return Markup(html.escape(text, quote=True))


def join(parts: Iterable[Any]) -> Markup:
    return Markup("".join(esc(p) for p in parts))


def tag(name: str, /, *children: Any, **attrs: Any) -> Markup:
    """<name attrs>children</name>, attribute values and children escaped (`class_` is `class`)."""
    shown = "".join(
        f' {k.rstrip("_").replace("_", "-")}="{esc(v)}"' for k, v in attrs.items() if v is not None
    )
    return Markup(f"<{name}{shown}>{join(children)}</{name}>")


def when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "-"


def payload(value: Any) -> Markup:
    """A JSON value for a page: inline when short, else folded with its first line shown."""
    text = json.dumps(value, ensure_ascii=False, indent=None, default=str)
    if len(text) <= COLLAPSE_OVER:
        return tag("code", text)
    pretty = json.dumps(value, ensure_ascii=False, indent=2, default=str)
    return tag("details", tag("summary", text[:80] + f"... ({len(text)} chars)"), tag("pre", pretty))


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], **attrs: Any) -> Markup:
    head = tag("thead", tag("tr", *(tag("th", h) for h in headers)))
    body = tag("tbody", *(tag("tr", *(tag("td", c) for c in row)) for row in rows))
    return tag("table", head, body, **attrs)


def link(href: str, text: Any) -> Markup:
    return tag("a", text, href=href)


def hidden(name: str, value: str) -> Markup:
    return Markup(f'<input type="hidden" name="{esc(name)}" value="{esc(value)}">')


def field(name: str, label: str, kind: str = "text", value: str = "") -> Markup:
    box = Markup(f'<input type="{esc(kind)}" name="{esc(name)}" id="f-{esc(name)}" value="{esc(value)}">')
    return tag("label", label + " ", box)


def form(action: str, csrf: str, *fields: Any, button: str = "Submit", **attrs: Any) -> Markup:
    """A POST form carrying the session's CSRF token."""
    return tag(
        "form",
        hidden("csrf", csrf),
        *fields,
        tag("button", button, type="submit"),
        method="post",
        action=action,
        **attrs,
    )


STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222}
header{background:#223;color:#fff;padding:.5em 1em;display:flex;gap:1.5em;align-items:center}
header a{color:#cde}main{padding:1em}table{border-collapse:collapse;width:100%}
td,th{border-bottom:1px solid #ddd;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f4f4f8}code,pre{font:12px ui-monospace,monospace}pre{white-space:pre-wrap}
.status{padding:0 .4em;border-radius:3px;background:#eee}.s-completed,.s-confirmed{background:#cfc}
.s-failed,.s-stuck{background:#fcc}.s-needs_attention,.s-unknown{background:#fe9}
.s-suspended,.s-paused{background:#def}.flash{background:#ffd;padding:.5em;border:1px solid #cc9}
.error{background:#fdd;border-color:#c99}form{display:inline-block;margin:.2em .5em .2em 0}
section{margin-bottom:1.5em}.counts span{margin-right:1em}
.tree-chart{width:100%;min-height:240px;border:1px solid #ddd}.mark{padding:0 .4em;border-radius:3px;
font-size:12px;white-space:nowrap;background:#eee}.m-superseded,.m-undone{background:#fcc}
.m-ran-again,.m-new,.m-revision,.m-undo{background:#cfc}.m-replayed,.m-shared{background:#def}
.m-soft,.m-left-standing,.m-not-run-yet{background:#fe9}.m-restored{background:#9cf}
.diff-note{color:#666;font-size:12px}.diff-kind{color:#667;font-size:12px}
.s-won,.s-chosen,.s-read,.s-eligible{background:#cfc}.s-restored,.s-rerun,.s-retried{background:#cde6fa}
.s-conflict{background:#fe9}
"""


def page(
    title: str,
    body: Any,
    *,
    who: str | None,
    flash: str = "",
    error: bool = False,
    csrf: str | None = None,
    audit: bool = False,
    banner: str = "",
) -> str:
    """A whole page: the navigation (the audit log's link for an operator), who is logged in,
    the inspector's mode (`banner`: read-only), a message, the body."""
    nav = [
        link("/", "Runs"),
        link("/approvals", "Approvals"),
        link("/attention", "Attention"),
        link("/audit", "Audit") if audit else "",
        tag("span", banner, id="mode") if banner else "",
        tag("span", f"signed in as {who}", id="who") if who else link("/login", "Sign in"),
        form("/logout", csrf, button="Sign out", id="logout") if who and csrf else "",
    ]
    note = tag("p", flash, class_="flash error" if error else "flash", id="flash") if flash else ""
    return "<!doctype html>\n" + tag(
        "html",
        tag(
            "head",
            Markup('<meta charset="utf-8">'),
            tag("title", f"{title} - daybook"),
            tag("style", Markup(STYLE)),
        ),
        tag(
            "body",
            tag("header", tag("strong", "daybook"), *nav),
            tag("main", tag("h1", title), note, body),
        ),
        lang="en",
    )


def status(value: str | None) -> Markup:
    return tag("span", value or "", class_=f"status s-{value or 'none'}")
