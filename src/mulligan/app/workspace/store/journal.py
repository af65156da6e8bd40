"""The snapshot store's journal: where a small snapshot's new objects (a turn's: a blob or
two and a manifest delta) are kept, made durable by one write and one fdatasync of a file
that never grows -- no file created, renamed or fsynced per object (on a shared disk each
creation and each fsync waits for the filesystem's own journal, which every process commits
through in turn: 1-8 ms loaded, against ~0.2 ms for this).

``checkpoints/journal`` is made once: `SIZE` bytes of zeros with a header, fsynced, linked
into place, its folder fsynced (its name is on disk before it vouches for anything).
Writing inside it never changes its size or block map, so its fdatasync is the data and a
cache flush, no metadata to commit. Layout (integers little-endian):

    header  MAGIC b"h" + generation (8) + BLAKE2b-160 of those 13 bytes
    record  MAGIC b"r" + generation (8) + when written (8, ns since the epoch) + payload
            length (4) + BLAKE2b-160(payload) + payload, from offset `_START` on, one after
            another
    payload per object: folder (1: b"b" blob, b"t" manifest) + name (20) + length (4) + the
            object's stored form (what `blobs` would write to its file: whole or delta)

A record counts when its generation is the header's and its payload hashes right; records
are read from `_START` until one does not (a torn last record ends them: its fdatasync never
returned, so nothing names what it holds, and the next record is written over it). An
object in a counted record is in the store: `blobs.Objects` reads it from here before its
loose file (which, after a crash in `restart`, may be torn).

`restart` (the journal is full, or `gc` is about to free): every object it holds is written
to its loose file (unless one is there and sound), dated when its record was written (gc's
grace counts from then), `os.sync()`, then the header gets a new
generation (fdatasynced) and records start again at `_START`. So the journal never holds
the only copy of anything older than its generation, and gc never frees what a record
would bring back. Processes take turns by flock; the header is read again for every
lookup or `view` (an operation's several lookups), so a restart by another process is seen.

In: the store's root and its `Objects` by folder letter. Out: `put` (durable), `get`, `has`,
`view`, `names`, `restart`. Never: return before the fdatasync, grow or shrink the file, hand back
bytes from a record that does not check, rewrite a loose object that reads back sound.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import struct
import threading
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from mulligan.app.workspace.store.blobs import write_atomic
from mulligan.home import open_private, private_dirs
from mulligan.session.stores.storage import fsync_folder, write_all

__all__ = ["MAX_RECORD", "SIZE", "Journal"]

SIZE = 256 << 10  # bytes: the journal file, made once (a few hundred turns' records)
MAX_RECORD = 64 << 10  # bytes of objects one record holds; a larger snapshot fsyncs files
_MAGIC = b"\x00MLJ"
_START = 4096  # records start here (the header has the first block to itself)
_HEADER = struct.Struct("<4scQ20s")  # magic, b"h", generation, hash of the first 13 bytes
_RECORD = struct.Struct("<4scQQI20s")  # magic, b"r", generation, when, length, its hash
_ITEM = struct.Struct("<c20sI")  # folder letter, name, length

Key = tuple[bytes, str]  # (folder letter, object name)


class _Objects(Protocol):
    """What the journal needs of a `blobs.Objects`."""

    def path_of(self, name: str) -> Path: ...

    def sound(self, name: str) -> bool: ...


def _hash(data: bytes | bytearray | memoryview) -> bytes:
    return hashlib.blake2b(data, digest_size=20).digest()


class Journal:
    """The journal of the store at `root`; `folders` maps a folder letter (b"b", b"t") to its
    `Objects`. Thread-safe; processes take turns by flock."""

    def __init__(self, root: Path, folders: dict[bytes, _Objects]) -> None:
        self.file = Path(root) / "journal"
        self.folders = folders
        self._lock = threading.RLock()
        self._fd: int | None = None
        self._size = SIZE
        self._generation = -1  # what the index below is of (-1: nothing read yet)
        self._end = _START  # after the last record read
        self._index: dict[Key, tuple[int, bytes]] = {}  # -> (when written, stored form)
        self._head = b""  # the header as last read or written: its generation's

    # ---- writing ------------------------------------------------------------------------

    def put(self, objects: Sequence[tuple[bytes, str, bytes]]) -> bool:
        """Keep `objects` ((folder letter, name, stored form)) as one record, fdatasynced
        before this returns: they are in the store, durably. False, with nothing written,
        when they do not fit a record (the caller writes and syncs their files)."""
        payload = bytearray()
        for letter, name, form in objects:
            payload += _ITEM.pack(letter, bytes.fromhex(name), len(form)) + form
        if len(payload) > MAX_RECORD:
            return False
        self._there()
        with self._locked(exclusive=True) as fd:
            if _START + _RECORD.size + len(payload) > self._size:
                return False  # a journal too small for it (not one this version made)
            end = self._scan(fd, writing=True)
            if end + _RECORD.size + len(payload) > self._size:  # full
                self._restart(fd)
                end = _START
            when = time.time_ns()
            head = _RECORD.pack(_MAGIC, b"r", self._generation, when, len(payload),
                                _hash(payload))
            os.pwrite(fd, head + payload, end)
            os.fdatasync(fd)
            self._add(when, bytes(payload))
            self._end = end + len(head) + len(payload)
        return True

    def restart(self) -> None:
        """Write everything the journal holds to its loose file, sync, and empty it (`gc`
        calls this before it frees anything). Nothing to do without a journal."""
        if self._there():
            with self._locked(exclusive=True) as fd:
                self._scan(fd, writing=True)
                if self._index:
                    self._restart(fd)

    def _restart(self, fd: int) -> None:
        """(Under the flock, the index read up to the end: `_scan`.)"""
        for (letter, name), (when, form) in list(self._index.items()):
            objects = self.folders.get(letter)
            if objects is None:
                continue
            path = objects.path_of(name)
            with contextlib.suppress(OSError):
                if path.read_bytes() == form or objects.sound(name):
                    continue  # (`sound` reads the loose file only, never this journal)
            write_atomic(path, form, durable=False)
            os.utime(path, ns=(when, when))  # gc's grace counts from when it was kept
        os.sync()  # every loose object written so far is on disk: the records are not needed
        generation = max(self._generation + 1, time.time_ns())
        self._head = _header(generation)
        os.pwrite(fd, self._head, 0)
        os.fdatasync(fd)
        self._generation, self._end, self._index = generation, _START, {}

    # ---- reading ------------------------------------------------------------------------

    def get(self, letter: bytes, name: str) -> bytes | None:
        """The stored form of object `name` of folder `letter`, from a record that checked;
        None when the journal does not hold it."""
        found = self.view().get((letter, name))
        return found[1] if found is not None else None

    def view(self) -> Mapping[Key, tuple[int, bytes]]:
        """What the journal holds ((folder letter, name) -> (when written, stored form)),
        brought up to the file once (the header read: a restart or new records by another
        process): for a lookup, or an operation that looks up several objects (a chain's
        links) without reading the header again for each. Still right however long it is
        kept: it never loses an entry (a restart, here or seen from another process, makes
        a new one), every form in it checked, and an object it holds stays in the store (a
        restart writes it to its own file and syncs before the generation changes); what
        another process adds after it was taken is not in it (an operation's objects are
        all older than the name it starts from: stored before anything named them)."""
        if not self._there():
            return {}
        with self._locked(exclusive=False) as fd:
            self._scan(fd, writing=False)
            return self._index

    def has(self, letter: bytes, name: str, *, fresh: bool = True) -> bool:
        """Whether the journal holds object `name` of folder `letter`. One this process has
        counted answers with one read of the header (a snapshot asks a few times: no scan):
        while the generation is the same, no restart -- which `gc` does before it frees
        anything -- has come between. Not `fresh` (a snapshot deciding what to keep): the
        records written by other processes since this one last read the journal are not
        looked for (False for what only they hold: it is kept again, harmlessly)."""
        if not self._there():
            return False
        with self._lock:
            if (letter, name) in self._index and self._fd is not None and self._head and \
                    os.pread(self._fd, _HEADER.size, 0) == self._head:
                return True
            if not fresh and self._generation != -1:  # (read once: it holds what it held)
                return False
        return self.get(letter, name) is not None

    def names(self, letter: bytes) -> list[str]:
        """The names of the objects of folder `letter` the journal holds."""
        if not self._there():
            return []
        with self._locked(exclusive=False) as fd:
            self._scan(fd, writing=False)
            return [name for (found, name) in self._index if found == letter]

    # ---- the file -----------------------------------------------------------------------

    def _there(self) -> bool:
        """Whether there is a journal: the one this object has open -- unless it was removed
        under this process (the store deleted by hand: what is written to it would be lost,
        so it is closed and a new one made when next needed) -- or one on disk."""
        with self._lock:
            if self._fd is not None and os.fstat(self._fd).st_nlink == 0:
                self._closer()
                self._fd, self._generation, self._end, self._index = None, -1, _START, {}
                self._head = b""
            return self._fd is not None or self.file.exists()

    @contextlib.contextmanager
    def _locked(self, *, exclusive: bool) -> Iterator[int]:
        """The journal open (made if need be), this object's lock held, and with `exclusive`
        the flock: writers take turns. A reader takes no flock: a record being written does
        not check yet, and is not read."""
        with self._lock:
            if self._fd is None:
                if not self.file.exists():
                    _make(self.file)
                self._fd = os.open(self.file, os.O_RDWR | os.O_CLOEXEC)
                self._closer = weakref.finalize(self, os.close, self._fd)
                # Its size as made (another version may make it bigger): never changed.
                self._size = os.fstat(self._fd).st_size
            if not exclusive:
                yield self._fd
                return
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                yield self._fd
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _scan(self, fd: int, *, writing: bool) -> int:
        """Bring the index up to the file (another process may have written records, or
        restarted it) and return where the next record goes."""
        head = os.pread(fd, _HEADER.size, 0)
        generation = -2  # no whole header: a journal with no records
        if head and head == self._head:  # (checked when it was read)
            generation = self._generation
        elif len(head) == _HEADER.size:
            magic, kind, found, digest = _HEADER.unpack(head)
            if magic == _MAGIC and kind == b"h" and digest == _hash(head[:13]):
                generation = found
        if generation != self._generation:
            self._generation, self._end, self._index = generation, _START, {}
        self._head = head if generation != -2 else b""
        if generation == -2:
            if writing:
                self._restart(fd)  # a new generation (there was nothing to keep)
            return _START
        # The records after the last one read: one read of the rest of the file once the
        # head there says one is (a new process catching up on a full journal: 550 records
        # at two preads each took 2.5 of its 5.7 ms), else that head alone.
        head = os.pread(fd, _RECORD.size, self._end)
        if len(head) < _RECORD.size or _RECORD.unpack(head)[:3] != (_MAGIC, b"r",
                                                                     self._generation):
            return self._end
        data, at = os.pread(fd, self._size - self._end, self._end), 0
        while (record := self._record_in(data, at, self._end)) is not None:
            self._add(record[0], record[1])
            self._end += record[2] - at
            at = record[2]
        return self._end

    def _add(self, when: int, payload: bytes) -> None:
        view, pos = memoryview(payload), 0
        while pos + _ITEM.size <= len(view):
            letter, name, size = _ITEM.unpack_from(view, pos)
            pos += _ITEM.size
            self._index[letter, name.hex()] = (when, bytes(view[pos:pos + size]))
            pos += size

    def _record_in(self, data: bytes, at: int, where: int
                   ) -> tuple[int, bytes, int] | None:
        """(when written, payload, where the next starts in `data`) of the counted record at
        `at` of `data`, which is at offset `where` of the file; None when there is no whole
        record of this generation there that checks."""
        if self._generation < 0 or where + _RECORD.size > self._size or \
                at + _RECORD.size > len(data):
            return None
        magic, kind, generation, when, size, digest = _RECORD.unpack_from(data, at)
        start = at + _RECORD.size
        if magic != _MAGIC or kind != b"r" or generation != self._generation or \
                where + _RECORD.size + size > self._size:
            return None
        payload = data[start:start + size]
        if len(payload) != size or _hash(payload) != digest:
            return None
        return when, payload, start + size


def _header(generation: int) -> bytes:
    head = _MAGIC + b"h" + struct.pack("<Q", generation)
    return head + _hash(head)


def _make(file: Path) -> None:
    """Create the journal: zeros and a header, fsynced, linked into place (never over one
    another process made meanwhile), and its folder fsynced: its name is durable before it
    vouches for anything (the fsync of the file committed the folders made before it)."""
    private_dirs(file.parent)
    temp = file.parent / f".{file.name}.{os.getpid()}.{threading.get_ident()}"
    fd = open_private(temp)
    try:
        block = bytearray(SIZE)
        block[:_HEADER.size] = _header(time.time_ns())
        write_all(fd, bytes(block))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        with contextlib.suppress(FileExistsError):  # another process made it: as good
            os.link(temp, file)
    finally:
        os.unlink(temp)
    fsync_folder(str(file))
