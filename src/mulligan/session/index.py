"""The tree in memory: entries in file order, an id -> position dict, and the walk.

`Index` is what a `SessionLog` keeps between calls. It is fed the bytes of complete lines in
file order and never re-parses a line it has accepted. Each entry's parent is looked up in the
id dict once, when its line is read, and remembered as a position; so accepting one more entry
costs one dict lookup, and a walk from the tip is a list lookup per step that checks, at every
step, what the format refuses (no parent key, a missing parent, a circle).

`path(entries, leaf_id)` is the same walk over a plain list of dicts, for callers holding
entries from elsewhere. `ancestors` is the one walk up a tree that every other reader (the
tree drawing, `check`, the attempt count) uses too. Nothing here does I/O; every refusal is a
named `SessionError`.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import orjson

from mulligan.session.entries import Entry
from mulligan.session.errors import (
    BadEntry,
    CircularParent,
    DuplicateId,
    MissingParent,
    NoParentKey,
    NotAnObject,
    UnknownEntry,
)

K = TypeVar("K", bound=Hashable)
FileName = str | os.PathLike[str] | None

_PAUSE_GC_ABOVE = 1 << 20  # bytes


class Index:
    """Parsed entries of one file, in file order, with the walk memo. `file` is only used to
    name the file in error messages."""

    def __init__(self, file: FileName = None) -> None:
        self.file = file
        self.entries: list[Entry] = []
        self.by_id: dict[str, int] = {}
        # _up[i]: the position of entry i's parent, looked up once when the line is read;
        # None when there is none to follow (a first entry, or one the walk must refuse, or a
        # parent not read yet), and then the walk looks at the entry itself.
        self._up: list[int | None] = []
        # ends[i]: the byte offset just after line i's newline (the line table's offsets);
        # size: the bytes of the lines accepted.
        self.ends: list[int] = []
        self.size = 0

    # ---- reading lines -------------------------------------------------------------------

    def add_data(self, data: bytes) -> int:
        """Parse and accept the complete lines at the start of `data` (bytes that follow what
        was accepted before) and return how many bytes they take, up to and including the
        last newline; a fragment after it is left to the caller. On a bad line every line
        before it is kept, and the error names the bad one: NotAnObject, BadEntry (no string
        id) or DuplicateId.

        Speed matters here (a 100k-entry file is opened in one call): lines are parsed as
        zero-copy memoryview slices, the checks run as C loops, and the cyclic garbage
        collector is paused during a big parse (it would otherwise re-scan every dict
        parsed so far, several times over)."""
        if len(data) <= _PAUSE_GC_ABOVE:
            return self._add_data(data)
        with paused_gc():
            return self._add_data(data)

    def _add_data(self, data: bytes) -> int:
        view, find, loads = memoryview(data), data.find, orjson.loads
        parsed: list[Any] = []
        stops: list[int] = []
        append, stop = parsed.append, stops.append
        start = 0
        broken: orjson.JSONDecodeError | None = None
        try:
            while (end := find(b"\n", start)) >= 0:
                append(loads(view[start:end]))
                start = end + 1
                stop(start)
        except orjson.JSONDecodeError as exc:
            broken = exc
        before = len(self.entries)
        try:
            if not self._add_checked(parsed):
                self._add_one_by_one(parsed)
        finally:
            accepted, base = len(self.entries) - before, self.size
            if accepted:
                kept = stops[:accepted] if accepted < len(stops) else stops
                self.ends.extend(kept if not base else [base + at for at in kept])
                self.size = self.ends[-1]
        if broken is not None:
            raise NotAnObject(f"not a JSON object ({broken})", file=self.file,
                              line=len(self.entries) + 1)
        return start

    def ups(self) -> list[int | None]:
        """Each line's parent position as found when it was read (None: not found then)."""
        return self._up

    def add_line(self, entry: Any, length: int) -> None:
        """`add_entry` for a line of `length` bytes (newline included) this log wrote."""
        self.add_entry(entry)
        self.size += length
        self.ends.append(self.size)

    def _add_checked(self, parsed: list[Any]) -> bool:
        """Accept `parsed` at once if every item is a well-typed entry (`_well_typed`) with a
        fresh id; else accept nothing and say so, and `add_entry` names the first bad one."""
        if not parsed:
            return True
        # One pass over the entries for every check and what the parents' lookup needs: at
        # 100k entries each pass over their dicts is memory-bound (issue 29).
        ids: list[str] = []
        parents: list[Any] = []  # each a string or None
        add_id, add_parent = ids.append, parents.append
        for entry in parsed:
            if type(entry) is not dict:
                return False
            entry_id = entry.get("id")
            if type(entry_id) is not str or not _well_typed(entry):
                return False
            add_id(entry_id)
            add_parent(entry.get("parent_id"))
        base = len(self.entries)
        fresh = dict(zip(ids, range(base, base + len(ids)), strict=True))
        if len(fresh) != len(ids) or not self.by_id.keys().isdisjoint(fresh):
            return False
        if self.by_id:
            self.by_id.update(fresh)
        else:
            self.by_id = fresh
        self.entries.extend(parsed)
        # every parent_id is a string or null here (`_well_typed`): never unhashable
        self._up.extend(map(self.by_id.get, parents))
        return True

    def _add_one_by_one(self, parsed: list[Any]) -> None:
        for entry in parsed:  # raises at the first bad one, keeping those before it
            self.add_entry(entry)

    def add_entry(self, entry: Any, number: int | None = None) -> None:
        """Accept one already-parsed entry as the next line: NotAnObject, BadEntry (a field of
        the wrong JSON type, a message on an entry that is not a message entry) or
        DuplicateId, naming the line, if it cannot be."""
        number = len(self.entries) + 1 if number is None else number
        if type(entry) is not dict:
            raise NotAnObject(f"not a JSON object but {type(entry).__name__}",
                              file=self.file, line=number)
        entry_id = entry.get("id")
        if type(entry_id) is not str:
            if "role" in entry and "type" not in entry:
                raise BadEntry("a bare message with no id or parent: a file from before "
                               "entries had parents; `mulligan session migrate OLD NEW` "
                               "converts it", file=self.file, line=number)
            raise BadEntry(f"an entry whose id is {_what(entry, 'id')}, not a string",
                           file=self.file, line=number)
        problem = entry_problem(entry)
        if problem is not None:
            raise BadEntry(problem, file=self.file, line=number, entry_id=entry_id)
        first = self.by_id.get(entry_id)
        if first is not None:
            raise DuplicateId(f"id {entry_id} is already the id of line {first + 1}",
                              file=self.file, line=number, entry_id=entry_id)
        self.by_id[entry_id] = len(self.entries)
        self.entries.append(entry)
        parent_id = entry.get("parent_id")
        self._up.append(self.by_id.get(parent_id) if type(parent_id) is str else None)

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
        [] for None. Every step is checked: NoParentKey, MissingParent, CircularParent (named
        where the walk comes back), each naming the entry. A list lookup per step."""
        if leaf_id is None:
            return []
        walked = list(ancestors(self.position(leaf_id), self._step))
        comes_back = self._step(walked[-1])
        if comes_back is not None:  # the chain stopped because its next entry was walked
            raise CircularParent("is its own ancestor: its parent chain comes back to it",
                                 file=self.file, line=comes_back + 1,
                                 entry_id=self.entries[comes_back]["id"])
        walked.reverse()
        return walked

    def _step(self, at: int) -> int | None:
        above = self._up[at]
        return above if above is not None else self._parent_of(at)

    def _parent_of(self, at: int) -> int | None:
        """The parent of an entry whose parent was not found when it was read: None for a
        first entry; found now (it was appended later); or a refusal naming the entry."""
        entry = self.entries[at]
        if "parent_id" not in entry:
            raise NoParentKey(
                "has no parent_id key (a file from before entries had parents; "
                "`mulligan session migrate` converts one)",
                file=self.file, line=at + 1, entry_id=entry["id"])
        parent_id = entry["parent_id"]
        if parent_id is None:
            return None
        found = self.by_id.get(parent_id) if type(parent_id) is str else None
        if found is None:
            raise MissingParent(f"names parent {parent_id!r}, which is in no entry",
                                file=self.file, line=at + 1, entry_id=entry["id"])
        self._up[at] = found
        return found

    def path(self, leaf_id: str | None) -> list[Entry]:
        """The entries from the first one down to `leaf_id`, oldest first."""
        entries = self.entries
        return [entries[i] for i in self.walk(leaf_id)]


@contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic collector off for a big parse (it would re-scan every dict parsed so far,
    several times over), and back as it was after; nested uses are free."""
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def _well_typed(entry: Entry) -> bool:
    """The fast yes of `entry_problem`, for the bulk read: a string type, a parent_id that is
    a string or null (or absent: the walk refuses that by name if it gets there), a message
    only on a message entry, and a label's target a string."""
    kind = entry.get("type")
    if kind == "message":
        parent = entry.get("parent_id")
        return parent is None or type(parent) is str
    if type(kind) is not str or "message" in entry:
        return False
    parent = entry.get("parent_id")
    if parent is not None and type(parent) is not str:
        return False
    if kind == "label":
        return type(entry.get("target_id")) is str
    if kind in ("branch_summary", "compaction"):  # what the transcript is made of
        return type(entry.get("summary")) is str and (
            kind == "compaction" or type(entry.get("from_id")) is str)
    return True


