"""Has anything changed in the working folder since the last snapshot? inotify says, so an
unchanged folder costs no walk -- git's fsmonitor idea, for the snapshot store.

`Monitor.start(root)` opens an inotify instance (inotify_simple: a thin, maintained wrapper
over the three system calls) or gives None where there is none. The snapshot walk calls
`watch(folder)` for every folder it is about to read, *before* reading it, so a change after
the read is an event; `begin()` before a walk forgets earlier events, `end()` after it keeps
any that came during the walk for the next question. `changed()` is True unless the
monitor has seen, with nothing lost, every change since the last walk ended: any event, a
queue overflow, a watch that could not be added (the system's limit), or no walk yet all
say True, and the caller walks. What inotify does not report -- a file changed through a
shared mmap without a write(), a change on a network filesystem made by another machine --
is not seen by it; git's fsmonitor has the same limits. Restores never use it (they walk).
`still(root, last, paths)`: the few paths a snapshot must read whatever the monitor says (a
write's target) are read and hashed, and checked against the last walk's manifest.
"""

from __future__ import annotations

import hashlib
import os
import stat
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mulligan.app.workspace.store.snapshots import Manifest


class Monitor:
    """Changes under one folder, from inotify. Not thread-safe: one session's recorder."""

    def __init__(self, root: Path, notify: Any, mask: int) -> None:
        self.root = Path(root).resolve()
        self.last: object = None  # what the last walk it watched recorded (the store's)
        self._notify, self._mask = notify, mask
        self._dirty = True  # nothing is known until a walk has ended
        self._broken = False
        weakref.finalize(self, notify.close)

    @classmethod
    def start(cls, root: Path) -> Monitor | None:
        try:  # imported here: ctypes and the library cost ~20 ms, paid at the first snapshot
            from inotify_simple import INotify, flags
        except (ImportError, OSError):  # pragma: no cover - no inotify on this system
            return None
        mask = (flags.MODIFY | flags.ATTRIB | flags.CLOSE_WRITE | flags.MOVED_FROM
                | flags.MOVED_TO | flags.CREATE | flags.DELETE | flags.DELETE_SELF
                | flags.MOVE_SELF | flags.DONT_FOLLOW | flags.ONLYDIR)
        try:
            return cls(root, INotify(nonblocking=True), mask)
        except (OSError, AttributeError):  # no instance left (max_user_instances), or no
            return None  # inotify on this system: the snapshots walk

    def changed(self) -> bool:
        """True unless nothing under the folder changed since the last walk ended."""
        if self._pending():
            self._dirty = True
        return self._dirty or self._broken

    def begin(self) -> None:
        """A walk starts: what happened before it, it sees. Every folder it reads is watched
        again (adding a watch that exists costs one system call and keeps it)."""
        self._pending()
        self._dirty = False

    def watch(self, folder: str) -> None:
        """Watch `folder` (an absolute path) before the walk reads it."""
        if self._broken:
            return
        try:
            self._notify.add_watch(folder, self._mask)
        except OSError:  # the watch limit, or the folder went away: a walk every time
            self._broken = True

    def end(self) -> None:
        """A walk ended: a change made while it read is for the next snapshot to see."""
        if self._pending():
            self._dirty = True

    def close(self) -> None:
        self._notify.close()

    def _pending(self) -> bool:
        """Read (and drop) every queued event; True if there was any (an overflow is one).
        The descriptor is read as bytes: only whether there were events matters, so none is
        parsed (three times a snapshot: inotify_simple's read is an ioctl, a read and a
        namedtuple per event)."""
        found = False
        try:
            while os.read(self._notify.fileno(), 65536):  # (non-blocking: whole events)
                found = True
        except BlockingIOError:  # the queue is empty
            return found
        except (OSError, ValueError):  # closed, or the queue could not be read
            self._broken = True
            return True
        return found


def still(root: Path, last: Manifest, forced: Iterable[str]) -> bool:
    """Whether each path in `forced` is now what `last` recorded, its content read and hashed
    (a write's target: its pre-image must be exact, whatever a stat says) -- the monitor saw
    no change since `last`'s walk, so the other paths need no look. False sends the caller
    to a walk (anything but a regular file, or a path `last` did not record as absent)."""
    for rel in forced:
        facts = last.files.get(rel)
        try:
            info = os.lstat(os.path.join(root, rel))
        except FileNotFoundError:
            if facts is None and last.state(rel) == "absent":
                continue
            return False
        except OSError:
            return False
        if facts is None or facts[0] != "file" or not stat.S_ISREG(info.st_mode) or \
                (stat.S_IMODE(info.st_mode), info.st_size, info.st_mtime_ns) != facts[1:4]:
            return False
        try:
            with open(os.path.join(root, rel), "rb") as handle:
                data = handle.read()
        except OSError:
            return False
        if hashlib.blake2b(data, digest_size=20).hexdigest() != facts[4]:
            return False
    return True
