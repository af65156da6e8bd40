"""One live writer per session file: a lease, held as a lock file next to the session.

``<session>.lease`` holds JSON ``{"pid", "started", "host"}`` naming the holder, and the holder
keeps an exclusive ``flock`` on it for as long as it lives. The kernel drops that lock when the
process ends, however it ends (a crash, kill -9), so a lease whose process is gone is simply
free and the next `acquire` takes it over; there is no pid guessing and no race between two
processes taking over the same stale lease. A live lease is refused with `LeaseHeld`, whose
message names the process holding it. This keeps two interactive writers from interleaving
attempts in one file; it is not a security boundary.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mulligan.home import private_dirs
from mulligan.session.entries import timestamp

# How long acquire() looks again at a lease locked by no live process that it can name.
_GLANCE_WAIT = 0.5


class LeaseHeld(RuntimeError):
    """Another live process holds the lease on this session."""

    def __init__(self, session: Path | str, holder: dict[str, Any]) -> None:
        self.session, self.holder = session, holder
        who = (f"pid {holder.get('pid')} on {holder.get('host')}, since {holder.get('started')}"
               if holder.get("pid") else "a process that is starting up")
        super().__init__(
            f"{session} is in use by another mulligan ({who}). Quit that one first, or start a "
            f"new session; once that process is gone its lease is free and is taken over.")


def lease_path(session: Path) -> Path:
    """The lock file that leases `session`."""
    return session.with_name(session.name + ".lease")


def read_holder(session: Path) -> dict[str, Any] | None:
    """The lease file's contents, or None when there is none (or it is unreadable)."""
    try:
        data = json.loads(lease_path(session).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@dataclass
class Lease:
    """A held lease: the open, locked lease file. `release()` is idempotent and also runs at
    interpreter exit; the kernel releases it anyway if the process dies."""

    session: Path
    fd: int

    def release(self) -> None:
        if self.fd < 0:
            return
        fd, self.fd = self.fd, -1
        try:
            # Unlink while still holding the lock, and only if the path is still our file.
            mine, named = os.fstat(fd), os.stat(lease_path(self.session))
            if (mine.st_dev, mine.st_ino) == (named.st_dev, named.st_ino):
                lease_path(self.session).unlink()
        except FileNotFoundError:
            pass
        finally:
            os.close(fd)

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def acquire(session: Path) -> Lease:
    """Take the lease on `session` for this process: `LeaseHeld` if a live process (this one
    included: one writer means one writer) holds it, and nothing is changed then. A lease file
    left by a process that is gone is taken over. The session's folder is created (0700) if
    needed; the session file itself is not."""
    session = Path(session)
    private_dirs(session.parent)
    lock = lease_path(session)
    patience = time.monotonic() + _GLANCE_WAIT
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = read_holder(session) or {}
            if not alive(holder) and time.monotonic() < patience:
                # No live holder named: most likely `is_free` (sessions ls) glancing at a
                # stale lease with its shared lock for a moment. Look again shortly.
                time.sleep(0.02)
                continue
            raise LeaseHeld(session, holder) from None
        try:
            named = os.stat(lock)
        except FileNotFoundError:
            named = None
        mine = os.fstat(fd)
        if named is None or (named.st_dev, named.st_ino) != (mine.st_dev, mine.st_ino):
            os.close(fd)  # released and unlinked between our open and our lock: try again
            continue
        me = {"pid": os.getpid(), "started": timestamp(), "host": socket.gethostname()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(me).encode(), 0)
        lease = Lease(session, fd)
        atexit.register(lease.release)
        return lease


def alive(holder: dict[str, Any]) -> bool:
    """True if `holder` names a process that exists on this host (a hint, never a decision:
    the lock decides)."""
    pid = holder.get("pid")
    if type(pid) is not int or holder.get("host") != socket.gethostname():
        return type(pid) is int  # another host's pid cannot be checked from here
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_free(session: Path) -> bool:
    """True when nobody holds the lease on `session` right now (a check, not a reservation)."""
    try:
        fd = os.open(lease_path(session), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    return True
