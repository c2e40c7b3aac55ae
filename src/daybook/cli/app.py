"""The `daybook` click group and what the commands share: `--db` and opening the store
(`with_book`), the exit codes (`fail`), JSON output, the JSON-or-table listing, and the options
several commands take alike (`--json`, `--app`, `--by`).

Exit codes: 0 ok, 1 error (`EXIT_ERROR`), 2 usage (click's own: a bad option or argument, raised
as `click.UsageError`/`BadParameter`), 3 a run needs a person (`EXIT_ATTENTION`), 5 a run is
suspended (`EXIT_SUSPENDED`). Each non-zero code of ours comes with one line on stderr,
`error: ...`, `needs attention: ...` or `suspended: ...`, from `fail`.

Everything printed goes through `say` (or `json_out`), which escapes terminal control characters
(`render.safe`), and a hint naming a `daybook ...` command carries the `--db` the command was
given (`with_db`), so following it reaches the same store.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import re
import shlex
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, overload

import click

from .. import CorruptJournal, Daybook, DaybookError, NeedsAttention, Suspended, __version__
from ..errors import redact_url
from ..gates.signing import read_key_file
from ..hints import with_db as hinted
from ..runtime.workflow import app_of, load_app, trusted_ref
from . import render

# The distribution's name on the package index (`pip install daybook-runtime`); the import
# package and the command stay `daybook` (the name `daybook` on PyPI is an unrelated project).
DISTRIBUTION = "daybook-runtime"

EXIT_ERROR = 1
EXIT_ATTENTION = 3
EXIT_SUSPENDED = 5

_SAYS = {EXIT_ERROR: "error", EXIT_ATTENTION: "needs attention", EXIT_SUSPENDED: "suspended"}

T = TypeVar("T")
Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


@contextlib.contextmanager
def _escaped_errors() -> Iterator[None]:
    """click's own usage errors quote what was typed (an unknown option, extra arguments) as is:
    escape it like everything else printed (`render.safe`), so argv cannot write to the terminal."""
    try:
        yield
    except click.ClickException as exc:
        vars(exc)["message"] = render.safe(exc.message, lines=True)  # Final in the stubs, not at runtime
        raise
    except ValueError as exc:
        # click's Path type stats what it is given: a NUL byte (possible from a program calling
        # the CLI in-process, never from a shell) is a usage error, not a traceback.
        if "null byte" not in str(exc):
            raise
        raise click.UsageError("an argument holds a NUL byte (\\x00): no path or value can") from exc


class SafeGroup(click.Group):
    """A click group whose usage errors (raised parsing its options or its subcommands') print
    escaped."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        with _escaped_errors():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        with _escaped_errors():
            return super().invoke(ctx)


GROUP_DB = "daybook.group_db"


def _group_db(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """`daybook --db URL CMD ...`: kept for the command, which takes it unless given its own."""
    if value is not None:
        ctx.meta[GROUP_DB] = remember_db(value)
    return value


def given_db(ctx: click.Context) -> str | None:
    """The `--db` given before the command (`daybook --db URL CMD`), if any."""
    found: str | None = ctx.find_root().meta.get(GROUP_DB)
    return found


@click.group(cls=SafeGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, package_name=DISTRIBUTION, prog_name="daybook")
@click.option(
    "--db",
    default=None,
    metavar="URL",
    expose_value=False,
    is_eager=True,
    callback=_group_db,
    help="Store URL for the command (before or after it: `daybook --db URL runs` is "
    "`daybook runs --db URL`; default $DAYBOOK_DB, else ./daybook.db).",
)
def main() -> None:
    """daybook: a durable journal for AI agents. Intent before every act, outcome after."""
    logger = logging.getLogger("daybook")
    if not any(isinstance(f, _EscapedLog) for f in logger.filters):
        logger.addFilter(_EscapedLog())


class _EscapedLog(logging.Filter):
    """daybook's own log lines (which quote run ids, keys and errors) escaped like everything
    else the CLI prints, whatever handler the operator's logging set up."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = render.safe(record.getMessage(), lines=True), None
        return True


def say(text: str, err: bool = False) -> None:
    """Print a line (or lines) for a person: control characters escaped, `daybook ...` hints
    given the command's `--db`."""
    click.echo(render.safe(with_db(text), lines=True), err=err)


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """Say on stderr what stopped the command (prefixed by what `code` means) and exit with it."""
    say(f"{_SAYS[code]}: {message}", err=True)
    sys.exit(code)


@contextlib.contextmanager
def parked_exit(book: Daybook, run_id: str) -> Iterator[None]:
    """A run this command ran that ended parked (`needs_attention`) exits with EXIT_ATTENTION,
    saying why; any other error goes on as usual."""
    try:
        yield
    except DaybookError as exc:
        info = book.store.get_run(run_id)
        if info is not None and info.status == "needs_attention":
            fail(str(exc), EXIT_ATTENTION)
        raise


def with_db(text: str, db: str | None = None) -> str:
    """`text` with each `daybook CMD ...` hint in backticks given the `--db` this command was
    given (or `db`; none when it used the default store), so the hint reaches the same store."""
    ctx = click.get_current_context(silent=True)
    return hinted(text, db or (ctx.meta.get("daybook.db") if ctx is not None else None))


def remember_db(db: str | None) -> str | None:
    """Check `--db` (an empty one, e.g. an unset `$DAYBOOK_DB` in a script, is a usage error, not
    ./daybook.db) and keep it for `with_db`."""
    if db is None and os.environ.get("DAYBOOK_DB", "x").strip() == "":
        db = ""  # click reads a set but empty variable as unset: it is not
    if db is not None and not db.strip():
        raise click.BadParameter(
            "is empty (an empty $DAYBOOK_DB?); give a store URL, or leave both unset for ./daybook.db",
            param_hint="'--db'",
        )
    ctx = click.get_current_context(silent=True)
    if ctx is not None and db:
        ctx.find_root().meta["daybook.db"] = db
    return db


def _command_db(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """A command's `--db`: given after the command, else before it (`daybook --db URL CMD`),
    else $DAYBOOK_DB (read here, not by click, so that the one before the command wins over
    it); the two places naming different stores is a usage error."""
    before = given_db(ctx)
    if value is None:
        value = before if before is not None else os.environ.get("DAYBOOK_DB")
    elif before is not None and value != before:
        raise click.BadParameter(
            f"names {redact_url(value)!r} after the command but {redact_url(before)!r} before it; give one",
            param_hint="'--db'",
        )
    return remember_db(value)


db_option = click.option(
    "--db",
    "db",
    default=None,
    metavar="URL",
    callback=_command_db,
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
                except (NeedsAttention, Suspended) as exc:
                    stopped(book, exc)
                finally:
                    warn_damaged(book)
        except CorruptJournal as exc:
            fail(_with_salvage_hint(str(exc)))
        except DaybookError as exc:
            fail(str(exc))

    return wrapper


def stopped(book: Daybook, exc: NeedsAttention | Suspended) -> NoReturn:
    """A run that stopped for a person (exit 3) or suspended (exit 5): say why, with the
    `daybook resume` that continues it given the `--app` its stored reference suggests, and the
    `daybook approve` that decides the gate it waits at."""
    message = str(exc)
    # The bare hint (or with the --db Daybook gave it) becomes one with the --app it needs.
    bare = re.compile(rf"`daybook resume {re.escape(exc.run_id)}(?: --db [^`]*)?`")
    with contextlib.suppress(DaybookError):  # no such run to look up: the message stands
        message = bare.sub(lambda _: resume_hint(book, exc.run_id), message)
    if isinstance(exc, Suspended):
        fail(message + _gate_hint(exc), EXIT_SUSPENDED)
    fail(message, EXIT_ATTENTION)


def _gate_hint(exc: Suspended) -> str:
    """When a run waits at an approval gate, name the command that decides it."""
    found = re.search(r"'verdict:([^']+)'", exc.waiting_for)
    if found is None:
        return ""
    run, gate = shlex.quote(exc.run_id), shlex.quote(found.group(1))
    return (
        f"; it waits at approval gate {found.group(1)}: decide it with `daybook approve {run} {gate} "
        f"--as NAME` or `daybook deny {run} {gate} --as NAME` (the token in $DAYBOOK_TOKEN)"
    )


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
        say(
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
    click.echo(render.safe_json(json.dumps(value, indent=2, ensure_ascii=False)))


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
        say(empty)
        return False
    say(render.table(headers, [row(item) for item in found]))
    return True


def json_option(help_text: str = "JSON instead of a table.") -> Decorator:
    """`--json` (as `as_json`)."""
    return click.option("--json", "as_json", is_flag=True, help=help_text)


def apps_option(help_text: str) -> Decorator:
    """`--app MODULE|FILE.py`, repeatable (as `apps`): the only code a command imports (with
    $DAYBOOK_APP); a run's stored reference is never imported."""
    return click.option(
        "--app", "apps", multiple=True, metavar="MODULE|FILE.py", help=help_text + " Repeatable."
    )


def resume_hint(book: Daybook, run_id: str) -> str:
    """`daybook resume RUN --app X` for a run. X comes from its stored reference only when this
    process loaded that workflow from that very reference (the operator's own code); else the
    stored text is untrusted data and the hint says `--app MODULE|FILE.py`."""
    info = book.get_run(run_id)
    app = " --app MODULE|FILE.py"
    if info.ref and trusted_ref(info.workflow, info.ref):
        app = f" --app {shlex.quote(app_of(info.ref))}"
    return f"`daybook resume {shlex.quote(run_id)}{app}`"


def import_apps(apps: Sequence[str]) -> None:
    """Import what the operator named with `--app` (a bad one is an error: exit 1, no traceback)."""
    for app in apps:
        try:
            load_app(app)
        except DaybookError as exc:
            fail(str(exc))


def by_option(verb: str) -> Decorator:
    """`--by`: who does it, journaled with the act (Daybook takes the OS user for None)."""
    return click.option("--by", default=None, help=f"Who {verb} it (default: the OS user).")


def credential_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`--token` / `--key-file`: the key that proves a registered approver's name (`--as`,
    `--by`); given to the command as `token` (the key file's text when a file is named)."""

    @functools.wraps(fn)
    def with_token(*args: Any, key_file: str | None = None, **kwargs: Any) -> Any:
        if key_file:
            try:
                kwargs["token"] = read_key_file(key_file)
            except DaybookError as exc:
                fail(str(exc))
        return fn(*args, **kwargs)

    options = [
        click.option(
            "--token",
            envvar=["DAYBOOK_TOKEN", "DAYBOOK_APPROVER_TOKEN"],
            default=None,
            help="A registered approver's key (token); prefer $DAYBOOK_TOKEN or --key-file "
            "(a flag is visible in `ps`).",
        ),
        click.option(
            "--key-file",
            envvar="DAYBOOK_KEY_FILE",
            default=None,
            metavar="PATH",
            help="The file holding the key (`daybook approvers add NAME --key-file PATH`); "
            "also $DAYBOOK_KEY_FILE.",
        ),
    ]
    wrapped: Callable[..., Any] = with_token
    for option in options:
        wrapped = option(wrapped)
    return wrapped
