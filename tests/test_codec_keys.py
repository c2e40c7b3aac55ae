"""The store knows its codec (issue 26 item 6, audit R9): a worker with the wrong key parked
every run it touched and re-encrypted their errors under its own key; a keyless writer stored
payloads in clear without a word. Now the store records its codec's key fingerprints, and a
read-write handle without the key, or with another one, is refused at open and writes nothing.
Rotation (`$DAYBOOK_CODEC_KEY=new,old`) works across real processes."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from conftest import HERE, cli
from store_bytes import store_text

from daybook import ConfigError, Daybook, FernetCodec, RunStatus
from daybook.store.codec import key_fingerprint

APP = str(HERE / "secret_app.py")
CARD = "4111-1111-1111-1111"


@pytest.fixture(autouse=True)
def no_key_in_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("DAYBOOK_CODEC_KEY", raising=False)
    yield


def _rows(db_url: str) -> str:
    """Every row of the store as text (not the SQLite file's bytes: opening it may touch the
    shared-memory index without writing a row)."""
    if db_url.startswith("sqlite:"):
        with sqlite3.connect(db_url.removeprefix("sqlite:///")) as db:
            return "\n".join(db.iterdump())
    # PostgreSQL lists tables and rows in no fixed order: compare them sorted.
    return "\n".join(sorted(store_text(db_url).split("\n")))


def _env(key: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DAYBOOK_CODEC_KEY"}
    if key is not None:
        env["DAYBOOK_CODEC_KEY"] = key
    return env


def _worker(db_url: str, key: str | None) -> subprocess.CompletedProcess[str]:
    return cli("worker", "--app", APP, "--poll", "0.1", "--until-idle", db=db_url, env=_env(key))


_SLEEPERS = """
import sys
import daybook
sys.path.insert(0, sys.argv[2])
import secret_app
book = daybook.Daybook(sys.argv[1], codec=daybook.FernetCodec(sys.argv[3]), inline_wait=0)
for run_id in sys.argv[5:]:
    try:
        book.run(secret_app.card_holder, sys.argv[4], run_id=run_id)
    except daybook.Suspended:
        pass
"""


def _sleepers(db_url: str, key: str, *run_ids: str) -> None:
    """Runs under `key`, each waiting on a short timer (due for a worker a moment later), from a
    process of its own."""
    done = subprocess.run(
        [sys.executable, "-c", _SLEEPERS, db_url, str(HERE), key, CARD, *(run_ids or ("A", "B"))],
        capture_output=True,
        text=True,
        env=_env(None),
    )
    assert done.returncode == 0, done.stderr


def test_a_worker_with_the_wrong_key_is_refused_at_start_and_writes_nothing(db_url: str) -> None:
    k1, k2 = FernetCodec.new_key(), FernetCodec.new_key()
    _sleepers(db_url, k1)
    time.sleep(0.6)  # the timers are due: a worker would take the runs now
    before = _rows(db_url)
    assert key_fingerprint(k1) in before and k1 not in before  # the store keeps a fingerprint
    wrong = _worker(db_url, k2)
    assert wrong.returncode != 0
    assert key_fingerprint(k1) in wrong.stderr and "nothing was written" in wrong.stderr
    assert k1 not in wrong.stderr and k2 not in wrong.stderr  # fingerprints, never keys
    assert _rows(db_url) == before  # no run parked, no error re-encrypted, no fingerprint added
    # The right key alone still reads and finishes every run.
    right = _worker(db_url, k1)
    assert right.returncode == 0, right.stderr
    with Daybook(db_url, codec=FernetCodec(k1)) as book:
        for run_id in ("A", "B"):
            info = book.get_run(run_id)
            assert info.status == RunStatus.COMPLETED and info.result == {"charged": 42, "card": CARD}
    assert CARD not in store_text(db_url)


def test_a_writer_without_the_key_is_refused_on_an_encrypted_store(db_url: str) -> None:
    key = FernetCodec.new_key()
    _sleepers(db_url, key)
    before = _rows(db_url)
    submit = (
        "import daybook, sys; sys.path.insert(0, sys.argv[2]); import secret_app; "
        "daybook.Daybook(sys.argv[1]).submit(secret_app.card_holder, '5500-0000-0000-0004')"
    )
    keyless = subprocess.run(
        [sys.executable, "-c", submit, db_url, str(HERE)], capture_output=True, text=True, env=_env(None)
    )
    assert keyless.returncode != 0 and "no codec" in keyless.stderr, keyless.stderr
    assert "5500-0000" not in _rows(db_url) and _rows(db_url) == before
    with pytest.raises(ConfigError, match="no codec, so it would write them in clear"):
        Daybook(db_url)
    with pytest.raises(ConfigError, match="none of them"):
        Daybook(db_url, codec=FernetCodec(FernetCodec.new_key()))
    # Reading needs no key: the listing works, a payload says which codec it needs.
    listed = cli("runs", db=db_url, env=_env(None))
    assert listed.returncode == 0 and "A" in listed.stdout
    shown = cli("show", "A", db=db_url, env=_env(None))
    assert shown.returncode != 0 and "'fernet' payload codec" in shown.stderr
    assert _rows(db_url) == before


def test_a_rotated_key_writes_and_the_old_key_still_reads_across_processes(db_url: str) -> None:
    old, new = FernetCodec.new_key(), FernetCodec.new_key()
    _sleepers(db_url, old)
    time.sleep(0.6)
    # A worker given the new key first and the old one after finishes runs written under the old.
    rotated = _worker(db_url, f"{new},{old}")
    assert rotated.returncode == 0, rotated.stderr
    # The new key now opens the store on its own (recorded), and reads what it wrote...
    _sleepers(db_url, new, "C")
    time.sleep(0.6)
    alone = _worker(db_url, new)
    assert alone.returncode == 0, alone.stderr
    # ...and every run, old rows and new, reads with both keys in another process.
    for run_id in ("A", "B", "C"):
        exported = cli("export", run_id, db=db_url, env=_env(f"{new},{old}"))
        assert exported.returncode == 0 and CARD in exported.stdout, exported.stderr
    assert "does not decrypt" in cli("export", "A", db=db_url, env=_env(new)).stderr  # A began under old
    assert CARD not in store_text(db_url)
