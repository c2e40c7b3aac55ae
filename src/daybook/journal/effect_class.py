"""Effect classes: what daybook does with an act of each class, in one table, and the one
function that maps a declaration (`@tool(...)` keywords, an adapter's, an integration's
profile) onto it.

Defined below `Tool`: it takes the profile's facts (has an inverse, is bufferable, ...), never
the tool, so `Tool` can carry an `EffectClass` without a cycle. Every consumer (transactions,
speculation, recovery, compensation, forks, the agent loop, the integrations, the CLI and web
pages) asks the value instead of re-deriving it from the tool's flags.

A new class is one row of `TABLE`. The columns:

- `undone`: whether anything may ever undo the act (False: irreversible, held in a transaction
  and never undone; True: its inverse undoes it, or a person does when it has none);
- `resend`: a re-send under the same key is safe (the counterparty dedupes keys);
- `gate`: the agent loop gates it by default (`ctx.effect` and `ctx.transaction` gate only
  under a release policy: `Daybook(gate_irreversible=)`, `ctx.transaction(gate=)`);
- `inverse`: the declaration must give `inverse=` (it promises an undo);
- `cost`: its act and its undo spend a fee or quota, recorded with their outcomes (`cost=`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError


@dataclass(frozen=True)
class Row:
    """One effect class of the table (see the module docstring for the columns)."""

    undone: bool
    resend: bool
    gate: bool
    inverse: bool
    cost: bool
    says: str


# fmt: off
TABLE: dict[str, Row] = {
    #                        undone resend gate   inverse cost
    "idempotent":           Row(True,  True,  False, False, False, "re-sent under its key if unknown"),
    "manual":               Row(True,  False, False, False, False, "no inverse: a person undoes it"),
    "reversible":           Row(True,  False, False, True,  False, "undone exactly by its inverse"),
    "compensable":          Row(True,  False, False, True,  False, "undone by a compensating inverse"),
    "reversible-with-cost": Row(True,  False, False, True,  True,  "undone; the fee it spent stays"),
    "irreversible":         Row(False, False, True,  False, False, "never undone; held, gated"),
}
# fmt: on

EFFECT_CLASSES = tuple(TABLE)
# What `ctx.transaction` does with a call: buffered (staged, runs at commit), held (released
# at commit, never undone) or run now (its inverse runs on abort); `tx:stage` rows keep the word.
IN_TRANSACTION = ("buffered", "held", "now")


@dataclass(frozen=True)
class EffectClass:
    """One tool's effect class: its row of `TABLE` with the facts of its declaration, and what
    that means everywhere an act of it goes. Build one with `declare`."""

    name: str
    row: Row
    has_inverse: bool
    bufferable: bool
    idempotent: bool
    in_transaction: str

    @property
    def irreversible(self) -> bool:
        return not self.row.undone

    @property
    def resend(self) -> bool:
        """A re-send under the same key is safe."""
        return self.idempotent

    @property
    def gated_by_agent_loop(self) -> bool:
        return self.row.gate

    @property
    def records_cost(self) -> bool:
        return self.row.cost

    @property
    def held(self) -> bool:
        """Held by a transaction until its commit, released once and never undone."""
        return self.in_transaction == "held"

    @property
    def on_rollback(self) -> str:
        """What a transaction's abort does to it: `drop` (staged or held: it never ran),
        `undo` (it ran; its inverse runs) or `stuck` (it ran; a person must undo it)."""
        if self.in_transaction != "now":
            return "drop"
        return "undo" if self.has_inverse else "stuck"

    @property
    def on_recovery(self) -> str:
        """The class a recovery plan sees (`recovery/select.py`): `irreversible` (never undone),
        `bufferable` (dropped when never flushed), `compensable` (undone by its inverse before a
        re-run) or `reversible` (replayed when asked for again as the same act)."""
        if self.irreversible:
            return "irreversible"
        if self.bufferable:
            return "bufferable"
        return "compensable" if self.has_inverse else "reversible"

    @property
    def on_fork(self) -> str:
        """The class a fork reports for a later act of the original: `compensable` (undone by the
        fork), else `irreversible` or `no inverse` (both stay done: the fork needs confirm)."""
        if self.irreversible:
            return "irreversible"
        return "compensable" if self.has_inverse else "no inverse"

    @property
    def fork_needs_confirm(self) -> bool:
        return self.on_fork != "compensable"

    @property
    def undo_may_be_proposed(self) -> bool:
        """A model may propose an undo for it when it has no inverse (never for an irreversible
        act), and it may serve as such an undo."""
        return not self.irreversible

    def profile(self) -> dict[str, object]:
        """What will actually happen to a call of this class, as data (`Tool.profile`)."""
        return {
            "effect_class": self.name,
            "outside_transaction": "now",
            "in_transaction": self.in_transaction,
            "on_rollback": self.on_rollback,
            "on_recovery": self.on_recovery,
            "fork_needs_confirm": self.fork_needs_confirm,
            "resend_safe": self.resend,
            "gated_by_agent_loop": self.gated_by_agent_loop,
            # A plain `ctx.effect` runs at once unless `Daybook(gate_irreversible=)` says
            # otherwise: no tool is gated by default there (the agent loop's gate is above).
            "gated_by_default": False,
            "records_cost": self.records_cost,
        }


def declare(
    what: str,
    effect_class: str | None,
    *,
    irreversible: bool | None = None,
    idempotent: bool = False,
    inverse: bool = False,
    bufferable: bool = False,
    profiled: bool = True,
    accepts_keys: bool = True,
    asks: bool = False,
    cost: bool = False,
    in_transaction: str | None = None,
    strict: bool = True,
) -> EffectClass:
    """The effect class of a declaration: `effect_class` (a name of `TABLE`, or None: inferred)
    with the other facts of the profile. `strict` (`@daybook.tool`) refuses a declaration that
    cannot be honoured, with a ConfigError saying what to change; otherwise (a `Tool` built
    directly, an integration's profile) the class is what will actually happen (a "reversible"
    tool with no inverse is `manual`)."""
    if effect_class is not None and effect_class not in TABLE:
        raise ConfigError(f"{what}: effect_class={effect_class!r}; use one of " + ", ".join(EFFECT_CLASSES))
    if strict:
        _refuse(what, effect_class, irreversible, inverse, cost, in_transaction)
    never = _irreversible(irreversible, effect_class, profiled, accepts_keys, inverse)
    if effect_class is not None and TABLE[effect_class].undone != never:
        name = effect_class  # as declared (a label that contradicts `irreversible` is not kept)
    else:
        name = _inferred(never, inverse, bool(idempotent or asks))
    # Declaring a class whose row says re-sending is safe is declaring it (`idempotent=True`);
    # a `Tool` built directly says it with its own `idempotent` flag, which wins.
    resend = bool(idempotent or (strict and effect_class is not None and TABLE[effect_class].resend))
    promises = (TABLE[name].inverse and not inverse) or (TABLE[name].resend and not (resend or asks))
    if not strict and promises:
        name = "compensable" if inverse else "manual"  # the label promises what the facts do not
    row = TABLE[name]
    how = in_transaction or ("held" if never else "buffered" if bufferable else "now")
    return EffectClass(name, row, inverse, bufferable, resend, how)


def _refuse(
    what: str,
    effect_class: str | None,
    irreversible: bool | None,
    inverse: bool,
    cost: bool,
    in_transaction: str | None,
) -> None:
    """Refuse a declaration that cannot be honoured."""
    row = TABLE[effect_class] if effect_class is not None else None
    if row is not None and row.inverse and not inverse:
        raise ConfigError(
            f"{what}: effect_class={effect_class!r} promises an undo but gives no inverse=; give "
            "inverse=<the @daybook.tool that undoes it>, or declare irreversible=False (a rollback "
            "then leaves it to a person) or effect_class='irreversible'"
        )
    if row is not None and irreversible is not None and irreversible == row.undone:
        raise ConfigError(
            f"{what}: effect_class={effect_class!r} and irreversible={irreversible} contradict each "
            "other; give one of them"
        )
    if row is not None and row.cost and not cost:
        raise ConfigError(
            f"{what}: effect_class={effect_class!r} records the fee or quota an act and its undo "
            "spend; give cost=<(args, result) -> dict of amounts>"
        )
    if in_transaction is not None and in_transaction not in IN_TRANSACTION:
        choices = ", ".join(IN_TRANSACTION)
        raise ConfigError(f"{what}: in_transaction={in_transaction!r}; use one of {choices}")
    never = irreversible is True or effect_class == "irreversible"
    if in_transaction is not None and (in_transaction == "held") != never:
        raise ConfigError(
            f"{what}: in_transaction={in_transaction!r}: an irreversible call is held (released at "
            "commit, never undone) and only an irreversible one; leave in_transaction unset"
        )


def _irreversible(
    irreversible: bool | None, effect_class: str | None, profiled: bool, accepts_keys: bool, inverse: bool
) -> bool:
    # A tool declared with no counterparty profile at all is treated as irreversible and
    # keyless: the most conservative reading (gated by the agent loop, never undone by a
    # model-proposed plan). So is a keyless act with no inverse (a shell command, a click):
    # `verify` only tells whether it happened. Say `irreversible=False` to opt out.
    if irreversible is not None:
        return irreversible
    if effect_class is not None:
        return not TABLE[effect_class].undone
    return not profiled or (not accepts_keys and not inverse)


def _inferred(never: bool, inverse: bool, keyed: bool) -> str:
    if never:
        return "irreversible"
    if inverse:
        return "compensable"
    return "idempotent" if keyed else "manual"
