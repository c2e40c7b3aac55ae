"""Semantic recovery from the command line: `daybook recover` (roll back the failed subtask
instance of a run, or explain why not) and `daybook boundaries` (lint a reviewed boundary config)."""

from __future__ import annotations

from typing import Any

import click

from .. import ConfigError, Daybook, DaybookError, Recovery, RecoveryPolicy
from ..recovery import lint
from ..recovery.select import POLICIES
from . import render
from .app import (
    apps_option,
    by_option,
    credential_option,
    db_option,
    import_apps,
    json_option,
    json_out,
    parked_exit,
    say,
    with_book,
)


@click.command()
@click.argument("run_id")
@click.option(
    "--policy",
    type=click.Choice(POLICIES),
    default="dart",
    show_default=True,
    help="dart: latest admissible checkpoint of the failed instance; entry: its entry checkpoint, "
    "no checks; coarse: re-run from its entry onwards; retry: re-run the whole task.",
)
@click.option(
    "--instance", default=None, help="The failed instance (Skeleton::entity::n), if the journal has none."
)
@click.option("--no-blocking", is_flag=True, help="Ablation: ignore committed consumers (unsafe; for study).")
@click.option("--exits", is_flag=True, help="Also consider exit checkpoints.")
@click.option(
    "--joint", is_flag=True, help="Roll committed consumers back too when all they did can be undone."
)
@click.option("--explain", is_flag=True, help="Show every candidate checkpoint and the conditions it passes.")
@click.option("--dry-run", is_flag=True, help="Decide and explain; change nothing.")
@click.option(
    "--submit", is_flag=True, help="Leave the restored run pending for a worker instead of running it here."
)
@apps_option("The module or script defining the run's workflow and tools (or $DAYBOOK_APP).")
@by_option("recovers")
@json_option("The recovery as JSON.")
@credential_option
@with_book
def recover(
    book: Daybook,
    run_id: str,
    policy: str,
    no_blocking: bool,
    exits: bool,
    joint: bool,
    explain: bool,
    apps: tuple[str, ...],
    as_json: bool,
    **call: Any,
) -> None:
    """Recover a failed run by rolling back only its failed subtask instance (`ctx.subtask`) to
    the latest checkpoint no committed consumer depends on and no irreversible effect lies after;
    if there is none, re-run the whole task (confirmed effects replay, never re-fire)."""
    import_apps(apps)
    chosen = RecoveryPolicy(policy, blocking=not no_blocking, exits=exits, joint=joint)
    with parked_exit(book, run_id):
        try:  # `call`: instance, dry_run, submit, by, token
            rec = book.recover(run_id, policy=chosen, app=apps, **call)
        except DaybookError as exc:
            if isinstance(exc.recovery, Recovery):  # the re-run stopped: say what was done first
                _show(exc.recovery, as_json, explain, ended=False)
            raise
        _show(rec, as_json, explain or call["dry_run"])
        if rec.refused:  # a dry run refuses as the real call would, with the same exit code
            raise ConfigError(rec.refused)


def _show(rec: Recovery, as_json: bool, explain: bool, ended: bool = True) -> None:
    if as_json:
        json_out({**rec.as_dict(), "result": rec.result})
    else:
        _say(rec, explain, ended)


def _say(rec: Recovery, explain: bool, ended: bool = True) -> None:
    where = f" at {rec.checkpoint}" if rec.checkpoint else ""
    mode = "would " if rec.dry_run else ""
    if rec.action == "restore":
        say(f"{rec.run_id}: {mode}restore {rec.instance}{where} ({rec.policy}, signal {rec.signal})")
    else:
        say(f"{rec.run_id}: {mode}re-run the whole task ({rec.policy}: {rec.reason}, signal {rec.signal})")
    say(
        f"replays {rec.replayed} action(s), {rec.upstream} upstream; keeps {rec.preserved} committed "
        f"instance(s); undoes {rec.compensated or 'nothing'}"
    )
    if rec.dropped:
        say(f"committed consumers left standing on undone work: {', '.join(rec.dropped)}")
    if explain and rec.verdicts:
        rows = [
            [
                str(v["checkpoint"]),
                _yes(v["in_scope"]),
                _yes(v["no_committed_conflict"]),
                _yes(v["effect_allowed"]),
                str(v["reason"]),
                ", ".join(map(str, v["consumers"] or v["effects"] or [])),
            ]
            for v in rec.verdicts
        ]
        say(
            render.table(
                ["checkpoint", "in scope", "no committed conflict", "effect allowed", "verdict", "why"], rows
            )
        )
    if rec.refused:
        say(f"the recovery would be refused: {rec.refused}")
    elif not rec.dry_run and ended:
        say(f"result: {rec.result!r}" if rec.result is not None else "the run is pending: a worker runs it")


def _yes(value: object) -> str:
    return "yes" if value else "no"


@click.command()
@click.argument("config", type=click.Path(exists=True, dir_okay=False))
@json_option("The findings as JSON.")
@db_option
def boundaries(config: str, as_json: bool, db: str | None) -> None:
    """Lint a reviewed boundary config (JSON: transitions and skeletons): list the legal edges that
    are not reviewed exits (legal is not recoverable) and reviewed exits that are not legal.
    Exits 1 if any edge needs review. (--db is accepted like on every command; the config is a
    file, not the store.)"""
    try:
        edges, skels = lint.load(config)
        found = lint.lint(edges, skels)
    except DaybookError as exc:  # a config that is not JSON or not the shape: a usage error
        raise click.BadParameter(str(exc), param_hint="'CONFIG'") from None
    open_edges = [f for f in found if f.verdict != "exit boundary"]
    if as_json:
        json_out(
            {
                "findings": [
                    {"skeleton": f.skeleton, "edge": list(f.edge), "verdict": f.verdict} for f in found
                ],
                "summary": lint.summary(edges, skels),
            }
        )
    else:
        rows = [[f.skeleton, f"{f.edge[0]} -> {f.edge[1]}", f.verdict] for f in found]
        say(render.table(["skeleton", "edge", "verdict"], rows))
        say(f"{len(open_edges)} edge(s) need review")
    if open_edges:
        raise SystemExit(1)


COMMANDS = (recover, boundaries)
