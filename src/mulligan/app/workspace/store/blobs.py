"""How the snapshot store keeps an object on disk: compressed, or as a delta against the
previous version at the same path, and read back verified.

An object is a file's bytes (a blob, named by their BLAKE2b-160 hash) or a manifest (named by
its snapshot id). `Objects` is one folder of them; its first bytes say which form it is in:

    raw    the bytes themselves, no header: every object of a store made before this module,
           and a blob zlib cannot shrink (unless it starts with MAGIC)
    whole  MAGIC b"z" + hash (20) + zlib(bytes)
    delta  MAGIC b"d" + hash (20) + depth (1) + base name (20) + zlib(ops)

`hash` is the BLAKE2b-160 of the bytes the object stands for (a blob's name; a manifest's own
check). A delta's ops (`mulligan.app.workspace.store.delta`: computed in O(n) by lines, a one-line
edit of a 1 MB file costs tens of bytes) copy byte ranges of its base -- another object of
the same folder, itself whole, raw or a delta of depth - 1 -- and insert literal bytes. A
chain is at most `MAX_DEPTH` deltas long (git's default); at that depth the next version is
made against the chain's first, whole object instead, so a file edited a thousand times is
still one whole copy and small deltas, read in at most MAX_DEPTH + 1 steps.

Every read is verified: the bytes a chain gives must hash to its header's hash (a blob's: to
its name), else `Damaged` (a ValueError) names the object and which link of its chain is
wrong or missing. A raw blob must hash to its name; a raw manifest (an old store's JSON) is
taken as it is, as before. Never: write an object but whole (temp file, rename), follow a
chain longer than MAX_DEPTH (a crafted loop), or free anything (`store.collect` asks
`base_of`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from mulligan.app.workspace.store.delta import apply_delta, make_delta
from mulligan.home import open_private, private_dirs

if TYPE_CHECKING:
    from mulligan.app.workspace.store.journal import Journal

__all__ = ["MAGIC", "MAX_DEPTH", "Damaged", "Objects", "write_atomic"]

MAGIC = b"\x00MLB"  # no text file, and no JSON manifest, starts with a NUL
_WHOLE, _DELTA = b"z", b"d"
_HEAD = len(MAGIC) + 1 + 20  # magic, form, hash
_DELTA_HEAD = _HEAD + 1 + 20  # then depth and base name
MAX_DEPTH = 50  # deltas in one chain, at most (git's default --depth)
MIN_DELTA = 512  # bytes: a smaller object is only compressed
_WORTH = 8  # a delta is kept when it is at most 1/_WORTH of the bytes it stands for
_RECENT = 32 << 20  # bytes of recently written or read objects kept in memory (delta bases)
_BACKLOG = 64 << 20  # bytes `put_soon` may hold before it waits
_INLINE = 16  # blobs `put_soon` writes itself before it hands them to the worker threads
_HOLD_FOR = 300.0  # seconds a link touched by `_hold` counts as recent here (gc's grace: 3600)
_HELD = 65536  # links whose (depth, base, touched) are remembered, at most


def _deflate(data: bytes) -> bytes:
    """`data` in zlib's format, by ISA-L's deflate at level 1 (python-isal, a dependency
    already: 3.5-5x less CPU than zlib's fastest level for the same size on source trees and
    site-packages; a first snapshot compresses every file). Read back by the stdlib's zlib."""
    from isal import isal_zlib

    return isal_zlib.compress(data, 1)


class Damaged(ValueError):
    """An object whose stored form does not give the bytes its name says: refused."""


def _inflate(data: bytes | memoryview) -> bytes:
    """zlib's format decompressed by ISA-L (python-isal, as `_deflate`: about 2x faster
    than the stdlib's zlib on a 1 MB manifest); zlib.error when it is not such a stream."""
    from isal import isal_zlib

    try:
        return isal_zlib.decompress(data)
    except Exception as exc:  # isal's IsalError (its stubs do not say it is an exception)
        raise zlib.error(str(exc)) from None


def _hash(data: bytes | memoryview) -> bytes:
    return hashlib.blake2b(data, digest_size=20).digest()


