"""OpenTelemetry spans of runs and steps: kept importable here (`daybook.web.otel`) for programs
written against it; the exporter lives in `daybook.telemetry.otel`, where workers use it too."""

from __future__ import annotations

from ..telemetry.otel import (
    Follower,
    configured_provider,
    export_run,
    settled,
    steps_of,
    trace_ids,
    traceparent,
)

__all__ = ["Follower", "configured_provider", "export_run", "settled", "steps_of", "trace_ids", "traceparent"]
