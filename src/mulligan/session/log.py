"""SessionLog: one session file, appended to under a lock, read incrementally.

In: a file path. Out: entries, the tip, the transcript. Every write is one line appended, in a
single write() on an O_APPEND descriptor, while an exclusive flock is held on the file; every
read holds a shared flock while it reads bytes, so a reader never sees half of another writer's
line. Never: rewrite, reorder or truncate a line; append after a torn or unreadable line;
re-read bytes it has already accepted, unless the file is not the one it parsed (below).

The log remembers what it has parsed (an `Index`) and, on every call, reads only the bytes
appended since -- by itself or by any other writer. It notices a file that was replaced (device
and inode differ), shrank (size below what was parsed) or changed at its end (the last parsed
line's bytes no longer match) and then re-reads it from the start. An edit in the middle of the
file that keeps its size and its last line is not noticed by a live log; a new one sees it.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import orjson

from mulligan.home import open_private
from mulligan.messages import Message
from mulligan.session.errors import DuplicateId, SessionError, TornLine, UnknownEntry
from mulligan.session.tree import Entry, Index
from mulligan.session.view import messages_of, transcript

# Keys every entry has; metadata passed by callers may not replace them.
RESERVED = frozenset({"id", "type", "parent_id", "timestamp"})
# How much of the last parsed line is kept to notice a file rewritten in place.
_TAIL_WINDOW = 64 * 1024


def timestamp() -> str:
    """Now, ISO-8601 UTC with milliseconds: 2026-11-30T10:00:00.000Z."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _read_at(fd: int, offset: int, length: int) -> bytes:
    chunks = []
    while length > 0:
        chunk = os.pread(fd, length, offset)
        if not chunk:  # the file shrank under us: the caller compares sizes and re-reads
            break
        chunks.append(chunk)
        offset += len(chunk)
        length -= len(chunk)
    return b"".join(chunks) if len(chunks) != 1 else chunks[0]


