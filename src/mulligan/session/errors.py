"""The named refusals of a session file.

Every error is a `SessionError`, which is a `ValueError`, and its message names the file and the
line number or entry id a person should look at. The fields are also kept as attributes
(`file`, `line`, `entry_id`) for programs. Nothing here does I/O.
"""

from __future__ import annotations

import os


def _where(file: str | os.PathLike[str] | None, line: int | None, entry_id: str | None) -> str:
    parts = [os.fspath(file)] if file is not None else []
    if line is not None:
        parts.append(f"line {line}")
    if entry_id is not None:
        parts.append(f"entry {entry_id}")
    return ", ".join(parts)


class SessionError(ValueError):
    """A session file, or a request about one, that cannot be honoured without guessing."""

    def __init__(
        self,
        problem: str,
        *,
        file: str | os.PathLike[str] | None = None,
        line: int | None = None,
        entry_id: str | None = None,
    ) -> None:
        self.problem = problem
        self.file = os.fspath(file) if file is not None else None
        self.line = line
        self.entry_id = entry_id
        where = _where(file, line, entry_id)
        super().__init__(f"{where}: {problem}" if where else problem)


class TornLine(SessionError):
    """The last line has no newline: a write that was cut off. Never skipped, never appended to."""


class NotAnObject(SessionError):
    """A line that is not one JSON object."""


class BadEntry(SessionError):
    """A JSON object that is not a usable entry: no string id, or a message entry whose
    "message" is not an object."""


class DuplicateId(SessionError):
    """Two lines with one id. The walk could not know which one a parent_id means."""


class NoParentKey(SessionError):
    """An entry without a "parent_id" key: a file from before entries had parents."""


class MissingParent(SessionError):
    """An entry whose parent_id is the id of no entry in the file."""


class CircularParent(SessionError):
    """A parent chain that comes back to an entry already walked through (named there)."""


class MissingLine(SessionError):
    """A store whose lines skip a number (a database row inserted by hand past the log)."""


class UnknownEntry(SessionError):
    """An id asked for (branch_to, a label's target, entry(), path()) that is in no entry."""


class NotOldFormat(SessionError):
    """migrate() was given a file whose entries already carry parents."""


class TargetExists(SessionError):
    """migrate() was asked to write a file that already exists."""
