"""Attempt folders: a private working folder per attempt, made from a snapshot in the store.

In: the snapshot store, a tree id (the working folder as it was when the attempts started),
and where the folder goes (`folder_for`: ``$MULLIGAN_HOME/attempts/<group>/<k>``). Out: a
folder holding exactly the snapshot's files, folders and links, modes kept. Every file is a
copy of its own, written from the store's blob (read and checked: blobs are compressed or
deltas): nothing in an attempt folder shares an inode or a block with the store or with the
user's folder, so what an attempt writes changes nothing anywhere else. Ignored paths the
project needs (a virtual environment, node_modules: `share`) are symlinks to the user's
folder, listed in the folder's ``.git/info/exclude`` so no snapshot records them.
Never: write outside the folder it makes, follow a link, or make a folder that exists.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mulligan.app.workspace.store.snapshots import Store
from mulligan.home import private_dirs

__all__ = ["SHARED", "attempts_root", "folder_for", "gc_folders", "make_folder",
           "remove_group"]

# Ignored folders an attempt reaches in the user's folder (by a link), unless config.toml's
# [attempts] share says otherwise.
SHARED = (".venv", "venv", "node_modules")


def attempts_root(home: Path) -> Path:
    return Path(home) / "attempts"


def folder_for(home: Path, group: str, index: int) -> Path:
    return attempts_root(home) / group / str(index)


def make_folder(store: Store, tree_id: str, target: Path, *, source: Path | None = None,
                share: Iterable[str] = SHARED, workers: int = 4) -> Path:
    """Make `target` (it must not exist) holding snapshot `tree_id`; link the `share` paths
    that exist in `source` (the user's folder) and are not in the snapshot. Returns target."""
    manifest = store.load(tree_id)
    private_dirs(target.parent)
    target.mkdir(mode=0o700)
    files: list[tuple[str, int, str]] = []
    for rel, (kind, mode, _size, _mtime, value) in manifest.files.items():
        path = target / rel
        if kind == "dir":
            path.mkdir(mode=0o700, exist_ok=True)
        elif kind == "link":
            path.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(value, path)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            files.append((rel, mode, value))
    # zlib, the hash and the writes let go of the GIL: a few threads keep the disk busy
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for _ in pool.map(lambda item: _copy(store, item[2], target / item[0], item[1]),
                          files, chunksize=64):
            pass
    for rel, (kind, mode, *_rest) in manifest.files.items():
        if kind == "dir":
            os.chmod(target / rel, mode)
    if source is not None:
        _share(Path(source), target, [s for s in share if s not in manifest.files])
    return target


def _copy(store: Store, digest: str, target: Path, mode: int) -> None:
    """Write blob `digest` (read verified: it may be compressed or a delta) to `target`."""
    data = store.read_blob(digest)
    dst = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(dst, "wb", closefd=False) as out:
            out.write(data)
        os.fchmod(dst, mode)
    finally:
        os.close(dst)


def _share(source: Path, target: Path, names: list[str]) -> None:
    linked = []
    for name in names:
        there = source / name
        if "/" in name or name in ("", ".", "..", ".git") or not there.exists():
            continue
        os.symlink(there, target / name)
        linked.append(name)
    if linked:  # the walk skips .git folders and reads .git/info/exclude: never recorded
        info = target / ".git" / "info"
        info.mkdir(parents=True, exist_ok=True)
        (info / "exclude").write_text("".join(f"/{n}\n" for n in linked), encoding="utf-8")


def remove_group(home: Path, group: str) -> None:
    """Remove every folder of one attempt group (their final trees are snapshots)."""
    if not group or "/" in group or group in (".", ".."):
        return
    _remove(attempts_root(home) / group)


def gc_folders(home: Path, *, keep: Iterable[str] = (), grace: float = 86400.0) -> int:
    """Remove attempt groups not in `keep` whose folders are older than `grace` seconds (a
    group still running is younger). Returns how many groups were removed."""
    root = attempts_root(home)
    if not root.is_dir():
        return 0
    kept, removed = set(keep), 0
    recent = time.time() - grace
    for group in root.iterdir():
        if group.name in kept or group.stat().st_mtime > recent:
            continue
        _remove(group)
        removed += 1
    return removed


def _remove(folder: Path) -> None:
    if not folder.is_dir() or folder.is_symlink():
        return
    # a folder the attempt made read-only would stop the removal: make each one writable
    # (os.walk follows no link, so nothing outside is touched)
    for dirpath, _dirs, _files in os.walk(folder):
        with contextlib.suppress(OSError):
            os.chmod(dirpath, stat.S_IRWXU)
    shutil.rmtree(folder, ignore_errors=True)
