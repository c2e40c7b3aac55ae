"""The price table: what a model call costs in USD, from its model id and token counts.

Defaults for common models ship in `prices.json` beside this module (USD per million input and
output tokens, with the date and source of the prices); `Daybook(prices=...)` takes a table of
its own (a mapping, a JSON file path, or a `PriceTable`), merged over the defaults. A model the
table does not know costs 0 USD; its tokens still count and it is listed as unpriced.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import PriceTableError

PER = 1_000_000  # prices are per million tokens


@dataclass(frozen=True)
class Price:
    """USD per million input tokens and per million output tokens of one model."""

    input: float
    output: float

    def usd(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input + output_tokens * self.output) / PER


@dataclass(frozen=True)
class PriceTable:
    """Model prices by model id; a model id matches its longest listed prefix (a dated version
    such as `gpt-4o-mini-2024-07-18` is priced as `gpt-4o-mini`), after any `provider:` or
    `provider/` part (`openai:gpt-4o`)."""

    models: Mapping[str, Price] = field(default_factory=dict)
    as_of: str = ""
    source: str = ""

    def price(self, model: str) -> Price | None:
        name = model.rsplit(":", 1)[-1].rsplit("/", 1)[-1]
        for candidate in (model, name):
            if candidate in self.models:
                return self.models[candidate]
        best = max((m for m in self.models if name.startswith(m)), key=len, default=None)
        return None if best is None else self.models[best]

    def cost(self, model: str, input_tokens: int, output_tokens: int) -> tuple[float, bool]:
        """(USD, whether the model is priced): 0 USD for a model the table does not know."""
        price = self.price(model)
        if price is None:
            return 0.0, False
        return price.usd(input_tokens, output_tokens), True

    def merged(self, other: PriceTable) -> PriceTable:
        """This table with `other`'s models over it (a user's table over the defaults)."""
        return PriceTable(
            {**self.models, **other.models}, other.as_of or self.as_of, other.source or self.source
        )


def defaults() -> PriceTable:
    """The shipped table (`prices.json`)."""
    text = resources.files("daybook.journal").joinpath("prices.json").read_text(encoding="utf-8")
    return parse(json.loads(text), "daybook's prices.json")


def table(source: Source) -> PriceTable:
    """The price table `Daybook(prices=source)` means: None the defaults; a `PriceTable`, a
    mapping (`{"my-model": {"input": 1.0, "output": 2.0}}`, or the file's own layout with
    `models`) or a JSON file's path, each over the defaults."""
    base = defaults()
    if source is None:
        return base
    if isinstance(source, PriceTable):
        return base.merged(source)
    if isinstance(source, str | Path):
        path = Path(source)
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise PriceTableError(
                f"price table {str(path)!r} could not be read as JSON ({exc}); give a file like "
                'daybook\'s prices.json: {"models": {"MODEL": {"input": USD_PER_M, "output": USD_PER_M}}}'
            ) from None
        return base.merged(parse(loaded, repr(str(path))))
    if isinstance(source, Mapping):
        return base.merged(parse(source, "Daybook(prices=...)"))
    raise PriceTableError(
        f"Daybook(prices=...) takes a mapping of model -> {{input, output}} USD per million "
        f"tokens, a JSON file path or a PriceTable, not {type(source).__name__}"
    )


def parse(raw: Any, where: str) -> PriceTable:
    """A table from JSON: `{"models": {...}, "as_of": ..., "source": ...}` or just the models."""
    if not isinstance(raw, Mapping):
        raise PriceTableError(f"price table {where}: expected a JSON object, got {type(raw).__name__}")
    models = raw.get("models", raw)
    if not isinstance(models, Mapping):
        raise PriceTableError(f"price table {where}: `models` must be an object of model -> prices")
    prices = {str(m): _price(m, p, where) for m, p in models.items()}
    return PriceTable(prices, str(raw.get("as_of") or ""), str(raw.get("source") or ""))


def _price(model: Any, raw: Any, where: str) -> Price:
    if not isinstance(raw, Mapping) or not {"input", "output"} <= set(raw):
        raise PriceTableError(
            f"price table {where}: model {model!r} needs input and output prices (USD per "
            f'million tokens), e.g. {{"input": 2.5, "output": 10.0}}; got {raw!r}'
        )
    values = []
    for side in ("input", "output"):
        value = raw[side]
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value < 0
        ):
            raise PriceTableError(
                f"price table {where}: model {model!r} {side} price {value!r} must be a number >= 0 "
                "(USD per million tokens)"
            )
        values.append(float(value))
    return Price(values[0], values[1])


# What `Daybook(prices=...)` takes: a table, a mapping of model -> prices, a JSON file's path.
Source = PriceTable | Mapping[str, Any] | str | Path | None
