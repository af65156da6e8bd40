"""Workspace checkpoints: the working folder's state along a session's branches, and putting
it back without ever destroying a change the agent did not make.

Recording. Nothing is walked before the first model call: the first snapshot is the one
taken before the first call that can change files, and an entry before it stands for that
state (`state_at`). Every call of a tool that can change files (`write`, `edit`, `bash`)
gets a snapshot before it runs and one after, and its toolResult entry carries, as metadata
(never sent to the model), ``"workspace": {"before", "after", "changed", "outside"}``: the
two snapshot ids, the paths the call changed, and the paths found changed by someone else
since the session last looked. The state the session expects the folder in at any entry is
the last ``after`` on its path.

Who owns a path. Walking a path's entries, a path the agent changed is the agent's; a path
changed outside (the user, an editor, another process or session) is the user's until the
agent changes it again. A path that only became visible or invisible (an ignore rule
changed) was neither created nor deleted: it is not in ``changed``. Putting the folder back
is `mulligan.app.workspace.restore`'s.

The recorder never records Mulligan's own files: `attach(session_file)` excludes the session
file and its sidecars (and remembers it for `gc` when it lives outside the home).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the store and the monitor come with the first snapshot (`Checkpoints`)
    from mulligan.app.workspace.monitor import Monitor
    from mulligan.app.workspace.restore import Restored
    from mulligan.app.workspace.store.snapshots import Manifest, Store

__all__ = ["FILE_TOOLS", "Checkpoints", "RestoreRefused", "expected_tree", "owners",
           "state_at", "workspace_of"]

FILE_TOOLS = frozenset({"write", "edit", "bash"})  # the tools that can change files
_WARM = frozenset({"inotify_simple", "mulligan.app.workspace.store.snapshots"})  # `_warm`'s

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


def state_at(path: Sequence[SessionEntry], session: Iterable[SessionEntry]) -> str | None:
    """The snapshot the folder should match at the end of `path`: the last ``after`` on it,
    else -- no call on `path` changed files, and the first snapshot is taken lazily -- the
    first ``before`` in the `session`'s entries in file order (the folder before the agent
    first changed anything)."""
    found = expected_tree(path)
    if found is None:
        for entry in session:
            before = workspace_of(entry).get("before")
            if isinstance(before, str):
                return before
    return found


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


class Checkpoints:
    """The recorder for one session in one folder: a Harness listener that snapshots before
    a file-changing tool runs, and `meta(message)`, which persist_to asks for the metadata
    of each message it appends (the snapshot after, for a tool result). Off (`enabled`
    False, `why_off` says why) for $HOME, / and a store that cannot be written. `store` may
    be a function making it: it is then made when first needed (a snapshot, a diff, a
    restore), not on the REPL's way to its first prompt, and the session files attached
    before are excluded from it then."""

    def __init__(self, store: Store | Callable[[], Store], root: Path) -> None:
        self._store: Store | None = None if callable(store) else store
        self._make: Callable[[], Store] | None = store if callable(store) else None
        self._attached: list[Path] = []  # before the store was made
        self.root = Path(root).resolve()
        self.enabled, self.why_off = True, ""
        # Changes to the folder, from inotify: an unchanged folder is not walked again.
        # Started at the first snapshot, not before the REPL's first prompt.
        self.monitor: Monitor | None = None
        self._monitoring = True
        # What the first snapshot needs, made on a thread while the model thinks (`_warm`).
        self._warming: threading.Thread | None = None
        self._warmed: list[Monitor | None] = []
        self._last: str | None = None  # what the session last saw: the expected state
        self._seen: Manifest | None = None  # that snapshot, when this object took it
        self._before: tuple[str, Manifest, list[str]] | None = None  # (call id, tree, outside)

    @property
    def store(self) -> Store:
        if self._store is None:
            assert self._make is not None
            self._store = self._make()
            for session_file in self._attached:
                self._exclude(session_file)
        return self._store

    def _take(self, reread: Iterable[str] = ()) -> Manifest | None:
        if not self.enabled:
            return None
        if self.monitor is None and self._monitoring:
            from mulligan.app.workspace.monitor import Monitor

            self.monitor = self._warm_monitor() if self._warming is not None \
                else Monitor.start(self.root)
            self._monitoring = self.monitor is not None
        try:
            return self.store.snapshot(self.root, reread=reread, monitor=self.monitor)
        except (OSError, _unsafe()) as exc:  # checkpoints stop; the session goes on, and
            self.enabled, self.why_off = False, str(exc)  # says so
            return None

    def _warm(self) -> None:
        """A prompt starts: on a thread, while the model is asked, import what the first
        snapshot needs and open the inotify instance (in a new process 25-40 ms on this
        machine: the store's modules, ctypes and inotify_simple, whose first call looks for
        libc with a subprocess), so the first call that changes files does not wait for it.
        Once a recorder's life, and only in a process that has not imported them yet; nothing
        is watched or walked here (the first snapshot watches each folder before it reads
        it)."""
        if self._warming is not None or self.monitor is not None or not self._monitoring \
                or not self.enabled or _WARM.issubset(sys.modules):
            return  # (imported already -- a later recorder in this process -- the instance
            # is a system call: a thread would cost more than it hides, 1-1.5 ms measured)

        def warm() -> None:
            from mulligan.app.workspace.monitor import Monitor
            from mulligan.app.workspace.store import snapshots  # noqa: F401 (imported early)

            self._warmed.append(Monitor.start(self.root))

        self._warming = threading.Thread(target=warm, name="mulligan-checkpoints-warm",
                                         daemon=True)
        self._warming.start()

    def _warm_monitor(self) -> Monitor | None:
        """The monitor `_warm`'s thread opened (waited for: it may still be importing)."""
        assert self._warming is not None
        self._warming.join()
        return self._warmed.pop() if self._warmed else None

    def close(self) -> None:
        """Stop watching the folder (the snapshots walk again), and write the stat index the
        store kept in memory. Idempotent."""
        self._monitoring = False
        if self._warming is not None and self.monitor is None:  # opened, never used
            unused = self._warm_monitor()
            if unused is not None:
                unused.close()
        if self._store is None:  # never made: nothing to write
            return
        with contextlib.suppress(OSError):  # a cache: a home that cannot be written loses it
            self.store.flush()
        if self.monitor is not None:
            self.monitor.close()
            self.monitor = None

    def attach(self, session_file: str | os.PathLike[str]) -> None:
        """The session recorded is `session_file` (a path; a database session's name is
        ignored): it and its sidecars are never part of a snapshot or a restore."""
        if not os.path.isabs(session_file):
            return
        if self._store is None:
            self._attached.append(Path(session_file))
        else:
            self._exclude(Path(session_file))

    def _exclude(self, session_file: Path) -> None:
        with contextlib.suppress(OSError):  # a home that cannot be written: no memory
            self.store.exclude_session(session_file)

    def baseline(self) -> dict[str, Any]:
        """The workspace metadata of the session's first entry: none. Nothing is walked
        before the first model call (a 40k-file folder would make every run wait for it):
        the first snapshot is the before-snapshot of the first call that can change files,
        and that is the state an entry before it stands for (`state_at`)."""
        return {}

    def follow(self, path: Sequence[SessionEntry]) -> None:
        """The session is now at the end of `path` (opened, resumed, gone back)."""
        self._last = expected_tree(path)

    def saw(self, tree_id: str) -> None:
        """The folder is known to be in snapshot `tree_id` (the files were kept on going
        back)."""
        self._last = tree_id

    def listener(self, event: Mapping[str, Any]) -> None:
        """Snapshot before a write, edit or bash call runs (listeners hear tool_execution_start
        before the tool is run); ready the first snapshot as a prompt starts (`_warm`)."""
        kind = event.get("type")
        if kind == "agent_start":
            self._warm()
            return
        if kind != "tool_execution_start" or event.get("tool_name") not in FILE_TOOLS:
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
                outside = _changes(last, before)
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
                              "changed": _changes(before, after),
                              "outside": outside}}

    def restored(self, done: Restored, target_owners: Mapping[str, str]) -> dict[str, Any]:
        """The workspace metadata of a workspace_restore entry, and the new expected state."""
        self._last, self._seen = done.after.id, done.after
        outside = sorted({p for p in done.restored if target_owners.get(p) == "outside"}
                         | set(done.kept) | set(done.merged))  # a merge holds your edit
        meta = {"after": done.after.id, "safety": done.safety, "restored": done.restored,
                "kept": done.kept, "changed": [p for p in done.restored if p not in outside],
                "outside": outside}
        if done.merged:
            meta["merged"] = done.merged
        return {"workspace": meta}


def _unsafe() -> type[Exception]:
    """`snapshots.Unsafe`, imported only when a snapshot raised (an except clause's tuple is
    evaluated then): a turn's snapshots run no import statement."""
    from mulligan.app.workspace.store.snapshots import Unsafe

    return Unsafe


def _changes(before: Manifest, after: Manifest) -> list[str]:
    """What changed from `before` to `after`, leaving out paths that only became visible or
    invisible (ignored on either side): an ignore rule changed, nobody created them."""
    from mulligan.app.workspace.store.snapshots import changed_paths

    return [p for p in changed_paths(before.files, after.files)
            if before.state(p) != "ignored" and after.state(p) != "ignored"]


def _relative(root: Path, path: str) -> str:
    """`path` (absolute, or relative to `root`) relative to `root`, "/"-separated; "" when it
    is not under it. (Strings, not pathlib: this runs before every write.)"""
    top = str(root)
    full = os.path.normpath(os.path.join(top, path))
    if not full.startswith(top.rstrip(os.sep) + os.sep):
        return ""
    return full[len(top.rstrip(os.sep)) + 1:].replace(os.sep, "/")
