"""Durable streams (`ctx.stream`, `ctx.llm(..., stream=)`), on both stores with real processes:
a writer SIGKILLed mid-stream and resumed gives a reader, reading across the crash, each chunk
once and in order; a reader SIGKILLed and restarted from its cursor gets each chunk once; a
re-run that says something else keeps what readers saw and records the difference; replay
writes nothing; the CLI and the web inspector deliver the chunks; bad input is refused clearly;
a secret in a chunk is never in the store's bytes."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import stream_app
from conftest import HERE, PG_URL, cli_in_process, killed, wait_until
from store_bytes import store_text
from webtools import serving, web_server

import daybook
from daybook import ConfigError, Daybook, DaybookError, NotSerializable, ScriptedLLM, Secret
from daybook.web import build

WORDS = [f"w{i}" for i in range(stream_app.WORDS)]
PIECES = [w + " " for w in WORDS[:-1]] + [WORDS[-1]]


def _child(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(HERE / "stream_child.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=None if env is None else {**os.environ, **env},
    )


def _killed_mid_stream(db_url: str, run_id: str, env: dict[str, str] | None = None) -> int:
    """Start the run in a child that is SIGKILLed once its first group of `answer` chunks has
    committed; returns how many `answer` chunks the store holds then (some, not all)."""
    proc = _child(db_url, "write", run_id, "--die-mid-stream", env=env)
    assert killed(proc), proc.stderr
    with Daybook(db_url) as book:
        held = len(book.chunks(run_id, stream="answer"))
    assert 0 < held < len(PIECES)
    return held


def _follow_in_thread(db_url: str, run_id: str, got: list[Any]) -> threading.Thread:
    def read() -> None:
        with Daybook(db_url) as book:
            got.extend(book.follow(run_id, stream="answer", timeout=240))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return reader


def test_a_writer_killed_mid_stream_then_resumed_gives_a_reader_each_chunk_once_in_order(
    db_url: str,
) -> None:
    run_id = "streamed-crash"
    held = _killed_mid_stream(db_url, run_id)
    got: list[Any] = []
    reader = _follow_in_thread(db_url, run_id, got)  # reads across the crash and the resume
    wait_until(lambda: len(got) >= held)
    with Daybook(db_url) as book:
        text = book.resume(run_id, wait=30)
        reader.join(timeout=120)
        assert not reader.is_alive()
        assert [c.value for c in got] == PIECES  # each piece once, in order, none lost
        assert [c.n for c in got] == list(range(len(PIECES)))
        assert [c.cursor for c in got] == sorted({c.cursor for c in got})
        assert "".join(c.value for c in got) == text == " ".join(WORDS)
        # The body's note before the model call was written again by the re-run, not twice.
        notes = [c.value for c in book.chunks(run_id, stream="notes")]
        assert notes == [{"topic": "durability"}, {"words": len(WORDS)}]
        assert book.chunks(run_id, divergent=True) == book.chunks(run_id)  # nothing differed


def test_a_step_whose_outcome_committed_never_loses_a_chunk_it_streamed(db_url: str) -> None:
    # Killed just after the model call's decision row commits (its second row: the first is
    # the reservation written before the call): the replay never calls the model again, so
    # every chunk it streamed must have committed before that row.
    run_id = "streamed-sealed"
    proc = _child(db_url, "write", run_id, "--kill-after", "decision:2")
    assert killed(proc), proc.stderr
    with Daybook(db_url) as book:
        assert [c.value for c in book.chunks(run_id, stream="answer")] == PIECES
        calls = stream_app.llm.calls
        assert book.resume(run_id, wait=30) == " ".join(WORDS)
        assert stream_app.llm.calls == calls  # replayed, not sampled: no chunk written again
        assert [c.value for c in book.chunks(run_id, divergent=True)] == [
            {"topic": "durability"},
            *PIECES,
            {"words": len(WORDS)},
        ]


def test_a_reader_killed_and_restarted_from_its_cursor_gets_each_chunk_once(
    db_url: str, tmp_path: Path
) -> None:
    run_id = "streamed-reader"
    out = str(tmp_path / "reader.txt")
    writer = subprocess.Popen(
        [sys.executable, str(HERE / "stream_child.py"), db_url, "write", run_id],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with Daybook(db_url) as book:
            wait_until(lambda: book.store.get_run(run_id) is not None)
        first = _child(db_url, "read", run_id, out, "--die-after", "40")
        assert killed(first), first.stderr
        second = _child(db_url, "read", run_id, out)
        assert second.returncode == 0, second.stderr
        assert writer.wait(timeout=240) == 0, writer.communicate()[1]
        with open(out) as f:
            lines = [line.split(" ", 2) for line in f.read().splitlines()]
    finally:
        if writer.poll() is None:
            writer.kill()
    assert [int(n) for _, n, _ in lines] == list(range(len(PIECES)))  # each once, in order
    assert [v for _, _, v in lines] == PIECES
    cursors = [int(c) for c, _, _ in lines]
    assert cursors == sorted(set(cursors))


def test_a_re_run_that_says_something_else_keeps_what_readers_saw_and_records_the_difference(
    db_url: str,
) -> None:
    run_id = "streamed-diverged"
    held = _killed_mid_stream(db_url, run_id, env={"STREAM_REPLY": "alt"})  # a first sample
    with Daybook(db_url) as book:
        text = book.resume(run_id, wait=30)  # re-sampled: the model now says w0 w1 ...
        assert text == " ".join(WORDS)  # the run goes on with the completion it recorded
        seen = book.chunks(run_id, stream="answer")
        assert [c.n for c in seen] == list(range(len(PIECES)))  # still each key once
        assert [c.value for c in seen[:held]] == [f"alt{i} " for i in range(held)]
        assert [c.value for c in seen[held:]] == PIECES[held:]
        differed = [c for c in book.chunks(run_id, stream="answer", divergent=True) if c.divergent]
        assert [(c.n, c.value) for c in differed] == [(i, PIECES[i]) for i in range(held)]


def test_replay_and_a_second_run_of_a_completed_run_write_no_chunk(book: Daybook) -> None:
    calls = stream_app.llm.calls
    text = book.run(stream_app.streamed, "replay", run_id="streamed-replay")
    before = book.chunks("streamed-replay", divergent=True)
    assert len(before) == len(PIECES) + 2 and stream_app.llm.calls == calls + 1
    assert book.replay("streamed-replay") == text
    assert book.run(stream_app.streamed, "replay", run_id="streamed-replay") == text
    assert book.chunks("streamed-replay", divergent=True) == before
    assert stream_app.llm.calls == calls + 1  # never sampled again


def test_daybook_journal_stream_prints_the_chunks_and_follows_to_the_end(book: Daybook) -> None:
    book.run(stream_app.streamed, "cli", run_id="streamed-cli")
    done = cli_in_process("journal", "streamed-cli", "--stream", "answer", "--follow", db=book.url)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split("  ", 3)[3] for line in lines] == PIECES
    assert lines[0].split("  ")[1:3] == ["answer", "streamed-cli/1#0"]
    cursor = lines[9].split("  ")[0]
    rest = cli_in_process("journal", "streamed-cli", "--stream", "*", "--after", cursor, db=book.url)
    assert [line.split("  ")[1] for line in rest.stdout.splitlines()] == ["answer"] * 140 + ["notes"]


def test_the_web_live_stream_delivers_each_chunk_and_resumes_after_its_last_event_id(
    db_url: str,
) -> None:
    run_id = "streamed-web"
    held = _killed_mid_stream(db_url, run_id)  # the stream is live: half written, run unfinished
    got: list[dict[str, Any]] = []
    with web_server(db_url) as base:

        def listen() -> None:
            url = f"{base}/runs/{run_id}/streams/answer"
            with httpx.stream("GET", url, headers={"Last-Event-ID": "3"}, timeout=240) as resp:
                kind = ""
                for line in resp.iter_lines():
                    if line.startswith("event: "):
                        kind = line[7:]
                    elif line.startswith("data: "):
                        got.append({"event": kind, **json.loads(line[6:])})

        viewer = threading.Thread(target=listen, daemon=True)
        viewer.start()
        wait_until(lambda: len(got) >= held - 3)
        with Daybook(db_url) as book:
            book.resume(run_id, wait=30)
            first = book.chunks(run_id)[:3]
        viewer.join(timeout=120)
        bad = httpx.get(f"{base}/runs/{run_id}/streams/a%2Fb", timeout=30)
    chunks = [g for g in got if g["event"] == "chunk"]
    assert got[-1]["event"] == "end" and got[-1]["status"] == "completed"
    after = [c for c in first if c.cursor > 3]  # the viewer resumed after cursor 3
    expected = [c.value for c in after if c.stream == "answer"]
    assert [c["value"] for c in chunks][: len(expected)] == expected
    assert [c["n"] for c in chunks] == list(range(len(PIECES) - len(chunks), len(PIECES)))
    assert [c["value"] for c in chunks] == PIECES[len(PIECES) - len(chunks) :]
    assert bad.status_code == 400 and "stream name" in bad.json()["error"]


def test_n_web_viewers_of_a_stream_share_one_reader_and_each_gets_every_chunk_once_in_order(
    db_url: str,
) -> None:
    """R13 for streams: each viewer once polled the store itself every 0.25 s; now one reader
    per (run, stream) does, whatever the number of viewers, and hands them what it read."""
    run_id = "streamed-shared"
    held = _killed_mid_stream(db_url, run_id)
    starts = [0, 0, 3, held - 1]  # cursors the viewers resume after
    got: list[list[dict[str, Any]]] = [[] for _ in starts]
    with Daybook(db_url) as book:
        app = build(book)

        def listen(i: int, base: str) -> None:
            url = f"{base}/runs/{run_id}/streams/answer?after={starts[i]}"
            with httpx.stream("GET", url, timeout=240) as resp:
                kind = ""
                for line in resp.iter_lines():
                    if line.startswith("event: "):
                        kind = line[7:]
                    elif line.startswith("data: "):
                        got[i].append({"event": kind, **json.loads(line[6:])})

        with serving(app) as base:
            viewers = [
                threading.Thread(target=listen, args=(i, base), daemon=True) for i in range(len(starts))
            ]
            for v in viewers:
                v.start()
            readers = app.state.chunk_readers
            key = (run_id, "answer")
            wait_until(lambda: key in readers.runs and len(readers.runs[key].viewers) == len(starts))
            wait_until(lambda: readers.started == 1)  # one reader for the four viewers
            book.resume(run_id, wait=30)
            for v in viewers:
                v.join(timeout=120)
            assert not any(v.is_alive() for v in viewers)
            wait_until(lambda: not readers.runs)  # the reader stops with its last viewer
            assert readers.started == 1
        every = [c.cursor for c in book.chunks(run_id, stream="answer")]
    for start, mine in zip(starts, got, strict=True):
        assert [g["cursor"] for g in mine if g["event"] == "chunk"] == [c for c in every if c > start]
        assert mine[-1]["event"] == "end" and mine[-1]["status"] == "completed"


# Chunks a run's JSON input cannot carry: made in the workflow from their names.
BAD = {"x": "x", "int-key": {1: "x"}, "nan": float("nan")}


@daybook.workflow
def noted(ctx: daybook.Context, name: Any, value: str) -> str:
    ctx.stream(name).write(BAD[value])
    return "written"


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        ("", "x", "stream name '' is not valid"),
        ("a/b", "x", "stream name 'a/b' is not valid"),
        (7, "x", "ctx.stream(): name must be a string, got int 7"),
        ("ok", "int-key", "stream 'ok' chunk is not plain JSON (non-string key 1)"),
        ("ok", "nan", "stream 'ok' chunk is not plain JSON (non-finite float nan)"),
    ],
)
def test_a_bad_stream_name_or_chunk_is_refused_saying_what_to_do(
    book: Daybook, name: Any, value: str, said: str
) -> None:
    with pytest.raises(DaybookError, match=re.escape(said)):
        book.run(noted, name, value, run_id="bad-stream")
    assert book.chunks("bad-stream") == []


def test_a_chunk_that_is_not_json_is_a_not_serializable_at_the_write(book: Daybook) -> None:
    @daybook.workflow
    def unjsonable(ctx: daybook.Context) -> str:
        try:
            ctx.stream("ok").write(object())
        except NotSerializable as exc:
            return str(exc)
        return "accepted"

    said = book.run(unjsonable, run_id="object-chunk")
    assert "stream 'ok' chunk" in said and "JSON" in said


def test_a_reader_given_a_bad_stream_or_cursor_is_refused(book: Daybook) -> None:
    book.run(noted, "ok", "x", run_id="read-bad")
    with pytest.raises(ConfigError, match="stream name"):
        book.follow("read-bad", stream="")
    with pytest.raises(ConfigError, match="after"):
        book.chunks("read-bad", after=-1)
    with pytest.raises(DaybookError, match="no run"):
        list(book.follow("no-such-run", stream="ok"))


def test_a_client_that_cannot_stream_is_refused_with_what_to_give(book: Daybook) -> None:
    class Plain:
        model = "plain-1"

        def complete(self, prompt: str, **params: Any) -> daybook.Completion:
            return daybook.Completion(text="hi", model=self.model)

    @daybook.workflow
    def asks(ctx: daybook.Context) -> Any:
        return ctx.llm(Plain(), "hello", stream="answer").value

    with pytest.raises(DaybookError, match="has no stream"):
        book.run(asks, run_id="plain-client")


def test_a_secret_in_a_chunk_is_never_in_the_store_in_clear(db_url: str) -> None:
    secret = "hunter2-stream-secret-7731"

    @daybook.workflow
    def leaky(ctx: daybook.Context) -> str:
        out = ctx.stream("log")
        out.write({"token": Secret(secret)})
        out.write(f"the token was {secret}")  # echoed text: scrubbed once the secret is live
        return "done"

    with Daybook(db_url) as book:
        book.run(leaky, run_id="secret-stream")
        values = [c.value for c in book.chunks("secret-stream")]
    assert values[0]["token"]["$secret"].startswith("hmac-sha256:")
    assert values[1] == "the token was [secret]"
    assert secret not in store_text(db_url)


def test_a_streamed_model_call_records_the_whole_completion(book: Daybook) -> None:
    llm = ScriptedLLM(lambda prompt: "alpha beta gamma")

    @daybook.workflow
    def asks(ctx: daybook.Context) -> Any:
        return ctx.llm(llm, "hello", stream="answer").value

    reply = book.run(asks, run_id="streamed-record")
    assert reply["text"] == "alpha beta gamma" and reply["output_tokens"] == 3
    assert [c.value for c in book.chunks("streamed-record")] == ["alpha ", "beta ", "gamma"]


@daybook.tool(idempotent=True)
def export_rows(*, rows: int, idempotency_key: str) -> int:
    """A tool that reports progress on the run's stream while it works."""
    progress = daybook.current().stream("progress")
    for i in range(rows):
        progress.write({"row": i})
    return rows


