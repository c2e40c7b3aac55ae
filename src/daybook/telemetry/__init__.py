"""Telemetry: what daybook tells observability systems about runs, read from the journal's
committed rows (the `daybook-runtime[otel]` extra).

Owns the OpenTelemetry exporter: `genai.py` (what each span says: the GenAI semantic conventions
for model calls and tools, the ids derived from the run id), `cursor.py` (each run's durable
export cursor, so each step is exported once overall), `otel.py` (handing spans to the SDK, the
`Follower` of `daybook web --otel` and `daybook worker --otel`), `watcher.py` (a
`Daybook(otel=...)` handle's exporter of the runs it executes), `switch.py` (whether a handle
exports: its `otel` argument or `$DAYBOOK_OTEL`).

May import: `daybook.records`, `daybook.errors`, `daybook.journal`, `daybook.coordination` (the
cursor's entity), `daybook.runtime` (owner ids), and opentelemetry (only `otel.py` and
`watcher.py`). Imported by the facade (`switch`, which imports `watcher` only when a handle asks
for spans), the worker, the web inspector and the CLI; nothing below it imports it, so the core
never needs opentelemetry.
"""
