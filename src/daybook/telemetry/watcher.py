"""The span exporter of a `Daybook(otel=...)` handle: the runs it executes, as they execute.

Told by the runner as each run's execution begins and ends here (`book.run`, `book.resume`,
`book.retry`, a child run driven here, a worker's `execute_claimed`). While a run executes, a
thread exports what settles in it each `poll` seconds (so a process killed mid-run has sent what
it settled up to its last poll); when the execution ends (completed, failed, suspended, parked),
what it settled is exported before `book.run` returns. Through the run's cursor (`cursor.py`),
like every exporter: a step replayed by a resume is never exported again.

Imported only when a handle asks for spans, so `daybook` itself never needs opentelemetry.
"""

from __future__ import annotations

import threading
from typing import Any

from .otel import Follower, configured_provider

# Seconds `close` waits for the thread's poll in progress (a store that answers slowly).
JOIN = 30.0


class SpanWatcher:
    """A handle's exporter (`Daybook(otel=True)`: the program's tracer provider, else one from
    the `OTEL_*` settings; or the tracer provider given)."""

    def __init__(self, store: Any, otel: Any, poll: float = 1.0) -> None:
        self.follower = Follower(store, configured_provider() if otel is True else otel, poll, watched=True)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def began(self, run_id: str) -> None:
        with self._lock:
            if self._thread is None:  # started by the first run, not by a handle that only reads
                self._thread = self.follower.start()
        self.follower.watch(run_id)

    def ended(self, run_id: str) -> None:
        self.follower.release(run_id)
        self.follower.export(run_id)

    def close(self) -> None:
        """Stop the thread, after one last export of what settled since its last poll."""
        with self._lock:
            thread = self._thread
        if thread is not None:
            self.follower.stop()
            thread.join(JOIN)  # no poll of the thread's may run on the store once it is closed
            self.follower.poll_once()
