"""The store's own health: check (audit every row, exit 1 on any finding) and migrate (create
the store, or upgrade its schema, and nothing else)."""

from __future__ import annotations

import sys
from typing import Any

import click

from .. import SCHEMA_VERSION, Daybook, DaybookError
from .app import EXIT_ERROR, db_option, fail, json_option, json_out, say


@click.command()
@json_option("The findings as JSON: {ok, findings: [{run_id, seq, problem}]}.")
@db_option
def check(db: str | None, as_json: bool) -> None:
    """Audit the store, reading only: the database's own check (SQLite quick_check), then every
    row: headers and journal rows decode, each run's seq has no gap, every attempt and outcome
    has its intent. Exit 1 on any finding."""
    try:
        with Daybook(db, read_only=True) as book:
            findings = book.check()
    except DaybookError as exc:
        # No store to read (a missing or empty file, not a daybook store): that is a finding.
        findings = [{"run_id": None, "seq": None, "problem": str(exc)}]
    if as_json:
        json_out({"ok": not findings, "findings": findings})
    else:
        for f in findings:
            say(f"{_where(f)}: {f['problem']}")
    if findings:
        say(f"{len(findings)} finding(s)", err=True)
        sys.exit(EXIT_ERROR)
    say("no findings: every row decodes, no journal has a gap, every outcome has its intent", err=True)


def _where(finding: dict[str, Any]) -> str:
    if finding["run_id"] is None:
        return "store"
    seq = "" if finding["seq"] is None else f" seq {finding['seq']}"
    return f"run {finding['run_id']}{seq}"


@click.command()
@db_option
def migrate(db: str | None) -> None:
    """Create the store if there is none, or upgrade its schema to this daybook's (read
    commands never do either)."""
    try:
        with Daybook(db) as book:
            say(f"store {book.url} is at schema v{SCHEMA_VERSION}")
    except DaybookError as exc:
        fail(str(exc))


COMMANDS = (check, migrate)
