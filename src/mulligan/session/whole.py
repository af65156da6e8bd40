"""`WholeRead`: a session read whole -- every line parsed, validated and kept in an `Index`.

One of the two readers behind `SessionLog` (the other is `mulligan.session.lazy.LazyFile`,
which parses only what a question needs). In: a `Storage`; for a session file, also the file
storage whose line table it keeps in step (`mulligan.session.sidecar.in_step`). Out: the
answers of the format, every refusal by name. It reads only what was appended since its last
call, by itself or any other writer, and starts again from the first line when the storage
says the session is not the one parsed. Never: append after a torn or unreadable line, or
re-parse a line it has accepted.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any

import orjson

from mulligan.session import sidecar as tables
from mulligan.session.entries import Entry, new_entry
from mulligan.session.errors import DuplicateId, SessionError, TornLine, UnknownEntry
from mulligan.session.index import Index, paused_gc
from mulligan.session.stores.storage import FileStorage, Storage


class WholeRead:
    """Every line of one session, in an Index, caught up on `refresh()`. `file`: the file
    storage whose line table is kept in step (None: a database session, or no table)."""

    def __init__(self, storage: Storage, file: FileStorage | None) -> None:
        self.storage, self.file = storage, file
        self.name = storage.name
        self.index = Index(self.name)
        self.table: tables.Table | None = None
        storage.forget()

    # ---- the reader's questions (see `mulligan.session.log.Reader`) --------------------

    def refresh(self) -> None:
        """Catch up with the storage (a missing file reads as empty), and the table with it."""
        before = len(self.index.entries)
        self.ingest(*self.storage.fetch())
        file = self.file
        if file is not None and len(self.index.entries) != before:
            stat = file.stat
            if stat is not None and stat.st_size == self.index.size:
                self.table = tables.in_step(self.name, self.table, self.index, stat, None,
                                            persist=before == 0)

    def entries(self) -> list[Entry]:
        return list(self.index.entries)

    def tip(self) -> str | None:
        return self.index.tip()

    def position(self, entry_id: str) -> int:
        return self.index.position(entry_id)

    def entry(self, entry_id: str) -> Entry:
        return self.index.entries[self.index.position(entry_id)]

    def path(self, leaf_id: str | None) -> list[Entry]:
        index = self.index
        return list(map(index.entries.__getitem__, index.walk(leaf_id)))

    def of_type(self, type_: str) -> list[Entry]:
        return [e for e in self.index.entries if e.get("type") == type_]

    def sketch(self) -> tuple[list[Entry], bool]:
        return list(self.index.entries), False

    # ---- appending -----------------------------------------------------------------------

    def append(self, type_: str, fields: Mapping[str, Any], parent: str | None,
               must_exist: str | None) -> str:
        """Write one entry under the storage's exclusive hold: catch up, work out the id (the
        line number) and the parent (the tip, or `parent`), check, write, keep the line."""
        with self.storage.appending(create=must_exist is None) as writer:
            if writer is None:  # deleted since the caller's check: nothing read holds
                self.index, self.table = Index(self.name), None
                self.storage.forget()
                raise UnknownEntry(f"no entry has the id {must_exist!r}", file=self.name,
                                   entry_id=must_exist)
            self.ingest(*writer.fetch())
            index = self.index
            if must_exist is not None:
                index.position(must_exist)
            number = len(index.entries) + 1
            new_id = f"e{number}"
            if new_id in index.by_id:
                raise DuplicateId(
                    f"the next line would take the id {new_id}, which line "
                    f"{index.by_id[new_id] + 1} already has (ids are 'e' + line number)",
                    file=self.name, line=number, entry_id=new_id)
            entry = new_entry(new_id, type_, parent if parent is not None else index.tip(),
                              fields)
            line = orjson.dumps(entry) + b"\n"  # TypeError here: nothing written
            writer.write(line, entry)
            # Parse our own bytes back: the entry kept is exactly what a reader gets, and the
            # caller's message dict may change later without changing the log.
            index.add_line(orjson.loads(line[:-1]), len(line))
            self.storage.accept(line, len(line))
            if self.file is not None:
                self.table = tables.in_step(self.name, self.table, index,
                                            os.stat(self.name), line, persist=True)
        return new_id

    # ---- parsing -----------------------------------------------------------------------

    def ingest(self, fresh: bool, data: bytes | Iterator[bytes]) -> None:
        """Parse `data`, the bytes after the last parsed line (after nothing when `fresh`),
        or a storage's stream of them, chunk by chunk (each ends at a line's end), with the
        collector paused across the chunks as it is across one big read. Raises TornLine for
        a last line without its newline (and the named error for a bad line), after keeping
        every complete line before it; what was not kept is fetched and refused again next
        call."""
        if fresh:
            self.index, self.table = Index(self.name), None
        if not isinstance(data, bytes):
            try:
                with paused_gc():
                    for chunk in data:
                        self._ingest_bytes(chunk)
            finally:  # a refusal mid-stream: the stream ends now, not when collected
                close = getattr(data, "close", None)
                if close is not None:
                    close()
            return
        self._ingest_bytes(data)

    def _ingest_bytes(self, data: bytes) -> None:
        if not data:
            return
        before = len(self.index.entries)
        try:
            used = self.index.add_data(data)
        except SessionError:
            used = _complete_lines(data, len(self.index.entries) - before)
            self.storage.accept(data, used)
            raise
        self.storage.accept(data, used)
        if used < len(data):
            try:
                whole = type(orjson.loads(data[used:])) is dict
            except orjson.JSONDecodeError:
                whole = False
            fix = ("a whole entry without its newline (`mulligan session repair` adds it)"
                   if whole else f"a torn write of {len(data) - used} bytes (`mulligan "
                   "session repair` sets it aside)")
            raise TornLine(f"the last line has no newline: {fix}",
                           file=self.name, line=len(self.index.entries) + 1)


def _complete_lines(data: bytes, count: int) -> int:
    """How many bytes the first `count` lines of `data` take, newlines included."""
    used = 0
    for _ in range(count):
        used = data.index(b"\n", used) + 1
    return used
