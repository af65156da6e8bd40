"""How the snapshot store keeps an object on disk: compressed, or as a delta against the
previous version at the same path (the write path; `store.reading` has the forms and reads
them back, verified).

`Objects` is one folder of objects (blobs, or manifests). `put` stores an object as a delta
(`mulligan.app.workspace.store.delta`: computed in O(n) by lines, a one-line edit of a 1 MB
file costs tens of bytes) against the previous version at the same path when that is at most
an eighth of it, else compressed, else raw. A chain is at most `MAX_DEPTH` deltas long (git's
default); at that depth the next version is made against the chain's first, whole object
instead, so a file edited a thousand times is still one whole copy and small deltas, read in
at most MAX_DEPTH + 1 steps. Before a delta is made every link of its base's chain is made
recent for a running gc (`_hold`, the one walk of a chain's headers).

In: object names and bytes. Out: files written whole (temp file, rename), or the stored forms
handed back for the journal (`into`, `settle`). Never: write an object but whole, follow a
chain longer than MAX_DEPTH (a crafted loop), use a base another process's gc freed, or free
anything (`store.collect` asks `base_of`).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from mulligan.app.workspace.store.delta import make_delta
from mulligan.app.workspace.store.reading import (
    _DELTA,
    _DELTA_HEAD,
    _HEAD,
    _WHOLE,
    MAGIC,
    MAX_DEPTH,
    Damaged,
    Journaled,
    Reader,
    _hash,
)
from mulligan.home import open_private, private_dirs

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

__all__ = ["MAGIC", "MAX_DEPTH", "MIN_MANIFEST_DELTA", "Damaged", "Objects", "write_atomic"]

MIN_DELTA = 512  # bytes: a smaller object is only compressed
# bytes: a smaller manifest too -- a few dozen paths, compressed to a few hundred bytes: its
# delta saves ~200 bytes a snapshot (under ~1 KB, none: it is not 1/_WORTH of the whole,
# found only after it was made) for the base's chain held and read and a line match on the
# turn, on a path that runs with cold caches after every tool
MIN_MANIFEST_DELTA = 4096
_WORTH = 8  # a delta is kept when it is at most 1/_WORTH of the bytes it stands for
_BACKLOG = 64 << 20  # bytes `put_soon` may hold before it waits (`Objects.backlog`)
_INLINE = 16  # blobs `put_soon` writes itself before it hands them to the worker threads
_HOLD_FOR = 300.0  # seconds a link touched by `_hold` counts as recent here (gc's grace: 3600)
_HELD = 65536  # links whose (depth, base, touched) are remembered, at most


def _deflate(data: bytes) -> bytes:
    """`data` in zlib's format, by ISA-L's deflate at level 1 (python-isal, a dependency
    already: 3.5-5x less CPU than zlib's fastest level for the same size on source trees and
    site-packages; a first snapshot compresses every file). Read back by the stdlib's zlib."""
    from isal import isal_zlib

    return isal_zlib.compress(data, 1)


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


