"""`Store.gc`'s freeing: what no kept snapshot needs goes, never a base a kept object needs,
never what was written within the grace period, never what the journal or a pack would bring
back.

In: a `Store`, the snapshot ids to keep, the grace in seconds. Out: (trees, blobs, bytes)
freed. Never: free an object a kept one is (through its chain) a delta of, or anything newer
than the grace (a running session may not have recorded its newest snapshot yet).
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mulligan.app.workspace.store.blobs import Objects
    from mulligan.app.workspace.store.snapshots import Store

__all__ = ["collect"]


def collect(store: Store, keep: Iterable[str], grace: float) -> tuple[int, int, int]:
    """`Store.gc`'s freeing: every manifest not in `keep` and every blob no kept manifest
    names, unless written in the last `grace` seconds or a base a kept blob needs. A kept
    manifest that is a delta of one freed is first written whole (a freed snapshot never
    stays alive, blobs and all, as another's base). Returns (trees, blobs, bytes) freed."""
    recent = time.time() - grace
    store.journal.restart()  # it and its packs on disk as files: nothing freed comes back
    wanted = set(keep)
    folder = store.root / "trees"  # the files (the journal is empty now)
    trees = _dated(folder.glob("*.json") if folder.is_dir() else (), lambda f: f.stem)
    trees = {t: found for t, found in trees.items() if re.fullmatch("[0-9a-f]{40}", t)}
    kept = {t for t, (_, mtime, _) in trees.items() if t in wanted or mtime > recent}
    for tree_id in sorted(kept):
        with contextlib.suppress(FileNotFoundError):
            base = store.manifests.base_of(tree_id)
            if base is not None and base not in kept:
                store.manifests.put(tree_id, store.manifests.read(tree_id))
    kept = _with_bases(store.manifests, kept, trees)  # none left, unless one raced this
    needed: set[str] = set()
    for tree_id in kept:
        needed.update(e[4] for e in store.load(tree_id).files.values() if e[0] == "file")
    folder = store.root / "blobs"
    blobs = _dated(folder.glob("*/*") if folder.is_dir() else (),
                   lambda b: b.parent.name + b.name)
    held = _with_bases(store.blobs, {d for d, (_, mtime, _) in blobs.items()
                                     if d in needed or mtime > recent}, blobs)
    freed_trees = freed_blobs = freed_bytes = 0
    for tree_id, (path, _, _) in trees.items():
        if tree_id not in kept and (size := _old(path, recent)) is not None:
            freed_bytes += size  # (not a base just now: dated again before it goes)
            freed_trees += 1
    for digest, (blob, _, _) in blobs.items():
        if digest not in held and (size := _old(blob, recent)) is not None:
            freed_bytes += size
            freed_blobs += 1
    return freed_trees, freed_blobs, freed_bytes


def _dated(paths: Iterable[Path], key: Callable[[Path], str]
           ) -> dict[str, tuple[Path, float, int]]:
    """key -> (path, mtime, size) of each of `paths` still there, its link not followed: a
    file gone since it was listed (a writer's temporary file renamed, another gc) is not
    one, and a link someone put in the store is dated as itself."""
    found: dict[str, tuple[Path, float, int]] = {}
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            info = path.lstat()
            found[key(path)] = (path, info.st_mtime, info.st_size)
    return found


def _old(path: Path, recent: float) -> int | None:
    """Remove `path` if it is still dated at or before `recent` (a snapshot may have made it
    a base since it was listed: then it is kept); its size when it was removed, else None."""
    try:
        info = path.lstat()
        if info.st_mtime > recent:
            return None
        path.unlink()
    except FileNotFoundError:  # gone meanwhile (another gc): not this one's to count
        return None
    return info.st_size


def _with_bases(objects: Objects, kept: set[str], present: Iterable[str]) -> set[str]:
    """`kept` and every object a kept one is (through its chain) a delta of. A base that is
    not in the store is left for the read to refuse by name."""
    there = set(present)
    result = set(kept)
    todo = list(kept)
    while todo:
        try:
            base = objects.base_of(todo.pop())
        except (FileNotFoundError, ValueError):
            continue
        if base is not None and base in there and base not in result:
            result.add(base)
            todo.append(base)
    return result
