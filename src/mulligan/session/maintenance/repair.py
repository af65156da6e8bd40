"""`repair(file)`: a torn last line moved, byte for byte, to a set-aside file and the session
truncated to its last complete line; everything else reported and left for a person."""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass, field

from mulligan.home import open_private
from mulligan.session.entries import timestamp
from mulligan.session.maintenance.check import _is_object, check
from mulligan.session.stores.storage import fsync_folder, write_all

_SHOW = 50  # problems listed by format(); the rest are counted


@dataclass
class RepairReport:
    """What repair() did: the torn fragment it set aside (if any), and what it left alone."""

    file: str
    moved_to: str | None = None  # the set-aside file holding the torn fragment
    completed: bool = False  # the last line was a whole entry missing only its newline
    fragment_bytes: int = 0
    kept_bytes: int = 0  # the size of the session after the repair
    problems: list[str] = field(default_factory=list)  # left for a person

    @property
    def ok(self) -> bool:
        """True when the session is sound after the repair."""
        return not self.problems

    def format(self) -> str:
        lines = []
        if self.completed:
            lines.append(f"{self.file}: the last line was a complete entry without its "
                         "newline (a hand edit, say); added the newline, nothing removed")
        elif self.moved_to is not None:
            lines.append(f"{self.file}: set aside a torn last line of {self.fragment_bytes} "
                         f"bytes in {self.moved_to}; the session now ends at byte "
                         f"{self.kept_bytes}, after its last complete line")
        else:
            lines.append(f"{self.file}: no torn last line; nothing changed")
        if self.problems:
            lines.append(f"left for a person ({len(self.problems)}):")
            lines += [f"  {problem}" for problem in self.problems[:_SHOW]]
            if len(self.problems) > _SHOW:
                lines.append(f"  ... and {len(self.problems) - _SHOW} more")
        else:
            lines.append("ok")
        return "\n".join(lines)




def repair(file: str | os.PathLike[str]) -> RepairReport:
    """End a last line that is a whole JSON object but lacks its newline (an append: the
    entry stays in the session). Otherwise set a torn last line aside: copy the fragment,
    byte for byte, to `<file>.torn-<UTC time>` next to the session (fsynced), then truncate
    the session to its last complete line. This is the one non-append change ever made to a
    session file, and it is safe: the bytes removed are a write that never finished, no
    reader could use them, and every append would be refused until they are gone; they are
    kept in the set-aside file, never deleted. Holds the session's exclusive lock while it works, so
    no writer interleaves. Any other damage is reported in `problems` and left as it is."""
    name = os.fspath(file)
    report = RepairReport(name)
    try:
        fd = os.open(name, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        report.problems.append(f"{name}: no such file")
        return report
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        keep = _after_last_newline(fd, size)
        report.kept_bytes = size
        if keep < size:
            fragment = os.pread(fd, size - keep, keep)
            if _is_object(fragment):
                # A whole entry that lacks only its newline: ending the line is an append,
                # and keeps the entry in the session.
                os.pwrite(fd, b"\n", size)
                report.completed, report.kept_bytes = True, size + 1
            else:
                report.moved_to = _set_aside(name, fragment)
                report.fragment_bytes = len(fragment)
                os.ftruncate(fd, keep)
                report.kept_bytes = keep
            os.fsync(fd)
    finally:
        os.close(fd)
    report.problems = check(name).problems
    return report


def _after_last_newline(fd: int, size: int) -> int:
    """The offset just after the last newline in the file (0 if there is none), reading
    backwards in blocks, so a torn tail of any size is found without reading the file."""
    end = size
    block = 1 << 16
    while end > 0:
        start = max(0, end - block)
        chunk = os.pread(fd, end - start, start)
        found = chunk.rfind(b"\n")
        if found >= 0:
            return start + found + 1
        end = start
    return 0


def _set_aside(name: str, fragment: bytes) -> str:
    """Write `fragment` to a new file next to the session and make it durable; never over an
    existing file (a counter is added if the name is taken)."""
    stamp = timestamp().replace(":", "").replace("-", "")
    base = f"{name}.torn-{stamp}"
    for attempt in range(1000):
        target = base if attempt == 0 else f"{base}.{attempt}"
        try:
            fd = open_private(target)
        except FileExistsError:
            continue
        try:
            write_all(fd, fragment)
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_folder(target)
        return target
    raise FileExistsError(f"{base}: too many set-aside files already")


