"""`daybook web` stops when asked, even while a browser follows a live run."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
from conftest import HERE, wait_until
from webtools import free_port

import daybook
from daybook import Daybook, Suspended


@daybook.workflow
def waiting(ctx: daybook.Context) -> str:
    ctx.wait_for("go")
    return "done"


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_the_inspector_exits_on_a_signal_while_a_live_stream_is_open(tmp_path: Path, how: int) -> None:
    # A live run's event stream never ends on its own; uvicorn waited for it on shutdown, so the
    # server outlived its SIGTERM and Ctrl-C for as long as a tab stayed open. The store plays
    # no part in it (SQLite only).
    db_url = str(tmp_path / "web.db")
    with Daybook(db_url) as book, pytest.raises(Suspended):
        book.run(waiting, run_id="live")
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "daybook", "web", "--db", db_url, "--port", str(port)],
        cwd=HERE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    lines: list[str] = []
    ended = threading.Event()

    def follow() -> None:
        def ready() -> bool:
            try:
                return httpx.get(f"http://127.0.0.1:{port}/login", timeout=5).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(ready)
        try:
            with httpx.stream("GET", f"http://127.0.0.1:{port}/runs/live/events", timeout=None) as resp:
                for line in resp.iter_lines():
                    lines.append(line)
        except httpx.HTTPError:
            pass  # the server cut the stream: what a browser's EventSource sees too
        ended.set()

    viewer = threading.Thread(target=follow, daemon=True)
    viewer.start()
    try:
        wait_until(lambda: any(line.startswith("event: status") for line in lines))
        server.send_signal(how)
        # A hang guard, not a speed limit: without the shutdown grace it never exits.
        assert server.wait(timeout=60) is not None
        assert ended.wait(timeout=60), "the viewer's stream stayed open after the server stopped"
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
