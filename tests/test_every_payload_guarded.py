"""Every payload through the guard, no side door (issue 26 item 4; design review §6: a secret in
clear in a transaction's `tx:stage` row, `tx:*` rows outside the codec).

One run carries a planted secret through every feature that writes rows (tests/secrecy_app.py:
decisions, effects, transactions with staged, held and aborted calls, speculation, a subtask,
a child run, a release gate and a gate, the inbox, an update, steering, and `book.recover` of a
failed run), and the side features write it too (a parked run's error and a cancel, an entity
log, a schedule, a record commit). Then the raw SQLite file with its WAL (or every PostgreSQL
row of the schema), `daybook export` and the web inspector's pages, JSON and live stream are
searched: 0 hits. Twice: with the secret marked and no codec (concealment), and with
FernetCodec and nothing marked (encryption). The three agent-framework integrations run under a
codec too. (The MCP proxy's arguments are tested with the proxy.)
"""

from __future__ import annotations

import importlib.util
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import HERE, cli, cli_in_process
from starlette.testclient import TestClient
from store_bytes import store_text

from daybook import Daybook, FernetCodec, RunStatus, Suspended, UpdateTimeout
from daybook.errors import RunFailed, RunParked
from daybook.store import Store
from daybook.store.guarded import PASSTHROUGH, GuardedStore
from daybook.store.parts import methods
from daybook.web.app import build

APP = str(HERE / "secrecy_app.py")


def _import_app() -> Any:
    spec = importlib.util.spec_from_file_location("secrecy_app", APP)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


app = _import_app()


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    value = f"PLANTED-{uuid.uuid4().hex}"
    monkeypatch.setenv("PLANTED_SECRET", value)
    monkeypatch.setenv("SECRECY_LOG", str(tmp_path / "counterparty.log"))
    monkeypatch.delenv("DAYBOOK_CODEC_KEY", raising=False)
    yield value


def _approve_all(book: Daybook, token: str) -> None:
    for gate in book.approvals("all"):
        if gate["state"] == "waiting":
            book.approve(str(gate["run_id"]), str(gate["gate_id"]), approver="alice", token=token)


def _drive(book: Daybook, note: str, payload: str) -> dict[str, Any]:
    """The run to its end: each gate approved, then a signal, an update and a revision."""
    token = book.add_approver("alice")
    with pytest.raises(Suspended):
        book.run(app.everything, note, run_id="all")
    for _ in range(2):  # the release gate, then the gate
        _approve_all(book, token)
        with pytest.raises(Suspended):
            book.resume("all", app=APP)
    book.signal("all", "go", payload)
    with pytest.raises(UpdateTimeout):
        book.update("all", "ask", {"p": payload}, timeout=0.05)  # stays queued in the inbox
    book.steer("all", "add", f"also {payload}", wait=0)
    result: dict[str, Any] = book.resume("all", app=APP)
    assert book.get_run("all").status == RunStatus.COMPLETED
    with pytest.raises(RunFailed):
        book.run(app.recoverable, note, run_id="recovered")
    recovered = book.recover("recovered")
    assert recovered.result["confirmed"] == "confirmed", recovered
    return result


def _side_features(book: Daybook, secret: str) -> None:
    """Payloads outside a workflow's journal: an entity entry, a schedule's input, a record."""
    entity = book.entity("desk")
    assert entity.claim("agent-1", ttl=60)
    assert entity.record("agent-1", "note", {"text": secret})
    book.schedule("nightly", app.child_login, cron="0 6 * * *", args=[secret])
    book.transaction("store a note", lambda tx: tx.put("notes", "n1", {"text": secret}))
    with pytest.raises(RunParked):
        book.run(app.breaks, secret, run_id="parked")
    book.cancel("parked")  # an operator's transition rewrites the header's error


def _web_text(book: Daybook, keyless: bool = False) -> str:
    """Every page and JSON answer of the web inspector over `book`'s store (`keyless`: a run's
    page may answer 400 or 404, saying the codec it needs)."""
    client = TestClient(build(book))
    out = []
    runs = [r.run_id for r in book.store.list_runs(limit=100)]
    assert "all" in runs
    pages = ["/", "/approvals", "/attention", "/api/runs"]
    # A finished run's live stream (Server-Sent Events) sends every row, then ends.
    pages += [p for run in runs for p in (f"/runs/{run}", f"/api/runs/{run}", f"/runs/{run}/events")]
    pages += [f"/runs/{run}/streams/*" for run in runs]  # a finished run's chunks, then the end
    for page in pages:
        answer = client.get(page)
        refused = keyless and "/runs/" in page and answer.status_code in (400, 404) and "codec" in answer.text
        assert answer.status_code == 200 or refused, (page, answer.text[:300])
        if page.endswith("/events") and not refused:
            assert "event: row" in answer.text  # the stream sent the journal
        out.append(answer.text)
    return "\n".join(out)


def _received(tmp_log: str) -> str:
    return Path(tmp_log).read_text(encoding="utf-8")


