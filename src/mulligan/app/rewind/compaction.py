"""Compaction on a tree: a long session goes on past the model's context window.

A compaction is one more entry, appended at the tip: ``{"type": "compaction", "summary",
"first_kept_entry_id", "tokens_before"}``, and ``"usage"`` when the summary's model call
reported it (free metadata, counted in what the session spent). By the pinned rules
(`mulligan.session.view`) the transcript below it is then the summary, the kept tail from
`first_kept_entry_id`, and what came after; nothing is copied and nothing is removed, and
going back to an entry before it brings the whole history back.

Making one (`Compaction.run`): the cut is at a user message (a turn's start) or at an
assistant message inside a long run of tool rounds, never at a tool result (so no tool call is
ever parted from its result), keeping the most recent `keep_tokens` verbatim; what is before
the cut -- a run's start and its request included -- is sent to the model, fitted into half
its window, with a prompt that keeps the task in hand. A compaction after a compaction sends the
previous summary and asks for it updated with what came since, rather than summarising a
summary of a summary; branch summaries in the cut part are part of what is sent. If the
model fails, the summary is made from the entries (and says so).

When: before a model call -- the first of a run or any later one, between its rounds of
tool calls -- whose context would pass the window minus `reserve_tokens` (the
providers' reported usage where present, an estimate of 4 characters a token otherwise); after
a context-overflow error (then the call is retried once: `mulligan.loop`); and by hand,
`/compact [instructions]`. Settings: ``[compaction] auto, keep_tokens, reserve_tokens, model``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from mulligan.app.rewind.summaries import (
    ask_model_usage,
    context_window,
    details_of,
    entry_text,
    fallback_text,
)
from mulligan.messages import IMAGE_TOKENS, Message, images_in
from mulligan.session import SessionLog
from mulligan.session.view import COMPACTION_PREAMBLE
from mulligan.wire import Event, Model

__all__ = ["SYSTEM", "UPDATE", "Compaction", "estimate_tokens"]

SYSTEM = """You compact a coding session that has grown too long for the model's context window.
The work goes on right after, from your summary and the most recent messages (kept as they
are), so keep the task in hand. Write plain text under these headings:
Request: what the user is asking for now, in their words where it matters.
Done: what has been done so far, with the results that matter.
In progress: what was being done when the summary was made.
Decisions: choices made and constraints the user set.
Files: files read and changed, with what matters about each.
Next: the next steps.
Be complete but terse: at most 400 words. No preamble."""

UPDATE = """Below is the summary made at the last compaction, then the messages that came after
it. Write the summary again, updated with those messages, under the same headings."""

CHARS_PER_TOKEN = 4


def estimate_tokens(system: str, messages: Sequence[Message]) -> int:
    """The context a request would take: the last reply's reported usage (input, cache reads
    and writes, and output: what the provider counted), plus an estimate of what came after
    it; or an estimate of the whole, 4 characters a token, when no usage was reported -- and
    after a compaction, whose kept replies report the context from before it."""
    compacted = bool(messages) and _is_summary(messages[0])
    for at in range(len(messages) - 1, -1, -1):
        message = messages[at]
        usage: Any = message.get("usage") if message["role"] == "assistant" else None
        if not compacted and isinstance(usage, Mapping) and isinstance(usage.get("input"), int):
            used = sum(int(usage.get(k) or 0) for k in ("input", "cache_read", "cache_write",
                                                        "output"))
            return used + _chars(messages[at + 1:]) // CHARS_PER_TOKEN
    return (len(system) + _chars(messages)) // CHARS_PER_TOKEN


def _chars(messages: Sequence[Message]) -> int:
    """Characters standing for the messages' tokens: an image counts as what a provider
    charges for one (`IMAGE_TOKENS`), not as the length of its base64."""
    return sum(_message_chars(message) for message in messages)


def _message_chars(message: Message) -> int:
    images = images_in(message.get("content"))
    size = len(orjson.dumps(message, default=str))
    return size - sum(len(b["data"]) for b in images) + \
        len(images) * IMAGE_TOKENS * CHARS_PER_TOKEN


@dataclass
class Settings:
    auto: bool = True
    keep_tokens: int = 20_000
    reserve_tokens: int = 16_000

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> Settings:
        table = config.get("compaction", {})
        return cls(bool(table.get("auto", True)), int(table.get("keep_tokens", 20_000)),
                   int(table.get("reserve_tokens", 16_000)))


class Compaction:
    """Compaction for one session's log, with the model that writes the summary (`model`,
    or the session's current one: `current_model`)."""

    def __init__(self, log: SessionLog, settings: Settings,
                 current_model: Callable[[], Model], system: Callable[[], str],
                 model: Model | None = None) -> None:
        self.log, self.settings = log, settings
        self._current, self._system, self._model = current_model, system, model
        self.abort: threading.Event | None = None

    def window(self) -> int:
        return context_window(self._current())

    def limits(self) -> tuple[int, int]:
        """(keep, reserve) in tokens, scaled down for a small window (a local model's)."""
        window = self.window()
        return (min(self.settings.keep_tokens, int(window * 0.4)),
                min(self.settings.reserve_tokens, int(window * 0.25)))

    def hook(self, messages: list[Message], overflow: bool,
             abort: threading.Event | None = None) -> Generator[Event, None, bool]:
        """The loop's `compact`: before a call -- the first of a run, or the next after a
        round of tool results -- compact when the context would pass the window minus the
        reserve (if `auto`); after an overflow, always try. The summary request stops when
        the run's `abort` is set, like the run (the summary is then made from the entries)."""
        tokens = estimate_tokens(self._system(), messages)
        if not overflow:
            _, reserve = self.limits()
            if not self.settings.auto or tokens <= self.window() - reserve:
                return False
        self.abort = abort
        try:
            done = yield from self.run("overflow" if overflow else "threshold", tokens)
        finally:
            self.abort = None
        if done:
            messages[:] = self.log.replay()  # the record in memory is the file's transcript
        return done

    def run(self, reason: str, tokens_before: int | None = None,
            instructions: str = "") -> Generator[Event, None, bool]:
        """Append a compaction entry (see the module docstring), announcing it with
        compaction_start / compaction_end; False, with the reason in compaction_end's error,
        when there is nothing to compact."""
        rows = self.log.rows()
        before = tokens_before if tokens_before is not None else estimate_tokens(
            self._system(), [m for _, m in rows])
        yield {"type": "compaction_start", "reason": reason, "tokens_before": before}
        keep, _ = self.limits()
        cut = _cut(rows, keep)
        if cut is None:
            yield {"type": "compaction_end", "summary": "", "tokens_before": before,
                   "tokens_after": before, "error": "nothing to compact: the conversation "
                                                    "is all recent turns"}
            return False
        previous = self._previous(rows)
        start = 1 if previous is not None else 0
        budget = int(self.window() * 0.5 * CHARS_PER_TOKEN)  # half the window, in characters
        text = _request(rows[start:cut], previous, instructions, budget)
        summary, usage = ask_model_usage(self._model or self._current(), SYSTEM, text,
                                         self.abort)
        if summary is None:  # the model failed: say what the entries say
            branch = self.log.branch(self.log.tip())
            ids = {entry_id for entry_id, _ in rows[start:cut]}
            part = [e for e in branch if e["id"] in ids]
            summary = fallback_text(part, details_of(part, restored=False))
            if previous is not None:
                summary = f"{previous}\n\n{summary}"
        first_kept = rows[cut][0]
        fields: dict[str, Any] = {"summary": summary, "first_kept_entry_id": first_kept,
                                  "tokens_before": before}
        if usage is not None:
            fields["usage"] = usage
        self.log.append_entry("compaction", **fields)
        after = estimate_tokens(self._system(), self.log.replay())
        yield {"type": "compaction_end", "summary": summary, "tokens_before": before,
               "tokens_after": after, "error": ""}
        return True

    def _previous(self, rows: Sequence[tuple[str, Message]]) -> str | None:
        """The summary of the compaction now in force, if the transcript begins with one."""
        if not rows:
            return None
        entry = self.log.entry(rows[0][0])
        return str(entry["summary"]) if entry.get("type") == "compaction" else None