def entry_problem(entry: Entry) -> str | None:
    """What makes `entry` (a dict with a string id) not an entry of the format, in words, or
    None: a type that is not a string, a parent_id that is neither a string nor null, a
    "message" on an entry whose type is not "message", a label whose target_id is not a
    string, a branch_summary or compaction whose summary (or a branch_summary whose
    from_id) is not a string. The one statement of these rules: the log and `check` both
    refuse through it."""
    if _well_typed(entry):
        return None
    kind = entry.get("type")
    if type(kind) is not str:
        return f"an entry whose type is {_what(entry, 'type')}, not a string"
    parent = entry.get("parent_id")
    if parent is not None and type(parent) is not str:
        return (f"an entry whose parent_id is {_what(entry, 'parent_id')}, not an entry id "
                "(a string) or null")
    if kind != "message" and "message" in entry:
        return (f"carries a message but its type is {kind!r}, not 'message' (a message only "
                "counts on a message entry: mend the type, or the message is not read)")
    if kind == "label":
        return f"a label whose target_id is {_what(entry, 'target_id')}, not an entry id"
    if type(entry.get("summary")) is not str:
        return f"a {kind} entry whose summary is {_what(entry, 'summary')}, not a string"
    return f"a branch_summary whose from_id is {_what(entry, 'from_id')}, not an entry id"


def _what(entry: Entry, key: str) -> str:
    """How a field's value reads in an error: "missing", "a list", "the number 7"."""
    if key not in entry:
        return "missing"
    value = entry[key]
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, dict):
        return "an object"
    return "a list" if isinstance(value, list) else type(value).__name__


def ancestors(start: K, up: Callable[[K], K | None]) -> Iterator[K]:
    """`start`, its parent, its parent's parent, ... : the one walk up the tree, over
    positions (`Index`) or ids (drawing code, `check`). `up(x)` is x's parent, or None where
    there is none to follow (a root, or a parent that is not there); it may raise to refuse a
    step. Stops without raising just before an entry would come round again, so a circle ends
    the walk; a caller that must refuse circles asks `up` of the last entry yielded: not None
    means the walk came back to that entry."""
    seen: set[K] = set()
    at: K | None = start
    while at is not None and at not in seen:
        seen.add(at)
        yield at
        at = up(at)


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
