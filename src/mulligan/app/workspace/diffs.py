"""What the files went through between two snapshots, as a unified diff for a person; and
which two snapshots /diff compares.

In: the snapshot store and two snapshot ids. Out: plain text lines (``--- a/path``,
``+++ b/path``, ``@@``, ``+``/``-``/`` ``), made by difflib; a binary file, a link or a folder is
one line saying what happened to it. At most `cap` lines (the rest counted). Never changes
anything.
"""

from __future__ import annotations

import difflib

from mulligan.app.workspace.checkpoints import expected_tree, state_at, workspace_of
from mulligan.app.workspace.store.snapshots import FileFacts, Store, changed_paths
from mulligan.session import SessionLog
from mulligan.session.branches import children_of, message_of, subtree_ids

__all__ = ["diff_span", "snapshot_diff"]


def diff_span(log: SessionLog, entry_id: str | None) -> tuple[str | None, str | None]:
    """The (before, after) snapshot ids /diff compares: by default the last turn on the
    branch at the tip; for a tool call's result, that call; for any other entry, from just
    before it to the end of its attempt (the tip when it is on the tip's branch, else the
    newest entry below it). None where nothing was recorded."""
    here = log.branch(log.tip())
    if entry_id is None:
        users = [at for at, e in enumerate(here)
                 if (message_of(e) or {}).get("role") == "user"]
        if not users:
            return None, None
        turn = users[-1]
        return state_at(here[:turn], here), expected_tree(here)
    meta = workspace_of(log.entry(entry_id))
    if isinstance(meta.get("before"), str):
        return meta["before"], meta.get("after")
    on_here = any(e["id"] == entry_id for e in here)
    end = log.tip() if on_here else subtree_ids(children_of(log.entries()), entry_id)[-1]
    branch = log.branch(str(end))
    at = next(n for n, e in enumerate(branch) if e["id"] == entry_id)
    return state_at(branch[:at], branch), expected_tree(branch)


def snapshot_diff(store: Store, before_id: str, after_id: str, *, cap: int = 400) -> list[str]:
    """The diff from snapshot `before_id` to `after_id` ([] when nothing changed)."""
    before, after = store.load(before_id).files, store.load(after_id).files
    lines: list[str] = []
    for path in changed_paths(before, after):
        lines += _one(store, path, before.get(path), after.get(path))
    if len(lines) > cap:
        return [*lines[:cap], f"... {len(lines) - cap} more diff lines"]
    return lines


def _one(store: Store, path: str, old: FileFacts | None, new: FileFacts | None) -> list[str]:
    kinds = {e[0] for e in (old, new) if e is not None}
    if kinds != {"file"}:
        what = ("created" if old is None else "deleted" if new is None else
                f"{old[0]} -> {new[0]}" if old[0] != new[0] else "changed")
        target = f" -> {new[4]}" if new is not None and new[0] == "link" else ""
        return [f"{path}: {(new or old)[0]} {what}{target}"]  # type: ignore[index]
    if old is not None and new is not None and old[4] == new[4]:
        return [f"{path}: mode {old[1]:o} -> {new[1]:o}"]
    texts = []
    for entry in (old, new):
        data = store.read_blob(entry[4]) if entry is not None else b""
        if b"\0" in data[:8192]:
            what = "created" if old is None else "deleted" if new is None else "changed"
            return [f"{path}: binary file {what}"]
        texts.append(data.decode("utf-8", "replace").splitlines(keepends=True))
    return [line.rstrip("\n") for line in difflib.unified_diff(
        texts[0], texts[1], fromfile="/dev/null" if old is None else f"a/{path}",
        tofile="/dev/null" if new is None else f"b/{path}")]
