"""Subtask skeletons and instances: `ctx.subtask`, the units semantic recovery rolls back.

A skeleton is the reviewed template of a subtask (its inputs, outputs and effect policy); an
instance is one occurrence of it on one entity, named `Skeleton::entity::ordinal`. Entering an
instance, each reviewed commit and its exit are journaled as recorded steps (`subtask:*`
decisions) carrying what the recovery controller needs later, in any process: the instance, the
keys it reads (at entry) and writes (at each checkpoint), and its effect policy. The steps
between an instance's markers belong to it. Nothing here decides anything; `recovery/trace.py`
reads these rows back.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from ..errors import ConfigError
from ..journal.decision import Decisions
from ..journal.execution import Execution
from ..journal.facet import Facet
from ..records import JSON, check_text
from .signal import normalize

PREFIX = "subtask:"
POLICIES = ("classes", "frozen")


@dataclass(frozen=True)
class Skeleton:
    """A reviewed subtask template. `inputs`/`outputs`: the keys an instance may read and write
    (templates: `{entity}` is replaced by the instance's entity); an upper bound, the journal
    records what each instance declared. `effects`: "classes" (roll back across an effect when its
    class allows: bufferable dropped, compensable undone, irreversible never) or "frozen" (never
    across a confirmed effect). `states`, `entry_states`, `transitions` and `exits` describe the
    agent's FSM for the boundary linter (`daybook.recovery.lint`)."""

    name: str
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    effects: str = "classes"
    states: tuple[str, ...] = ()
    entry_states: tuple[str, ...] = ()
    exits: tuple[tuple[str, str], ...] = ()
    commits: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_text(self.name, "a skeleton's name")
        if "::" in self.name:
            raise ConfigError(f"skeleton name {self.name!r} must not contain '::' (it separates ids)")
        if self.effects not in POLICIES:
            raise ConfigError(
                f"skeleton {self.name!r}: effects must be one of {POLICIES}, not {self.effects!r}"
            )

    @classmethod
    def load(cls, path: str | Path) -> dict[str, Skeleton]:
        """The skeletons of a reviewed config file (JSON: {"skeletons": [{"name": ...}, ...]})."""
        data = json.loads(Path(path).read_text())
        return {s.name: s for s in skeletons_of(data, str(path))}


def skeletons_of(data: Any, where: str) -> list[Skeleton]:
    if not isinstance(data, dict) or not isinstance(data.get("skeletons"), list):
        raise ConfigError(f"{where}: a boundary config is a JSON object with a list 'skeletons'")
    found = []
    for item in data["skeletons"]:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise ConfigError(f"{where}: every skeleton needs a 'name', got {item!r}")
        try:
            found.append(
                Skeleton(
                    name=item["name"],
                    inputs=tuple(item.get("inputs", ())),
                    outputs=tuple(item.get("outputs", ())),
                    effects=str(item.get("effects", "classes")),
                    states=tuple(item.get("states", ())),
                    entry_states=tuple(item.get("entry_states", ())),
                    exits=tuple((str(a), str(b)) for a, b in item.get("exits", ())),
                    commits=tuple(item.get("commits", ())),
                )
            )
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: skeleton {item.get('name')!r}: {exc}") from None
    return found


def instance_id(skeleton: str, entity: str, ordinal: int) -> str:
    return f"{skeleton}::{entity}::{ordinal}"


def _echo(payload: dict[str, JSON]) -> dict[str, JSON]:
    return payload


@dataclass
class _Registry:
    """This execution's instances: ordinals and which are active (rebuilt by replay)."""

    ordinals: dict[tuple[str, str], int] = field(default_factory=dict)
    active: dict[tuple[str, str], str] = field(default_factory=dict)


class Subtask:
    """An active subtask instance (`with ctx.subtask(...) as u`): `u.id`, `u.commit(...)`,
    `u.exit(...)`. Leaving the block without `exit()` keeps the instance active: entering the
    same skeleton and entity again continues it (no new entry checkpoint)."""

    def __init__(self, facet: Subtasks, skeleton: Skeleton, entity: str, reads: Sequence[str] | None) -> None:
        self._facet = facet
        self.skeleton = skeleton
        self.entity = entity
        # None: it declared no reads at all (not even `reads=[]`): recovery then counts it as a
        # possible consumer of whatever ran before it.
        self.reads = None if reads is None else tuple(reads)
        self.id = ""
        self.exited = False

    def _mark(self, kind: str, **data: JSON) -> None:
        self._facet._decisions.decide(PREFIX + kind, _echo, {"instance": self.id, **data})

    def __enter__(self) -> Subtask:
        reg = self._facet._registry()
        slot = (self.skeleton.name, self.entity)
        if slot in reg.active:
            self.id = reg.active[slot]
            self._mark("resume", reads=self._reads())
            return self
        ordinal = reg.ordinals.get(slot, 0)
        reg.ordinals[slot] = ordinal + 1
        self.id = instance_id(self.skeleton.name, self.entity, ordinal)
        reg.active[slot] = self.id
        self._mark(
            "entry",
            skeleton=self.skeleton.name,
            entity=self.entity,
            ordinal=ordinal,
            reads=self._reads(),
            outputs=list(self._outputs()),
            effects=self.skeleton.effects,
        )
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.exited:
            return
        if exc is None:
            self._mark("leave")
        elif isinstance(exc, Exception):
            # The failure event's instance and signal, journaled where it happened (a control-flow
            # stop, a pause or a crash writes nothing: recovery then reads the run's error).
            error = {"type": type(exc).__name__, "message": str(exc)[:2000]}
            self._mark("fail", signal=normalize(exc).value, error=error)

    async def __aenter__(self) -> Subtask:
        return self.__enter__()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(kind, exc, tb)

    def commit(self, *writes: str, **outputs: JSON) -> None:
        """A reviewed commit predicate holds: journal a commit checkpoint, naming the keys the
        instance has written since its last checkpoint (`writes`, and the names of `outputs`,
        whose values are kept with the checkpoint)."""
        self._mark("commit", writes=sorted({*writes, *outputs}), values=dict(outputs))

    def exit(self, *writes: str, **outputs: JSON) -> None:
        """A reviewed exit predicate holds: journal the exit checkpoint; the instance is done (the
        same skeleton and entity entered again is a new instance, ordinal + 1)."""
        self._mark("exit", writes=sorted({*writes, *outputs}), values=dict(outputs))
        self._facet._registry().active.pop((self.skeleton.name, self.entity), None)
        self.exited = True

    def _reads(self) -> list[JSON] | None:
        return None if self.reads is None else list(self.reads)

    def _outputs(self) -> Iterable[str]:
        return (o.replace("{entity}", self.entity) for o in self.skeleton.outputs)


class Subtasks(Facet):
    """`ctx.subtask(skeleton, entity=...)`: mark a subtask instance active (DART, seed 004)."""

    def __init__(self, exe: Execution, decisions: Decisions) -> None:
        super().__init__(exe)
        self._decisions = decisions
        self._subtasks = _Registry()

    def subtask(
        self, skeleton: str | Skeleton, entity: str = "-", *, reads: Iterable[str] | None = None
    ) -> Subtask:
        """A subtask instance of `skeleton` on `entity`, as a context manager (`with` or `async
        with`): entering journals its entry checkpoint (or continues it, if active); `commit()`
        and `exit()` journal the others. `reads`: the keys it consumes (other instances' outputs),
        added to the skeleton's declared inputs; `reads=[]` declares it reads nothing. With
        neither (`reads` left None and no skeleton inputs), recovery treats it as a possible
        consumer of everything that ran before it. `daybook recover` restores a failed
        instance to its latest admissible checkpoint."""
        skel = skeleton if isinstance(skeleton, Skeleton) else Skeleton(str(skeleton))
        check_text(entity, "a subtask's entity")
        if "::" in entity:
            raise ConfigError(f"entity {entity!r} must not contain '::' (it separates instance ids)")
        declared = [i.replace("{entity}", entity) for i in skel.inputs]
        if reads is None and not declared:
            return Subtask(self, skel, entity, None)
        return Subtask(self, skel, entity, sorted({*declared, *(reads or ())}))

    def _registry(self) -> _Registry:
        return self._subtasks
