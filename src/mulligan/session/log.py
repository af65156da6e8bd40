"""SessionLog: one session, appended to under mutual exclusion, read incrementally.

In: a file path (or any `Storage`: `mulligan.session.storage`). Out: entries, the tip, the
transcript. Every write is one entry, added while the storage holds the session exclusively,
after catching up with whatever other writers added. Never: rewrite, reorder or truncate a
line; append after a torn or unreadable line; re-read what it has already accepted, unless
the storage says the session is not the one parsed.

The log remembers what it has parsed (an `Index`) and, on every call, reads only what was
appended since -- by itself or by any other writer. The file storage notices a file that was
replaced, shrank or changed at its end, and the log then re-reads it from the start. An edit
in the middle of the file that keeps its size and its last line is not noticed by a live log;
a new one sees it. Parsing and every refusal are here, the same whatever the storage.

A session file also has a line table (`mulligan.session.sidecar`), kept in step by every
append and saved beside the file. A new log whose file has a sidecar that describes it
exactly opens lazily (`mulligan.session.lazy`): the tip, a branch, the transcript parse only
the lines on the path; `entries()`, or anything the table cannot answer exactly, reads the
file whole as before -- validating every line -- and the log stays whole from then on. A
file without a usable sidecar is read whole and gets a fresh one. Either way the answers
and refusals are those of the full read.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import orjson

from mulligan.messages import Message
from mulligan.session import sidecar as tables
from mulligan.session.entries import Entry, check_meta, new_entry
from mulligan.session.entries import timestamp as timestamp  # where callers found it
from mulligan.session.errors import DuplicateId, SessionError, TornLine, UnknownEntry
from mulligan.session.index import Index, paused_gc
from mulligan.session.lazy import LazyFile, Stale
from mulligan.session.storage import FileStorage, Releasable, Storage
from mulligan.session.view import messages_of, transcript

T = TypeVar("T")

class SessionLog:
    """A session on disk: one JSON object per line, each naming the entry it follows.

    SessionLog(path, *, fsync=True). Creates nothing until the first append; the folder the
    file goes in must exist (the caller creates it). The file is created with mode 0o600.
    With fsync=True (the default) every entry is flushed and fsynced before its id is
    returned, so a power cut loses at most the entry being written; fsync=False is for bulk
    tools. Thread-safe; any number of SessionLog objects, in any number of processes, may
    share one file. The dicts handed out are the log's own: treat them as read-only.
    SessionLog(storage=...) is the same log over another storage (a database session);
    `path` is then the storage's name. sidecar=False never reads or writes the sidecar
    (every open is a full read: the reference reader the tests compare against).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, fsync: bool = True,
                 storage: Storage | None = None, sidecar: bool = True) -> None:
        if storage is None:
            if path is None:
                raise TypeError("SessionLog needs a path or a storage")
            storage = FileStorage(path, fsync=fsync)
        self.path: str | os.PathLike[str] = path if path is not None else storage.name
        self.fsync = fsync
        self.storage = storage
        self._name = storage.name
        self._mutex = threading.RLock()
        self._index = Index(self._name)
        # The file's line table and how the log reads: None until the first call; a
        # LazyFile while the table answers; "whole" once the Index holds every line.
        self._file = storage if isinstance(storage, FileStorage) and sidecar else None
        self._table: tables.Table | None = None
        self._lazy: LazyFile | None = None
        self._whole = self._file is None

    def lease(self) -> Releasable:
        """Take the session's lease for this process (one live writer): LeaseHeld naming the
        holder when another live process has it."""
        return self.storage.lease()

    def __repr__(self) -> str:
        return f"SessionLog({self._name!r})"

    # ---- reading ---------------------------------------------------------------------------

    def entries(self) -> list[Entry]:
        """Every entry, file order, as dicts; [] when there is no file yet. Refuses (TornLine,
        NotAnObject, BadEntry, DuplicateId) a file with a line it cannot trust, naming it."""
        with self._mutex:
            self._go_whole()
            self._refresh()
            return list(self._index.entries)

    def tip(self) -> str | None:
        """The id of the last line of the file, or None when there is no entry yet."""
        return self._answer(LazyFile.tip, lambda: self._index.tip())

    def entry(self, entry_id: str) -> Entry:
        """The entry with that id; UnknownEntry (a ValueError) naming it if there is none."""
        return self._answer(lambda lazy: lazy.entries_at([lazy.position(entry_id)])[0],
                            lambda: self._index.entries[self._index.position(entry_id)])

    def branch(self, leaf_id: str | None) -> list[Entry]:
        """path(entries, leaf_id) over this log, using its index: the entries from the first
        one down to `leaf_id`. Validates the walk like path()."""
        return self._answer(lambda lazy: lazy.path(leaf_id),
                            lambda: self._index.path(leaf_id))

    def of_type(self, type_: str) -> list[Entry]:
        """The entries of one type (session_info, label, ...), file order; through the line
        table when the log reads lazily, without parsing the other lines."""
        kind = tables.KINDS.get(type_)
        return self._answer(
            (lambda lazy: lazy.of_kind(kind)) if kind is not None else None,
            lambda: [e for e in self._index.entries if e.get("type") == type_])

    def sketch(self) -> tuple[list[Entry], bool]:
        """Every entry, for drawing the tree folded: (entries, sketched). Read lazily, the
        entries on the branch to the tip and the labels are the entries themselves and every
        other is a sketch, {"id", "parent_id", "type"} ("other" for a type the index does
        not name), and `sketched` is True; else it is entries() and False."""
        def sketched(lazy: LazyFile) -> tuple[list[Entry], bool]:
            table = lazy.table
            if tables.UNRESOLVED in table.parents:
                raise Stale  # a parent the table cannot follow: the whole file, drawn
            whole = {e["id"]: e for e in (*lazy.path(lazy.tip()),
                                          *lazy.of_kind(tables.KINDS["label"]))}
            return [whole.get(f"e{at + 1}") or {
                "id": f"e{at + 1}", "parent_id": None if up == tables.ROOT else f"e{up + 1}",
                "type": tables.TYPE_OF_KIND[mark & 0xFF]}
                for at, (up, mark) in enumerate(zip(table.parents, table.marks, strict=True))
            ], True

        return self._answer(sketched, lambda: (list(self._index.entries), False))

    def table(self) -> tables.Table | None:
        """The file's line table as the log has it now (None: no file, a database session,
        or a file whose ids are not its line numbers). Read-only."""
        with self._mutex:
            self._refresh()
            return self._table if self._lazy is None else self._lazy.table

    def rows(self) -> list[tuple[str, Message]]:
        """(entry id, message) for every message on the branch that ends at the tip, oldest
        first, by the format's rules (`mulligan.session.view`: a branch summary is a user
        message, the latest compaction stands for what it summarised). Other entries
        (branch, label, ...) are stepped over; the whole walk is validated and every
        refusal names the entry."""
        return transcript(self._tip_branch(), file=self._name)

    def replay(self) -> list[Message]:
        """The transcript on the branch the session is on: for Harness(messages=...)."""
        return messages_of(self._tip_branch(), file=self._name)

    def _tip_branch(self) -> list[Entry]:
        return self._answer(lambda lazy: lazy.path(lazy.tip()), self._whole_tip_branch)

    def _whole_tip_branch(self) -> list[Entry]:
        index = self._index  # read after the refresh: a first read makes a new Index
        return list(map(index.entries.__getitem__, index.walk(index.tip())))

    def _answer(self, lazily: Callable[[LazyFile], T] | None, wholly: Callable[[], T]) -> T:
        """One question, under the log's lock, caught up with the file: `lazily` asks the
        line table when the log reads through it (and can answer: Stale, or no `lazily`,
        and the log reads whole from now on); `wholly` asks the Index of every line."""
        with self._mutex:
            lazy = self._refresh()
            if lazy is not None:
                try:
                    if lazily is not None:
                        return lazily(lazy)
                    self._go_whole()
                except Stale:  # the table said something the file does not: build it anew
                    self._go_whole(keep_table=False)
                self._refresh()
            return wholly()

    # ---- appending ---------------------------------------------------------------------------

    def append_message(self, message: Message, *, parent_id: str | None = None,
                       **meta: Any) -> str:
        """Append one message; its parent is the tip, or entry `parent_id` when given (the
        entries of parallel attempts, each under its own last entry: they interleave in
        the file, and the tip is still the last line). Unknown `parent_id`: UnknownEntry (a
        ValueError) naming it, nothing written. Extra keyword arguments are stored on the
        entry as metadata (never sent to the model). Returns the new entry's id."""
        check_meta(meta)
        return self._append("message", {"message": message, **meta}, parent=parent_id)

    def branch_to(self, entry_id: str) -> str:
        """Go back to `entry_id`: append one `branch` entry whose parent is it, so what comes
        next hangs off it. The attempt left behind stays in the file. Unknown id: UnknownEntry
        naming it, raised before anything is written (also when there is no file)."""
        return self._append("branch", {}, parent=entry_id)

    def branch_summary_to(self, entry_id: str, *, from_id: str, summary: str,
                          details: Mapping[str, Any] | None = None) -> str:
        """Go back to `entry_id` with a summary of the attempt left: append one
        `branch_summary` entry whose parent is it (in place of a plain branch line), naming
        the old tip `from_id`. It replays as one user message holding `summary`. Unknown
        id: UnknownEntry naming it, nothing written."""
        fields: dict[str, Any] = {"from_id": from_id, "summary": summary}
        if details is not None:
            fields["details"] = dict(details)
        return self._append("branch_summary", fields, parent=entry_id)

    def append_label(self, target_id: str, label: str) -> str:
        """Append a label naming `target_id`; UnknownEntry, nothing written, if it is absent."""
        return self._append("label", {"target_id": target_id, "label": label}, needs=target_id)

    def append_session_info(self, **fields: Any) -> str:
        """Append facts about the session: name, cwd, created, model, origin_file, ..."""
        return self.append_entry("session_info", **fields)

    def append_model_change(self, provider: str, model: str) -> str:
        """Append a note that the session went on with another model."""
        return self.append_entry("model_change", provider=provider, model=model)

    def append_entry(self, type: str, *, parent_id: str | None = None, **fields: Any) -> str:
        """Append an entry of any other type (session_info, model_change, compaction, ...);
        it hangs on the tree at the tip (or under entry `parent_id`: UnknownEntry naming it,
        nothing written, when absent) and rows() steps over it. "message" and "branch"
        have their own methods, which keep their rules."""
        if type in ("message", "branch", "branch_summary"):
            raise ValueError(f"use append_message, branch_to or branch_summary_to for a "
                             f"{type!r} entry")
        if "message" in fields:  # a reader would refuse the line: a message only on a message
            raise ValueError(f"a {type!r} entry cannot carry a message")
        check_meta(fields)
        return self._append(type, fields, parent=parent_id)

    def _append(self, type_: str, fields: dict[str, Any], *, parent: str | None = None,
                needs: str | None = None) -> str:
        """Write one entry while holding the exclusive lock: catch up with the file, work out
        the id (line number) and the parent (the tip, or `parent`), check, then write.
        `parent` / `needs` name an entry that must exist: checked first without creating the
        file, then again under the lock."""
        must_exist = parent or needs
        with self._mutex:
            if must_exist is not None:
                lazy = self._refresh()
                # fail fast: no file is created for nothing
                (lazy or self._index).position(must_exist)
            if self._lazy_file() is not None:
                done = self._append_lazily(type_, fields, parent, must_exist)
                if done is not None:
                    return done
            try:
                with self.storage.appending(create=must_exist is None) as writer:
                    if writer is None:  # deleted since the check above
                        self._reset()
                        raise UnknownEntry(f"no entry has the id {must_exist!r}",
                                           file=self._name, entry_id=must_exist)
                    self._ingest(*writer.fetch())
                    index = self._index
                    if must_exist is not None:
                        index.position(must_exist)
                    number = len(index.entries) + 1
                    new_id = f"e{number}"
                    if new_id in index.by_id:
                        raise DuplicateId(
                            f"the next line would take the id {new_id}, which line "
                            f"{index.by_id[new_id] + 1} already has (ids are 'e' + line "
                            f"number)", file=self._name, line=number, entry_id=new_id)
                    entry = new_entry(new_id, type_,
                                      parent if parent is not None else index.tip(), fields)
                    line = orjson.dumps(entry) + b"\n"  # TypeError here: nothing written
                    writer.write(line, entry)
                    # Parse our own bytes back: the entry kept is exactly what a reader gets,
                    # and the caller's message dict may change later without changing the log.
                    index.add_line(orjson.loads(line[:-1]), len(line))
                    self.storage.accept(line, len(line))
                    if self._file is not None:
                        self._keep_table(os.stat(self._name), line, persist=True)
            except SessionError:
                raise
            except BaseException:
                # The line may or may not have been kept (a failed fsync, a dropped database
                # connection): forget what was parsed, so the next call reads what is there.
                self._reset()
                raise
            return new_id

    def _append_lazily(self, type_: str, fields: dict[str, Any], parent: str | None,
                       must_exist: str | None) -> str | None:
        """The append of a log reading through its table: under the file's exclusive lock,
        the table caught up with the file (or None: the log reads whole, and the caller
        appends as a whole log does), the id and parent from it, one line written, the
        table and the sidecar moved on with it."""
        lazy = self._lazy
        file = self._file
        if lazy is None or file is None:
            return None
        with file.appending(create=False) as writer:
            if writer is None:
                self._go_whole(keep_table=False)
                return None
            before = os.fstat(writer.fd)
            try:
                lazy.adopt(writer.fd, before)
                lazy.check_last(writer.fd)  # the id comes from the file, not the table alone
            except Stale:
                self._go_whole(keep_table=False)
                return None
            if must_exist is not None:
                lazy.position(must_exist)
            table = lazy.table
            number = table.count + 1
            entry = new_entry(f"e{number}", type_,
                              parent if parent is not None else lazy.tip(), fields)
            line = orjson.dumps(entry) + b"\n"  # TypeError here: nothing written
            try:
                writer.write(line, entry)
            except BaseException:
                self._reset()
                raise
            lazy.parsed[number - 1] = orjson.loads(line[:-1])
            head, first = table.header(), table.count
            after = os.fstat(writer.fd)
            if after.st_size != before.st_size + len(line):  # someone wrote without the lock
                self._reset()
                return str(entry["id"])
            up = lazy.position(entry["parent_id"]) if entry["parent_id"] is not None \
                else tables.ROOT
            table.add(after.st_size, up, tables.kind_of(entry))
            table.state, table.last = tables.file_state(after), tables.line_hash(line)
            tables.append(file.name, table, head, first)
            return str(entry["id"])

    # ---- reading the storage -----------------------------------------------------------

    def _reset(self) -> None:
        """Forget everything read: the next call reads the file again (lazily if it can)."""
        self._index = Index(self._name)
        self.storage.forget()
        self._table, self._lazy = None, None
        self._whole = self._file is None

    def _go_whole(self, *, keep_table: bool = True) -> None:
        """From now on the log holds every line (an Index), read and validated whole. The
        lazy table is kept to be extended (`keep_table`) unless it was found wrong."""
        if self._whole:
            return
        kept = self._lazy.table if keep_table and self._lazy is not None else None
        self._lazy, self._whole = None, True
        self._index, self._table = Index(self._name), kept
        self.storage.forget()

    def _lazy_file(self) -> LazyFile | None:
        """The LazyFile while the log reads through the line table; on the first call, open
        it if the sidecar describes the file (else the log reads whole from then on)."""
        if not self._whole and self._lazy is None:
            self._lazy = LazyFile.open(self._file) if self._file is not None else None
            if self._lazy is None:
                self._go_whole(keep_table=False)
        return self._lazy

    def _refresh(self) -> LazyFile | None:
        """Catch up with the storage (a missing file reads as empty). Returns the LazyFile
        while the log reads through the table; None when the Index has every line."""
        if not self._whole:
            opened = self._lazy is None
            lazy = self._lazy_file()
            if lazy is not None:
                try:
                    if not opened:  # just opened, it is what the file is now
                        lazy.refresh()
                    return lazy
                except Stale:
                    self._go_whole(keep_table=False)
        before = len(self._index.entries)
        self._ingest(*self.storage.fetch())
        if self._file is not None and len(self._index.entries) != before:
            stat = self._file.stat
            if stat is not None and stat.st_size == self._index.size:
                self._keep_table(stat, None, persist=before == 0)
        return None

    def _keep_table(self, stat: os.stat_result, line: bytes | None, *, persist: bool) -> None:
        """Keep the line table in step with the Index (a whole log): extend it by the lines
        read or written since and, when `persist`, write the sidecar (its new records in
        place when it is in step, else whole). A file whose ids are not its line numbers
        has no table."""
        index, table = self._index, self._table
        if table is not None and (table.count > len(index.entries) or (
                table.count and index.ends[table.count - 1] != table.ends[-1])):
            table = None  # it described some other content: build it again
        if table is None:
            last = line if line is not None else tables.read_last(self._name, index.ends)
            built = None if last is None else tables.build(
                index.entries, index.ends, index.ups(), tables.file_state(stat), last)
            self._table = built
            if built is None:
                tables.remove(self._name)
            elif persist:
                tables.save(self._name, built)
            return
        head, first = table.header(), table.count
        if not table.extend(index.entries, index.ends, index.ups()):
            self._table = None
            tables.remove(self._name)
            return
        last_line = line if line is not None else tables.read_last(self._name, index.ends)
        if last_line is None:
            self._table = None
            return
        table.state, table.last = tables.file_state(stat), tables.line_hash(last_line)
        if persist and table.count > first:  # else the sidecar already says all this
            tables.append(self._name, table, head, first)

    def _ingest(self, fresh: bool, data: bytes | Iterator[bytes]) -> None:
        """Parse `data`, the bytes after the last parsed line (after nothing when `fresh`),
        or a storage's stream of them, chunk by chunk (each ends at a line's end), with the
        collector paused across the chunks as it is across one big read. Raises TornLine for
        a last line without its newline (and the named error for a bad line), after keeping
        every complete line before it; what was not kept is fetched and refused again next
        call."""
        if fresh:
            self._index, self._table = Index(self._name), None
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
        before = len(self._index.entries)
        try:
            used = self._index.add_data(data)
        except SessionError:
            used = _complete_lines(data, len(self._index.entries) - before)
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
                           file=self._name, line=len(self._index.entries) + 1)


def _complete_lines(data: bytes, count: int) -> int:
    """How many bytes the first `count` lines of `data` take, newlines included."""
    used = 0
    for _ in range(count):
        used = data.index(b"\n", used) + 1
    return used
