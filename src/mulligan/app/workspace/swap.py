"""One path of the working folder, read or replaced crash-safely: what a restore
(`mulligan.app.workspace.restore`) does to each path it changes.

`probe` reads what a path holds now (a file's bytes kept in the store: the safety copy);
`readable` reads and checks every copy a restore will write before anything changes; `put`
and `remove` change one path in one rename each: the new content is written beside the
target (`TEMP_MARK` and this process's id) and swapped with it by `renameat2(RENAME_EXCHANGE)`
(a removal renames it aside), then what was swapped out is compared with what the plan saw
(content hash, kind, mode; a folder: and empty) and swapped back when it differs -- a write
that raced the restore stays. Where nothing was seen, RENAME_NOREPLACE: a file created
meanwhile stays. What was swapped out and checked is removed by `Discards`, on worker threads;
`sweep` removes what a killed restore left beside the files. Never: follow a link out of the
folder (`Unsafe`), replace what differs from what the plan saw, remove what was not checked.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import os
import stat
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from mulligan.app.workspace.store.reading import read_all
from mulligan.app.workspace.store.snapshots import TEMP_MARK, FileFacts, Store, Unsafe
from mulligan.session.stores.storage import write_all

__all__ = ["OTHER", "Discards", "probe", "put", "readable", "remove", "same", "sweep"]

OTHER: FileFacts = ("other", 0, 0, 0, "")  # a pipe, socket or device: never replaced


def probe(store: Store | None, path: Path | str, added: list[str] | None = None
          ) -> FileFacts | None:
    """What `path` holds now, read whatever ignore rules and size caps say; a file's
    content is kept in `store` (the safety copy; `added` gets the hash of a copy it did
    not have, written without a sync: the caller syncs before a manifest names it). None
    when nothing is there, `OTHER` for a pipe, socket or device."""
    try:
        info = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    mode = info.st_mode
    if stat.S_ISLNK(mode):
        return ("link", 0, 0, 0, os.readlink(path))
    if stat.S_ISDIR(mode):
        return ("dir", stat.S_IMODE(mode), 0, 0, "")
    if not stat.S_ISREG(mode):
        return OTHER
    data = read_all(path, info.st_size, follow=False)  # a link now: not followed (ELOOP)
    digest = hashlib.blake2b(data, digest_size=20).hexdigest()
    if store is not None and not store.has_blob(digest):
        store.keep(data, durable=False)
        if added is not None:
            added.append(digest)
    return ("file", stat.S_IMODE(mode), len(data), info.st_mtime_ns, digest)


def same(a: FileFacts | None, b: FileFacts | None) -> bool:
    """Whether two facts say the same kind, mode and content (mtime and size aside)."""
    if a is None or b is None:
        return a is b
    return (a[0], a[1], a[4]) == (b[0], b[1], b[4])


def readable(store: Store, wanted: Iterable[tuple[str, FileFacts | None]]) -> None:
    """Every blob a restore will write (`wanted`: path, facts) read and checked before
    anything changes: a missing or damaged copy refuses the whole restore by name
    (ValueError), nothing changed, rather than half of it done. (What was read stays in the
    store's memory of recent objects: the writes do not read small files twice.)"""
    for rel, want in wanted:
        if want is None or want[0] != "file":
            continue
        try:
            store.read_blob(want[4])
        except (FileNotFoundError, ValueError) as exc:
            why = exc.strerror if isinstance(exc, FileNotFoundError) and exc.strerror else exc
            raise ValueError(f"not restoring: the store's copy of {rel} cannot be read "
                             f"({why}); nothing was changed") from None


_NOREPLACE, _EXCHANGE = 1, 2
_BATCH = 8  # removals handed to a worker thread at once (`Discards`)
_T = TypeVar("_T")
_libc = ctypes.CDLL(None, use_errno=True)


def _rename2(source: str, target: str, flags: int) -> None:
    """renameat2(2): one atomic rename that refuses to replace (NOREPLACE) or swaps the two
    paths (EXCHANGE). OSError as the system says; EINVAL where the filesystem has neither."""
    if _libc.renameat2(-100, os.fsencode(source), -100, os.fsencode(target), flags) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(target))