@daybook.workflow
def exporting(ctx: daybook.Context) -> int:
    return int(ctx.effect(export_rows, key="export-1", rows=3))


def test_a_tool_streams_under_its_act_key_and_replay_writes_nothing(book: Daybook) -> None:
    assert book.run(exporting, run_id="tool-stream") == 3
    assert book.run(exporting, run_id="tool-stream") == 3
    got = book.chunks("tool-stream", divergent=True)
    assert [(c.act, c.n, c.value) for c in got] == [("export-1", i, {"row": i}) for i in range(3)]


@daybook.workflow
async def gathered(ctx: daybook.Context) -> list[str]:
    import asyncio

    async def speak(word: str) -> str:
        out = ctx.stream("words")
        for i in range(3):
            out.write(f"{word}{i}")
            await asyncio.sleep(0)  # the two decisions' functions interleave
        return word

    one, two = await asyncio.gather(ctx.decide("a", speak, "a"), ctx.decide("b", speak, "b"))
    return [one.value, two.value]


def test_async_decisions_that_interleave_keep_their_own_segments(book: Daybook) -> None:
    assert book.run(gathered, run_id="gathered") == ["a", "b"]
    got = book.chunks("gathered", stream="words")
    by_act = {act: [c.value for c in got if c.act == act] for act in ("gathered/1", "gathered/2")}
    assert by_act == {"gathered/1": ["a0", "a1", "a2"], "gathered/2": ["b0", "b1", "b2"]}
    assert [c.n for c in got if c.act == "gathered/1"] == [0, 1, 2]


