"""A session file read through its line table: only the lines a question needs are parsed.

`LazyFile.open(storage)` gives one when the file's sidecar describes it exactly (see
`mulligan.session.sidecar`); every answer then comes from the table and the few lines it
points at, read through mmap and parsed once (kept). Anything the table cannot answer
exactly -- the file changed in a way the sidecar does not describe, a walk through a parent
the table cannot follow, a line whose id or parent is not what the table says, or that the
full read would refuse -- raises
`Stale`, and the log reads the file whole instead, where every refusal is made by name. So a
lazy answer is always the answer of the full read, or no answer.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Mapping
from typing import Any

import orjson

from mulligan.session.entries import Entry, new_entry
from mulligan.session.errors import UnknownEntry
from mulligan.session.index import entry_problem
from mulligan.session.sidecar import (
    KINDS,
    ROOT,
    TYPE_OF_KIND,
    UNRESOLVED,
    Table,
    append,
    file_state,
    kind_of,
    line_hash,
    load,
    number_of,
)
from mulligan.session.stores.storage import FileStorage, read_at


class Stale(Exception):
    """The table cannot answer this exactly: read the file whole."""


class LazyFile:
    """The indexed reader behind `SessionLog` (its other reader is
    `mulligan.session.whole.WholeRead`): the same questions, answered through the table, or
    Stale."""

    def __init__(self, storage: FileStorage, table: Table) -> None:
        self.storage, self.table = storage, table
        self.parsed: dict[int, Entry] = {}
        self.stale = False  # a writer went past the lock: only a whole read can say what is

    @classmethod
    def open(cls, storage: FileStorage) -> LazyFile | None:
        """The file through its sidecar, or None (no file, no sidecar, or a stale one)."""
        with storage.reading() as fd:
            if fd is None:
                return None
            table = load(storage.name, fd, os.fstat(fd))
        return cls(storage, table) if table is not None else None

    def refresh(self) -> None:
        """Catch up with appends other writers made (and recorded in the sidecar); Stale if
        the file is not what the table, or a newer sidecar extending it, describes."""
        if self.stale:
            raise Stale
        with self.storage.reading() as fd:
            if fd is None:
                raise Stale
            self.adopt(fd, os.fstat(fd))

    def adopt(self, fd: int, stat: os.stat_result) -> None:
        """Make the table describe the file as `stat` has it (the caller holds its lock)."""
        if file_state(stat) == self.table.state:
            return
        newer = load(self.storage.name, fd, stat)
        old = self.table
        if newer is None or newer.state[:2] != old.state[:2] or newer.count < old.count or (
                old.count and newer.ends[old.count - 1] != old.ends[-1]):
            raise Stale  # not the file read so far, grown by appends: start again
        self.table = newer

    def check_last(self, fd: int) -> None:
        """Stale unless the file's real last line (read now from `fd`, whose lock the caller
        holds) is the one line the table says it is: one JSON object, id "e" + the count,
        the parent the table gives. An append takes its id from this, never from the table
        alone (a forged table describing one line fewer would make it write a duplicate)."""
        table = self.table
        if not table.count:
            raise Stale
        at = table.count - 1
        start = table.start(at)
        raw = read_at(fd, start, table.ends[at] - start)
        if raw[-1:] != b"\n" or len(raw) != table.ends[at] - start:
            raise Stale
        try:
            self.parsed[at] = self._checked(at, orjson.loads(raw[:-1]))
        except (orjson.JSONDecodeError, ValueError, OverflowError):
            raise Stale from None

    # ---- questions --------------------------------------------------------------------

    def tip(self) -> str | None:
        return f"e{self.table.count}" if self.table.count else None

    def position(self, entry_id: Any) -> int:
        """Where `entry_id` is: every id of a tabled file is "e" + its line number."""
        number = number_of(entry_id, self.table.count)
        if number is not None:
            return number - 1
        raise UnknownEntry(f"no entry has the id {entry_id!r}", file=self.storage.name,
                           entry_id=str(entry_id))

    def entries(self) -> list[Entry]:
        raise Stale  # every line: only a whole read gives them, validated

    def entry(self, entry_id: str) -> Entry:
        return self.entries_at([self.position(entry_id)])[0]

    def of_type(self, type_: str) -> list[Entry]:
        kind = KINDS.get(type_)
        if kind is None:  # a type the table does not tell apart
            raise Stale
        return self.of_kind(kind)

    def sketch(self) -> tuple[list[Entry], bool]:
        """Every entry, for drawing the tree folded: the entries on the branch to the tip and
        the labels themselves, every other one a sketch, {"id", "parent_id", "type"}."""
        table = self.table
        if UNRESOLVED in table.parents:
            raise Stale  # a parent the table cannot follow: the whole file, drawn
        whole = {e["id"]: e for e in (*self.path(self.tip()), *self.of_kind(KINDS["label"]))}
        return [whole.get(f"e{at + 1}") or {
            "id": f"e{at + 1}", "parent_id": None if up == ROOT else f"e{up + 1}",
            "type": TYPE_OF_KIND[mark & 0xFF]}
            for at, (up, mark) in enumerate(zip(table.parents, table.marks, strict=True))
        ], True

    def append(self, type_: str, fields: Mapping[str, Any], parent: str | None,
               must_exist: str | None) -> str:
        """One line appended under the file's exclusive lock, the table caught up with the
        file first (Stale if it cannot be: the log appends as a whole read does), the id and
        parent from it, the table and the sidecar moved on with the line."""
        with self.storage.appending(create=False) as writer:
            if writer is None:
                raise Stale
            before = os.fstat(writer.fd)
            self.adopt(writer.fd, before)
            self.check_last(writer.fd)  # the id comes from the file, not the table alone
            if must_exist is not None:
                self.position(must_exist)
            table = self.table
            number = table.count + 1
            entry = new_entry(f"e{number}", type_,
                              parent if parent is not None else self.tip(), fields)
            line = orjson.dumps(entry) + b"\n"  # TypeError here: nothing written
            writer.write(line, entry)
            self.parsed[number - 1] = orjson.loads(line[:-1])
            head, first = table.header(), table.count
            after = os.fstat(writer.fd)
            if after.st_size != before.st_size + len(line):  # someone wrote without the lock
                self.stale = True
                return str(entry["id"])
            up = self.position(entry["parent_id"]) if entry["parent_id"] is not None else ROOT
            table.add(after.st_size, up, kind_of(entry))
            table.state, table.last = file_state(after), line_hash(line)
            append(self.storage.name, table, head, first)
            return str(entry["id"])

    def path(self, leaf_id: str | None) -> list[Entry]:
        if leaf_id is None:
            return []
        positions = self.table.path_from(self.position(leaf_id))
        if positions is None:
            raise Stale
        return self.entries_at(positions)

    def of_kind(self, kind: int) -> list[Entry]:
        return self.entries_at(self.table.positions_of(kind))

    def entries_at(self, positions: list[int]) -> list[Entry]:
        """The entries at those line positions, parsed from the file (once each), each
        checked against the table: its id and its parent must be what the table says."""
        parsed = self.parsed
        missing = [at for at in positions if at not in parsed]
        if missing:
            self._parse(missing)
        return [parsed[at] for at in positions]

    def _parse(self, positions: list[int]) -> None:
        table, loads = self.table, orjson.loads
        try:
            fd = os.open(self.storage.name, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            raise Stale from None
        try:
            if os.fstat(fd).st_size < table.ends[-1]:
                raise Stale
            with mmap.mmap(fd, table.ends[-1], prot=mmap.PROT_READ) as view:
                for at in positions:
                    self.parsed[at] = self._checked(
                        at, loads(view[table.start(at):table.ends[at] - 1]))
        except (orjson.JSONDecodeError, ValueError, OverflowError, OSError):
            raise Stale from None
        finally:
            os.close(fd)

    def _checked(self, at: int, entry: Any) -> Entry:
        """`entry`, parsed from line `at`, if it is what the table says (its id, its parent)
        and what the full read accepts (`entry_problem`); else Stale."""
        if type(entry) is not dict or entry.get("id") != f"e{at + 1}":
            raise Stale
        up = self.table.parents[at]
        if entry.get("parent_id", 0) != (None if up == ROOT else f"e{up + 1}"):
            raise Stale
        if entry_problem(entry) is not None:
            raise Stale
        return entry
