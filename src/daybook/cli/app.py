"""The `daybook` click group and what every command shares: the `--db` option and opening the
store (`with_book`), JSON output, and the exit codes.

Exit codes: 0 ok, 1 error (`EXIT_ERROR`), 2 usage (click's own), 3 a run needs a person
(`EXIT_ATTENTION`), 5 a run is suspended (`EXIT_SUSPENDED`). Each non-zero code of ours comes
with one line on stderr, `error: ...`, `needs attention: ...` or `suspended: ...`, from `fail`.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any, NoReturn

import click

from ..book import Daybook
from ..errors import DaybookError, NeedsAttention, Suspended

EXIT_ERROR = 1
EXIT_ATTENTION = 3
EXIT_SUSPENDED = 5

_SAYS = {EXIT_ERROR: "error", EXIT_ATTENTION: "needs attention", EXIT_SUSPENDED: "suspended"}


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