def test_a_marked_secret_is_in_no_row_no_export_and_no_web_page_of_any_feature(
    db_url: str, planted: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SECRECY_MARK", "1")
    with Daybook(db_url, inline_wait=0) as book:
        result = _drive(book, "a note", "go")
        assert result["approved"] and result["signal"] == "go"
        # Live, the counterparty got the value, in every call (the tools' own log).
        received = _received(os.environ["SECRECY_LOG"])
        for tool in ("login", "reserve", "stage_file", "charge"):
            assert f"{tool}|{planted}" in received, tool
        journal = book.journal("all")
        assert any(e.name == "tx:stage" for e in journal) and any(e.name == "tx:abort" for e in journal)
        exported = cli_in_process("export", "all", db=db_url)
        assert exported.returncode == 0, exported.stderr
        everywhere = [store_text(db_url), json.dumps(book.export("all")), exported.stdout, _web_text(book)]
    for where, text in zip(("store", "export", "cli export", "web"), everywhere, strict=True):
        assert planted not in text, where


def test_with_an_encrypting_codec_no_payload_of_any_feature_is_in_clear(
    db_url: str, planted: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SECRECY_MARK", "0")  # nothing marked: the codec alone protects
    # A second value never marked anywhere (so never scrubbed as a live secret either): only
    # the codec keeps it out of the run's input, the inbox, the update, the steering text, ...
    clear = f"CLEAR-{uuid.uuid4().hex}"
    key = FernetCodec.new_key()
    with Daybook(db_url, inline_wait=0, codec=FernetCodec(key)) as book:
        result = _drive(book, clear, clear)
        assert result["note"] == clear and result["signal"] == clear  # the key holder reads it
        assert result["update"] == {"echo": {"p": clear}} and result["revisions"] == [f"also {clear}"]
        _side_features(book, clear)
        assert book.record("notes", "n1") == {"text": clear}
        assert book.entity("desk").view().log[-1].data == {"text": clear}
        assert [c.value["note"] for c in book.chunks("all", stream="log")] == [clear]
        aborts = [e.data["value"]["error"] for e in book.journal("all") if e.name == "tx:abort"]
        (declined,) = [a["message"] for a in aborts if "declined" in a["message"]]
        assert clear in declined and "[secret]" in declined  # decrypted; the live secret scrubbed
        assert clear in json.dumps(book.get_run("parked").error)
        kept = store_text(db_url)
    assert planted not in kept and clear not in kept
    # Without the key: the export refuses (it cannot decrypt), the web inspector shows envelopes.
    keyless = {k: v for k, v in os.environ.items() if k != "DAYBOOK_CODEC_KEY"}
    exported = cli("export", "all", db=db_url, env=keyless)
    assert exported.returncode != 0 and "codec" in exported.stderr
    assert clear not in exported.stdout + exported.stderr
    with Daybook(db_url, read_only=True) as reader:
        seen = _web_text(reader, keyless=True)
    assert planted not in seen and clear not in seen


def test_the_guard_covers_every_store_method_with_no_side_door() -> None:
    guarded = {n for n, v in vars(GuardedStore).items() if callable(v) and not n.startswith("_")}
    wanted = methods(Store)  # every part's
    assert len(wanted) > 50
    assert wanted <= guarded, f"store methods the guard does not cover: {sorted(wanted - guarded)}"
    assert not hasattr(GuardedStore, "__getattr__")
    payloads = {"tx_begin", "tx_mark", "transition", "signal", "stage", "entity_record", "put_schedule"}
    assert not payloads & set(PASSTHROUGH)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("example", "run_flag"),
    [
        ("pydantic_ai_agent.py", "--run"),
        ("openai_agents_refund.py", "--run"),
        ("langgraph_agent.py", "--thread"),
    ],
)
def test_an_integration_agent_under_a_codec_keeps_its_payloads_encrypted(
    db_url: str, tmp_path: Path, example: str, run_flag: str
) -> None:
    refund_agent = pytest.importorskip("refund_agent")
    order = f"ORDER-{uuid.uuid4().hex}"  # in the model's prompt, the tool's arguments, the answer
    env = {
        **os.environ,
        "REFUNDS": str(tmp_path / "refunds.jsonl"),
        "MODEL_CALLS": str(tmp_path / "model.txt"),
        "CHECKPOINTS": str(tmp_path / "checkpoints.db"),  # LangGraph's own state, not daybook's
        "DAYBOOK_CODEC_KEY": FernetCodec.new_key(),
    }
    done = refund_agent.agent(example, env, "--db", db_url, run_flag, "refund-1", "--order", order)
    out, err = done.communicate(timeout=120)
    if done.returncode != 0 and "No module named" in err:
        pytest.skip(err.strip().splitlines()[-1])
    assert done.returncode == 0, err
    assert order in out  # the agent's answer names the order
    assert order in Path(env["REFUNDS"]).read_text()  # the counterparty got the order, live
    kept = store_text(db_url)
    assert "refund-1" in kept and order not in kept  # the store holds it only encrypted
