"""OpenTelemetry spans for runs and their steps (the `daybook-runtime[otel]` extra).

Built from the journal's committed rows, the same side channel the live pages read, so a span
never shows an effect as done before its outcome committed, and nothing below this layer imports
opentelemetry. One run is one trace whichever process ran or resumed it: the trace id and the
root span id are derived from the run id (a SHA-256 of it), and so is each step's span id, so
every process that exports a segment of the run puts its spans in the same trace, and a span sent
twice carries the same id. What each span says is `genai.py` (the GenAI semantic conventions for
model calls and tools); that each is exported once overall, across crashes, resumes and several
exporters, is the run's durable export cursor (`cursor.py`).

Spans: `daybook.run WORKFLOW` (the trace's root, once the run ended), `chat MODEL` (a model
call), `execute_tool TOOL` (an effect, or an undo), `daybook.decision NAME`, `daybook.wait NAME`,
`daybook.gate NAME`.

Off unless configured: `Daybook(otel=True)` or `$DAYBOOK_OTEL=1` (the runs that handle executes,
`book.run` and `book.resume` among them), `daybook worker --otel` (the runs that worker
executes), `daybook web --otel` (every run of the store), each with the tracer provider the
program set as global, else one the SDK's own environment settings configure
(`OTEL_EXPORTER_OTLP_*` with the OTLP exporter installed, `OTEL_SERVICE_NAME`, ...).
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags

from ..records import Event, RunInfo
from .cursor import Cursor
from .genai import Planned, content_default, plan, settled, steps_of, trace_ids

TRACER = "daybook"
log = logging.getLogger("daybook.telemetry")


def traceparent(run_id: str) -> str:
    """The W3C traceparent of the run's root, for a caller that wants to join the trace."""
    trace_id, span_id = trace_ids(run_id)
    return f"00-{trace_id:032x}-{span_id:016x}-01"


def _root(run_id: str) -> Any:
    trace_id, span_id = trace_ids(run_id)
    ctx = SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    return trace.set_span_in_context(NonRecordingSpan(ctx))


def _ns(at: float) -> int:
    return int(at * 1e9)


class _Fixed(IdGenerator):
    """The ids of the span being started: the planned ones (the SDK asks its tracer's id
    generator; a tracer of another SDK keeps its own, random ids: see docs/observability.md)."""

    def __init__(self) -> None:
        self.trace_id = 1
        self.span_id = 1

    def generate_span_id(self) -> int:
        return self.span_id

    def generate_trace_id(self) -> int:
        return self.trace_id


def emit(run_id: str, spans: list[Planned], provider: Any = None) -> None:
    """Hand `spans` (of run `run_id`) to the tracer provider (default: the global one)."""
    tracer = (provider or trace.get_tracer_provider()).get_tracer(TRACER)
    ids = _Fixed()
    if hasattr(tracer, "id_generator"):  # the SDK's tracer: a fresh one per get_tracer call
        tracer.id_generator = ids
    ids.trace_id = trace_ids(run_id)[0]
    parent = _root(run_id)
    for planned in spans:
        ids.span_id = planned.span_id
        span = tracer.start_span(
            planned.name,
            # The run's span is the root: an empty context, not the caller's current span.
            context=otel_context.Context() if planned.root else parent,
            kind=SpanKind.CLIENT if planned.client else SpanKind.INTERNAL,
            start_time=_ns(planned.start),
            attributes=planned.attributes,
        )
        if planned.error is not None:
            span.set_status(trace.Status(trace.StatusCode.ERROR, planned.error))
        span.end(end_time=_ns(planned.end))


def export_run(
    info: RunInfo, events: list[Event], provider: Any = None, after: int = 0, content: bool | None = None
) -> int:
    """Export the spans of what settled in the run past seq `after` (no cursor: the caller
    keeps its own); returns how many. `Follower` and `RunSpans` go through the run's cursor."""
    spans = plan(info, events, after, content_default() if content is None else content)
    emit(info.run_id, spans, provider)
    return len(spans)


def flush(provider: Any) -> None:
    """Send what the provider's processors hold (before the cursor moves past it)."""
    force = getattr(provider or trace.get_tracer_provider(), "force_flush", None)
    if callable(force):
        force()


class Exporter:
    """Exports a run's spans through its durable cursor: read (no write when nothing new), claim,
    export what settled past the cursor, flush, append the new cursor, give the claim back."""

    def __init__(self, store: Any, provider: Any = None, content: bool | None = None) -> None:
        self.store = store
        self.provider = provider
        self.content = content_default() if content is None else content
        self.cursor = Cursor(store)

    def export(self, run_id: str) -> int:
        """Export what settled in `run_id` and was not exported yet; returns how many spans."""
        info = self.store.get_run(run_id)
        if info is None:
            return 0
        events = self.store.load(run_id)
        if not events or not plan(info, events, self.cursor.read(run_id), self.content):
            return 0
        after = self.cursor.claim(run_id)
        if after is None:
            return 0  # another exporter holds the run: it sends these
        try:
            events = self.store.load(run_id)  # the journal as it stands under the claim
            info = self.store.get_run(run_id) or info
            spans = plan(info, events, after, self.content)
            if not spans:
                self.cursor.give_back(run_id)
                return 0
            emit(run_id, spans, self.provider)
            flush(self.provider)
        except BaseException:
            self.cursor.give_back(run_id)
            raise
        self.cursor.advance(run_id, events[-1].seq, len(spans))
        return len(spans)


