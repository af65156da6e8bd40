"""What a whole session has spent: every model call recorded in its file -- abandoned attempts
and branch summaries or compactions that carry a `usage` included -- not only the branch's.

In: a session log (its message entries read once, through `of_type`), then each reply as
the harness announces it (`listener`); branch summaries and compactions, appended outside
the harness, are few and counted from their entries' `usage` each time (`with_summaries`:
`of_type` reads only those lines through the index). Out: a total of tokens and, where the
model's price is known, dollars. The messages are never re-read turn by turn. Priced at
the current model's price (a reply does not record its model's).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mulligan.providers.facts import price_of
from mulligan.session import SessionLog

__all__ = ["Spent"]

_SUMMARIES = ("branch_summary", "compaction")


@dataclass
class Spent:
    price: tuple[float, float, float, float] | None
    tokens_in: int = 0
    tokens_out: int = 0
    dollars: float = 0.0

    @property
    def cost(self) -> float | None:
        return self.dollars if self.price is not None else None

    @classmethod
    def of_log(cls, log: SessionLog | None, model_name: str) -> Spent:
        """The total over `log`'s every model call so far (none: a session with no file)."""
        spent = cls(price_of(model_name))
        if log is None or log.tip() is None:
            return spent
        for entry in log.of_type("message"):
            message = entry.get("message")
            if isinstance(message, Mapping) and message.get("role") == "assistant":
                spent.add(message.get("usage"))
        return spent

    def with_summaries(self, log: SessionLog | None) -> Spent:
        """A copy of this total with every branch summary's and compaction's `usage` in
        `log` added."""
        whole = Spent(self.price, self.tokens_in, self.tokens_out, self.dollars)
        if log is not None and log.tip() is not None:
            for kind in _SUMMARIES:
                for entry in log.of_type(kind):
                    whole.add(entry.get("usage"))
        return whole

    def add(self, counts: Any) -> None:
        """Count one call's `usage` ({input, output, cache_read, cache_write}); anything
        else (no usage reported, a damaged one) counts nothing."""
        if not isinstance(counts, Mapping):
            return
        try:
            tokens_in, out, read, write = (int(counts.get(k) or 0) for k in (
                "input", "output", "cache_read", "cache_write"))
        except (TypeError, ValueError):
            return
        self.tokens_in += tokens_in + read + write
        self.tokens_out += out
        if self.price is not None:
            self.dollars += (tokens_in * self.price[0] + out * self.price[1]
                             + read * self.price[2] + write * self.price[3]) / 1e6

    def listener(self, event: Mapping[str, Any]) -> None:
        """For Harness.subscribe: each reply the run records, counted as it is announced."""
        if event.get("type") != "message_end":
            return
        message = event.get("message")
        if isinstance(message, Mapping) and message.get("role") == "assistant":
            self.add(message.get("usage"))
