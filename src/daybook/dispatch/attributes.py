"""`ctx.set_attributes`: search attributes a run sets on itself (`book.runs(attributes=...)`).

Journaled as an internal decision (`attributes:set`) whose row and index entries the store
writes in one transaction, so the index never holds what the journal does not; replay finds
the row and writes nothing. The values are indexed as they are (not encoded by a payload
codec), so a search attribute must not hold a secret.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from ..journal.execution import step_fingerprint
from ..journal.facet import Facet
from ..records import JSON, Kind, Status, check_text

STEP = "attributes:set"
MAX_NAME = 100
MAX_VALUE = 1_000


def checked(attributes: dict[str, Any]) -> dict[str, JSON]:
    if not attributes:
        raise ConfigError("set_attributes needs at least one attribute, e.g. customer='acme'")
    for name, value in attributes.items():
        check_text(name, "a search attribute name")
        if len(name) > MAX_NAME:
            raise ConfigError(f"search attribute name {name[:40]!r}... is longer than {MAX_NAME} characters")
        if not isinstance(value, str | int | float | bool):
            raise ConfigError(
                f"search attribute {name!r} must be a string, number or boolean, not "
                f"{type(value).__name__} (a secret never goes into the search index)"
            )
        if isinstance(value, str):
            check_text(value, f"search attribute {name!r}")
            if len(value) > MAX_VALUE:
                raise ConfigError(f"search attribute {name!r} is longer than {MAX_VALUE} characters")
    return dict(attributes)


class Attributes(Facet):
    """`ctx.set_attributes`."""

    def set_attributes(self, **attributes: JSON) -> None:
        """Set search attributes on this run (`customer="acme"`): `book.runs(attributes=...)`
        and `daybook runs --attr customer=acme` find it. A later call replaces a name's value.
        Journaled, so replay sets nothing again; values are strings, numbers or booleans."""
        exe = self._exe
        values = checked(attributes)
        step = exe.alloc()
        fp = step_fingerprint(values, step, STEP)
        if exe.expect(step, Kind.DECISION, STEP, fp) is not None:
            return  # recorded: its index entries were written with its row
        exe.append(
            Kind.DECISION,
            step,
            STEP,
            status=Status.RECORDED.value,
            fp=fp,
            data={"value": values},
            write=lambda ev: exe.store.set_attributes(ev, values),
        )
