"""The `daybook` click group and what the commands share: `--db` and opening the store
(`with_book`), the exit codes (`fail`), JSON output, the JSON-or-table listing, and the options
several commands take alike (`--json`, `--app`, `--by`).

Exit codes: 0 ok, 1 error (`EXIT_ERROR`), 2 usage (click's own), 3 a run needs a person
(`EXIT_ATTENTION`), 5 a run is suspended (`EXIT_SUSPENDED`). Each non-zero code of ours comes
with one line on stderr, `error: ...`, `needs attention: ...` or `suspended: ...`, from `fail`.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeVar

import click

from .. import Daybook, DaybookError, NeedsAttention, Suspended
from . import render

EXIT_ERROR = 1
EXIT_ATTENTION = 3
EXIT_SUSPENDED = 5

_SAYS = {EXIT_ERROR: "error", EXIT_ATTENTION: "needs attention", EXIT_SUSPENDED: "suspended"}

T = TypeVar("T")
Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="daybook")
def main() -> None:
    """daybook: a durable journal for AI agents. Intent before every act, outcome after."""


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """Say on stderr what stopped the command (prefixed by what `code` means) and exit with it."""
    click.echo(f"{_SAYS[code]}: {message}", err=True)
    sys.exit(code)


db_option = click.option(
    "--db",
    "db",
    envvar="DAYBOOK_DB",
    default=None,
    metavar="URL",
    help="Store URL: sqlite:///path.db (default ./daybook.db, or $DAYBOOK_DB) or postgresql://...",
)


def with_book(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Give the command `--db` and call it with the open store as its first argument; a
    DaybookError it raises becomes its line on stderr and its exit code."""

    @db_option
    @functools.wraps(fn)
    def wrapper(db: str | None, **kwargs: Any) -> Any:
        try:
            with Daybook(db) as book:
                return fn(book, **kwargs)
        except NeedsAttention as exc:
            fail(str(exc), EXIT_ATTENTION)
        except Suspended as exc:
            fail(str(exc), EXIT_SUSPENDED)
        except DaybookError as exc:
            fail(str(exc))

    return wrapper


def json_out(value: Any) -> None:
    """Print `value` as indented JSON (what every `--json` prints)."""
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


def listing(
    found: Sequence[T],
    as_json: bool,
    *,
    empty: str,
    headers: list[str],
    row: Callable[[T], list[str]],
    data: Callable[[T], Any] | None = None,
) -> bool:
    """Print what a listing command found: as JSON (each item through `data`, if given) with
    `--json`, else `empty` when nothing was found, else a table of `row(item)` under `headers`.
    True when it printed a table."""
    if as_json:
        json_out(found if data is None else [data(item) for item in found])
        return False
    if not found:
        click.echo(empty)
        return False
    click.echo(render.table(headers, [row(item) for item in found]))
    return True


def json_option(help_text: str = "JSON instead of a table.") -> Decorator:
    """`--json` (as `as_json`)."""
    return click.option("--json", "as_json", is_flag=True, help=help_text)


def app_option(help_text: str) -> Decorator:
    """`--app MODULE|FILE.py`, once (as `app`)."""
    return click.option("--app", default=None, metavar="MODULE|FILE.py", help=help_text)


def apps_option(help_text: str) -> Decorator:
    """`--app MODULE|FILE.py`, repeatable (as `apps`)."""
    return click.option("--app", "apps", multiple=True, metavar="MODULE|FILE.py", help=help_text)


def by_option(verb: str) -> Decorator:
    """`--by`: who does it, journaled with the act (Daybook takes the OS user for None)."""
    return click.option("--by", default=None, help=f"Who {verb} it (default: the OS user).")
