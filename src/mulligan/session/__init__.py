"""Sessions: append-only JSONL trees you can go back in.

`SessionLog` is one session file; `path(entries, leaf_id)` walks one branch of any list of
entries; `persist_to(log)` is the Harness listener that saves every completed message. Every
refusal is a `SessionError` (a ValueError) naming the line or entry. `mulligan.session.
maintenance` has check, repair and migrate for damaged and old files. See docs/sessions.md.
"""

from __future__ import annotations

from mulligan.session.errors import (
    BadEntry,
    CircularParent,
    DuplicateId,
    MissingLine,
    MissingParent,
    NoParentKey,
    NotAnObject,
    NotOldFormat,
    SessionError,
    TargetExists,
    TornLine,
    UnknownEntry,
)
from mulligan.session.index import path
from mulligan.session.log import SessionLog
from mulligan.session.persist import persist_to

__all__ = [
    "BadEntry",
    "CircularParent",
    "DuplicateId",
    "MissingLine",
    "MissingParent",
    "NoParentKey",
    "NotAnObject",
    "NotOldFormat",
    "SessionError",
    "SessionLog",
    "TargetExists",
    "TornLine",
    "UnknownEntry",
    "path",
    "persist_to",
]
