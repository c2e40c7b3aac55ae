"""A database password never appears in a message (audit D10): not in an error, not in `daybook`
output, not in `book.url`. The test server trusts 127.0.0.1, so any password connects."""

from __future__ import annotations

import pytest
from conftest import cli

import daybook
from daybook import ConfigError, Daybook, RunNotFound

PASSWORD = "S3cretPW-d10"


def _with_password(db_url: str) -> str:
    if not db_url.startswith("postgres"):
        pytest.skip("a password is a PostgreSQL URL's")
    return db_url.replace("postgresql://", f"postgresql://root:{PASSWORD}@", 1)


def test_the_password_in_a_store_url_is_never_shown(db_url: str) -> None:
    url = _with_password(db_url)

    @daybook.workflow
    def hello(ctx: daybook.Context) -> str:
        return "hi"

    with Daybook(url) as book:
        assert book.run(hello, run_id="p1") == "hi"  # it connects (and its heartbeat does)
        assert PASSWORD not in book.url and "root:***@" in book.url
        with pytest.raises(RunNotFound) as missing:
            book.get_run("nope")
        assert PASSWORD not in str(missing.value)
    for args in (("show", "nope"), ("runs", "--status", "failed"), ("export", "nope"), ("check",)):
        out = cli(*args, db=url)
        assert PASSWORD not in out.stdout + out.stderr, args
    with Daybook(url, read_only=True) as reader, pytest.raises(ConfigError) as refused:
        reader.signal("p1", "go")
    assert PASSWORD not in str(refused.value)


def test_a_connection_or_url_error_never_shows_the_password() -> None:
    for url in (
        f"postgresql://root:{PASSWORD}@127.0.0.1:1/test",
        f"postgresql://root@127.0.0.1:5432/test?password={PASSWORD}&bogus=1",
        f"mysql://root:{PASSWORD}@127.0.0.1/test",
    ):
        with pytest.raises(ConfigError) as raised:
            Daybook(url)
        assert PASSWORD not in str(raised.value), url
        out = cli("runs", db=url)
        assert out.returncode != 0 and PASSWORD not in out.stdout + out.stderr, url
