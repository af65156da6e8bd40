"""What a session file's lines are: one TypedDict per entry type, and the one way to make one.

In: nothing (plain types and two small functions). Out: `Entry`, the type every reader of a
session uses for a line once parsed (a JSON object: a file may hold any, and the readers
check what they rely on); `EntryType`, the types the format names; a TypedDict per type
saying what it carries beyond the four keys every entry has (`id`, `type`, `parent_id`,
`timestamp`); `timestamp()`; and `new_entry()`, which every append builds its line with.
Never: I/O, or a check of a parsed line (that is `mulligan.session.index.entry_problem`).

The TypedDicts are the format's documentation in code; an entry may carry more keys
(metadata: workspace checkpoints, an attempt's facts), which readers step over.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal, NotRequired, TypedDict

from mulligan.messages import Message

__all__ = [
    "RESERVED", "BranchEntry", "BranchSummaryEntry", "CheckEntry", "CompactionEntry",
    "Entry", "EntryType", "LabelEntry", "MessageEntry", "ModelChangeEntry",
    "SessionInfoEntry", "WorkspaceRestoreEntry", "check_meta", "new_entry", "timestamp",
]

# A line of a session, parsed: a JSON object, read-only for whoever is handed it.
Entry = Mapping[str, Any]

EntryType = Literal["message", "branch", "branch_summary", "compaction", "label",
                    "session_info", "model_change", "workspace_restore", "check"]

# Keys every entry has; metadata passed by callers may not replace them.
RESERVED = frozenset({"id", "type", "parent_id", "timestamp"})


class MessageEntry(TypedDict):
    id: str
    type: Literal["message"]
    parent_id: str | None
    timestamp: str
    message: Message


class BranchEntry(TypedDict):
    """Going back: its parent is the entry gone back to."""

    id: str
    type: Literal["branch"]
    parent_id: str | None
    timestamp: str


class BranchSummaryEntry(TypedDict):
    """Going back with a summary of the attempt left (`from_id`, its tip)."""

    id: str
    type: Literal["branch_summary"]
    parent_id: str | None
    timestamp: str
    from_id: str
    summary: str
    details: NotRequired[dict[str, Any]]


class CompactionEntry(TypedDict):
    id: str
    type: Literal["compaction"]
    parent_id: str | None
    timestamp: str
    summary: str
    first_kept_entry_id: str
    tokens_before: NotRequired[int]


class LabelEntry(TypedDict):
    id: str
    type: Literal["label"]
    parent_id: str | None
    timestamp: str
    target_id: str
    label: str


class SessionInfoEntry(TypedDict):
    id: str
    type: Literal["session_info"]
    parent_id: str | None
    timestamp: str
    name: NotRequired[str]
    cwd: NotRequired[str]
    created: NotRequired[str]
    model: NotRequired[str]
    origin_file: NotRequired[str]


class ModelChangeEntry(TypedDict):
    id: str
    type: Literal["model_change"]
    parent_id: str | None
    timestamp: str
    provider: str
    model: str


class WorkspaceRestoreEntry(TypedDict):
    id: str
    type: Literal["workspace_restore"]
    parent_id: str | None
    timestamp: str
    workspace: dict[str, Any]


class CheckEntry(TypedDict):
    """A check run in an attempt's folder (see DESIGN.md, attempts)."""

    id: str
    type: Literal["check"]
    parent_id: str | None
    timestamp: str
    attempt: dict[str, Any]
    command: str
    exit_code: int
    output: str
    duration_ms: int


def timestamp() -> str:
    """Now, ISO-8601 UTC with milliseconds: 2026-11-30T10:00:00.000Z."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_entry(entry_id: str, type_: str, parent_id: str | None,
              fields: Mapping[str, Any]) -> dict[str, Any]:
    """The entry an append writes: the four keys every entry has, in the format's order,
    stamped now, then `fields` (checked by `check_meta` first by whoever took them from a
    caller)."""
    return {"id": entry_id, "type": type_, "parent_id": parent_id, "timestamp": timestamp(),
            **fields}


def check_meta(meta: Mapping[str, Any]) -> None:
    """ValueError when caller-given keys would replace one of the four every entry has."""
    clash = RESERVED.intersection(meta)
    if clash:
        raise ValueError(f"entry keys {sorted(clash)} are the log's own and cannot be set")
