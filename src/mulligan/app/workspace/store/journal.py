"""The snapshot store's journal: where a small snapshot's new objects (a turn's: a blob or
two and a manifest delta) are kept, made durable by one write and one fdatasync of a file
that never grows -- no file created, renamed or fsynced per object (on a shared disk each
creation and each fsync waits for the filesystem's own journal, which every process commits
through in turn: 1-8 ms loaded, against ~0.2 ms for this).

``checkpoints/journal`` is made once: `SIZE` bytes of zeros with a header, fsynced, linked
into place, its folder fsynced (its name is on disk before it vouches for anything).
Writing inside it never changes its size or block map, so its fdatasync is the data and a
cache flush, no metadata to commit. Its layout -- a header (a generation), then records,
each checked by a hash -- is `store.packs`'s. A record counts when its generation is the
header's and its payload hashes right; records are read from `_START` until one does not (a
torn last record ends them: its fdatasync never returned, so nothing names what it holds,
and the next record is written over it). An object in a counted record is in the store:
`blobs.Objects` reads it from here (or a pack) before its loose file (which, after a crash
in a spill, may be torn).

When it is full, it is sealed (`_restart`, under the flock, every record read): its counted
records are copied into one pack, ``checkpoints/packs/<generation>.pack`` (`packs.seal`:
written whole, fsynced, renamed into place, the folder fsynced), then the header gets a new
generation, above every pack's (fdatasynced), and records start again at `_START`: one file
created and three flushes on the turn (1-11 ms; writing its ~1,100 objects out one file each
took 0.3-2 s). A background thread then spills the packs below that generation
(`packs.spill`: each object to its loose file unless one is there and sound, dated when its
record was written -- gc's grace counts from then -- `os.sync()`, then the packs removed).
Every process reads the packs beside the journal: on a new generation seen it lists them,
reads each new one once (every record checked), and forgets those gone (spilled: loose and
synced). `restart` (gc, before it frees anything) does all of it at once: seal, spill every
pack (after any spill under way), sync the removals, then a new generation, so no process
still answers from a pack whose objects gc is about to free.

Why nothing is lost, at any crash and between two processes. Seals take turns by the
journal's flock, spills by the packs folder's; a spill touches only packs below the
generation it was given, which are final: a new generation is above every pack there, so a
pack is sealed again (renamed over) only while its generation is the journal's, and then its
records are all still in the journal. A crash before the pack is renamed into place leaves a
temporary file (removed by the next seal, which holds the flock: no writer is alive) and the
journal as it was. After the pack, before the header: the pack duplicates the journal's
records; the next seal renames a copy of them, and any record added since, over it. After
the header, before or during the spill: the pack is durable (synced before the header
changed), readers find every object in it (a loose file the spill left torn is shadowed: the
pack is read first, and the next spill rewrites it); the next seal, by any process, or gc's
`restart` spills it. After the sync, before the removal: the next spill finds every object
sound and removes the pack. A reader that saw the new generation finds the pack, or, if it
was spilled already, the loose files (synced before the removal). So the journal and the
packs never hold the only copy of anything gc's listing would count as gone, and a view an
operation took stays right while it is kept.

Processes take turns by flock; the header is read again for every lookup, `view` (an
operation's several lookups) or `counted` (a snapshot's), so a seal or restart by another
process is seen.

In: the store's root and its `Objects` by folder letter. Out: `put` (durable), `get`,
`counted`, `view`, `names`, `restart`, `wait` (for this process's background spills).
Never: return before the fdatasync, grow or shrink the file, hand back bytes from a record
that does not check, write a turn's objects one file each on the turn, rewrite a loose object
that reads back sound.
"""

from __future__ import annotations

import _thread
import contextlib
import fcntl
import os
import threading
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from mulligan.app.workspace.store import packs
from mulligan.app.workspace.store.packs import HEADER, ITEM, RECORD, START, Entries, Folder, Key
from mulligan.home import open_private, private_dirs
from mulligan.session.stores.storage import fsync_folder, write_all

__all__ = ["MAX_RECORD", "SIZE", "Journal"]

SIZE = 256 << 10  # bytes: the journal file, made once (a few hundred turns' records)
MAX_RECORD = 64 << 10  # bytes of objects one record holds; a larger snapshot fsyncs files
_START, _RECORD = START, RECORD  # (the tests walk records as the reader does)


