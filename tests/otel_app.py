"""A model-and-tools run whose spans a process exports to a JSON-lines file of its own (one line
per span the SDK handed its exporter): the crash tests read every process's file and count.

    python tests/otel_app.py DB_URL SPANS_FILE RUN_ID [--die-in-tool | --die-at-cursor N]

`--die-in-tool`: SIGKILL inside the tool of step 4, once this process's exporter has recorded
steps 1 to 3 in the run's cursor (a crash after an export). `--die-at-cursor N`: SIGKILL when
the exporter is about to record its N-th cursor entry, after the batch went out (the crash
window: that batch is sent again, under the same span ids). Also a `--app` for `daybook worker`.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

import daybook
from daybook import Context, ScriptedLLM

sys.path.insert(0, str(Path(__file__).parent))
from crashpoint import die

DIE_IN_TOOL = "OTEL_APP_DIE_IN_TOOL"


class LinesExporter(SpanExporter):
    """Each span as one JSON line (name, ids, parent, attributes), written and flushed at once."""

    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with open(self.path, "a") as fh:
            for span in spans:
                ctx = span.get_span_context()
                assert ctx is not None
                line = {
                    "name": span.name,
                    "trace_id": f"{ctx.trace_id:032x}",
                    "span_id": f"{ctx.span_id:016x}",
                    "parent": f"{span.parent.span_id:016x}" if span.parent else None,
                    "attributes": dict(span.attributes or {}),
                    "pid": os.getpid(),
                }
                fh.write(json.dumps(line) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        return SpanExportResult.SUCCESS


def provider_writing_to(path: str) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(LinesExporter(path)))
    return provider


def read_spans(*paths: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in paths
        if path.exists()
        for line in path.read_text().splitlines()
        if line.strip()
    ]


def _reply(prompt: str) -> str:
    return f"answer to {prompt}"


@daybook.tool(idempotent=True)
def note(text: str, *, idempotency_key: str) -> str:
    return f"noted {text} as {idempotency_key}"


@daybook.tool(idempotent=True)
def wait_for_export(db: str, *, idempotency_key: str) -> str:
    """Step 4: with $OTEL_APP_DIE_IN_TOOL, wait until this process exported steps 1-3 (the
    cursor past step 3's row), then die here, the tool's intent journaled, its outcome not."""
    if os.environ.get(DIE_IN_TOOL):
        from daybook.telemetry.cursor import Cursor

        with daybook.Daybook(db, otel=False) as book:
            run_id = idempotency_key.split("/")[0]
            step3 = max(e.seq for e in book.journal(run_id) if e.step == 3)
            deadline = time.monotonic() + 120
            while Cursor(book.store).read(run_id) < step3 and time.monotonic() < deadline:
                time.sleep(0.05)
            seen = Cursor(book.store).read(run_id)
            print(f"cursor at {seen}, step 3 settled at {step3}", file=sys.stderr, flush=True)
        die()
    return "waited"


@daybook.workflow
def advise(ctx: Context, db: str) -> list[str]:
    llm = ScriptedLLM(_reply, model="gpt-4o-mini")
    first = ctx.llm(llm, "plan").value["text"]  # step 1
    done = [ctx.effect(note, text=str(first))]  # step 2
    second = ctx.llm(llm, "check").value["text"]  # step 3
    done.append(ctx.effect(wait_for_export, db=db))  # step 4
    third = ctx.llm(llm, "report").value["text"]  # step 5
    done.append(ctx.effect(note, text=str(second) + str(third)))  # step 6
    return done


@daybook.workflow
def paced(ctx: Context, steps: int, pause: float) -> int:
    """Model call and tool in turn, `pause` seconds apart: exporters polling meanwhile race."""
    llm = ScriptedLLM(_reply, model="claude-sonnet-4")
    for i in range(steps):
        if i % 2:
            ctx.effect(note, text=f"n{i}")
        else:
            ctx.llm(llm, f"p{i}")
        time.sleep(pause)
    return steps


def main(argv: list[str]) -> None:
    db, spans_file, run_id = argv[:3]
    if "--die-in-tool" in argv:
        os.environ[DIE_IN_TOOL] = "1"
    if "--die-at-cursor" in argv:
        from crashpoint import kill_at_call

        from daybook.telemetry import cursor

        n = int(argv[argv.index("--die-at-cursor") + 1])
        cursor.Cursor.advance = kill_at_call(cursor.Cursor.advance, n, before=True)  # type: ignore[method-assign]
    with daybook.Daybook(db, otel=provider_writing_to(spans_file)) as book:
        print(json.dumps({"result": book.run(advise, db, run_id=run_id)}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
