"""Secrets never in clear (issue 11 part 2, H9, audit D11): a value marked secret, on the tool
(`secrets=`, `secret_result=`) or as a value (`daybook.Secret`), is journaled as a keyed digest.
Each test plants a unique secret, lets a tool receive it live from a real HTTP server, then
reads the raw SQLite bytes or every PostgreSQL row, the export and the error messages."""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import HERE, cli, cli_in_process
from store_bytes import store_text

import daybook
from daybook import ConfigError, Daybook, RunStatus, Secret, SecretUnavailable, Suspended
from daybook.demo.bank import Bank

APP = str(HERE / "secret_app.py")


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    value = f"PLANTED-{uuid.uuid4().hex}"
    monkeypatch.setenv("PLANTED_SECRET", value)
    yield value


def _import_app() -> object:
    import importlib.util

    spec = importlib.util.spec_from_file_location("secret_app", APP)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


app = _import_app()


def _everywhere(db_url: str, run_id: str, book: Daybook) -> str:
    """The raw store, the API export and the CLI export, as one text to search."""
    exported = cli_in_process("export", run_id, db=db_url)
    assert exported.returncode == 0, exported.stderr
    return "\n".join([store_text(db_url), json.dumps(book.export(run_id)), exported.stdout, exported.stderr])


def test_a_secret_reaches_the_tool_but_never_the_store_the_export_or_a_resume(
    db_url: str, bank: Bank, planted: str
) -> None:
    with Daybook(db_url, inline_wait=0) as book:
        with pytest.raises(Suspended):
            book.run(app.sign_in, bank.url, "alice", run_id="s1")  # type: ignore[attr-defined]
        # Live, the tools got the real values: the bank saw the password and the token.
        (login,) = bank.records["logins"].values()
        assert login["password"] == planted
        (call,) = bank.records["calls"].values()
        assert call["auth"].startswith(f"tok-{planted}-")
        assert planted not in _everywhere(db_url, "s1", book)
        intent = next(e for e in book.journal("s1") if e.kind == "intent" and e.name == "login")
        assert intent.data["args"]["password"]["$secret"].startswith("hmac-sha256:")

    # A fresh process finishes the run from the journal: every settled step replays (the digest
    # is stable, so the fingerprints match), nothing is sent again, and still no secret is written.
    env = {k: v for k, v in os.environ.items() if k != "PLANTED_SECRET"}
    assert cli("signal", "s1", "go", "--payload", '"yes"', db=db_url, env=env).returncode == 0
    resumed = cli("resume", "s1", "--app", APP, db=db_url, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["go"] == "yes"
    assert sorted(bank.executions.values()) == [1, 1, 1]
    checked = cli("replay-check", "s1", "--app", APP, db=db_url, env=env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    with Daybook(db_url) as book:
        assert book.get_run("s1").status == RunStatus.COMPLETED
        assert book.replay("s1", app=APP)["login"] == login["id"]
        assert planted not in _everywhere(db_url, "s1", book)


def test_without_the_marking_the_same_scenario_leaks(db_url: str, bank: Bank, planted: str) -> None:
    # The control: the test above could fail. Unmarked, the password is in the store and export.
    with Daybook(db_url) as book:
        book.run(app.sign_in_unmarked, bank.url, "alice", run_id="u1")  # type: ignore[attr-defined]
        assert planted in store_text(db_url)
        assert planted in json.dumps(book.export("u1"))


def test_a_secret_quoted_in_an_error_is_scrubbed_from_the_error_the_journal_and_the_log(
    db_url: str, planted: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="daybook")
    with Daybook(db_url) as book:
        with pytest.raises(daybook.DaybookError) as raised:
            book.run(app.refused, "alice", run_id="e1")  # type: ignore[attr-defined]
        assert "login refused for alice" in str(raised.value)
        assert planted not in str(raised.value)
        assert planted not in repr(raised.value.args)
        assert planted not in caplog.text
        assert planted not in _everywhere(db_url, "e1", book)
        assert "[secret]" in json.dumps(book.export("e1"))


def test_a_secret_result_is_live_only_replay_hands_back_a_withheld_secret(
    db_url: str, bank: Bank, planted: str
) -> None:
    with Daybook(db_url, inline_wait=0) as book:
        with pytest.raises(Suspended):
            book.run(app.sign_in, bank.url, "bob", run_id="t1")  # type: ignore[attr-defined]
        outcome = next(e for e in book.journal("t1") if e.kind == "outcome" and e.name == "issue_token")
        digest = outcome.data["result"]["$secret"]
        replayed = Secret.withheld(digest)
        assert not replayed.available
        with pytest.raises(SecretUnavailable, match="holds only its digest"):
            replayed.reveal()
        assert planted not in repr(Secret(planted)) and planted not in str(Secret(planted))


def test_the_digest_is_keyed_and_stable_across_handles(db_url: str, tmp_path: Path) -> None:
    @daybook.workflow
    def pick(ctx: daybook.Context) -> None:
        ctx.decide("pin", lambda: Secret("1234"))

    def digest_with(url: str, key: str | None, run_id: str) -> str:
        with Daybook(url, secret_key=key) as book:
            book.run(pick, run_id=run_id)
            return str(book.journal(run_id)[1].data["value"]["$secret"])

    a = digest_with(db_url, "k" * 32, "d1")
    assert digest_with(db_url, "k" * 32, "d2") == a
    assert digest_with(db_url, "j" * 32, "d3") != a
    # With no key given, the store's own key: stable across handles of the same store.
    assert digest_with(db_url, None, "d4") == digest_with(db_url, None, "d5")
    with pytest.raises(ConfigError, match="at least 16"):
        Daybook(db_url, secret_key="short")


def test_a_secret_as_workflow_input_is_refused_with_what_to_do_instead(db_url: str, planted: str) -> None:
    @daybook.workflow
    def uses(ctx: daybook.Context, api_key: object) -> None:
        return None

    with Daybook(db_url) as book:
        with pytest.raises(ConfigError, match=r"cannot be workflow input.*secret manager"):
            book.run(uses, Secret(planted), run_id="i1")
        assert book.store.get_run("i1") is None
        assert planted not in store_text(db_url)
