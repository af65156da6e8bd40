"""What a whole session has spent: every model call recorded in its file -- abandoned attempts,
parallel `/try` attempts, branch summaries and compactions that carry a `usage` -- not only
the branch's, each call priced at the model that made it.

In: a session log, watched (`SessionLog.watch`): its message, branch_summary and compaction
entries read once, through the index, then each one counted as it is appended, whoever
appends it (the harness's saver, a parallel attempt's thread, going back with a summary, a
compaction). Nothing is re-read when the total is asked for: a status-line draw costs the
same at entry 100,000 as at entry 10. Out: a total of tokens and, where the models' prices
are known, dollars.

Which model made a call: an assistant message's `model`, a summary's or compaction's
`usage["model"]` (`rewind.summaries.ask_model_usage` records it); a call that names none
(an old file, a test double) is priced at the `fallback` model, the session's model when the
total was started -- never re-priced later, so switching models never changes what was
already counted. A call of a model with no known price adds tokens and no dollars, and is
counted in `unpriced`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from mulligan.providers.facts import cost_of, price_of
from mulligan.session import SessionLog
from mulligan.session.entries import Entry

__all__ = ["COUNTED", "Spent"]

COUNTED = ("message", "branch_summary", "compaction")  # the entries that record model calls


class Spent:
    """A running total. `fallback`: the model name a call that names none is priced at."""

    def __init__(self, fallback: str = "") -> None:
        self.fallback = fallback
        self.tokens_in = 0
        self.tokens_out = 0
        self.dollars = 0.0
        self.calls = 0
        self.unpriced = 0  # calls with usage whose model has no known price
        self._lock = threading.Lock()  # attempts append from threads of their own

    @property
    def cost(self) -> float | None:
        """Dollars, when any call (or, before any, the fallback model) has a known price;
        None when none has: no cost is shown rather than $0.00."""
        if self.calls > self.unpriced or (not self.calls and price_of(self.fallback)):
            return self.dollars
        return None

    @classmethod
    def watching(cls, log: SessionLog | None,
                 fallback: str = "") -> tuple[Spent, Callable[[], None]]:
        """The total over `log`'s every model call so far, kept up to date as entries are
        appended to it; and the undo that stops the watching. No log: an empty total."""
        spent = cls(fallback)
        if log is None:
            return spent, lambda: None
        return spent, log.watch(COUNTED, spent.entry)

    def entry(self, entry: Entry) -> None:
        """Count one entry: an assistant message's usage, a summary's or compaction's."""
        if entry.get("type") == "message":
            message = entry.get("message")
            if isinstance(message, Mapping) and message.get("role") == "assistant":
                self.add(message.get("usage"), message.get("model"))
        else:
            usage = entry.get("usage")
            self.add(usage, usage.get("model") if isinstance(usage, Mapping) else None)

    def add(self, counts: Any, model: Any = None) -> None:
        """Count one call's `usage` ({input, output, cache_read, cache_write}), priced at
        `model` (a name; else the fallback); anything else (no usage reported, a damaged
        one) counts nothing."""
        if not isinstance(counts, Mapping):
            return
        try:
            tokens_in, out, read, write = (int(counts.get(k) or 0) for k in (
                "input", "output", "cache_read", "cache_write"))
        except (TypeError, ValueError):
            return
        cost = cost_of(model if isinstance(model, str) and model else self.fallback,
                       (tokens_in, out, read, write))
        with self._lock:
            self.calls += 1
            self.tokens_in += tokens_in + read + write
            self.tokens_out += out
            if cost is None:
                self.unpriced += 1
            else:
                self.dollars += cost
