"""`Context`: what a workflow gets as `ctx`: one object whose methods each hand the call to the
facet that owns the noun.

Every non-deterministic read and every effect goes through it. The recorded primitives
(decisions, effects, waits) are `daybook.journal`; each facet above them lives with its noun:
gates (`daybook.gates`), obligations and the barrier (`daybook.books`), the budget and
entities (`daybook.coordination`), search attributes (`daybook.dispatch`), compensation
(`daybook.recovery`), updates and revisions (`daybook.steering`), transactions
(`daybook.tx`). This module builds one of each over the execution cursor, passing each the
facets it calls (a transaction's gate, a compensation's effects), and puts them behind one
flat `ctx`; the runtime builds one per execution.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any, NoReturn, TypeVar, overload

from .books.obligation import Obligations
from .books.unknowns import Barriers
from .checks import CONTEXT_RULES, checked
from .coordination.budget import Budget
from .coordination.child import Children
from .coordination.entity import Entity
from .dispatch.attributes import Attributes
from .gates import identity
from .gates.gate import REASKS, Gates, Verdict
from .journal.decision import Decision, Decisions, ModelCall, usage_of
from .journal.effect import Effects
from .journal.execution import Execution
from .journal.llm import LLMClient
from .journal.price import PriceTable
from .journal.stop import ContinueAsNew
from .journal.stream import Stream, Streams
from .journal.tool import Retry, Tool
from .journal.wait import Signal, Waits
from .records import JSON, Why, check_json
from .recovery.compensation import Compensation, Compensations
from .recovery.subtask import Skeleton, Subtask, Subtasks
from .steering.environment import Environments
from .steering.liveness import DEFAULT_GRACE
from .steering.revision import Primers, Revision, Revisions
from .steering.update import Updates
from .tx.atomix import DEFAULT_WAIT
from .tx.facet import Block, Transactions

T = TypeVar("T")


class Context:
    """What a workflow gets as `ctx`: every non-deterministic read and every effect goes through it."""

    # The facets, each built at its first use (`__getattr__`, from `_FACETS`) and kept: a run
    # uses a few (an MCP call through the proxy: its effect's four), and building all of them
    # for every execution cost as much as one of the call's SQL statements.
    _decisions: Decisions
    _effects: Effects
    _waits: Waits
    _gates: Gates
    _transactions: Transactions
    _compensations: Compensations
    _subtasks: Subtasks
    _obligations: Obligations
    _barriers: Barriers
    _updates: Updates
    _revisions: Revisions
    _primers: Primers
    _environments: Environments
    _attributes: Attributes
    _streams: Streams
    _children: Children
    budget: Budget

    def __init__(self, exe: Execution, prices: PriceTable | None = None) -> None:
        self._exe = exe
        self._prices = prices

    def __getattr__(self, name: str) -> Any:
        make = _FACETS.get(name)
        if make is None:
            raise AttributeError(f"'Context' object has no attribute {name!r}")
        # Under a lock: two threads of one run (a tool's own threads, a stream) reaching a
        # facet first at once must share one, as they did when all were built up front. An
        # RLock: a facet's maker reaches the facets it calls.
        with _BUILDING:
            facet = self.__dict__.get(name)
            if facet is None:
                facet = self.__dict__[name] = make(self)
        return facet

    @property
    def run_id(self) -> str:
        """This run's id."""
        return self._exe.run_id

    @overload
    def decide(
        self,
        name: str,
        fn: Callable[..., Coroutine[Any, Any, T]],
        *args: Any,
        why: Why | Callable[[Any], Why] | None = None,
        timeout: float | None = None,
        retry: Retry | None = None,
        **kwargs: Any,
    ) -> Awaitable[Decision[T]]: ...

    @overload
    def decide(
        self,
        name: str,
        fn: Callable[..., T],
        *args: Any,
        why: Why | Callable[[Any], Why] | None = None,
        timeout: float | None = None,
        retry: Retry | None = None,
        **kwargs: Any,
    ) -> Decision[T]: ...

    def decide(
        self,
        name: str,
        fn: Callable[..., Any],
        *args: Any,
        why: Why | Callable[[Any], Why] | None = None,
        timeout: float | None = None,
        retry: Retry | None = None,
        **kwargs: Any,
    ) -> Any:
        """Run `fn(*args, **kwargs)` once and journal its value; replay returns the recorded value.

        Use it for anything non-deterministic: a model call, reading the world, a random choice.
        An `async def` fn makes this return an awaitable. `why=Why(policy=, version=,
        observation=, alternatives=)` (or a function of the value returning one) goes into the
        decision ledger with the value (`daybook why`);
        effects that follow link to this decision unless given another. `timeout`: seconds `fn`
        may take (start to close) before it counts as failed with `TimedOut`; `retry`: a
        `Retry` policy for a failing `fn` (attempts and backoff, as an effect's); the step fails
        once both are spent, and only the final outcome is journaled.
        """
        return self._decisions.decide(name, fn, *args, why=why, timeout=timeout, retry=retry, **kwargs)

    def patched(self, name: str) -> bool:
        """A versioning marker: True where new code runs (a fresh execution, or a history that
        recorded the marker), False when replaying a history from before the marker, so old runs
        keep the path they took. Guard new behaviour with it; drop it once `daybook versions`
        shows no unfinished run without it."""
        return self._decisions.patched(name)

    def now(self) -> float:
        """Wall-clock time (epoch seconds), recorded once so replay sees the same instant."""
        return self._decisions.now()

    def random(self) -> float:
        """A random float in [0, 1), recorded once so replay sees the same value."""
        return self._decisions.random()

    def uuid(self) -> str:
        """A random UUID (text), recorded once so replay sees the same one."""
        return self._decisions.uuid()

    def llm(
        self,
        client: LLMClient,
        prompt: str,
        *,
        why: Why | None = None,
        cost: Callable[[dict[str, Any]], Mapping[str, float]] | None = None,
        stream: str | None = None,
        **params: JSON,
    ) -> Decision[dict[str, JSON]]:
        """One recorded model call: replay returns the recorded completion, never re-samples.
        The decision ledger gets the model id and tokens with `why`. The run's budget admits it
        before (`ctx.budget`: at a cap the run pauses or fails, as the cap says) and is charged
        its tokens and USD (the price table's, or `cost(completion)`) in the recorded row; a
        replayed call charges nothing again and counts as saved (`daybook cost`).
        `stream="answer"`: the reply is written to that durable stream piece by piece as the
        client's `stream()` yields it (docs/streams.md); replay returns the completion and
        writes no chunk."""
        return self.budget.model_call(client, prompt, params, why=why, cost=cost, stream=stream)

    def model_call(
        self,
        name: str,
        call: Callable[[], Any],
        *,
        model: str,
        usage: Callable[[Any], Mapping[str, JSON]],
        prompt: str = "",
        why: Why | None = None,
    ) -> Any:
        """A model call another SDK makes (a framework integration's): recorded at step `name`,
        admitted and charged as `ctx.llm`'s (reserved at `prompt`'s estimate and `model`'s price,
        charged at `usage(value)`: `{"model", "input_tokens", "output_tokens"}` as the SDK
        reported them). `call()` returns JSON (or an awaitable of it: then so does this); replay
        returns the recorded value, never calls again, charges nothing and counts as saved."""
        return self.budget.framework_call(
            ModelCall(name, {"args": [], "kwargs": {}}, call, usage_of(usage)), model, prompt, why
        )

    def stream(self, name: str) -> Stream:
        """The run's durable stream `name`: `ctx.stream("answer").write(text)` writes a chunk
        that `book.follow(run_id, stream="answer")`, `daybook journal RUN --follow --stream
        answer` and the web inspector's live stream deliver exactly once, in order, across
        crashes of the writer and of the reader (docs/streams.md)."""
        return self._streams.stream(name)

    @overload
    def effect(
        self,
        tool: Tool[Coroutine[Any, Any, T]],
        /,
        *,
        key: str | None = ...,
        decision: Decision[Any] | None = ...,
        **args: JSON,
    ) -> Awaitable[T]: ...

    @overload
    def effect(
        self,
        tool: Tool[T],
        /,
        *,
        key: str | None = ...,
        decision: Decision[Any] | None = ...,
        **args: JSON,
    ) -> T: ...

    def effect(
        self,
        tool: Tool[Any],
        /,
        *,
        key: str | None = None,
        decision: Decision[Any] | None = None,
        **args: JSON,
    ) -> Any:
        """Perform `tool(**args)` with an intent journaled before it and the outcome after.

        The key is `key` if given; else `<decision id>/<tool>/<i>` when derived from a decision;
        else `<run id>/<step>`. It never depends on the argument values.

        Inside `ctx.transaction` the call is scoped and buffered, held or compensated by the
        transaction."""
        if getattr(tool, "cost", None) is None:
            return self._transactions.effect(tool, key=key, decision=decision, **args)
        # A tool with a cost is admitted against the budget first and charged what it recorded.
        run = functools.partial(self._transactions.effect, tool, key=key, decision=decision, **args)
        return self.budget.effect(tool, dict(args), run)

    def key(self, decision: Decision[Any], kind: str, i: int = 0) -> str:
        """The idempotency key `<decision id>/<kind>/<i>`: names the decision, not its inputs."""
        return self._effects.key(decision, kind, i)

    def held(self, owner: object, *, take: bool = False) -> list[Any]:
        """What `owner` (a bufferable adapter: staged files, SQL statements, an outbox) holds for
        this execution until its commit step; `take=True` returns it and starts a new list. Not
        journaled: the steps that fill it replay in order, so a resumed run rebuilds it."""
        return self._effects.held(owner, take=take)

    def sleep(self, seconds: float) -> None:
        """A durable timer: the deadline is journaled, so a crash or a stop does not lose it and
        it fires once. Waits of up to a couple of seconds happen in this process; longer ones
        suspend the run (no thread, socket or process held) until a worker resumes it when due."""
        self._waits.sleep(seconds)

    async def sleep_async(self, seconds: float) -> None:
        """`sleep` for async workflows: the in-process part of the wait does not block the loop."""
        await self._waits.sleep_async(seconds)

    def wait_for(self, name: str, timeout: float | None = None) -> Signal | None:
        """Wait for the next signal `name` sent to this run (`book.signal`, `daybook signal`).

        Returns the `Signal`, or None once `timeout` seconds have passed without one. The wait is
        durable: past a couple of seconds the run is suspended until the signal or the deadline.
        Signals queue: each wait consumes the oldest unconsumed one of that name, once."""
        return self._waits.wait_for(name, timeout)

    async def wait_for_async(self, name: str, timeout: float | None = None) -> Signal | None:
        """`wait_for` for async workflows."""
        return await self._waits.wait_for_async(name, timeout)

    def gate(
        self,
        action: str,
        *,
        decision: Decision[Any] | None = None,
        approvers: Sequence[str] | None = None,
        timeout: float | None = 8 * 3600,
        on_timeout: str = "deny",
        escalate_to: Sequence[str] | Sequence[Sequence[str]] | None = None,
        approvals: int = 1,
        precondition: Callable[[], bool] | None = None,
        precheck: Callable[[], JSON] | None = None,
        reasks: int = REASKS,
        notify: Callable[[dict[str, Any]], None] | None = None,
        about: JSON = None,
    ) -> Verdict:
        """Park the run until people approve or decline `action` (durable: days are fine).

        The verdict is addressed to this gate's id (`decision.id` if given, else the gate's own
        step id) and only an authenticated approver (`daybook approvers add`) named in
        `approvers` (None: any) can give it (`daybook approve|deny RUN GATE`). `approvals=N`:
        N distinct approvers must approve (four eyes: 2); the same approver twice counts once,
        and one denial declines. `about` describes the gated act exactly (e.g. tool, arguments
        and key); the verdict is bound to a digest of the action and `about`, so an approval of
        one act never releases another.

        When `timeout` seconds pass without a decision, `on_timeout` (the expiry policy, shown
        with the gate) says what happens: "deny" (the default; "decline" is the old name)
        returns a `timed_out` verdict; "escalate" keeps the gate open, addressed now to
        `escalate_to` (a list of names, or a list of lists: one level each, in order, each with
        `timeout` again; after the last, `timed_out`); "wait" keeps waiting, marked overdue;
        "needs_attention" stops the run in `needs_attention` (what "escalate" meant before
        escalation lists). A verdict that arrives after the gate ended is recorded as late and
        does nothing.

        `precheck()` returns facts (JSON: a price, a balance) read as a recorded step before
        the request, shown with it and bound to the approval; re-read after the approval: if
        they changed, the gate asks again with the new facts (a new gate id; the old approval
        releases nothing), up to `reasks` times, then returns `stale`. `precondition()` (a
        bool) is re-checked after the approval too: False returns `stale`. `notify(gate)` (the
        request: run_id, gate_id, action, approvers, timeout, expiry, approvals, facts...) is
        called once per request, to tell the approvers."""
        return self._gates.gate(
            action,
            decision=decision,
            approvers=approvers,
            timeout=timeout,
            on_timeout=on_timeout,
            escalate_to=escalate_to,
            approvals=approvals,
            precondition=precondition,
            precheck=precheck,
            reasks=reasks,
            notify=notify,
            about=about,
        )

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
        return self._transactions.transaction(scopes, retries=retries, wait=wait, gate=gate)

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
        return self._transactions.speculate(
            branches, choose=choose, scopes=scopes, wait=wait, deadline=deadline
        )

    def compensate(
        self,
        *,
        on_stuck: Callable[[Compensation], None] | None = None,
        propose: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None,
        validate: Callable[[dict[str, Any], dict[str, Any]], bool] | None = None,
        approvers: Sequence[str] | None = None,
        gate_timeout: float = 8 * 3600,
        keys: Sequence[str] | None = None,
        strict: bool = True,
    ) -> Compensation:
        """Undo this run's confirmed effects, newest first, each with its tool's registered inverse
        under its own key `comp/<key>`, once (a kill mid-unwind resumes it without repeats).

        If an inverse fails after its retries, or an effect has no inverse, the rest are still
        unwound, `on_stuck(report)` fires (once: it is a recorded step) and the run stops as
        `stuck`, listing exactly what remains. It is never reported compensated when it is not.

        Where no inverse is registered, `propose(effect)` (e.g. a model; recorded) may suggest
        `{"tool": NAME, "args": {...}}`: it must name a registered tool that is not irreversible,
        pass `validate(effect, plan)` (recorded) and an approval gate like any forward act
        (`approvers`, `gate_timeout`); the effect itself must not be irreversible. Otherwise the
        effect stays listed as having no inverse.

        `keys` limits the unwind to those effects (a retraction undoes what was done for one
        step, not the run); `strict=False` returns an incomplete report instead of stopping the
        run as `stuck` (the caller says what remains, as a retraction's entry does)."""
        return self._compensations.compensate(
            on_stuck=on_stuck,
            propose=propose,
            validate=validate,
            approvers=approvers,
            gate_timeout=gate_timeout,
            keys=keys,
            strict=strict,
        )

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
        return self._subtasks.subtask(skeleton, entity, reads=reads)

    def obligation(
        self,
        kind: str,
        *,
        owner: str,
        due_in: float,
        about: JSON = None,
        decision: Decision[Any] | None = None,
    ) -> str:
        """Record something this run owes (a refund promised, a quote that expires, an approval
        pending): open until `fulfil`/`cancel`, shown as `breached` by `daybook obligations` once
        `due_in` seconds have passed. It outlives a suspend of days, and the run itself. Returns
        its id (`<run id>/<step>`)."""
        return self._obligations.obligation(kind, owner=owner, due_in=due_in, about=about, decision=decision)

    def fulfil(self, obligation_id: str, note: str = "") -> None:
        """Mark an obligation fulfilled (a new row; the open one stays as history)."""
        self._obligations.fulfil(obligation_id, note)

    def cancel(self, obligation_id: str, note: str = "") -> None:
        """Mark an obligation cancelled (nothing is owed any more)."""
        self._obligations.cancel(obligation_id, note)

    def barrier(self, *, runs: Sequence[str] | None = None, poll: float = 5.0) -> None:
        """Hold a closing step (post to the ledger, file the report) until no effect's outcome is
        open: unknown, in flight or awaiting a retry, in `runs` (default: every other run in the
        book; this run's own effects are settled before it gets here). Each check is a recorded
        step, and the wait between checks a durable timer, so replay passes the same way."""
        self._barriers.barrier(runs=runs, poll=poll)

    def child(self, workflow: Any, *args: JSON, run_id: str | None = None, **kwargs: JSON) -> Any:
        """Start `workflow(*args, **kwargs)` as a child run and return its result (an awaitable
        inside an async workflow). Its id is `<this run>~child<step>` unless `run_id` names it."""
        return self._children.child(workflow, *args, run_id=run_id, **kwargs)

    def handle_update(
        self, name: str, fn: Callable[[Any], Any], timeout: float | None = None
    ) -> tuple[Any, Any] | None:
        """Serve the next update `name` sent with `book.update(run_id, name, args)`: a request
        with an answer, applied once. Waits like `wait_for` (durably), computes `fn(args)` as a
        recorded step whose value is the answer the caller receives, and returns (args, answer);
        None if `timeout` passed first."""
        return self._updates.handle_update(name, fn, timeout)

    def revisions(self) -> list[Revision]:
        """The revisions sent to this run (`book.steer`, `daybook steer`) since the last call, in
        the order they were sent; [] when none. Reading them is a recorded step (the
        acknowledgement the sender waits for), written only when there is something new."""
        return self._revisions.revisions()

    def primer(self, after: float, summarize: Callable[[float], str]) -> str | None:
        """After a pause longer than `after` seconds, once, at the first step boundary of the
        resumed run: `summarize(paused_seconds)` as a recorded decision `primer` (its text also
        in the decision ledger's note), for the next decision to start from; None otherwise. Like
        `revisions`, the step exists only when a primer was made, and replay mirrors it."""
        return self._primers.primer(after, summarize)

    def environment(
        self,
        handle: str,
        kind: str = "directory",
        remove_on_expiry: bool = False,
        *,
        alive: Callable[[str], bool] | None = None,
        grace: float = DEFAULT_GRACE,
        start: Callable[[str], Any] | None = None,
        stop: Callable[[str], Any] | None = None,
        snapshot: Callable[[str], JSON] | None = None,
        restore: Callable[[str, JSON], Any] | None = None,
        destroy: Callable[[str], Any] | None = None,
    ) -> str:
        """Declare the run's workspace (a directory path, a sandbox id): recorded, so every
        replay sees the same handle, and shown in the run's checkpoint as `running` or
        `stopped`. The hooks are this workflow's code, given again by every execution:
        `start(handle)` here at each execution (the first start; on a resume, the restart in
        place: make it idempotent), after `restore(handle, snapshot)` if the last stop left a
        snapshot; `stop(handle)` then `snapshot(handle)` (JSON) when the execution ends however
        it ends (completed, failed, paused, waiting): stopped, never destroyed. Past the
        retention window the run becomes `expired` (`gc`, or a worker on its schedule) and only
        then is it destroyed: `destroy(handle)` (a function the workflow's module names at top
        level, found there by the expiring process if it loaded the workflow's code with
        `--app`; else the run waits, listed as awaiting destroy; idempotent: a kill after it
        runs it again), then, with `remove_on_expiry` (a directory), the directory deleted. With
        `alive(handle)`, each execution checks the workspace is up, waiting out a startup
        `grace` (seconds from the execution's start) before it fails the run with
        `EnvironmentLost`. Each start, stop and expiry is in the run's environment log
        (the checkpoint's `environment.log`). Returns `handle`."""
        return self._environments.environment(
            handle,
            kind,
            remove_on_expiry,
            alive=alive,
            grace=grace,
            start=start,
            stop=stop,
            snapshot=snapshot,
            restore=restore,
            destroy=destroy,
        )

    def set_attributes(self, **attributes: JSON) -> None:
        """Set search attributes on this run (`customer="acme"`): `book.runs(attributes=...)`
        and `daybook runs --attr customer=acme` find it. A later call replaces a name's value.
        Journaled, so replay sets nothing again; values are strings, numbers or booleans."""
        self._attributes.set_attributes(**attributes)

    def continue_as_new(self, *args: JSON, **kwargs: JSON) -> NoReturn:
        """End this run here and go on as a new run of the same workflow with this input, so
        history does not grow without bound: the new run (id `<run id>~2`, then `~3`, ...) starts
        with an empty journal, and resuming it reads only its own. Carry forward whatever state
        the next segment needs as its arguments."""
        check_json({"args": list(args), "kwargs": kwargs}, "continue_as_new input")
        raise ContinueAsNew(self.run_id, args, kwargs)

    def entity(self, name: str) -> Entity:
        """The coordination entity `name` on this run's store. Its operations act on shared
        state now; make a claim or a record part of the run's history by wrapping it in a step:
        `ctx.decide("claim", lambda: ctx.entity(name).claim(agent, ttl)).value`."""
        return Entity(self._exe.store, name)

    def _proved(self, act: str, sender: str, record: Any) -> bool:
        """A signal's sender is proved by a signature the approvers file checks (any role)."""
        return identity.verify(self._exe.store, act, self._exe.run_id, sender, record, role=None)

    def _branch(self, exe: Execution) -> tuple[Context, Transactions]:
        """A speculation branch's `ctx`, over the branch's own cursor, and its transactions."""
        twin = Context(exe, self._prices)
        return twin, twin._transactions


