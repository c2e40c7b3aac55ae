"""Named durable stream readers (`book.follow(run_id, stream=, reader=NAME)`, `daybook journal RUN
--stream NAME --follow --reader NAME`), on both stores with real processes: a reader SIGKILLed
and restarted under its name goes on after the last chunk it acknowledged, getting again only
the one chunk it held (at least once, a window of one chunk), or none when it acknowledged it;
a writer and a reader both killed mid-stream still give the consumer every chunk in order; the
CLI reader killed from outside prints each line once but for that window; bad input is refused
clearly; the store holds the reader's positions, never a chunk's value."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import stream_app
from conftest import HERE, cli, cli_in_process, killed, wait_until
from store_bytes import store_text

import daybook
from daybook import ConfigError, Daybook, DaybookError, ReaderBusy, RunNotFound, Secret
from daybook.coordination.entity import Entity
from daybook.coordination.reader import entity_name

WORDS = [f"w{i}" for i in range(stream_app.WORDS)]
PIECES = [w + " " for w in WORDS[:-1]] + [WORDS[-1]]


def _child(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(HERE / "stream_child.py"), *args], capture_output=True, text=True, timeout=300
    )


def _recorded(out: Path) -> list[str]:
    """The values the consumer recorded, in the order it recorded them."""
    return [line.split(" ", 2)[2] for line in out.read_text().splitlines()]


def _finished_run(db_url: str, run_id: str) -> None:
    with Daybook(db_url) as book:
        book.run(stream_app.streamed, "readers", run_id=run_id)


def test_a_reader_killed_holding_a_chunk_gets_that_chunk_once_more_and_nothing_else_lost(
    db_url: str, tmp_path: Path
) -> None:
    run_id = "reader-held"
    _finished_run(db_url, run_id)
    out = tmp_path / "consumer.txt"
    first = _child(db_url, "readas", run_id, str(out), "billing-ui", "--die-after", "40")
    assert killed(first), first.stderr
    second = _child(db_url, "readas", run_id, str(out), "billing-ui")
    assert second.returncode == 0, second.stderr
    # The 40th chunk was recorded, then the reader died before asking for the 41st: the store
    # never acknowledged it, so it comes again (the documented window), and only it.
    assert _recorded(out) == PIECES[:40] + PIECES[39:]
    with Daybook(db_url) as book:
        assert list(book.follow(run_id, stream="answer", reader="billing-ui")) == []  # all acknowledged


def test_a_reader_killed_after_acknowledging_a_chunk_never_gets_it_again(db_url: str, tmp_path: Path) -> None:
    run_id = "reader-acked"
    _finished_run(db_url, run_id)
    out = tmp_path / "consumer.txt"
    first = _child(db_url, "readas", run_id, str(out), "billing-ui", "--ack-then-die", "25")
    assert killed(first), first.stderr
    second = _child(db_url, "readas", run_id, str(out), "billing-ui")
    assert second.returncode == 0, second.stderr
    assert _recorded(out) == PIECES  # each once, in order


def test_a_reader_that_acknowledges_every_ten_chunks_gets_again_at_most_ten(
    db_url: str, tmp_path: Path
) -> None:
    run_id = "reader-every"
    _finished_run(db_url, run_id)
    out = tmp_path / "consumer.txt"
    first = _child(db_url, "readas", run_id, str(out), "batch", "--ack-every", "10", "--die-after", "25")
    assert killed(first), first.stderr
    second = _child(db_url, "readas", run_id, str(out), "batch", "--ack-every", "10")
    assert second.returncode == 0, second.stderr
    # Stored after the 10th and the 20th chunk taken: the 21st to 25th come again, no more.
    assert _recorded(out) == PIECES[:25] + PIECES[20:]
    with Daybook(db_url) as book, pytest.raises(ConfigError, match="ack_every"):
        book.follow(run_id, stream="answer", reader="batch", ack_every=0)


def test_a_writer_and_a_reader_both_killed_mid_stream_give_the_consumer_every_chunk_in_order(
    db_url: str, tmp_path: Path
) -> None:
    run_id = "reader-both"
    writer = _child(db_url, "write", run_id, "--die-mid-stream")
    assert killed(writer), writer.stderr
    with Daybook(db_url) as book:
        held = len(book.chunks(run_id, stream="answer"))
    assert 3 < held < len(PIECES)
    out = tmp_path / "consumer.txt"
    first = _child(db_url, "readas", run_id, str(out), "ui", "--die-after", str(held - 2))
    assert killed(first), first.stderr
    # The same reader name, restarted while the run is still unfinished, follows across the
    # writer's resume to the end of the stream.
    second = subprocess.Popen(
        [sys.executable, str(HERE / "stream_child.py"), db_url, "readas", run_id, str(out), "ui"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: len(_recorded(out)) > held - 2)  # it picked up where the first left off
        with Daybook(db_url) as book:
            book.resume(run_id, wait=30)
        assert second.wait(timeout=240) == 0, second.communicate()[1]
    finally:
        if second.poll() is None:
            second.kill()
    assert _recorded(out) == PIECES[: held - 2] + PIECES[held - 3 :]
    n = [int(line.split(" ")[1]) for line in out.read_text().splitlines()]
    assert n == list(range(held - 2)) + list(range(held - 3, len(PIECES)))


def test_a_cli_reader_killed_from_outside_prints_every_line_once_but_the_one_it_held(
    db_url: str, tmp_path: Path
) -> None:
    run_id = "reader-cli"
    _finished_run(db_url, run_id)
    out = tmp_path / "printed.txt"
    command = [sys.executable, "-m", "daybook", "journal", run_id, "--stream", "answer", "--follow"]
    command += ["--reader", "ops", "--db", db_url]
    with open(out, "a") as sink:
        proc = subprocess.Popen(command, stdout=sink, stderr=subprocess.PIPE, text=True, cwd=HERE)
        try:
            wait_until(lambda: len(out.read_text().splitlines()) >= 30, interval=0.001)
            os.kill(proc.pid, signal.SIGKILL)  # wherever it is: printing, acknowledging, reading
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert killed(proc)
    cut = len(out.read_text().splitlines())
    again = cli(*command[3:-2], db=db_url)
    assert again.returncode == 0, again.stderr
    lines = out.read_text().splitlines() + again.stdout.splitlines()
    values = [line.split("  ", 3)[3] for line in lines]
    # Every chunk printed, in order; at most the one line at the cut printed twice.
    assert values in (PIECES, PIECES[:cut] + PIECES[cut - 1 :]), (cut, values[cut - 3 : cut + 3])
    done = cli(*command[3:-2], db=db_url)
    assert done.returncode == 0 and done.stdout == ""  # the name has read everything


def test_a_reader_name_follows_each_stream_of_a_run_on_its_own(book: Daybook) -> None:
    book.run(stream_app.streamed, "two", run_id="reader-streams")
    with book.follow("reader-streams", stream="answer", reader="ui") as answer:
        taken = [next(answer) for _ in range(3)]
        answer.ack()
    assert [c.value for c in taken] == PIECES[:3]
    notes = [c.value for c in book.follow("reader-streams", stream="notes", reader="ui")]
    assert notes == [{"topic": "two"}, {"words": len(WORDS)}]
    rest = [c.value for c in book.follow("reader-streams", stream="answer", reader="ui")]
    assert rest == PIECES[3:]
    every = [c.stream for c in book.follow("reader-streams", reader="ui")]  # '*': its own position
    assert every == ["notes"] + ["answer"] * len(PIECES) + ["notes"]


def test_a_reader_that_stops_early_without_acknowledging_gets_the_chunk_in_hand_again(book: Daybook) -> None:
    book.run(stream_app.streamed, "early", run_id="reader-early")
    for chunk in book.follow("reader-early", stream="answer", reader="ui"):
        if chunk.n == 4:
            break  # not acknowledged: the loop never asked for the next one
    again = book.follow("reader-early", stream="answer", reader="ui")
    assert next(again).n == 4
    again.close()


def test_the_reader_rows_hold_positions_only_never_a_chunk_value(db_url: str) -> None:
    secret = "hunter2-reader-secret-4410"
    plant = "planted-chunk-text-for-readers"

    @daybook.workflow
    def leaky(ctx: daybook.Context) -> str:
        out = ctx.stream("log")
        out.write({"token": Secret(secret)})
        out.write(f"the token was {secret}")
        out.write(plant)
        return "done"

    with Daybook(db_url) as book:
        book.run(leaky, run_id="reader-secret")
        got = [c.value for c in book.follow("reader-secret", stream="log", reader="audit")]
        assert got[2] == plant
        log = Entity(book.store, entity_name("reader-secret", "log", "audit")).view().log
        assert [e.action for e in log] == ["claim", "read", "read", "read", "release"]
        assert [e.data for e in log if e.action == "read"] == [{"upto": 1}, {"upto": 2}, {"upto": 3}]
        assert book.leases() == []  # a reader's name is not a lease a person coordinates with
    text = store_text(db_url)
    assert secret not in text
    assert text.count(plant) == 1  # the chunk itself, and no copy in a reader's row


@pytest.mark.parametrize(
    ("reader", "said"),
    [
        ("", "reader name '' is not valid"),
        ("x" * 101, "reader name 'xxxx"),
        ("a/b", "reader name 'a/b' is not valid"),
        (7, "reader name 7 is not valid"),
    ],
)
def test_a_bad_reader_name_is_refused_saying_what_a_name_may_hold(
    book: Daybook, reader: Any, said: str
) -> None:
    book.run(stream_app.streamed, "bad", run_id="reader-bad")
    with pytest.raises(ConfigError, match=re.escape(said)) as caught:
        book.follow("reader-bad", stream="answer", reader=reader)
    assert "1 to 100 letters" in str(caught.value)


def test_a_reader_on_a_finished_run_without_that_stream_is_told_which_it_wrote(book: Daybook) -> None:
    book.run(stream_app.streamed, "which", run_id="reader-which")
    with pytest.raises(ConfigError, match=r"never wrote stream 'answr' \(it wrote 'answer', 'notes'\)"):
        book.follow("reader-which", stream="answr", reader="ui")
    with pytest.raises(RunNotFound):
        book.follow("no-such-run", stream="answer", reader="ui")
    with pytest.raises(ConfigError, match="give after= or reader=, not both"):
        book.follow("reader-which", stream="answer", reader="ui", after=3)
    done = cli_in_process("journal", "reader-which", "--reader", "ui", db=book.url)
    assert done.returncode != 0 and "give --stream NAME" in done.stderr


def test_one_process_per_reader_name_at_a_time(book: Daybook) -> None:
    book.run(stream_app.streamed, "busy", run_id="reader-busy")
    first = book.follow("reader-busy", stream="answer", reader="ui")
    with pytest.raises(ReaderBusy, match="already open in this process"):
        book.follow("reader-busy", stream="answer", reader="ui")
    first.close()
    # A live process on another host holds the name: refused, saying who and for how long.
    name = entity_name("reader-busy", "answer", "ui")
    assert Entity(book.store, name).claim("elsewhere:4242:1:boot:ns:abcdef", 30)
    with pytest.raises(ReaderBusy, match=r"in use by process 4242 on elsewhere .*lapses in \d+s"):
        book.follow("reader-busy", stream="answer", reader="ui")
    assert isinstance(ReaderBusy("x"), DaybookError)


def test_a_read_only_handle_cannot_keep_a_readers_position(db_url: str) -> None:
    _finished_run(db_url, "reader-ro")
    with Daybook(db_url, read_only=True) as book, pytest.raises(ConfigError, match="opened read-only"):
        book.follow("reader-ro", stream="answer", reader="ui")


def test_a_reader_following_a_live_run_waits_for_its_stream(db_url: str) -> None:
    """A run still going may not have written the stream yet: the name waits, not refuses."""
    run_id = "reader-live"
    got: list[Any] = []
    writer = subprocess.Popen(
        [sys.executable, str(HERE / "stream_child.py"), db_url, "write", run_id],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with Daybook(db_url) as book:
            wait_until(lambda: book.store.get_run(run_id) is not None)

            def read() -> None:
                got.extend(book.follow(run_id, stream="answer", reader="live", timeout=240))

            reader = threading.Thread(target=read, daemon=True)
            reader.start()
            assert writer.wait(timeout=240) == 0, writer.communicate()[1]
            reader.join(timeout=120)
            assert not reader.is_alive()
    finally:
        if writer.poll() is None:
            writer.kill()
    assert [c.value for c in got] == PIECES


def test_a_reader_whose_name_was_taken_over_stops_rather_than_move_the_position_back(book: Daybook) -> None:
    book.run(stream_app.streamed, "taken", run_id="reader-taken")
    chunks = book.follow("reader-taken", stream="answer", reader="ui")
    held = [next(chunks) for _ in range(3)]
    # Meanwhile its claim lapsed and a process elsewhere took the name and read further.
    entity = Entity(book.store, entity_name("reader-taken", "answer", "ui"))
    holder = entity.view().holder
    assert holder is not None and book.store.entity_release(entity.name, holder, time.time())
    other = "elsewhere:4242:1:boot:ns:abcdef"
    assert entity.claim(other, 30) and entity.record(other, "read", {"upto": held[-1].cursor + 10})
    with pytest.raises(ReaderBusy, match="another process took the name over"):
        chunks.ack()
    assert [e.data for e in entity.view().log if e.action == "read"][-1] == {"upto": held[-1].cursor + 10}
