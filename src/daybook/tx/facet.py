"""The `Transactions` facet of `ctx`: `ctx.transaction(scopes=..., retries=...)`, and `ctx.effect`
made transaction-aware (inside a block, a call is checked against the block's scopes, then
buffered, held or run now and compensated on abort). Outside any block a call runs as before,
except that with the `Daybook(gate_irreversible=)` policy an irreversible one is a one-effect
transaction whose release passes an approval gate first."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Protocol, TypeVar

from ..errors import ConfigError, ReleaseDeclined
from ..journal.act import TxMark
from ..journal.decision import Decision, Decisions
from ..journal.effect import Effects
from ..journal.execution import Execution
from ..journal.facet import Facet
from ..journal.tool import Tool, gate_terms
from ..records import JSON
from .atomix import DEFAULT_WAIT, EpochTransaction, drive_async, drive_sync
from .scope import parse_all
from .speculate import speculate

T = TypeVar("T")


def release_policy(value: object, what: str) -> bool | tuple[str, ...]:
    """A release policy as given (False, True, or approvers' names), checked."""
    if isinstance(value, bool):
        return value
    if (
        isinstance(value, str)
        or not isinstance(value, Sequence)
        or not all(isinstance(v, str) for v in value)
    ):
        raise ConfigError(f"{what}: {value!r}; use True, False or a list of approver names")
    return tuple(value)


class GateKeeper(Protocol):
    """What the release policy needs of the gates facet (`daybook.gates`, a sibling package
    this one does not import): the gate itself, and whether a decision's gate was approved."""

    def gate(
        self,
        action: str,
        *,
        decision: Decision[Any] | None = None,
        approvers: Sequence[str] | None = None,
        about: JSON = None,
        approvals: int = 1,
        precheck: Callable[[], JSON] | None = None,
    ) -> Any: ...

    def approved(self, decision_id: str) -> bool: ...


# A full `ctx` over a speculation branch's cursor, and its transactions facet.
Brancher = Callable[[Execution], "tuple[Any, Transactions]"]


class Block:
    """What `ctx.transaction(...)` returns: a context manager, `with` or `async with`; it
    yields the `EpochTransaction` (epoch, attempt, status, results)."""

    def __init__(self, owner: Transactions, tx: EpochTransaction) -> None:
        self._owner = owner
        self.tx = tx
        self._joined = False

    def _enter(self) -> EpochTransaction:
        outer = self._owner._tx
        if outer is not None and outer.group is not None:
            # Inside a speculation's branch the block joins the branch's transaction (the branch
            # commits or aborts as a whole, when the winner is chosen).
            self._joined = True
            return outer
        if outer is not None:
            raise ConfigError(
                f"ctx.transaction inside transaction {outer.tx_id}: transactions do not "
                "nest; declare every scope on the outer one"
            )
        self.tx.begin()
        self._owner._tx = self.tx
        return self.tx

    def __enter__(self) -> EpochTransaction:
        return self._enter()

    def __exit__(
        self, et: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        if self._joined:
            return False
        self._owner._tx = None
        return drive_sync(self.tx.end(exc))

    async def __aenter__(self) -> EpochTransaction:
        return self._enter()

    async def __aexit__(
        self, et: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        if self._joined:
            return False
        self._owner._tx = None
        return await drive_async(self.tx.end(exc))


class Transactions(Facet):
    """`ctx.transaction`: Atomix transactions (epochs, frontiers, the commit rule)."""

    def __init__(
        self,
        exe: Execution,
        effects: Effects,
        decisions: Decisions,
        gates: GateKeeper,
        branch: Brancher,
    ) -> None:
        super().__init__(exe)
        self._effects = effects
        self._decisions = decisions
        self._gates = gates
        self._branch_ctx = branch
        self._tx: EpochTransaction | None = None

    def transaction(
        self,
        scopes: Iterable[str],
        *,
        retries: int = 3,
        wait: float | None = DEFAULT_WAIT,
        gate: bool | Sequence[str] = False,
    ) -> Block:
        """A transaction over the resources `scopes` (`<type>:<path>[:<id>]`, `*` one segment,
        `**` any suffix), as `with` or `async with`.

        Entering takes a fresh epoch from the store and waits until no transaction with a smaller
        epoch on an overlapping scope is open: in the process for a short spin (`inline_wait`),
        then suspended (the run holds no process or worker slot; it looks again every second).
        `wait` (seconds, default 600; None: no limit) bounds the whole wait, across
        suspensions, from when the epoch was taken; past it FrontierTimeout is raised.
        Inside, `ctx.effect` calls are checked against the scopes (a tool's `scopes=`; outside:
        ScopeViolation, refused before it runs), then: a `bufferable` tool is staged and runs at
        commit; an irreversible one is held and runs at commit, once; any other runs now and its
        inverse runs on abort (newest first). Staged and held calls return None in the block;
        their results are in `tx.results` (by key) afterwards. Leaving normally commits; an
        exception aborts and the block runs again under a fresh epoch, up to `retries` times,
        then the exception propagates.

        `gate`: the release policy for held irreversible calls. False (default): released at
        commit. True, or a list of approver names: each passes an approval gate (`ctx.gate`,
        bound to the call's tool, key and arguments) before the commit decision; one not
        approved aborts the transaction without a retry and raises ReleaseDeclined."""
        parsed = parse_all(scopes, "ctx.transaction scopes")
        if not isinstance(gate, bool) and (isinstance(gate, str) or not isinstance(gate, Sequence)):
            raise ConfigError(f"ctx.transaction(gate={gate!r}): use True, False or a list of approver names")
        gate_fn = self._gates.gate
        tx = EpochTransaction(self._exe, self._effect_now, parsed, retries, wait, None, gate, gate_fn)
        return Block(self, tx)

    def speculate(
        self,
        branches: Mapping[str, Callable[[Any], Any]],
        *,
        choose: Callable[[dict[str, Any]], str],
        scopes: Iterable[str] | None = None,
        wait: float | None = DEFAULT_WAIT,
        deadline: float | None = None,
    ) -> Any:
        """Best-of-K: run every branch `fn(ctx)` concurrently (threads), each in its own
        transaction over `scopes` (default `**`, everything), then `choose(results)` (the results
        of the branches that finished without an exception, by name; recorded) names the winner.
        The losers are aborted (staged calls dropped, held calls never released, calls that ran
        now undone by their inverses) and the winner commits; returns the winner's result.
        Branches do not block one another; if every branch raised, the first exception is
        raised. Branch functions are synchronous. With `deadline` (seconds), a branch still
        running then is cut: it writes nothing more and is aborted like a loser (recorded, so a
        replay cuts the same branches)."""
        return speculate(self, branches, choose, scopes, wait, deadline)

    def _effect_now(
        self, tool: Tool[Any], key: str | None, decision: Any, args: dict[str, Any], tx: TxMark | None
    ) -> Any:
        return self._effects.perform(tool, key, decision, args, tx)

    def _choose(self, name: str, fn: Callable[[], Any]) -> Any:
        """A speculation's recorded choice."""
        return self._decisions.decide(name, fn).value

    def _branch(self, exe: Execution) -> tuple[Any, Transactions]:
        """A speculation branch's full `ctx` over its own cursor, and that ctx's facet."""
        return self._branch_ctx(exe)

    def effect(
        self,
        tool: Tool[Any],
        /,
        *,
        key: str | None = None,
        decision: Decision[Any] | None = None,
        **args: JSON,
    ) -> Any:
        """`ctx.effect` (`Context.effect`; outside a transaction, `Effects.effect`); inside
        `ctx.transaction`, the call is scoped and buffered, held or compensated by the transaction."""
        tx = self._tx
        if tx is None or not isinstance(tool, Tool):
            exe = self._exe
            policy = exe.settings.gate_irreversible
            gated = policy is not False and isinstance(tool, Tool) and tool.effect.irreversible
            # Approved: a fork may make it again with other arguments than its original.
            released = gated and self._release(tool, key, decision, dict(args))
            if not released and isinstance(tool, Tool):
                return self._effects.perform(tool, key, decision, args, None)  # the hot path
            if released:
                exe.release(tool.name)
            try:
                return self._effects.effect(tool, key=key, decision=decision, **args)
            finally:
                if released:
                    exe.release(None)
        return tx.call(tool, key, decision, dict(args))

    def _release(
        self, tool: Tool[Any], key: str | None, decision: Decision[Any] | None, args: dict[str, Any]
    ) -> bool:
        """The one-effect transaction's release policy: an irreversible call outside any block
        passes an approval gate (bound to its tool, arguments and key) before it runs, unless a
        person already approved the decision it is made under (the agent loop's own gate).
        True when a person approved it."""
        policy = self._exe.settings.gate_irreversible
        if decision is not None and self._gates.approved(decision.id):
            return True
        approvers = None if policy is True else list(policy or ())
        about = {"tool": tool.name, "args": args, "key": key}
        terms = gate_terms(tool, args)
        verdict = self._gates.gate(
            f"effect:{tool.name}", decision=decision, approvers=approvers, about=about, **terms
        )
        if not verdict.approved:
            raise ReleaseDeclined(
                f"run {self._exe.run_id!r}: the irreversible call {tool.name} was {verdict.outcome} "
                f"at gate {verdict.gate_id} (Daybook(gate_irreversible=...)); it was not run. "
                "Catch ReleaseDeclined in the workflow to go on without it"
            )
        return True