class Objects(Reader):
    """One folder of objects, written and read (`Reader`). `path_of(name)` is where object
    `name` (40 hex digits, checked by the caller) lives; `by_content`: names are the hash of
    the bytes (blobs), so a raw object is checked against its name. `what` names the objects
    in messages ("blob"). Thread-safe (the shared store's uploader reads while a snapshot
    writes)."""

    def __init__(self, path_of: Callable[[str], Path], *, by_content: bool, what: str,
                 min_delta: int = MIN_DELTA, backlog: int = _BACKLOG) -> None:
        super().__init__(path_of, by_content=by_content, what=what)
        self.min_delta = min_delta  # bytes: a smaller object is stored whole, compressed
        self.backlog = backlog  # bytes `put_soon` may hold before it waits
        self._pool: ThreadPoolExecutor | None = None
        self._mine = threading.local()  # .jobs: this thread's put_soon's, not yet settled
        self._backlog = 0  # bytes they hold
        # name -> (depth, base, when this process last touched it or wrote it): `_hold`
        self._held: OrderedDict[str, tuple[int, str | None, float]] = OrderedDict()

    def put(self, name: str, data: bytes, *, base: str | None = None,
            durable: bool = True, along: Sequence[Path] = (),
            into: list[tuple[str, bytes]] | None = None) -> None:
        """Store `data` as object `name`: as a delta against object `base` (the previous
        version at the same path) when that is much smaller, else compressed, else raw.
        `into`: no file is written; (name, stored form) is appended to it, for the caller to
        keep in the journal or write (`write_staged`)."""
        digest = bytes.fromhex(name) if self.by_content else _hash(data)
        form = None
        if base is not None and base != name and len(data) >= self.min_delta:
            form = self._delta_form(digest, data, base)
        if form is None and self.by_content and len(data) <= _HEAD + 8 and \
                not data.startswith(MAGIC):
            form = data  # zlib's output is 8 bytes at least: kept raw, as below, unpacked
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
        anything names them. At most `backlog` bytes wait: beyond, this waits for the oldest.
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
                # Imported with the first big snapshot, not on the REPL's way to its prompt.
                from concurrent.futures import ThreadPoolExecutor

                self._pool = ThreadPoolExecutor(max_workers=2,
                                                thread_name_prefix="mulligan blobs")
            job = self._pool.submit(self._put_counted, name, data, base)
            self._backlog += len(data)
        jobs: list[Future[None]] = mine.setdefault("jobs", [])
        jobs.append(job)
        # The jobs before `ended` have ended (a job that has stays so): each is asked once.
        # (Asking every job from the first each time made a big first snapshot quadratic:
        # site-packages, 20,886 files, 5.4M `done()` calls, half of its 38 s.)
        at = mine.get("ended", 0)
        while self._backlog > self.backlog and at < len(jobs):
            if jobs[at].done():
                at += 1
            else:
                jobs[at].result()  # the oldest still running (raises what it raised)
        mine["ended"] = at

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
        self._mine.__dict__.pop("ended", None)
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
            depth, first = self._hold(base)
            if depth >= MAX_DEPTH:  # the chain is full: start again from its first object
                base, depth = first, 0
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

    def _hold(self, name: str) -> tuple[int, str]:
        """Touch object `name` and every link of its chain (mtime now), so that a gc that
        listed the store before this delta was made still sees each of them as recent
        when it comes to free it: a gc frees only what is older than its grace, and
        touching the base alone left the links under it to be freed. `name` itself is
        always touched (a base another process's gc freed is never used, even from memory);
        a link under it this process touched or wrote in the last `_HOLD_FOR` seconds (far
        less than gc's grace) is not touched again, so a chain of this session's versions
        costs one syscall. The journal is looked in once, as the walk starts (one read of
        its header for every link, where there were two per link: the top is looked up
        first, as before). Returns `name`'s depth and the first, whole object of its chain
        (where a full chain starts again). Raises OSError when a link is gone, `Damaged` on
        a chain longer than MAX_DEPTH (a crafted loop)."""
        now = time.monotonic()
        journal = self._journal_view()
        top: int | None = None
        for _ in range(MAX_DEPTH + 1):
            with self._lock:
                held = self._held.get(name)
            stale = held is None or now - held[2] >= _HOLD_FOR
            if top is None or stale:
                self._touch(name, journal)
            if held is None or stale:
                depth, below = self._link(name, journal)
                self._note(name, depth, below, now)
            else:
                depth, below = held[0], held[1]
            top = depth if top is None else top
            if below is None:
                return top, name
            name = below
        raise Damaged(f"{self.what} {name}: its chain of deltas is longer than {MAX_DEPTH}: "
                      "refused")

    def _touch(self, name: str, journal: Journaled) -> None:
        """mtime now (`_hold`). An object kept in the journal or a pack may have no file to
        touch: if its record is younger than `_HOLD_FOR` (far within gc's grace) it needs
        none -- a gc writes it out dated then, and keeps it. An older one is written to its
        loose file now (not durable: the record is the durable copy), or its file touched:
        a gc in another process between this lookup and the new delta's record would
        otherwise write it out dated long ago and free it, leaving the delta without its
        base (the delta, in the journal, is not in gc's listing to keep it)."""
        found = journal.get((self.letter, name))
        if found is None:
            os.utime(self.path_of(name))
        elif found[0] < time.time_ns() - _HOLD_FOR * 1e9:
            try:
                os.utime(self.path_of(name))  # (spilled already: its file is there)
            except FileNotFoundError:
                write_atomic(self.path_of(name), found[1], durable=False)

    def _note(self, name: str, depth: int, base: str | None, when: float) -> None:
        with self._lock:
            self._held[name] = (depth, base, when)
            self._held.move_to_end(name)
            if len(self._held) > _HELD:
                self._held.popitem(last=False)