class Journal:
    """The journal of the store at `root`; `folders` maps a folder letter (b"b", b"t") to its
    `Objects`. Thread-safe; processes take turns by flock."""

    def __init__(self, root: Path, folders: dict[bytes, Folder]) -> None:
        self.file = Path(root) / "journal"
        self.packs = Path(root) / "packs"
        self.folders = folders
        self._lock = threading.RLock()
        self._fd: int | None = None
        self._size = SIZE
        self._generation = -1  # what the index below is of (-1: nothing read yet)
        self._end = START  # after the last record read
        # -> (when written, stored form): the sealed packs' objects, then this generation's
        # records (`_own`: a seal makes them a pack's). Never emptied in place: a new
        # generation, seen or made, makes a new one (`view`).
        self._index: Entries = {}
        self._own: Entries = {}
        self._sealed: dict[int, Entries] = {}  # the packs read (or sealed) here, by generation
        self._head = b""  # the header as last read or written: its generation's
        self._spills: list[_thread.LockType] = []  # held by each background spill

    # ---- writing ------------------------------------------------------------------------

    def put(self, objects: Sequence[tuple[bytes, str, bytes]]) -> bool:
        """Keep `objects` ((folder letter, name, stored form)) as one record, fdatasynced
        before this returns: they are in the store, durably. False, with nothing written,
        when they do not fit a record (the caller writes and syncs their files)."""
        payload = bytearray()
        keys = []  # as `_scan` reads them back (the name's bytes, in lowercase hex)
        for letter, name, form in objects:
            raw = bytes.fromhex(name)
            payload += ITEM.pack(letter, raw, len(form)) + form
            keys.append(((letter, raw.hex()), form))
        if len(payload) > MAX_RECORD:
            return False
        self._there()
        with self._locked(exclusive=True) as fd:
            if START + RECORD.size + len(payload) > self._size:
                return False  # a journal too small for it (not one this version made)
            end = self._scan(fd, writing=True)
            if end + RECORD.size + len(payload) > self._size:  # full
                self._restart(fd)
                end = START
            when = time.time_ns()
            head = RECORD.pack(packs.MAGIC, b"r", self._generation, when, len(payload),
                               packs.digest(payload))
            os.pwrite(fd, head + payload, end)
            os.fdatasync(fd)
            # What `_scan` reads back from the record, without parsing it again.
            index, own = self._index, self._own
            for key, form in keys:
                index[key] = own[key] = (when, form)
            self._end = end + len(head) + len(payload)
        return True

    def restart(self) -> None:
        """Write everything the journal and its packs hold to loose files, sync, and empty
        them, before this returns (`gc` calls this before it frees anything): the journal
        sealed, every pack spilled (after a spill another process has under way), the
        removals synced, then a new generation -- so every process drops what it read of
        those packs, and nothing gc frees comes back from one. Nothing to do without a
        journal."""
        if not self._there():
            return
        with self._locked(exclusive=True) as fd:
            self._scan(fd, writing=True)
            if self._end > START:  # (under the flock: no other seal, every pack is final)
                packs.seal(self.packs, self._generation, os.pread(fd, self._end, 0))
                self._sealed[self._generation] = self._own
            packs.spill(self.packs, self.folders, 1 << 64, self._sealed, durable=True)
            self._new_generation(fd)
            self._index, self._own, self._sealed = {}, {}, {}

    def wait(self) -> None:
        """Return once the spills this process started in the background have ended."""
        while self._spills:
            done = self._spills.pop()
            done.acquire()
            done.release()

    def _restart(self, fd: int) -> None:
        """Seal the full journal (under the flock, the index read up to the end: `_scan`):
        its counted records become a pack, durably, then the header a new generation, and a
        background thread spills the packs below it. Nothing else is written on the turn."""
        if self._end > START:
            packs.seal(self.packs, self._generation, os.pread(fd, self._end, 0))
            self._sealed[self._generation] = self._own
        self._new_generation(fd)
        # A new index: the packs there now (this one among them), those spilled since the
        # last seal forgotten -- a process that is the only writer never sees a generation
        # of another's, and kept every pack it ever sealed.
        self._index = self._packed()
        if not self._sealed:
            return  # (a journal whose header was damaged: nothing was kept, nothing to spill)
        # A thread of the low-level kind: `Thread.start` waits until it runs (1-5 ms under
        # load, the whole seal's cost otherwise); it holds `done` until it ends (`wait`).
        done = _thread.allocate_lock()
        done.acquire()
        self._spills = [lock for lock in self._spills if lock.locked()] + [done]
        _thread.start_new_thread(self._spill, (self._generation, dict(self._sealed), done))

    def _spill(self, below: int, known: dict[int, Entries], done: _thread.LockType) -> None:
        # A failure (a full disk, the store removed) leaves the packs for the next seal or
        # gc to spill, never a traceback on the user's screen.
        try:
            with contextlib.suppress(Exception):
                packs.spill(self.packs, self.folders, below, known)
        finally:
            done.release()

    def _new_generation(self, fd: int) -> None:
        """A new generation in the header (fdatasynced), above every pack's: no pack is
        ever sealed again under a name a spill may be removing."""
        generation = packs.next_generation(self._generation, *packs.listed(self.packs))
        self._head = packs.header(generation)
        os.pwrite(fd, self._head, 0)
        os.fdatasync(fd)
        self._generation, self._end, self._own = generation, START, {}

    # ---- reading ------------------------------------------------------------------------

    def get(self, letter: bytes, name: str) -> bytes | None:
        """The stored form of object `name` of folder `letter`, from a record that checked;
        None when neither the journal nor a pack holds it."""
        found = self.view().get((letter, name))
        return found[1] if found is not None else None

    def view(self) -> Mapping[Key, tuple[int, bytes]]:
        """What the journal and its packs hold ((folder letter, name) -> (when written,
        stored form)), brought up to the file once (the header read: a seal, a restart or
        new records by another process): for a lookup, or an operation that looks up
        several objects (a chain's links) without reading the header again for each. Still
        right however long it is kept: it never loses an entry (a new generation seen makes
        a new one), every form in it checked, and an object it holds stays in the store (a
        pack is durable before the generation changes, and removed only once its objects
        are in synced files); what another process adds after it was taken is not in it (an
        operation's objects are all older than the name it starts from: stored before
        anything named them)."""
        if not self._there():
            return {}
        with self._locked(exclusive=False) as fd:
            self._scan(fd, writing=False)
            return self._index

    def counted(self) -> Mapping[Key, tuple[int, bytes]]:
        """What this process has counted of the journal and its packs, as `view` gives it,
        for one snapshot deciding what it need not keep again: brought up to the file only
        when this process has read nothing yet or the generation changed (a seal, or a
        restart -- which `gc` does before it frees anything); else what it counted, after
        one look that the file is still the one it has open and one read of the header. The
        records other processes wrote since are not looked for: what only they hold is kept
        again, harmlessly. Right as long as `view`'s is (a snapshot's lookups share one)."""
        if not self._there():
            return {}
        with self._lock:
            if self._generation != -1 and self._fd is not None and self._head and \
                    os.pread(self._fd, HEADER.size, 0) == self._head:
                return self._index
        return self.view()

    def names(self, letter: bytes) -> list[str]:
        """The names of the objects of folder `letter` the journal and its packs hold."""
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
                self._fd, self._generation, self._end = None, -1, START
                self._index, self._own, self._sealed, self._head = {}, {}, {}, b""
            return self._fd is not None or self.file.exists()

    @contextlib.contextmanager
    def _locked(self, *, exclusive: bool) -> Iterator[int]:
        """The journal open (made if need be), this object's lock held, and with `exclusive`
        the flock: writers take turns. A reader takes no flock: a record being written does
        not check yet, and is not read."""
        with self._lock:
            if self._fd is None:
                if not self.file.exists():
                    _make(self.file, self.packs)
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
        """Bring the index up to the file (another process may have written records, sealed
        or restarted it) and return where the next record goes."""
        head = os.pread(fd, HEADER.size, 0)
        generation = -2  # no whole header: a journal with no records
        if head and head == self._head:  # (checked when it was read)
            generation = self._generation
        elif (found := packs.generation_of(head)) is not None:
            generation = found
        if generation != self._generation:
            self._generation, self._end, self._own = generation, START, {}
            self._index = self._packed()
        self._head = head if generation != -2 else b""
        if generation == -2:
            if writing:
                self._restart(fd)  # a new generation (there was nothing to keep)
            return START
        # The records after the last one read: one read of the rest of the file once the
        # head there says one is (a new process catching up on a full journal: 550 records
        # at two preads each took 2.5 of its 5.7 ms), else that head alone.
        head = os.pread(fd, RECORD.size, self._end)
        if len(head) < RECORD.size or RECORD.unpack(head)[:3] != (packs.MAGIC, b"r",
                                                                  self._generation):
            return self._end
        data, at = os.pread(fd, self._size - self._end, self._end), 0
        while (record := packs.record_in(data, at, self._end, self._generation,
                                         self._size)) is not None:
            self._add(record[0], record[1])
            self._end += record[2] - at
            at = record[2]
        return self._end

    def _packed(self) -> Entries:
        """A new index: the objects of the packs there now (every record checked; each read
        once when it is below this generation: final, never written again -- one of this
        generation is a crashed seal's, which the next seal replaces with more), those that
        are gone forgotten (spilled: their objects are in files, synced)."""
        index: Entries = {}
        sealed: dict[int, Entries] = {}
        for generation, name in sorted(packs.listed(self.packs).items()):
            entries = self._sealed.get(generation)
            if entries is None:
                entries = packs.read(self.packs / name, generation)
            if entries is not None:
                if generation < self._generation:
                    sealed[generation] = entries
                index.update(entries)
        self._sealed = sealed
        return index

    def _add(self, when: int, payload: bytes) -> None:
        for key, form in packs.items(payload):
            self._index[key] = self._own[key] = (when, form)


def _make(file: Path, packed: Path) -> None:
    """Create the journal: zeros and a header (a generation above every pack's), fsynced,
    linked into place (never over one another process made meanwhile), and its folder
    fsynced: its name is durable before it vouches for anything (the fsync of the file
    committed the folders made before it)."""
    private_dirs(file.parent)
    temp = file.parent / f".{file.name}.{os.getpid()}.{threading.get_ident()}"
    fd = open_private(temp)
    try:
        block = bytearray(SIZE)
        generation = packs.next_generation(*packs.listed(packed))
        block[:HEADER.size] = packs.header(generation)
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
