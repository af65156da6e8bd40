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
from collections.abc import Iterable
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
    trees = {f.stem: f for f in folder.glob("*.json") if re.fullmatch("[0-9a-f]{40}", f.stem)} \
        if folder.is_dir() else {}
    kept = {t for t in trees if t in wanted or trees[t].stat().st_mtime > recent}
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
    blobs = {b.parent.name + b.name: b for b in folder.glob("*/*")} if folder.is_dir() else {}
    held = _with_bases(store.blobs, {d for d, b in blobs.items()
                                     if d in needed or b.stat().st_mtime > recent}, blobs)
    freed_trees = freed_blobs = freed_bytes = 0
    for tree_id, path in trees.items():
        if tree_id not in kept and path.stat().st_mtime <= recent:  # not a base just now
            freed_bytes += path.stat().st_size
            path.unlink()
            freed_trees += 1
    for digest, blob in blobs.items():
        if digest not in held and blob.stat().st_mtime <= recent:
            freed_bytes += blob.stat().st_size
            blob.unlink()
            freed_blobs += 1
    return freed_trees, freed_blobs, freed_bytes


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