def _inside(root: str, rel: str, known: set[str]) -> str:
    """`root`/`rel`, refusing a path whose folders are not real folders inside `root` (a
    link would carry the write outside). `known`: the folders this restore found so
    already (a realpath is a dozen syscalls; the restore itself never turns a folder into
    a link while it has paths to change inside it: those go first, deepest first)."""
    target = os.path.join(root, rel)
    parent = os.path.dirname(target)
    if parent in known:
        return target
    if os.path.realpath(parent) != parent or \
            not (parent == root or parent.startswith(root.rstrip("/") + "/")):
        raise Unsafe(f"{rel}: its folder is a link or lies outside {root}; not restored")
    known.add(parent)
    return target


def _temp(target: str) -> str:
    """The temporary name beside `target` (this process's), nothing there."""
    temp = _temp_name(target)
    _discard(temp)
    return temp


def _temp_name(target: str) -> str:
    folder, name = os.path.split(target)
    return os.path.join(folder, f".{name}{TEMP_MARK}{os.getpid()}")


def _made(temp: str, make: Callable[[], _T]) -> _T:
    """`make()`, which creates `temp` and fails when something is there already: what a
    killed restore of a process with this id left is removed first (not looked for before
    every creation: one lstat a path)."""
    try:
        return make()
    except FileExistsError:
        _discard(temp)
        return make()


def _discard(path: Path | str, kind: str | None = None) -> None:
    """Remove `path` (`kind` "dir" or another kind when known: no lstat to tell)."""
    try:
        if kind == "dir" or (kind is None and stat.S_ISDIR(os.lstat(path).st_mode)):
            os.rmdir(path)
        else:
            os.unlink(path)
    except FileNotFoundError:
        pass


def sweep(root: Path, temps: list[str]) -> None:
    """Remove what a killed restore left beside the files (its process is gone)."""
    for rel in temps:
        pid = rel.rpartition(TEMP_MARK)[2]
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                os.kill(int(pid), 0)
                continue  # a live restore's
            except ProcessLookupError:
                pass
            except PermissionError:
                continue
        with contextlib.suppress(OSError):  # a folder with something in it stays
            _discard(root / rel)


