"""OpenTelemetry spans for runs and their steps (the `daybook-runtime[otel]` extra).

Built from the journal's committed rows, the same side channel the live pages read, so a span
never shows an effect as done before its outcome committed, and nothing below this layer imports
opentelemetry. One run is one trace whichever process ran or resumed it: the trace id and the
root span id are derived from the run id (a SHA-256 of it), so every process that exports a
segment of the run (before a crash, after a resume) puts its spans in the same trace, and the
traceparent needs no extra row. Spans:

- `daybook.run WORKFLOW`: the run, first row to its last (status, run id, workflow);
- one span per step: `daybook.effect TOOL` (intent to its settling outcome: key, status,
  counterparty reference, attempts), `daybook.decision NAME` (a model call named `llm` follows
  the GenAI conventions: gen_ai.operation.name, gen_ai.request.model, gen_ai.usage.*),
  `daybook.wait NAME` (a timer or a signal, set to fired/received), `daybook.gate NAME`, and
  `daybook.compensation TOOL` for an undo (its key starts with `comp/`).

Off unless configured: `daybook web --otel` (every run of the store) and `daybook worker --otel`
(the runs that worker executes; `$DAYBOOK_OTEL=1` for either) export with the tracer provider
the OpenTelemetry SDK's own environment settings configure (`OTEL_EXPORTER_OTLP_*` with the OTLP
exporter installed, `OTEL_SERVICE_NAME`, ...); a program runs a `Follower` or calls `export_run`.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import threading
import time
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags

from ..journal import keys
from ..records import TERMINAL, Event, Kind, RunInfo

TRACER = "daybook"
log = logging.getLogger("daybook.telemetry")
_SETTLED = {"confirmed", "failed"}
_ENDS = {Kind.RUN_COMPLETED, Kind.RUN_FAILED, Kind.RUN_CANCELLED, Kind.RUN_EXPIRED}


def trace_ids(run_id: str) -> tuple[int, int]:
    """The run's trace id and root span id, the same in every process."""
    digest = hashlib.sha256(run_id.encode()).digest()
    return int.from_bytes(digest[:16], "big") or 1, int.from_bytes(digest[16:24], "big") or 1


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


def steps_of(events: list[Event]) -> dict[int, list[Event]]:
    by_step: dict[int, list[Event]] = {}
    for ev in events:
        if ev.step is not None:
            by_step.setdefault(ev.step, []).append(ev)
    return by_step


def settled(rows: list[Event]) -> bool:
    """Whether a step's rows are final: a decision, a settled effect, a fired wait."""
    first, last = rows[0], rows[-1]
    if first.kind == Kind.INTENT:
        return last.kind == Kind.OUTCOME and last.status in _SETTLED
    if first.kind in (Kind.TIMER, Kind.SIGNAL):
        return last.status in ("fired", "received", "timeout")
    return last.status != "reserved"  # a model call's reservation: its completion is to come


def export_run(
    info: RunInfo, events: list[Event], provider: Any = None, done: set[int] | None = None
) -> set[int]:
    """Export the spans of a run's settled steps not in `done` (and the run's span once it has
    ended); returns the steps exported, so a follower exports each once."""
    tracer = (provider or trace.get_tracer_provider()).get_tracer(TRACER)
    done = set(done or ())
    parent = _root(info.run_id)
    for step, rows in sorted(steps_of(events).items()):
        if step not in done and settled(rows):
            _step_span(tracer, parent, info.run_id, step, rows)
            done.add(step)
    if info.status in TERMINAL and -1 not in done and events:
        span = tracer.start_span(
            f"daybook.run {info.workflow}",
            context=parent,
            kind=SpanKind.INTERNAL,
            start_time=_ns(events[0].at),
            attributes=_run_attrs(info),
        )
        span.end(end_time=_ns(events[-1].at))
        done.add(-1)
    return done


def _run_attrs(info: RunInfo) -> dict[str, Any]:
    return {"daybook.run_id": info.run_id, "daybook.workflow": info.workflow, "daybook.status": info.status}


def _step_span(tracer: Any, parent: Any, run_id: str, step: int, rows: list[Event]) -> None:
    first, last = rows[0], rows[-1]
    kind, attrs = _what(first, last)
    attrs.update({"daybook.run_id": run_id, "daybook.step": step, "daybook.status": last.status or ""})
    if first.key:
        attrs["daybook.key"] = first.key
    span = tracer.start_span(
        f"daybook.{kind} {first.name}", context=parent, start_time=_ns(first.at), attributes=attrs
    )
    if last.status == "failed":
        span.set_status(trace.Status(trace.StatusCode.ERROR, str(last.data.get("error") or "failed")))
    span.end(end_time=_ns(last.at))


