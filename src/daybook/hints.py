"""The `daybook CMD ...` commands messages suggest: each names the store it needs (`--db URL`).

An error raised by a `Daybook` opened on a store other than the default (`$DAYBOOK_DB`, else
./daybook.db) suggested `daybook show RUN`, which then looked in ./daybook.db ("no daybook store
at ...") instead of the store the run is in. `with_db` gives each hint in backticks the `--db`
that reaches the same store (a password never shown); `name_the_store` applies it to every
DaybookError leaving a public method of a class with a `url` (Daybook). The CLI's own lines go
through `with_db` too, with the `--db` the command was given.

It imports only `daybook.errors`; `Daybook` (book.py) and the CLI import it.
"""

from __future__ import annotations

import functools
import inspect
import re
import shlex
from collections.abc import Callable
from typing import Any, TypeVar

from .errors import DaybookError, redact_url

C = TypeVar("C", bound=type)

_HINT = re.compile(r"`(daybook [^`]*)`")
# Options a hint may end with whose value the reader fills in: `--db` goes before such an
# option, never between it and its value (`daybook budget RUN --db URL --raise`).
TAKES_VALUE = frozenset(
    {"--raise", "--payload", "--confirmed", "--failed", "--app", "--sweep", "--day", "--by"}
)


def with_db(text: str, db: str | None) -> str:
    """`text` with each `daybook CMD ...` hint in backticks given `--db DB` (password masked,
    shell-quoted); unchanged for no `db`, and a hint that names a `--db` already keeps it."""
    if not db:
        return text
    flag = f"--db {shlex.quote(redact_url(db))}"

    def add(match: re.Match[str]) -> str:
        words = match.group(1).split(" ")
        if "--db" in words:
            return match.group(0)
        # Before `--` (what follows is another program's command line: `daybook mcp-proxy --
        # CMD`) or a trailing option awaiting its value; else at the end.
        at = words.index("--") if "--" in words else len(words) - (words[-1] in TAKES_VALUE)
        return "`" + " ".join([*words[:at], flag, *words[at:]]) + "`"

    return _HINT.sub(add, text)


def name_the_store(default_url: Callable[[None], str]) -> Callable[[C], C]:
    """A class decorator: a DaybookError leaving a public method of the class has the hints in
    its message given `--db self.url`, unless `self.url` is the store a bare `daybook` command
    opens (`default_url(None)`, read when the error happens: $DAYBOOK_DB may change)."""

    def decorate(cls: C) -> C:
        for name in dir(cls):
            method = inspect.getattr_static(cls, name)
            if not name.startswith("_") and inspect.isfunction(method):
                setattr(cls, name, _hinting(method, default_url))
        return cls

    return decorate


def _hinting(method: Callable[..., Any], default_url: Callable[[None], str]) -> Callable[..., Any]:
    def name_store(self: Any, exc: DaybookError) -> None:
        url = self.url
        if url != default_url(None) and exc.args and isinstance(exc.args[0], str):
            exc.args = (with_db(exc.args[0], url), *exc.args[1:])

    if inspect.iscoroutinefunction(method):

        @functools.wraps(method)
        async def run_async(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return await method(self, *args, **kwargs)
            except DaybookError as exc:
                name_store(self, exc)
                raise

        return run_async

    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except DaybookError as exc:
            name_store(self, exc)
            raise

    return run
