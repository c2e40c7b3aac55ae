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
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, overload

import click

from .. import CorruptJournal, Daybook, DaybookError, NeedsAttention, Suspended
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


ReadOnly = bool | Callable[[dict[str, Any]], bool]


@overload
def with_book(fn: Callable[..., Any]) -> Callable[..., Any]: ...


@overload
def with_book(*, read_only: ReadOnly) -> Decorator: ...


def with_book(fn: Callable[..., Any] | None = None, *, read_only: ReadOnly = False) -> Any:
    """Give the command `--db` and call it with the open store as its first argument; a
    DaybookError it raises becomes its line on stderr and its exit code. `read_only` (or a
    function of the command's options saying so) opens the store for reading only: it must
    exist, and nothing is created, upgraded or written. Runs a listing skipped because a row
    does not decode are named on stderr, with what to do."""
    if fn is None:
        return functools.partial(with_book, read_only=read_only)
    command = fn

    @db_option
    @functools.wraps(command)
    def wrapper(db: str | None, **kwargs: Any) -> Any:
        reading = read_only(kwargs) if callable(read_only) else read_only
        try:
            with Daybook(db, read_only=reading) as book:
                try:
                    return command(book, **kwargs)
                finally:
                    warn_damaged(book)
        except NeedsAttention as exc:
            fail(str(exc), EXIT_ATTENTION)
        except Suspended as exc:
            fail(str(exc), EXIT_SUSPENDED)
        except CorruptJournal as exc:
            fail(_with_salvage_hint(str(exc)))
        except DaybookError as exc:
            fail(str(exc))

    return wrapper


def _with_salvage_hint(message: str) -> str:
    if "--raw" in message:
        return message
    return (
        f"{message} (`daybook check` lists every damaged row; `daybook export RUN --raw` "
        "salvages what of a run is readable)"
    )


def warn_damaged(book: Daybook) -> None:
    """One line on stderr per run a listing skipped because a row of it does not decode."""
    for run_id, problem in book.damaged().items():
        click.echo(
            f"warning: skipped run {run_id!r}, which is damaged ({problem}); find every damaged "
            f"row with `daybook check`, salvage the run with `daybook export {run_id} --raw`",
            err=True,
        )


if TYPE_CHECKING:
    _ParamType = click.ParamType[float]  # generic from click 8.2; the floor (8.1) is not
else:
    _ParamType = click.ParamType


class Bounded(_ParamType):
    """A number option checked as the API checks it (finite, within bounds), so `nan`, `inf`,
    a negative or a huge value is a usage error (exit 2) that says what is allowed."""

    name = "seconds"

    def __init__(self, check: Callable[[object], float]) -> None:
        self.check = check

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        try:
            return self.check(number)
        except DaybookError as exc:
            self.fail(str(exc), param, ctx)


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
