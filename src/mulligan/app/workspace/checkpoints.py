"""Workspace checkpoints: the working folder's state along a session's branches, and putting
it back without ever destroying a change the agent did not make.

Recording. A baseline snapshot is taken before the first message (on the session_info
entry); every call of a tool that can change files (`write`, `edit`, `bash`) gets a snapshot
before it runs and one after, and its toolResult entry carries, as metadata (never sent to
the model), ``"workspace": {"before", "after", "changed", "outside"}``: the two snapshot ids,
the paths the call changed, and the paths found changed by someone else since the session
last looked. The state the session expects the folder in at any entry is the last ``after``
on its path.

Who owns a path. Walking a path's entries, a path the agent changed is the agent's; a path
changed outside (the user, an editor, another process or session) is the user's until the
agent changes it again. A restore to entry X (`plan`) changes only the paths where X's state
differs from the expected one, and refuses (`RestoreRefused`, naming every such file) when
one of them was changed outside since the session last saw it, or holds a user's change the
session saw: it would be destroyed. `keep_mine` leaves those files as they are; `overwrite`
restores them anyway. Before the first file changes the current state is snapshotted (the
safety snapshot), so every restore can itself be undone; writes are atomic (temp + rename),
modes restored, links restored as links and never followed; nothing is deleted that the
store has no copy of. What is ignored, oversized, outside the folder, or done by a
background process after its command returned is not restorable; `Plan.not_restorable`
says so per path.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from glob import escape as glob_escape
from pathlib import Path
from typing import Any

from mulligan.app.workspace.monitor import Monitor
from mulligan.app.workspace.snapshots import (
    TEMP_MARK,
    Entry,
    Manifest,
    Store,
    Unsafe,
    changed_paths,
)

__all__ = ["FILE_TOOLS", "Checkpoints", "Plan", "RestoreRefused", "expected_tree", "owners",
           "apply", "plan"]

FILE_TOOLS = frozenset({"write", "edit", "bash"})  # the tools that can change files

SessionEntry = Mapping[str, Any]


class RestoreRefused(ValueError):
    """A restore would overwrite changes the agent did not make; nothing was changed."""

    def __init__(self, conflicts: list[tuple[str, str]]) -> None:
        self.conflicts = conflicts
        listed = "\n".join(f"  {path}: {why}" for path, why in conflicts)
        super().__init__(
            f"not restoring: {len(conflicts)} file(s) were changed outside the agent and "
            f"would be overwritten; nothing was changed:\n{listed}\n"
            "Keep them as they are with --keep-mine (/back: k), or restore anyway with "
            "--overwrite (a safety snapshot keeps them).")


def workspace_of(entry: SessionEntry) -> Mapping[str, Any]:
    found = entry.get("workspace")
    return found if isinstance(found, Mapping) else {}


def expected_tree(path: Sequence[SessionEntry]) -> str | None:
    """The snapshot the folder should match at the end of `path`: the last ``after``."""
    for entry in reversed(path):
        after = workspace_of(entry).get("after")
        if isinstance(after, str):
            return after
    return None


def owners(path: Sequence[SessionEntry]) -> dict[str, str]:
    """Who made each path's state at the end of `path`: "agent" or "outside" (paths never
    touched since the baseline are in neither)."""
    owner: dict[str, str] = {}
    for entry in path:
        meta = workspace_of(entry)
        for rel in meta.get("outside") or ():
            owner[rel] = "outside"
        for rel in meta.get("changed") or ():
            owner[rel] = "agent"
    return owner


@dataclass
class Plan:
    """What a restore to `target` would do, worked out against the folder as it is now."""

    target: Manifest
    current: Manifest  # the folder now; stored whole: the safety snapshot
    changes: list[str] = field(default_factory=list)  # paths to put back, in order
    conflicts: list[tuple[str, str]] = field(default_factory=list)
    not_restorable: list[tuple[str, str]] = field(default_factory=list)
    target_owners: dict[str, str] = field(default_factory=dict)


def plan(store: Store, root: Path, here: Sequence[SessionEntry],
         there: Sequence[SessionEntry]) -> Plan | None:
    """The restore from the end of path `here` (the branch the session is on) to the end of
    path `there` (the entry gone back, or forward, to); None when either has no checkpoint.
    Reads the folder (a snapshot), changes nothing in it."""
    expected_id, target_id = expected_tree(here), expected_tree(there)
    if expected_id is None or target_id is None:
        return None
    expected, target = store.load(expected_id), store.load(target_id)
    current = store.snapshot(root)
    result = Plan(target, current, target_owners=owners(there))
    mine = owners(here)
    for rel in changed_paths(expected.files, target.files):
        now = current.files.get(rel)
        if _same(now, target.files.get(rel)):
            continue  # already as wanted
        if not _same(now, expected.files.get(rel)):
            why = "deleted" if now is None else "changed"
            result.conflicts.append((rel, f"{why} outside the agent since the session last "
                                          "saw it"))
        elif mine.get(rel) == "outside":
            result.conflicts.append((rel, "holds a change made outside the agent, which going "
                                          "back would undo"))
        else:
            result.changes.append(rel)
    for rel, why in {**target.skipped, **current.skipped}.items():
        result.not_restorable.append((rel, why))
    return result


def _same(a: Entry | None, b: Entry | None) -> bool:
    if a is None or b is None:
        return a is b
    return (a[0], a[1], a[4]) == (b[0], b[1], b[4])


@dataclass
class Restored:
    restored: list[str]
    kept: list[str]  # conflicting files left as the user has them
    safety: str  # the snapshot taken before anything changed
    after: Manifest  # the folder once done


def apply(store: Store, root: Path, chosen: Plan, *, keep_mine: bool = False,
          overwrite: bool = False) -> Restored:
    """Do `chosen`: RestoreRefused (nothing changed) if it has conflicts and neither
    `keep_mine` nor `overwrite` says what to do with them. Deletions go deepest first,
    then creations shallowest first; each file is written to a temporary name beside it and
    renamed into place. A kill at any moment leaves every file as it was or as the target
    has it, and running the same restore again finishes the job."""
    if chosen.conflicts and not (keep_mine or overwrite):
        raise RestoreRefused(chosen.conflicts)
    root = Path(root).resolve()
    paths = list(chosen.changes)
    kept = [rel for rel, _ in chosen.conflicts]
    if overwrite:
        paths += kept
        kept = []
    wanted = chosen.target.files
    removals = sorted((p for p in paths if _needs_removal(root, p, wanted.get(p))),
                      key=lambda p: -p.count("/"))
    for rel in removals:
        _remove(root, rel)
    for rel in sorted((p for p in paths if p in wanted), key=lambda p: (p.count("/"), p)):
        _create(store, root, rel, wanted[rel])
    after = store.snapshot(root)
    return Restored(sorted(paths), sorted(kept), chosen.current.id, after)


def _needs_removal(root: Path, rel: str, wanted: Entry | None) -> bool:
    """Whether what is at `rel` must go first: nothing is wanted there, or a thing of
    another kind (a folder where a file was, a link where a folder was)."""
    try:
        info = (root / rel).lstat()
    except FileNotFoundError:
        return False
    kind = "link" if stat.S_ISLNK(info.st_mode) else "dir" if stat.S_ISDIR(info.st_mode) \
        else "file"
    return wanted is None or wanted[0] != kind or kind == "link"


def _inside(root: Path, rel: str) -> Path:
    """`root / rel`, refusing a path whose folders are not real folders inside `root` (a
    link would carry the write outside)."""
    target = root / rel
    parent = target.parent
    if os.path.realpath(parent) != str(parent) or not parent.is_relative_to(root):
        raise Unsafe(f"{rel}: its folder is a link or lies outside {root}; not restored")
    return target


def _remove(root: Path, rel: str) -> None:
    target = _inside(root, rel)
    info = target.lstat()
    if stat.S_ISDIR(info.st_mode):
        with contextlib.suppress(OSError):  # not empty: it holds files the restore keeps
            target.rmdir()
    else:
        target.unlink()


def _create(store: Store, root: Path, rel: str, entry: Entry) -> None:
    target = _inside(root, rel)
    kind, mode, _, _, value = entry
    if kind == "dir":
        if not target.is_dir():
            target.mkdir(mode=mode)
        os.chmod(target, mode)
        return
    for stale in target.parent.glob(f".{glob_escape(target.name)}{TEMP_MARK}*"):
        with contextlib.suppress(FileNotFoundError):  # left by a restore that was killed
            stale.unlink()
    temp = target.with_name(f".{target.name}{TEMP_MARK}{os.getpid()}")
    if kind == "link":
        os.symlink(value, temp)
    else:
        data = store.read_blob(value)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, mode)
    os.replace(temp, target)


class Checkpoints:
    """The recorder for one session in one folder: a Harness listener that snapshots before
    a file-changing tool runs, and `meta(message)`, which persist_to asks for the metadata
    of each message it appends (the snapshot after, for a tool result). Off (`enabled`
    False, `why_off` says why) for $HOME, / and a store that cannot be written."""

    def __init__(self, store: Store, root: Path) -> None:
        self.store, self.root = store, Path(root).resolve()
        self.enabled, self.why_off = True, ""
        # Changes to the folder, from inotify: an unchanged folder is not walked again.
        # Started at the first snapshot, not before the REPL's first prompt.
        self.monitor: Monitor | None = None
        self._monitoring = True
        self._last: str | None = None  # what the session last saw: the expected state
        self._seen: Manifest | None = None  # that snapshot, when this object took it
        self._before: tuple[str, Manifest, list[str]] | None = None  # (call id, tree, outside)

    def _take(self, reread: Iterable[str] = ()) -> Manifest | None:
        if not self.enabled:
            return None
        if self.monitor is None and self._monitoring:
            self.monitor = Monitor.start(self.root)
            self._monitoring = self.monitor is not None
        try:
            return self.store.snapshot(self.root, reread=reread, monitor=self.monitor)
        except (Unsafe, OSError) as exc:  # checkpoints stop; the session goes on, and says so
            self.enabled, self.why_off = False, str(exc)
            return None

    def close(self) -> None:
        """Stop watching the folder (the snapshots walk again). Idempotent."""
        self._monitoring = False
        if self.monitor is not None:
            self.monitor.close()
            self.monitor = None

    def baseline(self) -> dict[str, Any]:
        """The workspace metadata of the session's first entry."""
        taken = self._take()
        if taken is None:
            return {}
        self._last, self._seen = taken.id, taken
        return {"workspace": {"after": taken.id}}

    def follow(self, path: Sequence[SessionEntry]) -> None:
        """The session is now at the end of `path` (opened, resumed, gone back)."""
        self._last = expected_tree(path)

    def saw(self, tree_id: str) -> None:
        """The folder is known to be in snapshot `tree_id` (the files were kept on going
        back)."""
        self._last = tree_id

    def listener(self, event: Mapping[str, Any]) -> None:
        """Snapshot before a write, edit or bash call runs (listeners hear tool_execution_start
        before the tool is run)."""
        if event.get("type") != "tool_execution_start" or event.get("tool_name") not in \
                FILE_TOOLS:
            return
        arguments = event.get("arguments") or {}
        target = arguments.get("path") if isinstance(arguments, Mapping) else None
        reread = [_relative(self.root, target)] if isinstance(target, str) else []
        before = self._take([r for r in reread if r])
        if before is None:
            return
        outside: list[str] = []
        if self._last is not None and self._last != before.id:
            with contextlib.suppress(FileNotFoundError):
                last = self._seen if self._seen is not None and self._seen.id == self._last \
                    else self.store.load(self._last)  # read from disk only after a resume
                outside = changed_paths(last.files, before.files)
        self._before = (str(event.get("tool_call_id")), before, outside)

    def meta(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """The workspace metadata for `message`'s entry: for the result of a call snapshotted
        before it ran, the snapshot after and what changed; {} for anything else."""
        if message.get("role") != "toolResult" or self._before is None \
                or self._before[0] != message.get("tool_call_id"):
            return {}
        _, before, outside = self._before
        self._before = None
        after = self._take()
        if after is None:
            return {}
        self._last, self._seen = after.id, after
        return {"workspace": {"before": before.id, "after": after.id,
                              "changed": changed_paths(before.files, after.files),
                              "outside": outside}}

    def restored(self, done: Restored, target_owners: Mapping[str, str]) -> dict[str, Any]:
        """The workspace metadata of a workspace_restore entry, and the new expected state."""
        self._last, self._seen = done.after.id, done.after
        outside = sorted({p for p in done.restored if target_owners.get(p) == "outside"}
                         | set(done.kept))
        return {"workspace": {"after": done.after.id, "safety": done.safety,
                              "restored": done.restored, "kept": done.kept,
                              "changed": [p for p in done.restored if p not in outside],
                              "outside": outside}}


def _relative(root: Path, path: str) -> str:
    candidate = Path(path)
    full = candidate if candidate.is_absolute() else root / candidate
    try:
        return Path(os.path.normpath(full)).relative_to(root).as_posix()
    except ValueError:
        return ""