def _what(first: Event, last: Event) -> tuple[str, dict[str, Any]]:
    if first.kind == Kind.INTENT:
        kind = "compensation" if keys.is_compensation(first.key) else "effect"
        ref = last.data.get("ref")
        attrs: dict[str, Any] = {"daybook.tool": first.name, "daybook.attempts": last.attempt + 1}
        if isinstance(ref, str | int):
            attrs["daybook.ref"] = str(ref)
        return kind, attrs
    if first.kind in (Kind.TIMER, Kind.SIGNAL):
        return "wait", {}
    if first.name.startswith("gate:"):
        return "gate", {}
    if first.name == "llm":
        return "decision", _genai(last.data.get("value"))  # the completion (after its reservation)
    return "decision", {}


def _genai(value: Any) -> dict[str, Any]:
    """The GenAI semantic conventions' attributes of a recorded model call."""
    if not isinstance(value, dict):
        return {}
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": str(value.get("model", "")),
        "gen_ai.usage.input_tokens": int(value.get("input_tokens") or 0),
        "gen_ai.usage.output_tokens": int(value.get("output_tokens") or 0),
    }


class Follower:
    """Exports spans as runs' steps settle: each poll reads the runs updated since the last one
    (the store's headers), and exports each settled step (and each ended run) once.

    With `watched=True` (a worker's), only the runs handed to `watch(run_id)` while this process
    executes them: the steps settled from that moment on, so a fleet of workers sends each step
    once (one owner executes a run at a time), and no poll lists the store's runs."""

    def __init__(
        self,
        store: Any,
        provider: Any = None,
        poll: float = 1.0,
        since: float | None = None,
        *,
        watched: bool = False,
    ) -> None:
        self.store = store
        self.provider = provider
        self.poll = poll
        # Steps settled before `since` (default: now) were another exporter's to send.
        self.since = time.time() if since is None else since
        self.start_at = self.since
        self.done: dict[str, set[int]] = {}
        # Watched runs: from when, and whether still executing here (False: one last export).
        self.watched: dict[str, tuple[float, bool]] | None = {} if watched else None
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._polling = threading.Lock()

    def watch(self, run_id: str) -> None:
        """This process starts executing `run_id`: export the steps it settles from now on."""
        assert self.watched is not None, "Follower(watched=True) exports watched runs only"
        with self._lock:
            old = self.watched.get(run_id)
            # Taken again before its last export: still this process's, from the first time.
            self.watched[run_id] = (old[0] if old is not None else time.time(), True)

    def release(self, run_id: str) -> None:
        """This process stopped executing `run_id`: its spans go out at the next poll, then it is
        forgotten (a later execution here, after a resume, is watched afresh)."""
        assert self.watched is not None, "Follower(watched=True) exports watched runs only"
        with self._lock:
            if run_id in self.watched:
                self.watched[run_id] = (self.watched[run_id][0], False)

    def poll_once(self) -> int:
        """Export what settled since the last poll; returns how many spans were exported."""
        with self._polling:  # the thread's poll and a caller's final one never send a step twice
            return self._poll()

    def _poll(self) -> int:
        if self.watched is not None:
            return self._poll_watched()
        before = sum(len(d) for d in self.done.values())
        started = time.time()
        for info in self.store.list_runs(None, 1_000_000):
            if info.updated_at < self.since:
                continue
            events = self.store.load(info.run_id)
            if info.run_id not in self.done:
                self.done[info.run_id] = _before(events, self.start_at)
            self.done[info.run_id] = export_run(info, events, self.provider, self.done[info.run_id])
        self.since = started - 1.0  # a second of overlap: a write racing the read is seen next time
        return sum(len(d) for d in self.done.values()) - before

    def _poll_watched(self) -> int:
        assert self.watched is not None
        with self._lock:
            watched = dict(self.watched)
        sent = 0
        for run_id, (at, executing) in watched.items():
            info = self.store.get_run(run_id)
            if info is not None:
                events = self.store.load(run_id)
                done = self.done.get(run_id)
                if done is None:
                    done = _before(events, at)
                exported = export_run(info, events, self.provider, done)
                sent += len(exported) - len(done)
                self.done[run_id] = exported
            with self._lock:
                if not executing and self.watched.get(run_id) == (at, False):
                    del self.watched[run_id]  # released, and exported since
                    self.done.pop(run_id, None)
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


def _before(events: list[Event], at: float) -> set[int]:
    """The steps (and the run, as -1) that had settled before `at`."""
    early = {s for s, rows in steps_of(events).items() if settled(rows) and rows[-1].at < at}
    return early | ({-1} if events and events[-1].kind in _ENDS and events[-1].at < at else set())


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
        return provider
    try:
        otlp = importlib.import_module("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    except ImportError:
        log.warning("OpenTelemetry: install opentelemetry-exporter-otlp-proto-http to export over OTLP")
        return provider
    provider.add_span_processor(BatchSpanProcessor(otlp.OTLPSpanExporter()))
    return provider