class Discards:
    """Removes, on worker threads, what `put` and `remove` swapped out once it was checked
    to be what the plan saw (a copy is in the store): on this kind of disk each unlink of a
    file that was on disk waits 0.2-3 ms for the filesystem's journal, one at a time, and
    the waits overlap the next paths' work and each other instead. They go to the threads
    `_BATCH` at a time (a hand-off per path cost as much as a quiet unlink, and woke a
    thread that then waited for the interpreter's lock). Every removal is done (or has
    failed, raised here) when the `with` block ends; a folder is compared only once the
    removals inside it are done (`settle`). A kill meanwhile leaves temporary names, which
    the next restore removes (`sweep`), as it did before."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="mulligan restore")
        self._jobs: list[Future[None]] = []
        self._batch: list[tuple[str, str]] = []
        self.folders: set[str] = set()  # found to be real folders inside the root (`_inside`)

    def __call__(self, path: str, kind: str) -> None:
        """Remove `path`, a `kind` ("dir": an empty folder) checked by the caller."""
        self._batch.append((path, kind))
        if len(self._batch) >= _BATCH:
            self._send()

    def _send(self, per: int = _BATCH) -> None:
        batch, self._batch = self._batch, []
        for at in range(0, len(batch), per):
            self._jobs.append(self._pool.submit(_discard_all, batch[at:at + per]))

    def settle(self) -> None:
        """Wait for every removal so far; the first that failed raises."""
        self._send(per=2)  # what is left, on every thread: this waits for it
        jobs, self._jobs = self._jobs, []
        for job in jobs:
            job.result()

    def __enter__(self) -> Discards:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.settle()
        finally:
            self._pool.shutdown(wait=True)


def _discard_all(batch: list[tuple[str, str]]) -> None:
    """`_discard` each; the first failure raises once all were tried."""
    failed: OSError | None = None
    for path, kind in batch:
        try:
            _discard(path, kind)
        except OSError as exc:
            failed = failed or exc
    if failed is not None:
        raise failed


def _matches(path: str, seen: FileFacts | None) -> bool:
    """Whether `path` holds what the plan saw (a folder: and nothing in it)."""
    now = probe(None, path)
    if now is None or seen is None or now[0] != "dir":
        return same(now, seen) if now is not OTHER else False
    return seen[0] == "dir" and not os.listdir(path)


def put(store: Store, root: Path, rel: str, want: FileFacts, seen: FileFacts | None,
        gone: Discards) -> bool:
    """Put `want` at `rel` where the plan saw `seen`; False (and the path as it is) when
    something else is there now. What was there goes to `gone` once checked."""
    target = _inside(str(root), rel, gone.folders)
    kind, mode, _, _, value = want
    if kind == "dir" and seen is not None and seen[0] == "dir":
        os.chmod(target, mode)  # only its mode differs
        return True
    if kind == "dir" and seen is None:
        try:
            os.mkdir(target, mode)
        except FileExistsError:
            return stat.S_ISDIR(os.lstat(target).st_mode)
        os.chmod(target, mode)
        return True
    if seen is not None and seen[0] == "dir":
        gone.settle()  # what was removed inside it is gone before it is swapped out
    temp = _temp_name(target)
    if kind == "dir":
        _made(temp, lambda: os.mkdir(temp, 0o700))
        os.chmod(temp, mode)
    elif kind == "link":
        _made(temp, lambda: os.symlink(value, temp))
    else:
        data = store.read_blob(value)
        fd = _made(temp, lambda: os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL |
                                         os.O_CLOEXEC | os.O_NOFOLLOW, 0o600))
        try:  # not fsynced, as git checkout: see the docstring
            write_all(fd, data)
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
    try:
        if seen is None:
            _rename2(temp, target, _NOREPLACE)
            return True
        _rename2(temp, target, _EXCHANGE)
    except OSError as exc:
        if exc.errno == errno.EINVAL and seen is not None and _matches(target, seen):
            os.replace(temp, target)  # no atomic swap on this filesystem: checked, then put
            return True
        _discard(temp)
        if exc.errno in (errno.EEXIST, errno.ENOENT, errno.EINVAL):
            return False  # created, or removed, while restoring: theirs stays
        raise
    if _matches(temp, seen):
        gone(temp, seen[0])  # what was there, as the plan saw it (the safety snapshot has it)
        return True
    _rename2(temp, target, _EXCHANGE)  # a write raced the restore: it goes back
    _discard(temp)
    return False


def remove(store: Store, root: Path, rel: str, seen: FileFacts | None,
           gone: Discards) -> bool:
    """Remove `rel`, which the plan saw holding `seen`; False when it holds something else.
    A file goes to `gone` once checked."""
    target = _inside(str(root), rel, gone.folders)
    if seen is None:
        return True
    if seen[0] == "dir":
        gone.settle()  # what was removed inside it is gone first
        try:
            os.rmdir(target)
        except FileNotFoundError:
            return True
        except OSError:  # something was put in it meanwhile: it stays
            return False
        return True
    aside = _temp(target)  # (a rename would replace what a killed run left: removed first)
    try:
        os.rename(target, aside)
    except FileNotFoundError:
        return True
    if _matches(aside, seen):
        gone(aside, seen[0])
        return True
    try:  # a write raced the restore: it goes back
        _rename2(aside, target, _NOREPLACE)
    except OSError:
        os.rename(aside, f"{target}.kept-by-mulligan")
    return False
