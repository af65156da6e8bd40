"""What each part of a session did to each file, and the three-way merge that takes the
agent's changes out of a file the user also edited, keeping the user's (as `git revert`
does), or brings an abandoned attempt's changes into it (as `git cherry-pick` does).

In: the entries of a part of a branch (`steps`), the snapshot store, and a file's content
now. Out: the merged content, or `Overlap` naming the file and the lines where the user's
edit and the agent's change touch the same lines (nothing is merged then). The merge is
`merge3`'s (the three-way merge Breezy uses, on lines), applied once per recorded change:
the part being left's changes are taken out newest first, then the changes of the part
gone to are put in oldest first. Never: merge a binary file, a link or a folder (refused by
name), or read anything but the store's blobs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import merge3

from mulligan.app.workspace.checkpoints import SessionEntry, workspace_of
from mulligan.app.workspace.store.snapshots import Manifest, Store

__all__ = ["Overlap", "Step", "merge_file", "steps"]

Step = tuple[str, str]  # (snapshot before, snapshot after) of one change the agent made


class Overlap(ValueError):
    """The user's edit and the agent's change cannot both be kept: nothing was merged."""


def steps(part: Sequence[SessionEntry]) -> dict[str, list[Step]]:
    """For each path the agent changed in `part` (tool calls, and restores that put files
    back; not the files kept as they were), its changes in order."""
    found: dict[str, list[Step]] = {}
    for entry in part:
        meta = workspace_of(entry)
        after = meta.get("after")
        if entry.get("type") == "workspace_restore":
            before, paths = meta.get("safety"), meta.get("restored") or []
        else:
            before, paths = meta.get("before"), meta.get("changed") or []
        if isinstance(before, str) and isinstance(after, str):
            for rel in paths:
                found.setdefault(str(rel), []).append((before, after))
    return found


def merge_file(store: Store, rel: str, now: bytes, take_out: list[Step],
               put_in: list[Step]) -> bytes:
    """`now` with the changes `take_out` taken out (newest first) and `put_in` put in
    (oldest first); Overlap naming `rel` when they touch lines the user changed."""
    loaded: dict[str, Manifest] = {}

    def content(tree_id: str) -> bytes:
        manifest = loaded.get(tree_id) or loaded.setdefault(tree_id, store.load(tree_id))
        facts = manifest.files.get(rel)
        if facts is None:
            if manifest.state(rel) != "absent":
                raise Overlap(f"{rel}: not recorded at snapshot {tree_id[:12]}; cannot merge")
            return b""
        if facts[0] != "file":
            raise Overlap(f"{rel}: a {facts[0]} at snapshot {tree_id[:12]}; cannot merge")
        return store.read_blob(facts[4])

    text = now
    for before, after in reversed(take_out):
        text = _merge(rel, base=content(after), mine=text, theirs=content(before))
    for before, after in put_in:
        text = _merge(rel, base=content(before), mine=text, theirs=content(after))
    return text


def _merge(rel: str, *, base: bytes, mine: bytes, theirs: bytes) -> bytes:
    if any(b"\0" in data[:8192] for data in (base, mine, theirs)):
        raise Overlap(f"{rel}: a binary file; cannot merge")
    base_lines, mine_lines = base.splitlines(True), mine.splitlines(True)
    theirs_lines = theirs.splitlines(True)
    out: list[bytes] = []
    regions: list[tuple[Any, ...]] = list(
        merge3.Merge3(base_lines, mine_lines, theirs_lines).merge_regions())
    for region in regions:
        kind = region[0]
        if kind == "unchanged":
            out += base_lines[region[1]:region[2]]
        elif kind in ("a", "same"):
            out += mine_lines[region[1]:region[2]]
        elif kind == "b":
            out += theirs_lines[region[1]:region[2]]
        else:  # ("conflict", base start, end, mine start, end, theirs start, end)
            first, last = region[3] + 1, max(region[4], region[3] + 1)
            raise Overlap(f"{rel}: your edit and the agent's change touch the same lines "
                          f"(lines {first}-{last} of yours); cannot merge")
    return b"".join(out)
