"""How the snapshot store reads an object back, verified: the read path of `store.blobs`
(which writes them).

An object is a file's bytes (a blob, named by their BLAKE2b-160 hash) or a manifest (named by
its snapshot id). Its first bytes say which form it is in:

    raw    the bytes themselves, no header: every object of a store made before compression,
           and a blob zlib cannot shrink (unless it starts with MAGIC)
    whole  MAGIC b"z" + hash (20) + zlib(bytes)
    delta  MAGIC b"d" + hash (20) + depth (1) + base name (20) + zlib(ops)

`hash` is the BLAKE2b-160 of the bytes the object stands for (a blob's name; a manifest's own
check). A delta's ops (`mulligan.app.workspace.store.delta`) copy byte ranges of its base --
another object of the same folder, itself whole, raw or a delta of depth - 1 -- and insert
literal bytes. A chain is at most `MAX_DEPTH` deltas long.

In: where an object's file lives (`path_of`), and the store's journal (`store.journal`),
which is looked in first, with its sealed packs: an operation takes one `Journal.view` (one
read of its header) for every link it looks up. Out: `read` (the bytes), `exists`,
`base_of`, `sound`. Every read is verified: the bytes a chain gives must hash to its
header's hash (a blob's: to its name), else `Damaged` (a ValueError) names the object and
which link of its chain is wrong or missing. A raw blob must hash to its name; a raw manifest
(an old store's JSON) is taken as it is.
Never: return bytes that were not verified (or kept in memory once verified or written),
follow a chain longer than MAX_DEPTH or whose depths do not count down, write anything.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from mulligan.app.workspace.store.delta import apply_delta

if TYPE_CHECKING:
    from mulligan.app.workspace.store.journal import Journal

__all__ = ["MAGIC", "MAX_DEPTH", "Damaged", "Reader", "read_all"]

MAGIC = b"\x00MLB"  # no text file, and no JSON manifest, starts with a NUL
_WHOLE, _DELTA = b"z", b"d"
_HEAD = len(MAGIC) + 1 + 20  # magic, form, hash
_DELTA_HEAD = _HEAD + 1 + 20  # then depth and base name
MAX_DEPTH = 50  # deltas in one chain, at most (git's default --depth)
_RECENT = 32 << 20  # bytes of recently written or read objects kept in memory (delta bases)

# What the journal holds, as one operation sees it (`Journal.view`): (folder, name) -> form.
Journaled = Mapping[tuple[bytes, str], tuple[int, bytes]]
_Chain = list[tuple[str, bytes, int, bytes]]  # (name, hash, depth, ops), top first


class Damaged(ValueError):
    """An object whose stored form does not give the bytes its name says: refused."""


def _inflate(data: bytes | memoryview) -> bytes:
    """zlib's format decompressed by ISA-L (python-isal, a dependency already: about 2x
    faster than the stdlib's zlib on a 1 MB manifest); zlib.error when it is not such a
    stream."""
    from isal import isal_zlib

    try:
        return isal_zlib.decompress(data)
    except Exception as exc:  # isal's IsalError (its stubs do not say it is an exception)
        raise zlib.error(str(exc)) from None


def _hash(data: bytes | memoryview) -> bytes:
    return hashlib.blake2b(data, digest_size=20).digest()


def read_all(path: Path | str, size: int = 0, *, follow: bool = True) -> bytes:
    """The whole of the file at `path`, read to its end (not `follow`: a link is refused,
    ELOOP, and a fifo does not block); `size`: what it is expected to hold (lstat's), read
    in one go. Three system calls where `Path.read_bytes` makes nine (its buffered file
    object's fstat, tty check, seeks and size check): a restore reads hundreds of files, and
    a snapshot every file it cannot vouch for. A file that grew since `size` is read on to
    its end."""
    flags = os.O_RDONLY | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW | os.O_NONBLOCK)
    fd = os.open(path, flags)
    try:
        want = size + 1 if size > 0 else 1 << 16
        first = os.read(fd, want)
        if len(first) < want:  # a short read of a file is its end: no read to find it
            return first
        chunks = [first]
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


class Reader:
    """One folder of objects, read. `path_of(name)` is where object `name` (40 hex digits,
    checked by the caller) lives; `by_content`: names are the hash of the bytes (blobs), so
    a raw object is checked against its name. `what` names the objects in messages
    ("blob"). Thread-safe."""

    def __init__(self, path_of: Callable[[str], Path], *, by_content: bool, what: str) -> None:
        self.path_of, self.by_content, self.what = path_of, by_content, what
        self._recent: OrderedDict[str, bytes] = OrderedDict()  # name -> bytes, verified
        self._recent_size = 0
        self._lock = threading.Lock()
        # The store's journal (`journal`): small snapshots' objects are kept there, not in
        # files of their own; `letter` is this folder's in it.
        self.journal: Journal | None = None
        self.letter = b""
        # (name, stored form, bytes) of the first object of the chain read last: not checked
        # on its own (the top's hash was), so used only once checked (`_checked_aside`).
        self._aside: tuple[str, bytes, bytes] | None = None

    def _journal_view(self) -> Journaled:
        """The journal as it is now (one read of its header), for one operation."""
        return self.journal.view() if self.journal is not None else {}

    def _remember(self, name: str, data: bytes) -> None:
        if len(data) > _RECENT // 4:
            return
        with self._lock:
            if name in self._recent:
                self._recent.move_to_end(name)
                return
            self._recent[name] = data
            self._recent_size += len(data) + 64  # about what an entry costs beside its bytes
            while self._recent_size > _RECENT:
                _, gone = self._recent.popitem(last=False)
                self._recent_size -= len(gone) + 64

    def _cached(self, name: str) -> bytes | None:
        with self._lock:
            return self._recent.get(name)

    def base_of(self, name: str) -> str | None:
        """The object `name`'s delta base (which must be kept while it is), or None."""
        return self._link(name)[1]

    def _link(self, name: str, journaled: Journaled | None = None) -> tuple[int, str | None]:
        """(depth, base name) from `name`'s header: (0, None) when it is not a delta."""
        if journaled is None:
            journaled = self._journal_view()
        found = journaled.get((self.letter, name))
        if found is not None:
            head = found[1][:_DELTA_HEAD]
        else:
            with open(self.path_of(name), "rb") as handle:
                head = handle.read(_DELTA_HEAD)
        if not head.startswith(MAGIC + _DELTA):
            return 0, None
        if len(head) < _DELTA_HEAD:
            raise Damaged(f"{self.what} {name}: its header is cut short: refused")
        return head[_HEAD], head[_HEAD + 1:].hex()

    def read(self, name: str) -> bytes:
        """The bytes object `name` stands for, verified. FileNotFoundError when there is no
        such object; `Damaged` naming it (and the link of its chain at fault) when what is
        stored does not give bytes with the right hash."""
        cached = self._cached(name)
        if cached is None:
            cached = self._checked_aside(name)
        if cached is not None:
            return cached
        journaled = self._journal_view()
        try:
            # The bytes a chain gives are checked against the top's hash, which is what a
            # reader needs: the first object's own hash is not computed too (1.2 ms of a
            # 1 MB manifest's read).
            return self._read(name, journaled, careful=False)
        except Damaged:
            # Something is wrong: read again checking every link, to name the one at fault
            # (and to read an old raw blob that only looks like a compressed one).
            return self._read(name, journaled, careful=True)

    def sound(self, name: str) -> bool:
        """Whether object `name`'s loose file reads back whole and verified (not from memory
        nor from the journal: what the journal's `restart` asks before it writes one)."""
        try:
            self._read(name, {}, careful=True, memory=False)
        except (OSError, ValueError):
            return False
        return True

    def exists(self, name: str) -> bool:
        """Whether the store holds object `name` (its file, or the journal)."""
        return (self.letter, name) in self._journal_view() or self.path_of(name).exists()

    def _stored(self, name: str, journaled: Journaled) -> bytes:
        """Object `name`'s stored form: the journal's (a checked record) first, else its file."""
        found = journaled.get((self.letter, name))
        return found[1] if found is not None else read_all(self.path_of(name))

    def _read(self, name: str, journaled: Journaled, *, careful: bool,
              memory: bool = True) -> bytes:
        # (`memory` False: no link of its chain from memory: `sound`.) The loop ends: each
        # delta's depth is one less than the one above it's, from at most MAX_DEPTH.
        chain: _Chain = []
        current = name
        data: bytes
        first: tuple[str, bytes, bytes] | None = None  # a chain's first object, unchecked
        while True:
            try:
                stored = self._stored(current, journaled)
            except FileNotFoundError:
                if current == name:
                    raise
                raise Damaged(self._where(name, chain, f"its delta base {current} is "
                                                      "missing")) from None
            if stored.startswith(MAGIC + _DELTA):
                if len(stored) < _DELTA_HEAD:
                    raise Damaged(self._where(name, chain, f"{current}'s header is cut short"))
                depth = stored[_HEAD]
                if not 1 <= depth <= MAX_DEPTH or (chain and depth != chain[-1][2] - 1):
                    raise Damaged(self._where(name, chain, f"{current} says depth {depth}"))
                chain.append((current, stored[len(MAGIC) + 1:_HEAD], depth,
                              stored[_DELTA_HEAD:]))
                current = stored[_HEAD + 1:_DELTA_HEAD].hex()
                hit = self._cached(current) if memory else None
                if hit is not None:
                    data = hit
                    break
                continue
            if chain and chain[-1][2] != 1:
                raise Damaged(self._where(name, chain, f"{current} is not a delta, but "
                                                      f"{chain[-1][0]} says depth "
                                                      f"{chain[-1][2]}"))
            data = self._whole(current, stored, name, chain, check=careful or not chain)
            if chain and not careful and len(data) <= _RECENT // 4:  # (as `_remember`)
                first = (current, stored, data)
            break
        for link, _, _, packed in reversed(chain):
            try:
                data = apply_delta(data, _inflate(packed))
            except (zlib.error, ValueError) as exc:
                raise Damaged(self._where(name, chain, f"the delta {link} cannot be "
                                                      f"applied ({exc})")) from None
        if chain:
            made = _hash(data)  # once: the top's hash, and for a blob its name
            if made != chain[0][1]:
                raise Damaged(self._where(name, chain, self._culprit(name, chain, journaled)))
            if self.by_content and made.hex() != name:
                raise Damaged(self._where(name, chain, "its bytes do not hash to its name"))
            if first is not None:
                with self._lock:
                    self._aside = first
        self._remember(name, data)
        return data

    def _checked_aside(self, name: str) -> bytes | None:
        """The bytes of object `name` if it was the first object of the chain read last,
        now checked against its own hash (a restore reads the manifest it goes back to
        right after one that is a delta of it: no second read and inflate of 1 MB)."""
        with self._lock:
            aside, self._aside = self._aside, None
        if aside is None or aside[0] != name:
            return None
        _, stored, data = aside
        if stored.startswith(MAGIC + _WHOLE):
            want = stored[len(MAGIC) + 1:_HEAD]
            if self.by_content and want.hex() != name:
                return None
        elif self.by_content:
            want = bytes.fromhex(name)
        else:
            return None  # a raw manifest (an old store's): read as before
        if _hash(data) != want:
            return None  # read again, the careful way, to say what is wrong
        self._remember(name, data)
        return data

    def _whole(self, current: str, stored: bytes, name: str, chain: _Chain, *,
               check: bool = True) -> bytes:
        """The bytes of a raw or whole (compressed) object, checked against its hash (and a
        blob's, against its name) unless not `check` (the first object of a chain whose
        top's hash the caller checks)."""
        if stored.startswith(MAGIC + _WHOLE):
            try:
                data = _inflate(memoryview(stored)[_HEAD:])
            except zlib.error as exc:
                if not self._raw_ok(current, stored):
                    raise Damaged(self._where(name, chain, f"{current} cannot be "
                                                          f"decompressed ({exc})")) from None
                return stored
            if not check:
                return data
            if _hash(data) != stored[len(MAGIC) + 1:_HEAD]:
                if self._raw_ok(current, stored):  # an old raw blob that starts like ours
                    return stored
                raise Damaged(self._where(name, chain, f"{current}'s bytes do not match "
                                                      "its hash"))
            if self.by_content and not chain and stored[len(MAGIC) + 1:_HEAD].hex() != current:
                # (its bytes hash to its header's hash: the name is compared with that)
                raise Damaged(self._where(name, chain, "its bytes do not hash to its name"))
            return data
        if check and self.by_content and _hash(stored).hex() != current:
            raise Damaged(self._where(name, chain, f"{current}'s bytes do not hash to its "
                                                  "name"))
        return stored

    def _raw_ok(self, current: str, stored: bytes) -> bool:
        return self.by_content and _hash(stored).hex() == current

    def _culprit(self, name: str, chain: _Chain, journaled: Journaled) -> str:
        """Which link of a chain that gave the wrong bytes is at fault (the slow path:
        every level is checked against its own hash)."""
        data = None
        # the first object: the base of the chain's last delta (each other link's base is
        # the delta below it)
        base = self._stored(chain[-1][0], journaled)[_HEAD + 1:_DELTA_HEAD].hex()
        with contextlib.suppress(OSError, ValueError):
            data = self._whole(base, self._stored(base, journaled), name, [])
        if data is None:
            return f"its first object {base} is damaged"
        for link, digest, _, packed in reversed(chain):
            try:
                data = apply_delta(data or b"", zlib.decompress(packed))
            except (zlib.error, ValueError):
                return f"the delta {link} cannot be applied"
            if _hash(data) != digest:
                return f"the delta {link} gives bytes that do not match its hash"
        return "its bytes do not match its hash"

    def _where(self, name: str, chain: _Chain, why: str) -> str:
        links = f" (a delta, {len(chain)} deep)" if chain else ""
        return f"{self.what} {name}{links} is damaged: {why}: refused"