def test_gc_erases_a_finished_runs_chunks_from_the_store_bytes(db_url: str) -> None:
    plant = "planted-chunk-text-5521"

    with Daybook(db_url) as book:
        book.run(stream_app.streamed, plant, run_id="old")
        assert plant in store_text(db_url)
        done = book.gc(0)
        assert "old" in done["run_ids"]
        erased = book.chunks("old", divergent=True)
        assert len(erased) == len(PIECES) + 2  # keys and cursors stay
        assert {json.dumps(c.data) for c in erased} == {json.dumps({"$erased": done["gc_id"]})}
    assert plant not in store_text(db_url)


def _sql(db_url: str, sql: str) -> None:
    if db_url.startswith("sqlite"):
        with contextlib.closing(sqlite3.connect(db_url.removeprefix("sqlite:///"))) as db:
            db.execute(sql)
            db.commit()
        return
    schema = db_url.split("schema=", 1)[1]
    with psycopg.connect(PG_URL, autocommit=True) as db:
        db.execute(f'SET search_path TO "{schema}"')
        db.execute(sql)


@pytest.mark.parametrize(
    "sql",
    [
        'UPDATE daybook_chunks SET data = \'{"value": "forged"}\'',
        'UPDATE daybook_chunks SET data = \'{"$erased": "x"}\'',  # no gc pass logged it
        "DELETE FROM daybook_chunks",
    ],
)
def test_chunks_cannot_be_rewritten_or_deleted(db_url: str, sql: str) -> None:
    with Daybook(db_url) as book:
        book.run(noted, "log", "x", run_id="kept")
        before = book.chunks("kept")
    with pytest.raises((sqlite3.IntegrityError, psycopg.errors.RaiseException), match="append-only"):
        _sql(db_url, sql)
    with Daybook(db_url) as book:
        assert book.chunks("kept") == before


def test_flush_commits_what_was_written_before_the_step_ends(book: Daybook) -> None:
    seen: list[list[Any]] = []

    @daybook.workflow
    def waits_on_a_slow_call(ctx: daybook.Context) -> str:
        def work() -> str:
            out = ctx.stream("status")
            out.write("started")
            out.flush()  # a reader sees it now, before a long call
            seen.append([c.value for c in book.chunks(ctx.run_id)])
            return "done"

        return str(ctx.decide("work", work).value)

    assert book.run(waits_on_a_slow_call, run_id="flushed") == "done"
    assert seen == [["started"]]