def _cut(rows: Sequence[tuple[str, Message]], keep: int) -> int | None:
    """Where the kept tail starts: at a user message (a turn's start) or at an assistant
    message (inside a long run of tool rounds: its tool calls' results come after it, so no
    call is parted from its result), never at a tool result. The latest such place whose tail
    holds at least `keep` tokens, else the earliest one; None when nothing new lies before
    any of them to summarise. A cut inside a run summarises the run's start, its request
    included."""
    lower = 1 if rows and _is_summary(rows[0][1]) else 0
    places = [at for at in range(lower + 1, len(rows)) if rows[at][1]["role"] != "toolResult"]
    if not places:
        return None
    tail, sizes = 0, {}
    for at in range(len(rows) - 1, places[0] - 1, -1):
        tail += _message_chars(rows[at][1]) // CHARS_PER_TOKEN
        sizes[at] = tail
    return max((at for at in places if sizes[at] >= keep), default=places[0])


def _is_summary(message: Message) -> bool:
    return message["role"] == "user" and isinstance(message["content"], str) and \
        message["content"].startswith(COMPACTION_PREAMBLE)


def _request(rows: Sequence[tuple[str, Message]], previous: str | None,
             instructions: str, budget: int) -> str:
    """The part being summarised as text, fitted into `budget` characters: the first part
    (the previous summary, else the first request) always, then the newest messages that
    fit, saying how many between them were left out."""
    parts = [t for t in (entry_text({"type": "message", "message": m}) for _, m in rows) if t]
    head = [UPDATE, "Summary so far:\n" + previous] if previous is not None else \
        [f"{parts.pop(0)[:budget // 4]}"] if parts else []
    used = sum(map(len, head))
    kept: list[str] = []
    for part in reversed(parts):
        if used + len(part) > budget:
            break
        kept.append(part)
        used += len(part)
    kept.reverse()
    if len(kept) < len(parts):
        head.append(f"[{len(parts) - len(kept)} messages left out here]")
    tail = [f"The user asks that the summary: {instructions}"] if instructions else []
    return "\n\n".join([*head, *kept, *tail])
