"""The line table of a session file, and its sidecar `<session>.jsonl.idx`: a cache, never a
source of truth.

A `Table` says, for every line of a session file, where it ends (a byte offset), which line
is its parent, which message line is its nearest message ancestor, and what kind of entry it
is -- 24 bytes a line. With it a log finds the lines on the path to the tip without parsing
the others (`path_from`), a listing counts entries and attempts and finds the few lines it
shows (`positions_of`), and an append knows the next id.

The sidecar holds a table on disk: a 72-byte header (magic, line count, the session file's
device, inode, size, mtime_ns and ctime_ns, a hash of its last line, a CRC of the records, a
CRC of the header) and then the records, three int64 each. The ctime is what makes an edit
with its mtime put back (`touch -d`, `os.utime`) visible: no user call can set it. `load`
trusts it only when every one of those matches the file as it is now, under the file's
lock; anything else (missing, torn, stale, another file) is None, and the caller reads the
file whole -- validating every line as always -- and writes a fresh one (`save`,
atomically: a temp file renamed over). An append adds its record and rewrites the header
(`append`), under the session file's exclusive lock, so file and sidecar move together; a
writer that does not know the sidecar leaves it stale, and stale is noticed. What no stat
shows -- an edit within the clock tick of the last append that keeps the size and the last
line, the limit git's index has too -- is still caught on every line a lazy read parses
(`mulligan.session.lazy` checks each line's id and parent against the table, and the line
as the full read checks it), and an append never takes its id from the table alone: it
reads the real last line under the lock first.
Only files whose ids are "e" + their line number (all Mulligan writes) get a table.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import zlib
from array import array
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mulligan.session.index import Index

MAGIC = b"MULIDX2\n"  # 2: the header pins the ctime too
# magic, count, dev, ino, size, mtime_ns, ctime_ns, last-line hash, CRC of the records
_HEAD = struct.Struct("<8sQQQQQQ8sI")
HEADER_SIZE = _HEAD.size + 4  # + crc32 of the rest: 72
RECORD = 24  # end offset, parent line, (nearest message ancestor + 2) << 8 | kind
_RECORD = struct.Struct("<qqq")
ROOT, UNRESOLVED = -1, -2  # parent codes: a first entry; a parent the table cannot follow
SUFFIX = ".idx"

# Entry kinds the table knows; 0 is any other type.
KINDS = {"session_info": 3, "branch": 4, "branch_summary": 5, "compaction": 6, "label": 7}
USER_MESSAGE, OTHER_MESSAGE = 1, 2
TYPE_OF_KIND = {0: "other", 1: "message", 2: "message", **{k: t for t, k in KINDS.items()}}


def sidecar_path(session: str) -> str:
    return session + SUFFIX


def kind_of(entry: Mapping[str, Any]) -> int:
    kind = entry.get("type")
    if kind == "message":
        message = entry.get("message")
        return USER_MESSAGE if isinstance(message, dict) and message.get("role") == "user" \
            else OTHER_MESSAGE
    return KINDS.get(kind, 0) if isinstance(kind, str) else 0


def number_of(entry_id: object, count: int) -> int | None:
    """The line number (from 1) that `entry_id` is the id of in a tabled file of `count`
    lines -- every id there is "e" + its line number -- or None when it is no id there."""
    if type(entry_id) is not str or entry_id[:1] != "e":
        return None
    digits = entry_id[1:]
    if not (digits.isascii() and digits.isdigit()) or digits[:1] == "0":
        return None
    number = int(digits)
    return number if number <= count else None


def line_hash(line: bytes) -> bytes:
    return hashlib.blake2b(line, digest_size=8).digest()


State = tuple[int, int, int, int, int]  # dev, ino, size, mtime_ns, ctime_ns


def file_state(stat: os.stat_result) -> State:
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns


class Table:
    """The line table of one session file, and the file state it describes."""

    def __init__(self, ends: array[int], parents: array[int], marks: array[int],
                 state: State, last: bytes, crc: int = 0) -> None:
        self.ends, self.parents, self.marks = ends, parents, marks
        self.state = state  # (dev, ino, size, mtime_ns, ctime_ns) of the file described
        self.last = last  # hash of the file's last line
        self.crc = crc  # CRC-32 of the records, as the sidecar holds them

    @property
    def count(self) -> int:
        return len(self.ends)

    def start(self, at: int) -> int:
        return self.ends[at - 1] if at else 0

    def path_from(self, at: int) -> list[int] | None:
        """The line positions from the first entry down to line `at`, oldest first; None
        when the walk meets a parent the table cannot follow (the caller reads the file
        whole, where the walk refuses it by name)."""
        parents, walked = self.parents, []
        while True:
            walked.append(at)
            up = parents[at]
            if up == ROOT:
                walked.reverse()
                return walked
            if up < 0 or up >= at:  # unresolved, or not an earlier line: not for the table
                return None
            at = up

    def positions_of(self, kind: int) -> list[int]:
        return [at for at, mark in enumerate(self.marks) if mark & 0xFF == kind]

    def attempts(self) -> int | None:
        """How many message lines no later message follows (`branches.message_leaves`);
        None if some parent could not be followed."""
        if UNRESOLVED in self.parents:
            return None
        messages = [mark for mark in self.marks if 0 < mark & 0xFF < 3]
        followed = {mark >> 8 for mark in messages}  # nearest message ancestors, + 2
        return len(messages) - sum(1 for at, mark in enumerate(self.marks)
                                   if 0 < mark & 0xFF < 3 and at + 2 in followed)

    def add(self, end: int, parent: int, kind: int) -> None:
        """One more line, ending at `end`, whose parent is line `parent` (or a code)."""
        mark = (self._nearest(parent) + 2) << 8 | kind
        self.ends.append(end)
        self.parents.append(parent)
        self.marks.append(mark)
        self.crc = zlib.crc32(_RECORD.pack(end, parent, mark), self.crc)

    def extend(self, entries: Sequence[Mapping[str, Any]], ends: Sequence[int],
               ups: Sequence[int | None]) -> bool:
        """Add the lines after those the table has, from a whole read (`ends[i]`: where line
        i ends; `ups[i]`: its parent's position when the read found it). False, and the
        table is not to be used, at the first id that is not "e" + its line number."""
        first = self.count
        parents, marks = self.parents, self.marks
        for at in range(first, len(entries)):
            entry, up = entries[at], ups[at]
            if entry["id"] != f"e{at + 1}":
                del parents[first:], marks[first:]
                return False
            parent = ROOT if entry.get("parent_id", 0) is None else (
                up if up is not None and up < at else UNRESOLVED)
            parents.append(parent)
            marks.append((self._nearest(parent) + 2) << 8 | kind_of(entry))  # as `add`'s
        # the records' CRC over all the new records at once, not record by record (`add`):
        # that was most of building the table of a 100k-line file read whole
        self.ends.extend(ends[first:len(entries)])
        self.crc = zlib.crc32(self.records(first), self.crc)
        return True

    def _nearest(self, parent: int) -> int:
        if parent < 0:
            return parent
        return parent if self.marks[parent] & 0xFF in (1, 2) else (self.marks[parent] >> 8) - 2

    def header(self) -> bytes:
        head = _HEAD.pack(MAGIC, self.count, *self.state, self.last, self.crc)
        return head + struct.pack("<I", zlib.crc32(head))

    def records(self, first: int = 0) -> bytes:
        out = array("q", bytes(RECORD * (self.count - first)))
        out[0::3], out[1::3], out[2::3] = \
            self.ends[first:], self.parents[first:], self.marks[first:]
        return out.tobytes()


def build(entries: Sequence[Mapping[str, Any]], ends: Sequence[int], ups: Sequence[int | None],
          state: State, last_line: bytes) -> Table | None:
    """The table of a file just read whole (`ends[i]`: where line i ends; `ups[i]`: its
    parent's position when the read found it), or None when its ids are not "e" + line."""
    table = Table(array("q"), array("q"), array("q"), state, line_hash(last_line))
    return table if table.extend(entries, ends, ups) else None


def load(session: str, fd: int, stat: os.stat_result) -> Table | None:
    """The sidecar's table if it describes the file open on `fd` exactly as `stat` says it
    is (checked: header CRC, device, inode, size, mtime, the last line's hash, the records'
    length); else None. The caller holds the file's lock."""
    try:
        with open(sidecar_path(session), "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    if len(data) < HEADER_SIZE:
        return None
    head = data[:_HEAD.size]
    (crc,) = struct.unpack_from("<I", data, _HEAD.size)
    if zlib.crc32(head) != crc:
        return None
    magic, count, dev, ino, size, mtime, ctime, last, records_crc = _HEAD.unpack(head)
    state = file_state(stat)
    if magic != MAGIC or (dev, ino, size, mtime, ctime) != state or count == 0:
        return None
    body = data[HEADER_SIZE:HEADER_SIZE + count * RECORD]
    if len(body) != count * RECORD or zlib.crc32(body) != records_crc:
        return None
    flat = array("q")
    flat.frombytes(body)
    table = Table(flat[0::3], flat[1::3], flat[2::3], state, last, records_crc)
    if table.ends[-1] != size:
        return None
    start = table.start(count - 1)
    if line_hash(os.pread(fd, size - start, start)) != last:
        return None
    return table


def save(session: str, table: Table) -> None:
    """Write the whole sidecar for `table`, atomically; a failure (a read-only folder) is
    ignored: the sidecar is a cache."""
    target = sidecar_path(session)
    temp = f"{target}.{os.getpid()}.tmp"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, table.header() + table.records())
        finally:
            os.close(fd)
        os.replace(temp, target)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temp)


def append(session: str, table: Table, before: bytes, first: int) -> None:
    """Persist the table's records from line `first` on: written in place when the sidecar
    on disk is the one for the state before them (`before`, that state's header), the new
    header last; else the whole sidecar again."""
    try:
        fd = os.open(sidecar_path(session), os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        save(session, table)
        return
    try:
        if os.pread(fd, HEADER_SIZE, 0) == before:
            os.pwrite(fd, table.records(first), HEADER_SIZE + first * RECORD)
            os.pwrite(fd, table.header(), 0)
            return
    except OSError:
        pass
    finally:
        os.close(fd)
    save(session, table)


def in_step(session: str, table: Table | None, index: Index, stat: os.stat_result,
            line: bytes | None, *, persist: bool) -> Table | None:
    """The table of a file read whole (`index`: every line, as the file is at `stat`), kept
    in step: `table` extended by the lines read or written since (`line`: the one just
    written, if any) or, when it described other content, built again; with `persist` the
    sidecar written (its new records in place when it is in step, else whole). None, and
    no sidecar, for a file whose ids are not its line numbers."""
    if table is not None and (table.count > len(index.entries) or (
            table.count and index.ends[table.count - 1] != table.ends[-1])):
        table = None  # it described some other content: build it again
    if table is None:
        last = line if line is not None else read_last(session, index.ends)
        built = None if last is None else build(
            index.entries, index.ends, index.ups(), file_state(stat), last)
        if built is None:
            remove(session)
        elif persist:
            save(session, built)
        return built
    head, first = table.header(), table.count
    if not table.extend(index.entries, index.ends, index.ups()):
        remove(session)
        return None
    last_line = line if line is not None else read_last(session, index.ends)
    if last_line is None:
        return None
    table.state, table.last = file_state(stat), line_hash(last_line)
    if persist and table.count > first:  # else the sidecar already says all this
        append(session, table, head, first)
    return table


def read_last(session: str, ends: Sequence[int]) -> bytes | None:
    """The last line's bytes (newline included) of a file whose lines end at `ends`."""
    if not ends:
        return None
    start = ends[-2] if len(ends) > 1 else 0
    try:
        with open(session, "rb") as handle:
            handle.seek(start)
            return handle.read(ends[-1] - start)
    except OSError:
        return None


def remove(session: str) -> None:
    """Drop a sidecar that no longer describes its file (a file with no table)."""
    with contextlib.suppress(OSError):
        os.unlink(sidecar_path(session))
