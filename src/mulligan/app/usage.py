"""What a session has used: tokens per turn, the context in use against the model's window,
and what it cost where the model's prices are known.

In: the branch's messages (assistant messages carry the providers' `usage`) and the model.
Out: plain numbers for the status line and /usage. Prices are per million tokens, as the
providers published them on the date in `PRICES_AS_OF` (`mulligan.providers.facts`); a model
not in the table has no cost shown, never a guessed one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mulligan.app.rewind.compaction import estimate_tokens
from mulligan.messages import Message
from mulligan.providers.facts import PRICES, PRICES_AS_OF, cost_of, price_of, window_of
from mulligan.wire import Model

__all__ = ["PRICES", "PRICES_AS_OF", "Turn", "Usage", "cost_of", "price_of", "usage_of"]

@dataclass
class Turn:
    """One model reply's tokens (and cost, None when the price is unknown)."""

    number: int
    input: int
    output: int
    cache_read: int
    cache_write: int
    cost: float | None


@dataclass
class Usage:
    turns: list[Turn] = field(default_factory=list)
    context: int = 0  # tokens the next request would carry (reported or estimated)
    window: int = 0
    priced: bool = False

    @property
    def tokens_in(self) -> int:
        return sum(t.input + t.cache_read + t.cache_write for t in self.turns)

    @property
    def tokens_out(self) -> int:
        return sum(t.output for t in self.turns)

    @property
    def cost(self) -> float | None:
        return sum(t.cost or 0.0 for t in self.turns) if self.priced else None


def usage_of(messages: Sequence[Message], model: Model, system: str = "") -> Usage:
    """The branch's usage (see the module docstring). Each reply is priced at the model
    that made it (its `model`; `model`'s when it names none)."""
    name = str(getattr(model, "name", ""))
    found = Usage(window=window_of(model), priced=price_of(name) is not None,
                  context=estimate_tokens(system, messages))
    for message in messages:
        if message["role"] != "assistant" or not isinstance(message.get("usage"), Mapping):
            continue
        counts: Mapping[str, Any] = message["usage"]
        tokens_in, out, read, write = (int(counts.get(k) or 0) for k in (
            "input", "output", "cache_read", "cache_write"))
        cost = cost_of(str(message.get("model") or name), (tokens_in, out, read, write))
        found.priced = found.priced or cost is not None
        found.turns.append(Turn(len(found.turns) + 1, tokens_in, out, read, write, cost))
    return found