def _write_all(fd: int, data: bytes) -> None:
    # One write() is the rule; a regular file only writes short on a full disk or a signal,
    # and then the rest follows while the lock is still held, so nothing can come between.
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class SessionLog:
    """A session on disk: one JSON object per line, each naming the entry it follows.

    SessionLog(path, *, fsync=True). Creates nothing until the first append; the folder the
    file goes in must exist (the caller creates it). The file is created with mode 0o600.
    With fsync=True (the default) every entry is flushed and fsynced before its id is
    returned, so a power cut loses at most the entry being written; fsync=False is for bulk
    tools. Thread-safe; any number of SessionLog objects, in any number of processes, may
    share one file. The dicts handed out are the log's own: treat them as read-only.
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.path = path
        self.fsync = fsync
        self._name = os.fspath(path)
        self._mutex = threading.RLock()
        self._reset()

    def __repr__(self) -> str:
        return f"SessionLog({self._name!r})"

    # ---- reading ---------------------------------------------------------------------------

    def entries(self) -> list[Entry]:
        """Every entry, file order, as dicts; [] when there is no file yet. Refuses (TornLine,
        NotAnObject, BadEntry, DuplicateId) a file with a line it cannot trust, naming it."""
        with self._mutex:
            self._refresh()
            return list(self._index.entries)

    def tip(self) -> str | None:
        """The id of the last line of the file, or None when there is no entry yet."""
        with self._mutex:
            self._refresh()
            return self._index.tip()

    def entry(self, entry_id: str) -> Entry:
        """The entry with that id; UnknownEntry (a ValueError) naming it if there is none."""
        with self._mutex:
            self._refresh()
            return self._index.entries[self._index.position(entry_id)]

    def branch(self, leaf_id: str | None) -> list[Entry]:
        """path(entries, leaf_id) over this log, using its index: the entries from the first
        one down to `leaf_id`. Validates the walk like path()."""
        with self._mutex:
            self._refresh()
            return self._index.path(leaf_id)

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
        with self._mutex:
            self._refresh()
            index = self._index
            return list(map(index.entries.__getitem__, index.walk(index.tip())))

    # ---- appending ---------------------------------------------------------------------------

    def append_message(self, message: Message, **meta: Any) -> str:
        """Append one message; its parent is the tip. Extra keyword arguments are stored on
        the entry as metadata (never sent to the model). Returns the new entry's id."""
        _check_meta(meta)
        return self._append("message", {"message": message, **meta})

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

    def append_entry(self, type: str, **fields: Any) -> str:
        """Append an entry of any other type (session_info, model_change, compaction, ...);
        it hangs on the tree at the tip and rows() steps over it. "message" and "branch"
        have their own methods, which keep their rules."""
        if type in ("message", "branch", "branch_summary"):
            raise ValueError(f"use append_message, branch_to or branch_summary_to for a "
                             f"{type!r} entry")
        if "message" in fields:  # a reader would refuse the line: a message only on a message
            raise ValueError(f"a {type!r} entry cannot carry a message")
        _check_meta(fields)
        return self._append(type, fields)

    def _append(self, type_: str, fields: dict[str, Any], *, parent: str | None = None,
                needs: str | None = None) -> str:
        """Write one entry while holding the exclusive lock: catch up with the file, work out
        the id (line number) and the parent (the tip, or `parent`), check, then write.
        `parent` / `needs` name an entry that must exist: checked first without creating the
        file, then again under the lock."""
        must_exist = parent or needs
        with self._mutex:
            if must_exist is not None:
                self._refresh()
                self._index.position(must_exist)  # fail fast: no file is created for nothing
            with self._open(write=True, create=must_exist is None) as opened:
                if opened is None:  # deleted since the check above
                    self._reset()
                    raise UnknownEntry(f"no entry has the id {must_exist!r}",
                                       file=self._name, entry_id=must_exist)
                fd, created = opened
                self._catch_up(fd)
                index = self._index
                if must_exist is not None:
                    index.position(must_exist)
                number = len(index.entries) + 1
                new_id = f"e{number}"
                if new_id in index.by_id:
                    raise DuplicateId(
                        f"the next line would take the id {new_id}, which line "
                        f"{index.by_id[new_id] + 1} already has (ids are 'e' + line number)",
                        file=self._name, line=number, entry_id=new_id)
                entry = {"id": new_id, "type": type_,
                         "parent_id": parent if parent is not None else index.tip(),
                         "timestamp": timestamp(), **fields}
                line = orjson.dumps(entry) + b"\n"  # TypeError here: nothing written
                _write_all(fd, line)
                if self.fsync:
                    os.fsync(fd)
                    if created:
                        _fsync_folder(self._name)
                # Parse our own bytes back: the entry kept is exactly what a reader gets, and
                # the caller's message dict may change later without changing the log.
                index.add_entry(orjson.loads(line[:-1]), number)
                self._size += len(line)
                self._tail = line[-_TAIL_WINDOW:]
                return new_id

    # ---- the file ------------------------------------------------------------------------

    def _reset(self) -> None:
        self._index = Index(self._name)
        self._ident: tuple[int, int] | None = None
        self._size = 0  # bytes parsed, always at the end of a complete line
        self._tail = b""  # the last bytes of the last parsed line, newline included

    @contextmanager
    def _open(self, *, write: bool, create: bool) -> Iterator[tuple[int, bool] | None]:
        """The file, open and locked (exclusive to write, shared to read), as (fd, created);
        None if it does not exist and may not be created. Retries if the path was replaced
        between open() and flock(), so the lock is always on the file the path names."""
        flags = (os.O_RDWR | os.O_APPEND if write else os.O_RDONLY) | os.O_CLOEXEC
        while True:
            created = False
            try:
                fd = os.open(self._name, flags)
            except FileNotFoundError:
                if not create:
                    yield None
                    return
                try:
                    fd = open_private(self._name, flags)
                    created = True
                except FileExistsError:
                    continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if write else fcntl.LOCK_SH)
                mine = os.fstat(fd)
                try:
                    named = os.stat(self._name)
                    same = (named.st_dev, named.st_ino) == (mine.st_dev, mine.st_ino)
                except FileNotFoundError:
                    same = False
                if not same:
                    continue  # replaced or deleted while we waited: open what is there now
                yield fd, created
                return
            finally:
                os.close(fd)  # closing releases the lock

    def _refresh(self) -> None:
        """Catch up with the file (a missing file reads as empty). The shared lock is held
        only while bytes are read: parsing them needs no lock, and writers need not wait."""
        with self._open(write=False, create=False) as opened:
            if opened is None:
                if self._ident is not None:
                    self._reset()
                return
            data = self._fetch(opened[0])
        self._ingest(data)

    def _catch_up(self, fd: int) -> None:
        """Parse the bytes appended since the last call, under the caller's lock."""
        self._ingest(self._fetch(fd))

    def _fetch(self, fd: int) -> bytes:
        """The bytes appended since the last call; if the file is not the one parsed (another
        inode, smaller than what was parsed, or other bytes where the last parsed line was),
        forget everything and return the whole file."""
        stat = os.fstat(fd)
        ident = (stat.st_dev, stat.st_ino)
        if (ident != self._ident or stat.st_size < self._size
                or _read_at(fd, self._size - len(self._tail), len(self._tail)) != self._tail):
            self._reset()
            self._ident = ident
        return _read_at(fd, self._size, stat.st_size - self._size)

    def _ingest(self, data: bytes) -> None:
        """Parse `data`, the bytes after the last parsed line. Raises TornLine for a last line
        without its newline (and the named error for a bad line), after keeping every
        complete line before it; what was not kept is fetched and refused again next call."""
        if not data:
            return
        before = len(self._index.entries)
        try:
            used = self._index.add_data(data)
        except SessionError:
            used = _complete_lines(data, len(self._index.entries) - before)
            self._advance(data, used)
            raise
        self._advance(data, used)
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

    def _advance(self, data: bytes, used: int) -> None:
        """`used` bytes of `data` (whole lines) are parsed: move the mark, keep the tail."""
        if used == 0:
            return
        self._size += used
        last = data.rfind(b"\n", 0, used - 1) + 1
        self._tail = data[max(last, used - _TAIL_WINDOW):used]


def _complete_lines(data: bytes, count: int) -> int:
    """How many bytes the first `count` lines of `data` take, newlines included."""
    used = 0
    for _ in range(count):
        used = data.index(b"\n", used) + 1
    return used


def _check_meta(meta: dict[str, Any]) -> None:
    clash = RESERVED.intersection(meta)
    if clash:
        raise ValueError(f"entry keys {sorted(clash)} are the log's own and cannot be set")


def _fsync_folder(name: str) -> None:
    """Make a new file's name durable too: without this a power cut could lose the file."""
    folder = os.path.dirname(os.path.abspath(name))
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
