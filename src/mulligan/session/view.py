"""The view: the transcript a branch of the record stands for, by the format's rules.

In: the entries on one branch (oldest first, as the walk gives them). Out: (entry id,
message) pairs, what the model is sent (after `context_for_model`). The record is never
changed: going back, summaries and compaction are entries; this reads them.

- A `message` entry is its message (refused, by entry, if it lacks the wire shape).
- A `branch_summary` entry is one user message: `SUMMARY_PREAMBLE` + its summary.
- Only the last `compaction` entry C on the branch applies: one user message,
  `COMPACTION_PREAMBLE` + C's summary; then what the two rules above make of the branch from
  C's `first_kept_entry_id` (inclusive) up to C; then what they make of the rest after C.
  A `first_kept_entry_id` that is not an entry on the branch before C is refused, naming C.
- Every other entry stands for nothing.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from mulligan.messages import Message, shape_problem, user_message
from mulligan.session.entries import Entry
from mulligan.session.errors import BadEntry

__all__ = ["COMPACTION_PREAMBLE", "SUMMARY_PREAMBLE", "messages_of", "transcript"]

SUMMARY_PREAMBLE = ("[The user went back from an earlier attempt at this and left it. This "
                    "summarises what that attempt found out and did; the attempt itself is "
                    "not part of this conversation.]\n\n")
COMPACTION_PREAMBLE = ("[The earlier part of this conversation was compacted to fit the "
                       "model's context window. This summarises it; the messages after it "
                       "follow as they were.]\n\n")

_SHOWN = frozenset({"message", "branch_summary"})


def transcript(branch: Sequence[Entry], *, file: str | os.PathLike[str] | None = None
               ) -> list[tuple[str, Message]]:
    """The (entry id, message) pairs `branch` stands for (see the module docstring)."""
    return [(entry_id, message) for entry_id, message in zip(
        *_view(branch, file), strict=True)]


def messages_of(branch: Sequence[Entry], *, file: str | os.PathLike[str] | None = None
                ) -> list[Message]:
    """The messages alone: `transcript` without the ids. Replay builds no pair per message:
    100k fresh tuples would wake the cyclic garbage collector for a full pass."""
    return _view(branch, file)[1]


def _view(branch: Sequence[Entry], file: str | os.PathLike[str] | None
          ) -> tuple[list[str], list[Message]]:
    last = None
    for at in range(len(branch) - 1, -1, -1):
        if branch[at].get("type") == "compaction":
            last = at
            break
    ids: list[str] = []
    messages: list[Message] = []
    if last is None:
        _items(branch, file, ids, messages)
        return ids, messages
    compaction = branch[last]
    first_kept = compaction.get("first_kept_entry_id")
    start = next((at for at in range(last) if branch[at]["id"] == first_kept), None)
    if start is None:
        raise BadEntry(f"a compaction whose first_kept_entry_id {first_kept!r} is not an entry "
                       "on its branch before it", file=file, entry_id=compaction["id"])
    ids.append(compaction["id"])
    messages.append(user_message(COMPACTION_PREAMBLE + compaction["summary"]))
    _items(branch[start:last], file, ids, messages)
    _items(branch[last + 1:], file, ids, messages)
    return ids, messages


def _items(entries: Sequence[Entry], file: str | os.PathLike[str] | None, ids: list[str],
           messages: list[Message]) -> None:
    for entry in entries:
        kind = entry.get("type")
        if kind not in _SHOWN:
            continue
        if kind == "branch_summary":
            ids.append(entry["id"])
            messages.append(user_message(SUMMARY_PREAMBLE + entry["summary"]))
            continue
        message = entry.get("message")
        # A hand-edited message would otherwise fail later, as a KeyError in whatever reads
        # it first; refuse it here, by entry, like any other damage.
        problem = shape_problem(message)
        if problem is not None:
            raise BadEntry(f"a message entry holding {problem}", file=file,
                           entry_id=entry["id"])
        ids.append(entry["id"])
        messages.append(message)  # type: ignore[arg-type]
