"""Numbers are validated: a NaN, infinite, negative or huge lease TTL, inline wait, poll, limit,
concurrency, resume wait or sweep age is refused with a clear error, in the API and on the
command line (a usage error, exit 2), before it can orphan a run or sweep a live transaction."""

from __future__ import annotations

import math
import subprocess
import time

import pytest
from conftest import cli, cli_in_process, worker_command

import daybook
from daybook import ConfigError, Daybook
from daybook.worker import Worker

NOT_SECONDS = [math.nan, math.inf, -math.inf, -1, 10**30, 1e12, "5", True, None]


@daybook.workflow
def one(ctx: daybook.Context) -> int:
    return int(ctx.decide("a", lambda: 1).value)


def test_a_handle_refuses_lease_ttl_and_inline_wait_that_are_not_finite_bounded_seconds(db_url: str) -> None:
    for bad in [*NOT_SECONDS, 0]:
        with pytest.raises(ConfigError, match=r"lease_ttl \(seconds\) must be"):
            Daybook(db_url, lease_ttl=bad)  # type: ignore[arg-type]
    for bad in NOT_SECONDS:
        with pytest.raises(ConfigError, match=r"inline_wait \(seconds\) must be"):
            Daybook(db_url, inline_wait=bad)  # type: ignore[arg-type]
    with Daybook(db_url, lease_ttl=0.5, inline_wait=0) as book:
        for bad in (math.nan, math.inf, -1):
            with pytest.raises(ConfigError, match="lease_ttl"):
                book.lease_ttl = bad
            with pytest.raises(ConfigError, match="inline_wait"):
                book.inline_wait = bad
        assert (book.lease_ttl, book.inline_wait) == (0.5, 0)
        book.run(one, run_id="r1")
        info = book.get_run("r1")
        assert info.status == "completed" and info.lease_owner is None


def test_a_worker_refuses_bad_poll_concurrency_and_lease_ttl(db_url: str) -> None:
    for bad in (math.nan, math.inf, 0, -1, 1e9):
        with pytest.raises(ConfigError, match=r"poll \(seconds\) must be"):
            Worker(db_url, poll=bad)
    for bad_count in (0, -1, 100_000, 2.5, True):
        with pytest.raises(ConfigError, match="concurrency must be a whole number from 1 to 256"):
            Worker(db_url, concurrency=bad_count)  # type: ignore[arg-type]
    for bad in (math.nan, math.inf, 0):
        with pytest.raises(ConfigError, match="lease_ttl"):
            Worker(db_url, lease_ttl=bad)


def test_limits_waits_and_sweeps_are_checked_before_anything_is_read_or_deleted(db_url: str) -> None:
    with Daybook(db_url) as book:
        book.run(one, run_id="r1")
        book.store.stage("tx-live", "c", "1", "{}", time.time())  # a transaction in progress
        for bad_limit in (-1, 0, 10**30, 2.5):
            with pytest.raises(ConfigError, match="limit must be a whole number"):
                book.runs(limit=bad_limit)  # type: ignore[arg-type]
        for bad in (math.nan, math.inf, -1):
            with pytest.raises(ConfigError, match=r"wait \(seconds\) must be"):
                book.resume("r1", wait=bad)
        for bad in (math.nan, -10, math.inf, 1e30):
            with pytest.raises(ConfigError, match=r"older_than \(seconds\) must be"):
                book.sweep_orphans(bad)
        assert len(book.orphans()) == 1  # the live transaction's staging is untouched
        assert [r.run_id for r in book.runs(limit=1)] == ["r1"]


@pytest.mark.slow
def test_the_command_line_refuses_bad_numbers_as_usage_errors(db_url: str) -> None:
    with Daybook(db_url) as book:
        book.run(one, run_id="r1")
        book.store.stage("tx-live", "c", "1", "{}", time.time())
    cases = [
        (["runs", "--limit", "99999999999999999999999"], "--limit"),
        (["runs", "--limit", "-1"], "--limit"),
        (["orphans", "--sweep", "nan"], "must be a finite number"),
        (["orphans", "--sweep", "-10"], "must be a finite number >= 0"),
        (["orphans", "--sweep", "soon"], "is not a number"),
        (["resume", "r1", "--wait", "inf"], "must be a finite number"),
    ]
    # The first of each family in a real process, the others in this one (the same parsing).
    for i, (args, said) in enumerate(cases):
        proc = (cli if i == 0 else cli_in_process)(*args, db=db_url)
        assert proc.returncode == 2, (args, proc.stderr)
        assert said in proc.stderr and "Traceback" not in proc.stderr, (args, proc.stderr)
    for i, (option, value, said) in enumerate((
        ("--lease-ttl", "nan", "lease_ttl (seconds) must be a finite number > 0"),
        ("--lease-ttl", "inf", "lease_ttl (seconds) must be a finite number > 0"),
        ("--poll", "nan", "must be a finite number > 0"),
        ("--poll", "-1", "must be a finite number > 0"),
        ("--concurrency", "100000", "--concurrency"),
        ("--concurrency", "0", "--concurrency"),
    )):  # fmt: skip
        argv = [*worker_command(db_url, option, value), "--until-idle"]
        if i == 0:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        else:
            proc = cli_in_process(*argv[3:])  # (after `python -m daybook`)
        assert proc.returncode == 2, (option, value, proc.stderr)
        assert said in proc.stderr and "Traceback" not in proc.stderr, (option, value, proc.stderr)
    with Daybook(db_url) as book:
        assert len(book.orphans()) == 1
