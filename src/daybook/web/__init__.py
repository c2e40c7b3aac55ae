"""The local web inspector (`daybook web`, the `daybook-runtime[web]` extra): runs, a run's
timeline and books, the approvals inbox, the attention panel and steering, live, over the same
store as the CLI.

    html.py     escaped HTML building (every value through `esc`), the page frame
    pages.py    the read-only pages
    actions.py  what a signed-in approver does: approve/deny, resolve, retry, cancel, pause,
                resume, steer, each through the same `Daybook` call as its command
    auth.py     sign-in with an approver's token, sessions, CSRF, roles, --require-sign-in
    audit_page.py  the audit log written for every POST, and the /audit page
    live.py     Server-Sent Events from the journal (`journal.follow`)
    otel.py     `daybook.telemetry.otel` under its old name (the exporter, the `otel` extra)
    app.py      the Starlette app: routes, body limits, errors as 4xx
    guard.py    allowed Host names, the same-origin rule for POSTs, security headers

The top layer beside the CLI: may import anything in daybook; nothing in daybook imports it.
Starlette and uvicorn are imported only here.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Sequence

from ..book import Daybook
from .app import build
from .guard import hosts_for

__all__ = ["build", "is_loopback", "serve"]

log = logging.getLogger("daybook.web")

# On SIGTERM or Ctrl-C uvicorn waits for open requests to end, and a live view's event stream
# never ends while its run is live: without a bound, `daybook web` did not exit as long as one
# browser tab showed a live run. Page requests finish well inside this; streams are cut after it
# (the browser's EventSource reconnects to whichever server comes up next).
SHUTDOWN_GRACE = 2  # seconds (uvicorn takes a whole number)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(
    book: Daybook,
    host: str = "127.0.0.1",
    port: int = 8765,
    apps: Sequence[str] = (),
    otel: bool = False,
    allowed_hosts: Sequence[str] = (),
    *,
    read_only: bool = False,
    require_sign_in: bool = False,
) -> None:
    """Serve the inspector over `book` until interrupted, answering the loopback names, `host`
    and `allowed_hosts` as Host (`guard.hosts_for`); with `otel`, export OpenTelemetry spans of
    the store's runs as their steps settle (`daybook.telemetry.otel`); `read_only` and
    `require_sign_in` as `build` takes them."""
    import uvicorn

    hosts = hosts_for(host, allowed_hosts)

    if otel:
        from ..telemetry.otel import Follower, configured_provider

        Follower(book.store, configured_provider()).start()

    app = build(book, apps, hosts, read_only=read_only, require_sign_in=require_sign_in)
    uvicorn.run(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=SHUTDOWN_GRACE)
