"""Whether a `Daybook` handle exports spans, and with what: its `otel` argument (or
`$DAYBOOK_OTEL`) checked, and the exporter made only when asked for, so the facade imports this
module and never opentelemetry itself (`watcher.py` does, when a handle turns spans on)."""

from __future__ import annotations

import os
from typing import Any

from ..errors import ConfigError
from ..records import shown

ENV = "DAYBOOK_OTEL"


def span_watcher(store: Any, otel: Any) -> Any:
    """The handle's span exporter (a `watcher.SpanWatcher`; None: spans off): `otel` True, a
    tracer provider, False, or None for `$DAYBOOK_OTEL` (1, true or yes: on)."""
    if otel is None:
        otel = os.environ.get(ENV, "").strip().lower() in ("1", "true", "yes")
    if otel is False:
        return None
    if otel is not True and not callable(getattr(otel, "get_tracer", None)):
        raise ConfigError(
            f"Daybook(otel=...) must be True, False, None or an OpenTelemetry tracer provider, not "
            f"{shown(otel)} (e.g. Daybook(otel=True) exports with the program's tracer provider)"
        )
    try:
        from .watcher import SpanWatcher
    except ImportError as exc:
        raise ConfigError(
            f"Daybook(otel=...) exports spans with OpenTelemetry, which is not installed ({exc}): "
            "pip install 'daybook-runtime[otel]', or leave otel (and $DAYBOOK_OTEL) unset"
        ) from None
    return SpanWatcher(store, otel)
