"""The tree in memory: entries in file order, an id -> position dict, and the walk.

`Index` is what a `SessionLog` keeps between calls. It is fed complete lines (bytes without
their newline) in file order and never re-parses a line it has accepted. Walks are validated
once: each entry whose chain up to the root has been checked remembers its parent's position,
so after one full walk, appending an entry costs one more step of validation, and rows() from
the tip is a list lookup per step.

`path(entries, leaf_id)` is the same walk over a plain list of dicts, for callers holding
entries from elsewhere. Nothing here does I/O; every refusal is a named `SessionError`.
"""

from __future__ import annotations

import os
from typing import Any

import orjson

from mulligan.session.errors import (
    BadEntry,
    CircularParent,
    DuplicateId,
    MissingParent,
    NoParentKey,
    NotAnObject,
    UnknownEntry,
)

Entry = dict[str, Any]
FileName = str | os.PathLike[str] | None

_UNCHECKED = -2  # parent position not validated yet
_ROOT = -1  # parent_id is null: the first entry of a branch


class Index:
    """Parsed entries of one file, in file order, with the walk memo. `file` is only used to
    name the file in error messages."""

    def __init__(self, file: FileName = None) -> None:
        self.file = file
        self.entries: list[Entry] = []
        self.by_id: dict[str, int] = {}
        # _parent[i]: position of entry i's parent once its whole chain has been validated,
        # _ROOT for a validated first entry, _UNCHECKED otherwise.
        self._parent: list[int] = []

    # ---- reading lines -------------------------------------------------------------------

    def add_lines(self, lines: list[bytes]) -> None:
        """Parse and accept complete lines, in order. On a bad line every line before it is
        kept and the error names the bad one: NotAnObject, BadEntry (no string id) or
        DuplicateId. The fast path is C loops only; the slow path finds the line to name."""
        if not lines:
            return
        base = len(self.entries)
        try:
            parsed = list(map(orjson.loads, lines))
        except orjson.JSONDecodeError:
            self._add_slowly(lines)
            return
        if not all(type(e) is dict for e in parsed):
            self._add_slowly(lines)
            return
        ids = [e.get("id") for e in parsed]
        if not all(type(i) is str for i in ids):
            self._add_slowly(lines)
            return
        fresh = dict(zip(ids, range(base, base + len(ids)), strict=True))
        if len(fresh) != len(ids) or not self.by_id.keys().isdisjoint(fresh):
            self._add_slowly(lines)
            return
        if self.by_id:
            self.by_id.update(fresh)
        else:
            self.by_id = fresh
        self.entries.extend(parsed)
        self._parent.extend([_UNCHECKED] * len(parsed))

    def _add_slowly(self, lines: list[bytes]) -> None:
        for raw in lines:
            number = len(self.entries) + 1
            try:
                entry = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise NotAnObject(f"not a JSON object ({exc})", file=self.file,
                                  line=number) from None
            self.add_entry(entry, number)

    def add_entry(self, entry: Any, number: int | None = None) -> None:
        """Accept one already-parsed entry as the next line."""
        number = len(self.entries) + 1 if number is None else number
        if type(entry) is not dict:
            raise NotAnObject(f"not a JSON object but {type(entry).__name__}",
                              file=self.file, line=number)
        entry_id = entry.get("id")
        if type(entry_id) is not str:
            raise BadEntry("an entry without a string id", file=self.file, line=number)
        first = self.by_id.get(entry_id)
        if first is not None:
            raise DuplicateId(f"id {entry_id} is already the id of line {first + 1}",
                              file=self.file, line=number, entry_id=entry_id)
        self.by_id[entry_id] = len(self.entries)
        self.entries.append(entry)
        self._parent.append(_UNCHECKED)

    # ---- questions ------------------------------------------------------------------------

    def tip(self) -> str | None:
        """The id of the last line, or None when there are no lines."""
        return self.entries[-1]["id"] if self.entries else None

    def position(self, entry_id: Any) -> int:
        """Where `entry_id` is in the file; UnknownEntry naming it if it is in no entry."""
        found = self.by_id.get(entry_id) if type(entry_id) is str else None
        if found is None:
            raise UnknownEntry(f"no entry has the id {entry_id!r}", file=self.file,
                               entry_id=str(entry_id))
        return found

    def walk(self, leaf_id: str | None) -> list[int]:
        """Positions of the entries from the first one down to `leaf_id`, oldest first;
        [] for None. Validates the chain (NoParentKey, MissingParent, CircularParent, each
        naming the entry) unless it was validated before."""
        if leaf_id is None:
            return []
        start = self.position(leaf_id)
        self._validate(start)
        parent = self._parent
        walked = []
        at = start
        while at != _ROOT:
            walked.append(at)
            at = parent[at]
        walked.reverse()
        return walked

    def _validate(self, start: int) -> None:
        parent, entries, by_id = self._parent, self.entries, self.by_id
        if parent[start] != _UNCHECKED:
            return
        chain: list[int] = []
        seen: set[int] = set()
        at = start
        while True:
            if at in seen:  # the walk came back: name the entry it came back to
                raise CircularParent(
                    "is its own ancestor: its parent chain comes back to it",
                    file=self.file, entry_id=entries[at]["id"])
            seen.add(at)
            chain.append(at)
            entry = entries[at]
            if "parent_id" not in entry:
                raise NoParentKey(
                    "has no parent_id key (a file from before entries had parents; "
                    "`mulligan session migrate` converts one)",
                    file=self.file, entry_id=entry["id"])
            parent_id = entry["parent_id"]
            if parent_id is None:
                above = _ROOT
                break
            found = by_id.get(parent_id) if type(parent_id) is str else None
            if found is None:
                raise MissingParent(f"names parent {parent_id!r}, which is in no entry",
                                    file=self.file, entry_id=entry["id"])
            if parent[found] != _UNCHECKED:
                above = found
                break
            at = found
        for child, up in zip(chain, chain[1:], strict=False):
            parent[child] = up
        parent[chain[-1]] = above

    def path(self, leaf_id: str | None) -> list[Entry]:
        """The entries from the first one down to `leaf_id`, oldest first."""
        entries = self.entries
        return [entries[i] for i in self.walk(leaf_id)]


def path(entries: list[Entry], leaf_id: str | None) -> list[Entry]:
    """The entries from the first one down to `leaf_id`, oldest first: one branch of a log.

    `entries` is the file in file order, as dicts (what `SessionLog.entries()` returns).
    leaf_id None gives []. Raises a named SessionError (a ValueError) naming the entry for an
    unknown leaf, a duplicate id anywhere in `entries`, an entry without a parent_id key, a
    parent that is in no entry, and a circle (named where the walk comes back). Never returns
    a shorter branch than the one asked for, and never changes `entries`.
    """
    index = Index()
    for entry in entries:
        index.add_entry(entry)
    return index.path(leaf_id)