def write_atomic(target: Path, data: bytes, *, durable: bool = True,
                 along: Sequence[Path] = ()) -> None:
    """Write `data` to `target` whole or not at all (temp + rename), 0600 in 0700 folders;
    `durable` fsyncs it first (blobs are not: one sync covers them all before their
    manifest), together with the files `along` (the blobs a manifest names: synced at the
    same time, one wait for the disk instead of one each, all before the rename)."""
    folder = target.parent
    if not folder.is_dir():
        private_dirs(folder)
    temp = folder / f".{target.name}.{os.getpid()}.{threading.get_ident()}.{time.monotonic_ns()}"
    fd = open_private(temp)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            if durable:
                out.flush()
                _sync_together(out.fileno(), along)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


def _sync_together(fd: int, along: Sequence[Path]) -> None:
    """fsync `fd` and the files `along` concurrently (the filesystem's journal commits them
    together); raises the first failure after every sync has ended."""
    failed: list[BaseException] = []

    def sync(path: Path) -> None:
        try:
            handle = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                os.fsync(handle)
            finally:
                os.close(handle)
        except BaseException as exc:  # noqa: BLE001 - re-raised below, in the caller
            failed.append(exc)

    threads = [threading.Thread(target=sync, args=(path,)) for path in along]
    for thread in threads:
        thread.start()
    try:
        os.fsync(fd)
    finally:
        for thread in threads:
            thread.join()
    if failed:
        raise failed[0]


