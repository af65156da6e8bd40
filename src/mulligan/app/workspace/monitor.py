"""What changed in the working folder since the last snapshot, and where: inotify names it, so
an unchanged folder costs no walk and a changed one only a look at the names the events gave
-- git's fsmonitor idea, for the snapshot store.

`Monitor.start(root)` opens an inotify instance (inotify_simple: a thin, maintained wrapper
over the three system calls; its `parse_events` reads the descriptor's bytes) or gives None
where there is none. The snapshot walk calls `watch(folder)` for every folder it is about to
read, *before* reading it, so a change after the read is an event naming the folder's watch
and the entry's name. `begin()` before a walk (or a look) hands over what the events named
since the last one began -- {folder relative to the root ("" the root): {names}} -- and
forgets it; what comes during it stays queued for the next (read only then: a system call
and an empty queue's exception less on every snapshot). The named set is None,
"walk everything", unless every event since the last walk began could be described as a name
in a folder the walk read: a queue overflow, a watch that could not be added (the system's
limit: then every snapshot walks), a watch that went away, a watched folder deleted or moved
(`DELETE_SELF`, `MOVE_SELF`) or unmounted, the root's own change (its mode), an event of a
watch the monitor did not add, more than `MAX_NAMES` names, or no walk yet, all say None.
A folder's own change (`ATTRIB`: its mode) is named in its parent. A directory created or
moved in is a name like any other: the look finds a folder it did not know and walks it,
watching it, as the full walk would. Nothing is missed that a walk would see, given the
events: a name in the set is looked at, a folder with none is not; a look that cannot tell
walks (`store.looks`). What inotify does not report -- a file changed through a shared mmap
without a write(), a change on a network filesystem made by another machine, a write through
a hard link whose other name lies outside the folder, a filesystem mounted inside it later --
is not seen by it; git's fsmonitor has the same limits. Restores never use it (they read
every path they touch). Reads make no event it asks for (no `ACCESS`, `OPEN`, `CLOSE_NOWRITE`;
an atime update is no `ATTRIB`), so the walk's own reads do not name anything.

`last`, `index`, `plain`: what the last walk or look watched recorded (the store's manifest,
the stat index that describes it, and whether every ignore file it read was a regular file --
a link's target can change with no event in the folder).
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

MAX_NAMES = 4096  # names between two snapshots past which a walk costs no more than looks
# inotify's own bits (inotify(7)); inotify_simple's `flags` has the same values.
_MODIFY, _ATTRIB, _CLOSE_WRITE, _MOVED_FROM, _MOVED_TO = 0x2, 0x4, 0x8, 0x40, 0x80
_CREATE, _DELETE, _DELETE_SELF, _MOVE_SELF = 0x100, 0x200, 0x400, 0x800
_UNMOUNT, _Q_OVERFLOW, _IGNORED = 0x2000, 0x4000, 0x8000
_ONLYDIR, _DONT_FOLLOW = 0x1000000, 0x2000000
_LOST = _DELETE_SELF | _MOVE_SELF | _UNMOUNT | _Q_OVERFLOW | _IGNORED  # no name describes it

Named = dict[str, set[str]]  # folder (relative, "" the root) -> names in it
_READ, _ROOM = 65536, 16 + 256  # bytes a read asks for; the largest event (NAME_MAX + 1)


class Monitor:
    """Changes under one folder, from inotify. Not thread-safe: one session's recorder."""

    def __init__(self, root: Path, notify: Any, mask: int, parse: Any) -> None:
        self.root = Path(root).resolve()
        self.last: object = None  # what the last walk it watched recorded (the store's)
        self.index: object = None  # the stat index that describes `last` (the store's)
        self.plain = False  # every ignore file that walk read was a regular file
        self._notify, self._mask, self._parse = notify, mask, parse
        self.top = str(self.root)  # as a string
        self._folders: dict[int, str] = {}  # watch descriptor -> folder, relative
        self._names: Named = {}
        self._count = 0
        self._lost = True  # nothing is known until a walk has begun
        self._broken = False
        weakref.finalize(self, notify.close)

    @classmethod
    def start(cls, root: Path) -> Monitor | None:
        try:  # imported here: ctypes and the library cost ~20 ms, paid at the first snapshot
            from inotify_simple import INotify, parse_events
        except (ImportError, OSError):  # pragma: no cover - no inotify on this system
            return None
        mask = _MODIFY | _ATTRIB | _CLOSE_WRITE | _MOVED_FROM | _MOVED_TO | _CREATE | \
            _DELETE | _DELETE_SELF | _MOVE_SELF | _DONT_FOLLOW | _ONLYDIR
        try:
            return cls(root, INotify(nonblocking=True), mask, parse_events)
        except (OSError, AttributeError):  # no instance left (max_user_instances), or no
            return None  # inotify on this system: the snapshots walk

    def changed(self) -> bool:
        """True unless nothing under the folder changed since the last walk began."""
        self._pending()
        return self._lost or self._broken or bool(self._names)

    def begin(self) -> Named | None:
        """A walk or a look starts: what the events named since the last one began (None:
        they cannot say, walk everything), handed over and forgotten -- what happens from
        now on is for the next. Every folder a walk reads is watched again (adding a watch
        that exists costs one system call and keeps it)."""
        self._pending()
        named = None if self._lost or self._broken else self._names
        self._names, self._count, self._lost = {}, 0, False
        return named

    def watch(self, folder: str) -> None:
        """Watch `folder` (an absolute path under the root) before the walk reads it."""
        if self._broken:
            return
        try:
            wd = self._notify.add_watch(folder, self._mask)
        except OSError:  # the watch limit, or the folder went away: a walk every time
            self._broken = True
            return
        top = self.top
        self._folders[wd] = "" if folder == top else folder[len(top) + 1:] \
            if folder.startswith(top + "/") else folder  # (not under it: named, then unknown)

    def close(self) -> None:
        self._notify.close()

    def _pending(self) -> None:
        """Read every queued event, and keep what it names (or that it cannot)."""
        chunks = []
        try:
            fd = self._notify.fileno()
            # Non-blocking, whole events a read; a read that left room for another event
            # took every event queued then (one system call, not a second that finds none).
            while chunk := os.read(fd, _READ):
                chunks.append(chunk)
                if len(chunk) <= _READ - _ROOM:
                    break
        except BlockingIOError:  # the queue is empty
            pass
        except (OSError, ValueError):  # closed, or the queue could not be read
            self._broken = True
        for chunk in chunks:
            self._note(chunk)

    def _note(self, data: bytes) -> None:
        folders, names = self._folders, self._names
        for wd, mask, _cookie, name in self._parse(data):
            folder = folders.get(wd)
            if mask & _LOST or folder is None:
                self._lost = True
                if mask & _IGNORED:  # the watch is gone: its number may be given again
                    folders.pop(wd, None)
                continue
            if not name:  # the folder itself (its mode): a name in its parent
                if not folder:
                    self._lost = True  # the root's own: whether it can be read at all
                    continue
                folder, _, name = folder.rpartition("/")
            known = names.get(folder)
            if known is None:
                known = names[folder] = set()
            if name not in known:  # (a name written again and again counts once)
                known.add(name)
                self._count += 1
                if self._count > MAX_NAMES:
                    self._lost = True


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
