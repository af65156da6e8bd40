"""The journal's records on disk, and its sealed packs: a full journal's counted records
copied whole into one file that is never written again, ``checkpoints/packs/<generation as
16 hex digits>.pack``, read by every process beside the journal until it is "spilled" (each
object to its own loose file, synced) and removed. Sealing a full journal is one file
created and one fsync; writing its ~1,100 objects out one file each (0.3-2 s on this disk)
is done after, by a background thread, off the turn's way (`store.journal` says when).

Format (integers little-endian), the journal's and a pack's alike:

    header  MAGIC b"h" + generation (8) + BLAKE2b-160 of those 13 bytes, at offset 0
    record  MAGIC b"r" + generation (8) + when written (8, ns since the epoch) + payload
            length (4) + BLAKE2b-160(payload) + payload, from offset `START` on, one after
            another
    payload per object: folder (1: b"b" blob, b"t" manifest) + name (20) + length (4) + the
            object's stored form (what `blobs` would write to its file: whole or delta)

A record counts when its generation is the header's and its payload hashes right; records
are read from `START` until one does not. A pack is the journal's first bytes up to its last
counted record, so it is read by the same checks; it counts only under its own name (a
header whose generation is not the name's: no pack), only names of the form above are packs
at all, and only regular files (anything else in the folder is never read, followed or
removed, nor a path built from it).

In: the packs folder, bytes. Out: `read` (a pack's objects, every record checked), `listed`,
`seal` (a pack made durable: temp file fsynced, renamed into place, folder fsynced), `spill`.
Never: raise on a damaged or crafted pack (it is data: what does not check is not counted),
build a path from a pack's contents but through a folder's `path_of` (names are 20 bytes,
written as hex), remove a pack before its objects are in files and synced, or rewrite a
loose object that reads back sound.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import stat
import struct
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Protocol

from mulligan.app.workspace.store.blobs import write_atomic
from mulligan.home import open_private, private_dirs
from mulligan.session.stores.storage import fsync_folder, write_all

__all__ = ["CEILING", "HEADER", "ITEM", "MAGIC", "RECORD", "START", "Entries", "Folder", "Key",
           "generation_of", "header", "items", "listed", "next_generation", "read", "record_in",
           "seal", "spill"]

MAGIC = b"\x00MLJ"
START = 4096  # records start here (the header has the first block to itself)
HEADER = struct.Struct("<4scQ20s")  # magic, b"h", generation, hash of the first 13 bytes
RECORD = struct.Struct("<4scQQI20s")  # magic, b"r", generation, when, length, its hash
ITEM = struct.Struct("<c20sI")  # folder letter, name, length
_NAME = re.compile(r"([0-9a-f]{16})\.pack")
CEILING = 1 << 63  # generations a store makes are below (the ns clock: until the year 2262)
_MAX = 16 << 20  # bytes of a pack read, at most (a journal is 256 KB: a crafted one is cut)
_TEMP = ".part"  # a pack being written (only while its writer holds the journal's flock)

Key = tuple[bytes, str]  # (folder letter, object name)
Entries = dict[Key, tuple[int, bytes]]  # -> (when written, stored form)


class Folder(Protocol):
    """What a spill (and the journal) needs of a `blobs.Objects`: one folder of objects."""

    def path_of(self, name: str) -> Path: ...

    def sound(self, name: str) -> bool: ...


def digest(data: bytes | bytearray | memoryview) -> bytes:
    return hashlib.blake2b(data, digest_size=20).digest()


def header(generation: int) -> bytes:
    head = MAGIC + b"h" + struct.pack("<Q", generation)
    return head + digest(head)


def generation_of(head: bytes) -> int | None:
    """The generation a header says, None when it is not a whole header that checks."""
    if len(head) != HEADER.size:
        return None
    magic, kind, found, check = HEADER.unpack(head)
    return found if magic == MAGIC and kind == b"h" and check == digest(head[:13]) else None


def record_in(data: bytes, at: int, where: int, generation: int, size: int
              ) -> tuple[int, bytes, int] | None:
    """(when written, payload, where the next starts in `data`) of the counted record at
    `at` of `data`, which is at offset `where` of a file of `size` bytes whose header says
    `generation`; None when there is no whole record of that generation there that checks."""
    if generation < 0 or where + RECORD.size > size or at + RECORD.size > len(data):
        return None
    magic, kind, found, when, length, check = RECORD.unpack_from(data, at)
    start = at + RECORD.size
    if magic != MAGIC or kind != b"r" or found != generation or \
            where + RECORD.size + length > size:
        return None
    payload = data[start:start + length]
    if len(payload) != length or digest(payload) != check:
        return None
    return when, payload, start + length


def items(payload: bytes) -> Iterator[tuple[Key, bytes]]:
    """((folder letter, name), stored form) of each object in a counted record's payload; an
    object cut short by the payload's end (a crafted one: ours never are) is not one."""
    view, pos = memoryview(payload), 0
    while pos + ITEM.size <= len(view):
        letter, name, size = ITEM.unpack_from(view, pos)
        pos += ITEM.size
        if pos + size > len(view):
            return
        yield (letter, name.hex()), bytes(view[pos:pos + size])
        pos += size


