"""Telemetry: what daybook tells observability systems about runs, read from the journal's
committed rows (the `daybook-runtime[otel]` extra).

Owns the OpenTelemetry exporter (`otel`): a span per run and per step, one trace per run across
crashes and resumes, exported by `daybook web --otel` (every run of the store) and `daybook
worker --otel` (the runs that worker executes).

May import: `daybook.records` (and opentelemetry, only here). Imported by the worker, the web
inspector and the CLI; nothing below them imports it, so the core never needs opentelemetry.
"""