class Objects:
    """One folder of objects. `path_of(name)` is where object `name` (40 hex digits, checked
    by the caller) lives; `by_content`: names are the hash of the bytes (blobs), so a raw
    object is checked against its name. `what` names the objects in messages ("blob").
    Thread-safe (the shared store's uploader reads while a snapshot writes)."""

    def __init__(self, path_of: Callable[[str], Path], *, by_content: bool, what: str) -> None:
        self.path_of, self.by_content, self.what = path_of, by_content, what
        self._recent: OrderedDict[str, bytes] = OrderedDict()  # name -> bytes, verified
        self._recent_size = 0
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._mine = threading.local()  # .jobs: this thread's put_soon's, not yet settled
        self._backlog = 0  # bytes they hold
        # name -> (depth, base, when this process last touched it or wrote it): `_hold`
        self._held: OrderedDict[str, tuple[int, str | None, float]] = OrderedDict()
        # The store's journal (`journal`): small snapshots' objects are kept there, not in
        # files of their own; `letter` is this folder's in it.
        self.journal: Journal | None = None
        self.letter = b""

    # ---- writing ------------------------------------------------------------------------

    def put(self, name: str, data: bytes, *, base: str | None = None,
            durable: bool = True, along: Sequence[Path] = (),
            into: list[tuple[str, bytes]] | None = None) -> None:
        """Store `data` as object `name`: as a delta against object `base` (the previous
        version at the same path) when that is much smaller, else compressed, else raw.
        `into`: no file is written; (name, stored form) is appended to it, for the caller to
        keep in the journal or write (`write_staged`)."""
        digest = bytes.fromhex(name) if self.by_content else _hash(data)
        form = None
        if base is not None and base != name and len(data) >= MIN_DELTA:
            form = self._delta_form(digest, data, base)
        if form is None:
            packed = _deflate(data)
            if len(packed) + _HEAD < len(data) or data.startswith(MAGIC) or \
                    not self.by_content:
                form = MAGIC + _WHOLE + digest + packed
            else:
                form = data  # incompressible: raw, as an old store keeps everything
        if into is not None:
            into.append((name, form))
        else:
            write_atomic(self.path_of(name), form, durable=durable, along=along)
        self._remember(name, data)
        if form.startswith(MAGIC + _DELTA):  # raw bytes never start with MAGIC
            self._note(name, form[_HEAD], form[_HEAD + 1:_DELTA_HEAD].hex(), time.monotonic())
        else:
            self._note(name, 0, None, time.monotonic())

    def put_soon(self, name: str, data: bytes, *, base: str | None = None) -> None:
        """`put` (not durable), on one of two worker threads once this thread has put
        _INLINE since its last `settle` (a turn's snapshot writes one or two: a hand-off
        would cost more than it saves): a first snapshot goes on reading and hashing files
        while its new blobs are compressed and written. `settle` must be called before
        anything names them. At most _BACKLOG bytes wait: beyond, this waits for the oldest.
        With a journal, the first _INLINE are not written but kept for `settle` to hand back
        (a small snapshot keeps them in the journal: no file each)."""
        mine = self._mine.__dict__
        mine["count"] = mine.get("count", 0) + 1
        if mine["count"] <= _INLINE:
            staged = mine.setdefault("staged", []) if self.journal is not None else None
            self.put(name, data, base=base, durable=False, into=staged)
            return
        self.write_staged(mine.pop("staged", []))  # a big snapshot: files, as before
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=2,
                                                thread_name_prefix="mulligan blobs")
            job = self._pool.submit(self._put_counted, name, data, base)
            self._backlog += len(data)
        jobs: list[Future[None]] = self._mine.__dict__.setdefault("jobs", [])
        jobs.append(job)
        while self._backlog > _BACKLOG:
            oldest = next((job for job in jobs if not job.done()), None)
            if oldest is None:
                break
            oldest.result()

    def _put_counted(self, name: str, data: bytes, base: str | None) -> None:
        try:
            self.put(name, data, base=base, durable=False)
        finally:
            with self._lock:
                self._backlog -= len(data)

    def settle(self) -> list[tuple[str, bytes]]:
        """Wait until every `put_soon` of this thread is written (threads share a Store:
        parallel attempts); the first that failed raises here (a full disk fails the
        snapshot, as a `put` would). Returns the (name, stored form) of those kept back, not
        written (with a journal): the caller keeps them in it, or `write_staged`s them."""
        pending: list[Future[None]] = self._mine.__dict__.pop("jobs", [])
        self._mine.__dict__.pop("count", None)
        staged: list[tuple[str, bytes]] = self._mine.__dict__.pop("staged", [])
        for job in pending:
            job.result()
        return staged

    def write_staged(self, staged: Iterable[tuple[str, bytes]]) -> list[Path]:
        """Write objects `put` kept back (not durable); their files."""
        written = []
        for name, form in staged:
            written.append(self.path_of(name))
            write_atomic(written[-1], form, durable=False)
        return written

    def _delta_form(self, digest: bytes, data: bytes, base: str) -> bytes | None:
        try:
            # Held first: every link of the base's chain is recent for `gc`'s grace, and
            # one gc freed meanwhile is not used (its bytes may still be in memory).
            depth = self._hold(base)
            if depth >= MAX_DEPTH:  # the chain is full: start again from its first object
                base = self._first(base)
                depth = 0
            old = self.read(base)
        except (OSError, ValueError):  # no usable base: stored whole
            return None
        ops = make_delta(old, data, limit=len(data) // _WORTH)
        if ops is None:
            return None
        packed = zlib.compress(ops, 9)
        if len(packed) * _WORTH > len(data):
            return None
        return MAGIC + _DELTA + digest + bytes([depth + 1]) + bytes.fromhex(base) + packed

    def _hold(self, name: str) -> int:
        """Touch object `name` and every link of its chain (mtime now), so that a gc that
        listed the store before this delta was made still sees each of them as recent
        when it comes to free it: a gc frees only what is older than its grace, and
        touching the base alone left the links under it to be freed. `name` itself is
        always touched (a base another process's gc freed is never used, even from memory);
        a link under it this process touched or wrote in the last `_HOLD_FOR` seconds (far
        less than gc's grace) is not touched again, so a chain of this session's versions
        costs one syscall. Returns `name`'s depth. Raises OSError when a link is gone,
        `Damaged` on a chain longer than MAX_DEPTH."""
        now = time.monotonic()
        top: int | None = None
        for _ in range(MAX_DEPTH + 1):
            with self._lock:
                held = self._held.get(name)
            stale = held is None or now - held[2] >= _HOLD_FOR
            if top is None or stale:
                self._touch(name)
            if held is None or stale:
                depth, below = self._link(name)
                self._note(name, depth, below, now)
            else:
                depth, below = held[0], held[1]
            top = depth if top is None else top
            if below is None:
                return top
            name = below
        raise Damaged(f"{self.what} {name}: its chain of deltas is longer than {MAX_DEPTH}: "
                      "refused")

    def _touch(self, name: str) -> None:
        """mtime now (`_hold`); an object kept in the journal has no file to touch and needs
        none: gc writes the journal out, fresh, before it frees anything."""
        if self.journal is None or not self.journal.has(self.letter, name):
            os.utime(self.path_of(name))

    def _note(self, name: str, depth: int, base: str | None, when: float) -> None:
        with self._lock:
            self._held[name] = (depth, base, when)
            self._held.move_to_end(name)
            if len(self._held) > _HELD:
                self._held.popitem(last=False)

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

    # ---- reading ------------------------------------------------------------------------

    def base_of(self, name: str) -> str | None:
        """The object `name`'s delta base (which must be kept while it is), or None."""
        return self._link(name)[1]

    def _link(self, name: str) -> tuple[int, str | None]:
        """(depth, base name) from `name`'s header: (0, None) when it is not a delta."""
        form = self.journal.get(self.letter, name) if self.journal is not None else None
        if form is not None:
            head = form[:_DELTA_HEAD]
        else:
            with open(self.path_of(name), "rb") as handle:
                head = handle.read(_DELTA_HEAD)
        if not head.startswith(MAGIC + _DELTA):
            return 0, None
        if len(head) < _DELTA_HEAD:
            raise Damaged(f"{self.what} {name}: its header is cut short: refused")
        return head[_HEAD], head[_HEAD + 1:].hex()

    def _first(self, name: str) -> str:
        """The whole object at the start of `name`'s chain."""
        for _ in range(MAX_DEPTH + 1):
            depth, base = self._link(name)
            if base is None:
                return name
            name = base
        raise Damaged(f"{self.what} {name}: its chain of deltas is longer than {MAX_DEPTH}: "
                      "refused")

    def read(self, name: str) -> bytes:
        """The bytes object `name` stands for, verified. FileNotFoundError when there is no
        such object; `Damaged` naming it (and the link of its chain at fault) when what is
        stored does not give bytes with the right hash."""
        cached = self._cached(name)
        if cached is not None:
            return cached
        try:
            # The bytes a chain gives are checked against the top's hash, which is what a
            # reader needs: the first object's own hash is not computed too (1.2 ms of a
            # 1 MB manifest's read).
            return self._read(name, careful=False)
        except Damaged:
            # Something is wrong: read again checking every link, to name the one at fault
            # (and to read an old raw blob that only looks like a compressed one).
            return self._read(name, careful=True)

    def sound(self, name: str) -> bool:
        """Whether object `name`'s loose file reads back whole and verified (not from memory
        nor from the journal: what the journal's `restart` asks before it writes one)."""
        try:
            self._read(name, careful=True, journal=False)
        except (OSError, ValueError):
            return False
        return True

    def exists(self, name: str) -> bool:
        """Whether the store holds object `name` (its file, or the journal)."""
        return (self.journal is not None and self.journal.has(self.letter, name)) or \
            self.path_of(name).exists()

    def _stored(self, name: str, journal: bool = True) -> bytes:
        """Object `name`'s stored form: the journal's (a checked record) first, else its file."""
        if journal and self.journal is not None:
            form = self.journal.get(self.letter, name)
            if form is not None:
                return form
        return self.path_of(name).read_bytes()

    def _read(self, name: str, *, careful: bool, journal: bool = True) -> bytes:
        # (`journal` False: its file only, no link of its chain from memory: `sound`.)
        chain: list[tuple[str, bytes, int, bytes]] = []  # (name, hash, depth, ops), top first
        current = name
        data: bytes
        while True:
            try:
                stored = self._stored(current, journal)
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
                hit = self._cached(current) if journal else None
                if hit is not None:
                    data = hit
                    break
                continue
            if chain and chain[-1][2] != 1:
                raise Damaged(self._where(name, chain, f"{current} is not a delta, but "
                                                      f"{chain[-1][0]} says depth "
                                                      f"{chain[-1][2]}"))
            data = self._whole(current, stored, name, chain, check=careful or not chain)
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
                raise Damaged(self._where(name, chain, self._culprit(name, chain)))
            if self.by_content and made.hex() != name:
                raise Damaged(self._where(name, chain, "its bytes do not hash to its name"))
        self._remember(name, data)
        return data

    def _whole(self, current: str, stored: bytes, name: str,
               chain: list[tuple[str, bytes, int, bytes]], *, check: bool = True) -> bytes:
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

    def _culprit(self, name: str, chain: list[tuple[str, bytes, int, bytes]]) -> str:
        """Which link of a chain that gave the wrong bytes is at fault (the slow path:
        every level is checked against its own hash)."""
        data = None
        for link, _, _, _ in reversed(chain):
            base = self._stored(link)[_HEAD + 1:_DELTA_HEAD].hex()
            if data is None:
                with contextlib.suppress(OSError, ValueError):
                    data = self._whole(base, self._stored(base), name, [])
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

    def _where(self, name: str, chain: list[tuple[str, bytes, int, bytes]], why: str) -> str:
        links = f" (a delta, {len(chain)} deep)" if chain else ""
        return f"{self.what} {name}{links} is damaged: {why}: refused"