class Follower:
    """Exports spans as runs' steps settle: each poll reads the runs updated since the last one
    (the store's headers) and exports what settled past each one's cursor.

    With `watched=True` (a worker's, a handle's), only the runs handed to `watch(run_id)` while
    this process executes them, so no poll lists the store's runs. Several followers, in one
    process or many, export each step once overall: they share each run's cursor."""

    def __init__(
        self,
        store: Any,
        provider: Any = None,
        poll: float = 1.0,
        since: float | None = None,
        *,
        watched: bool = False,
        content: bool | None = None,
    ) -> None:
        self.store = store
        self.provider = provider
        self.poll = poll
        self.exporter = Exporter(store, provider, content)
        # Runs last updated before `since` (default: now) are not looked at.
        self.since = time.time() if since is None else since
        # Watched runs: run id -> still executing here (False: one last export, then forgotten).
        self.watched: dict[str, bool] | None = {} if watched else None
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._polling = threading.Lock()

    def watch(self, run_id: str) -> None:
        """This process starts executing `run_id`: export its steps as they settle."""
        assert self.watched is not None, "Follower(watched=True) exports watched runs only"
        with self._lock:
            self.watched[run_id] = True

    def release(self, run_id: str) -> None:
        """This process stopped executing `run_id`: what it settled goes out at the next poll,
        then it is forgotten."""
        assert self.watched is not None, "Follower(watched=True) exports watched runs only"
        with self._lock:
            if run_id in self.watched:
                self.watched[run_id] = False

    def export(self, run_id: str) -> int:
        """Export what settled in `run_id` now (a handle's run that just ended or stopped)."""
        with self._polling:
            return self._export(run_id)

    def poll_once(self) -> int:
        """Export what settled since the last poll; returns how many spans were exported."""
        with self._polling:  # the thread's poll and a caller's final one never send a step twice
            return self._poll()

    def _export(self, run_id: str) -> int:
        try:
            return self.exporter.export(run_id)
        except Exception as exc:  # one run's failure does not stop the others' export
            log.warning("OpenTelemetry export of run %s: %s", run_id, exc)
            return 0

    def _poll(self) -> int:
        if self.watched is not None:
            with self._lock:
                watched = dict(self.watched)
            sent = sum(self._export(run_id) for run_id in watched)
            with self._lock:
                for run_id, executing in watched.items():
                    if not executing and self.watched.get(run_id) is False:
                        del self.watched[run_id]  # released, and exported since
            return sent
        started = time.time()
        sent = 0
        for info in self.store.list_runs(None, 1_000_000):
            if info.updated_at >= self.since:
                sent += self._export(info.run_id)
        self.since = started - 1.0  # a second of overlap: a write racing the read is seen next time
        return sent

    def stop(self) -> None:
        """End the thread `start` began, after the poll it may be in (call `poll_once` after, for
        what settled since)."""
        self._stopped.set()

    def start(self) -> threading.Thread:
        def loop() -> None:
            while not self._stopped.is_set():
                try:
                    self.poll_once()
                except Exception as exc:  # keep exporting; the store may be briefly unavailable
                    log.warning("OpenTelemetry export: %s", exc)
                self._stopped.wait(self.poll)

        thread = threading.Thread(target=loop, name="daybook-otel", daemon=True)
        thread.start()
        return thread


def configured_provider() -> Any:
    """A tracer provider from the SDK's standard settings: the global one if the program (or
    `opentelemetry-instrument`) set one, else an SDK provider named by `OTEL_SERVICE_NAME`
    (default "daybook") exporting over OTLP (`OTEL_EXPORTER_OTLP_*`, with
    opentelemetry-exporter-otlp installed) or, with `OTEL_TRACES_EXPORTER=console`, to stdout."""
    import os

    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current
    provider = TracerProvider(
        resource=Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "daybook")})
    )
    if os.environ.get("OTEL_TRACES_EXPORTER", "otlp") == "console":
        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    else:
        try:
            otlp = importlib.import_module("opentelemetry.exporter.otlp.proto.http.trace_exporter")
        except ImportError:
            log.warning("OpenTelemetry: install opentelemetry-exporter-otlp-proto-http to export over OTLP")
        else:
            provider.add_span_processor(BatchSpanProcessor(otlp.OTLPSpanExporter()))
    # Made the global one, so every handle of the program (and its own spans) share it.
    trace.set_tracer_provider(provider)
    return trace.get_tracer_provider()


__all__ = [
    "Exporter",
    "Follower",
    "configured_provider",
    "emit",
    "export_run",
    "flush",
    "settled",
    "steps_of",
    "trace_ids",
    "traceparent",
]