_BUILDING = threading.RLock()
# How each facet is built over the execution cursor, with the facets it calls.
_FACETS: dict[str, Callable[[Context], Any]] = {
    "_decisions": lambda c: Decisions(c._exe),
    "_effects": lambda c: Effects(c._exe),
    "_waits": lambda c: Waits(c._exe, prove=c._proved),
    "_gates": lambda c: Gates(c._exe, c._decisions, c._waits),
    "_transactions": lambda c: Transactions(c._exe, c._effects, c._decisions, c._gates, branch=c._branch),
    "_compensations": lambda c: Compensations(c._exe, c._decisions, c._transactions, c._gates),
    "_subtasks": lambda c: Subtasks(c._exe, c._decisions),
    "_obligations": lambda c: Obligations(c._exe),
    "_barriers": lambda c: Barriers(c._exe, c._decisions, c._waits),
    "_updates": lambda c: Updates(c._exe, c._decisions, c._waits),
    "_revisions": lambda c: Revisions(c._exe),
    "_primers": lambda c: Primers(c._exe, c._decisions),
    "_environments": lambda c: Environments(c._exe, c._decisions),
    "_attributes": lambda c: Attributes(c._exe),
    "_streams": lambda c: Streams(c._exe),
    "_children": lambda c: Children(c._exe, c._decisions),
    "budget": lambda c: Budget(c._exe, c._decisions, c._waits, c._prices),
}

# A bad step name or key is refused before the step runs (a `ConfigError` parks the run).
checked(Context, CONTEXT_RULES, "ctx")
