"""Payload codecs (issue 11 part 2): a whole-payload policy the store applies to every payload,
as Temporal's payload codecs do. FernetCodec encrypts; RedactingCodec digests named fields."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator

import pytest
from conftest import HERE, cli
from store_bytes import store_text
from test_secrets import app

from daybook import ConfigError, Daybook, FernetCodec, RedactingCodec, RunStatus, Suspended
from daybook.demo.bank import Bank

APP = str(HERE / "secret_app.py")


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    value = f"PLANTED-{uuid.uuid4().hex}"
    monkeypatch.setenv("PLANTED_SECRET", value)
    yield value


def test_an_encrypting_codec_keeps_every_payload_unreadable_without_its_key(
    db_url: str, bank: Bank, planted: str
) -> None:
    key = FernetCodec.new_key()
    with Daybook(db_url, codec=FernetCodec(key), inline_wait=0) as book:
        # Nothing marked secret: the codec alone keeps the password out of the store.
        assert book.run(app.sign_in_unmarked, bank.url, "al", run_id="f1")["login"]  # type: ignore[attr-defined]
        with pytest.raises(Suspended):
            book.run(app.sign_in, bank.url, "al", run_id="f2")  # type: ignore[attr-defined]
        assert planted not in store_text(db_url)
        # The key holder reads it back (that is what the key is for); replay works through it.
        assert planted in json.dumps(book.export("f1"))
        assert book.replay("f1", app=APP)["login"] == book.get_run("f1").result["login"]
        intent = next(e for e in book.journal("f1") if e.kind == "intent")
        assert intent.data["args"]["password"] == planted
    raw = cli(
        "export", "f1", db=db_url, env={k: v for k, v in os.environ.items() if k != "DAYBOOK_CODEC_KEY"}
    )
    assert planted not in raw.stdout + raw.stderr
    assert raw.returncode != 0 and "codec" in raw.stderr
    # A fresh process (a worker, the CLI) is given the key by $DAYBOOK_CODEC_KEY and finishes the run.
    rotated = FernetCodec.new_key()
    env = {**os.environ, "DAYBOOK_CODEC_KEY": f"{rotated},{key}"}  # a rotation: the new key first
    assert cli("signal", "f2", "go", "--payload", '"ok"', db=db_url, env=env).returncode == 0
    resumed = cli("resume", "f2", "--app", APP, db=db_url, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert sorted(bank.executions.values()) == [1, 1, 1, 1]  # nothing sent twice
    with Daybook(db_url, codec=FernetCodec(rotated, key)) as book:
        assert book.get_run("f2").status == RunStatus.COMPLETED  # new rows under the new key
        stranger = FernetCodec(FernetCodec.new_key())
        with pytest.raises(ConfigError, match="none of them"):
            Daybook(db_url, codec=stranger)  # refused at open: it would write under its own key
        with pytest.raises(ConfigError, match="does not decrypt"):
            Daybook(db_url, codec=stranger, read_only=True).journal("f1")
    assert planted not in store_text(db_url)


def test_a_redacting_codec_digests_named_fields_everywhere(db_url: str, bank: Bank, planted: str) -> None:
    with Daybook(db_url, codec=RedactingCodec(fields=("password",))) as book:
        assert book.run(app.sign_in_env, bank.url, "bo", run_id="r1")["login"]  # type: ignore[attr-defined]
        (login,) = bank.records["logins"].values()
        assert login["password"] == planted  # the tool got the value
        assert planted not in store_text(db_url) and planted not in json.dumps(book.export("r1"))
        intent = next(e for e in book.journal("r1") if e.kind == "intent")
        assert intent.data["args"]["password"]["$secret"].startswith("hmac-sha256:")
        assert book.replay("r1", app=APP)["login"] == login["id"]
    with pytest.raises(ConfigError, match="tuple of field names"):
        RedactingCodec(fields="password")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="not a Fernet key"):
        FernetCodec("nope")