def listed(folder: Path) -> dict[int, str]:
    """The packs in `folder`: generation -> file name (only names a store makes)."""
    try:
        names = os.listdir(folder)
    except OSError:  # no folder (no pack ever), or not one: no packs
        return {}
    return {int(match[1], 16): name for name in names if (match := _NAME.fullmatch(name))}


def next_generation(*after: int) -> int:
    """A generation above each of `after` and the clock (ns since the epoch): a generation
    at or past `CEILING` is not one a store made (a crafted header or pack name) and sets
    nothing, so a generation always fits its 8 bytes."""
    return max([time.time_ns()] + [found + 1 for found in after if found < CEILING])


def read(path: Path, generation: int) -> Entries | None:
    """The objects of the pack at `path` named `generation`, every record checked (read up to
    the first that does not); None when there is no pack file there: gone (spilled: its
    objects are in files), or not a regular file (a link, a folder: never followed nor
    removed)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        return _parsed(fd, generation) if stat.S_ISREG(os.fstat(fd).st_mode) else None
    finally:
        os.close(fd)


def _parsed(fd: int, generation: int) -> Entries:
    try:
        data = os.pread(fd, min(os.fstat(fd).st_size, _MAX), 0)
    except OSError:
        return {}
    entries: Entries = {}
    if generation_of(data[:HEADER.size]) != generation:
        return entries  # damaged, or not this generation's: nothing in it counts
    at = START
    while (record := record_in(data, at, at, generation, len(data))) is not None:
        for key, form in items(record[1]):
            entries[key] = (record[0], form)
        at = record[2]
    return entries


def seal(folder: Path, generation: int, data: bytes) -> None:
    """Make `data` (a journal's header and counted records) pack `generation`, durably: a
    temporary file written whole and fsynced, renamed into place (over a pack of the same
    generation a crash left before its journal moved on: its records are all in `data`),
    the folder fsynced. The caller holds the journal's flock: a temporary file found here is
    a dead writer's, and is removed."""
    private_dirs(folder)
    for name in os.listdir(folder):
        if name.startswith(".") and name.endswith(_TEMP):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(folder / name)
    temp = folder / f".{generation:016x}.{os.getpid()}{_TEMP}"
    fd = open_private(temp)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, folder / f"{generation:016x}.pack")
    fsync_folder(str(folder / "pack"))  # (its folder's:) the name is on disk before the
    # journal moves on


def spill(folder: Path, folders: Mapping[bytes, Folder], below: int,
          known: Mapping[int, Entries], *, durable: bool = False) -> None:
    """Write every object of every pack whose generation is below `below` to its loose file
    (unless one is there and sound), dated when its record was written (gc's grace counts
    from then), `os.sync()`, then remove those packs. `known`: packs already read (by
    generation). Spills take turns by a flock of the folder (a second waits, then finds the
    packs gone). `durable`: the removals are synced too (gc is about to free: a pack a crash
    brought back would bring back what it freed)."""
    try:
        lock = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return  # no folder: no pack was ever sealed
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = []
        for generation, name in sorted(listed(folder).items()):
            if generation >= below:  # a live journal's, or a newer seal's: not final yet
                continue
            entries = known.get(generation)
            if entries is None:
                entries = read(folder / name, generation)
                if entries is None:
                    continue
            for (letter, object_name), (when, form) in entries.items():
                objects = folders.get(letter)
                if objects is not None:
                    _write_out(objects, object_name, when, form)
            done.append(name)
        if done:
            os.sync()  # every object written so far is on disk: the packs are not needed
            for name in done:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(folder / name)
        if durable:
            os.fsync(lock)
    finally:
        os.close(lock)  # (the flock goes with it)


def _write_out(objects: Folder, name: str, when: int, form: bytes) -> None:
    """Object `name`'s loose file, dated `when` (its record's), unless one is there and
    sound. A file a crash left torn is replaced, dated no earlier than it was (it may have
    been touched since). Where there was none, the file is linked into place, never over
    one written meanwhile: a delta's base written out just now (`blobs.Objects._touch`,
    mtime now, so a gc keeps it) must not be dated back."""
    path = objects.path_of(name)
    there = True
    try:
        if path.read_bytes() == form or objects.sound(name):
            return  # (`sound` reads the loose file only, never a journal or a pack)
        when = max(when, path.stat().st_mtime_ns)
    except FileNotFoundError:
        there = False
    except OSError:  # there, but not a file that reads: replaced
        pass
    if there:
        write_atomic(path, form, durable=False)
        os.utime(path, ns=(when, when))
        return
    if not path.parent.is_dir():
        private_dirs(path.parent)
    temp = path.parent / f".{path.name}.{os.getpid()}.{threading.get_ident()}.spill"
    fd = open_private(temp)
    try:
        write_all(fd, form)
        os.utime(fd, ns=(when, when))
    finally:
        os.close(fd)
    try:
        with contextlib.suppress(FileExistsError):
            os.link(temp, path)
    finally:
        os.unlink(temp)
