"""Where a session's lines are kept: the seam under `SessionLog`, and the file behind it.

A `Storage` holds the lines of one session, in order, and offers the three things a log needs:
`fetch()` the bytes of the lines added since what the log accepted (or all of them, when what
was accepted is no longer there), `appending()` -- the one place a line is added, under an
exclusive hold that also covers reading the lines before it, so the next id is computed on a
complete view -- and `lease()`, one live writer per session. What the bytes mean (parsing,
every refusal, the ids) is the log's business, the same on every storage; a storage never
parses a line. `FileStorage` is the file: flock'd, O_APPEND, fsync'd, re-read from the start
when the file is not the one parsed. `mulligan.session.stores.postgres` is the other implementation.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Protocol

from mulligan.home import open_private

# How much of the last accepted line is kept to notice a file rewritten in place.
_TAIL_WINDOW = 64 * 1024


class Releasable(Protocol):
    def release(self) -> None: ...


class Writer(Protocol):
    """The hold `Storage.appending()` gives: read what came before, then add one line."""

    def fetch(self) -> tuple[bool, bytes | Iterator[bytes]]: ...
    def write(self, line: bytes, entry: dict[str, Any]) -> None: ...


class Storage(Protocol):
    """One session's lines. `name` is what refusals name (a file path, or a database session).

    fetch() -> (fresh, data): the bytes of the complete and incomplete lines after what was
    accepted (or an iterator of such bytes, chunk by chunk, each ending at a line's end: a
    storage that streams); `fresh` means forget everything accepted, `data` is then the whole
    session.
    accept(data, used): the first `used` bytes of `data` (whole lines) were accepted.
    forget(): nothing is accepted any more (the log re-reads from the start).
    appending(create) -> a context holding the session exclusively, giving a Writer -- or None
    when there is no session yet and `create` is false. A line written is durable before the
    context exits normally; if it raises, the line may or may not be there (the log forgets
    and re-reads). exists(): the session has at least one line (a cheap check).
    lease(): the one-live-writer lease (LeaseHeld naming the holder).
    file: the session's file, None when it is not one (a database session); short: a short
    name for people (a file's stem, a database id); whole(): every line exactly as stored."""

    name: str
    file: Path | None
    short: str

    def whole(self) -> bytes: ...

    def fetch(self) -> tuple[bool, bytes | Iterator[bytes]]: ...
    def accept(self, data: bytes, used: int) -> None: ...
    def forget(self) -> None: ...
    def appending(self, create: bool) -> AbstractContextManager[Writer | None]: ...
    def exists(self) -> bool: ...
    def lease(self) -> Releasable: ...


def read_at(fd: int, offset: int, length: int) -> bytes:
    """`length` bytes at `offset`, fewer if the file ends first."""
    chunks = []
    while length > 0:
        chunk = os.pread(fd, length, offset)
        if not chunk:  # the file shrank under us: the caller compares sizes and re-reads
            break
        chunks.append(chunk)
        offset += len(chunk)
        length -= len(chunk)
    return b"".join(chunks) if len(chunks) != 1 else chunks[0]


def write_all(fd: int, data: bytes) -> None:
    # One write() is the rule; a regular file only writes short on a full disk or a signal,
    # and then the rest follows while the lock is still held, so nothing can come between.
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class FileStorage:
    """A session file: one JSON object per line. Every write is one line appended, in a single
    write() on an O_APPEND descriptor, while an exclusive flock is held on the file; every read
    holds a shared flock while it reads bytes, so a reader never sees half of another writer's
    line. It notices a file that was replaced (device and inode differ), shrank (size below
    what was accepted) or changed at its end (the last accepted line's bytes no longer match)
    and then hands out the whole file as fresh. The file is created 0600 by the first append;
    with fsync every line (and a new file's name) is flushed to disk before write() returns."""

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.name = os.fspath(path)
        self.file: Path | None = Path(self.name)
        self.short = Path(self.name).stem
        self.fsync = fsync
        self.stat: os.stat_result | None = None  # the file as the last fetch found it
        self.forget()

    def forget(self) -> None:
        self._ident: tuple[int, int] | None = None
        self._size = 0  # bytes accepted, always at the end of a complete line
        self._tail = b""  # the last bytes of the last accepted line, newline included

    def whole(self) -> bytes:
        return Path(self.name).read_bytes()

    def exists(self) -> bool:
        try:
            return os.stat(self.name).st_size > 0
        except FileNotFoundError:
            return False

    def lease(self) -> Releasable:
        from mulligan.session.stores.lease import acquire  # lease names its start time: log's clock

        return acquire(Path(self.name))

    def fetch(self) -> tuple[bool, bytes]:
        """The shared lock is held only while bytes are read: parsing needs no lock."""
        with self._open(write=False, create=False) as opened:
            if opened is None:
                fresh = self._ident is not None
                self.forget()
                return fresh, b""
            return self._fetch(opened[0])

    def _fetch(self, fd: int) -> tuple[bool, bytes]:
        stat = self.stat = os.fstat(fd)
        ident = (stat.st_dev, stat.st_ino)
        fresh = (ident != self._ident or stat.st_size < self._size
                 or read_at(fd, self._size - len(self._tail), len(self._tail)) != self._tail)
        if fresh:
            self.forget()
            self._ident = ident
        return fresh, read_at(fd, self._size, stat.st_size - self._size)

    def accept(self, data: bytes, used: int) -> None:
        if used == 0:
            return
        self._size += used
        last = data.rfind(b"\n", 0, used - 1) + 1
        self._tail = data[max(last, used - _TAIL_WINDOW):used]

    @contextmanager
    def reading(self) -> Iterator[int | None]:
        """The file open under a shared lock, as an fd, for as long as the context lasts (no
        writer can add a line meanwhile); None when there is no file."""
        with self._open(write=False, create=False) as opened:
            yield None if opened is None else opened[0]

    def appending(self, create: bool) -> _FileWriter:
        # A class, not a generator: an append is on the hot path of every message.
        return _FileWriter(self, create)

    @contextmanager
    def _open(self, *, write: bool, create: bool) -> Iterator[tuple[int, bool] | None]:
        """The file, open and locked (exclusive to write, shared to read), as (fd, created);
        None if it does not exist and may not be created."""
        opened = self._locked(write=write, create=create)
        if opened is None:
            yield None
            return
        try:
            yield opened
        finally:
            os.close(opened[0])  # closing releases the lock

    def _locked(self, *, write: bool, create: bool) -> tuple[int, bool] | None:
        """Open and lock the file; the caller closes it. Retries if the path was replaced
        between open() and flock(), so the lock is always on the file the path names."""
        flags = (os.O_RDWR | os.O_APPEND if write else os.O_RDONLY) | os.O_CLOEXEC
        while True:
            created = False
            try:
                fd = os.open(self.name, flags)
            except FileNotFoundError:
                if not create:
                    return None
                try:
                    fd = open_private(self.name, flags)
                    created = True
                except FileExistsError:
                    continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if write else fcntl.LOCK_SH)
                mine = os.fstat(fd)
                try:
                    named = os.stat(self.name)
                    same = (named.st_dev, named.st_ino) == (mine.st_dev, mine.st_ino)
                except FileNotFoundError:
                    same = False
            except BaseException:
                os.close(fd)
                raise
            if same:
                return fd, created
            os.close(fd)  # replaced or deleted while we waited: open what is there now


class _FileWriter:
    """The exclusive hold on the file for one append (a context manager): the fd, locked."""

    def __init__(self, storage: FileStorage, create: bool) -> None:
        self._storage, self._create = storage, create
        self.fd, self._created = -1, False

    def __enter__(self) -> _FileWriter | None:
        opened = self._storage._locked(write=True, create=self._create)
        if opened is None:
            return None
        self.fd, self._created = opened
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing releases the lock
            self.fd = -1

    def fetch(self) -> tuple[bool, bytes]:
        return self._storage._fetch(self.fd)

    def write(self, line: bytes, entry: dict[str, Any]) -> None:
        write_all(self.fd, line)
        if self._storage.fsync:
            os.fsync(self.fd)
            if self._created:
                fsync_folder(self._storage.name)


def fsync_folder(name: str) -> None:
    """Make a new file's name durable too: without this a power cut could lose the file."""
    folder = os.path.dirname(os.path.abspath(name))
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
