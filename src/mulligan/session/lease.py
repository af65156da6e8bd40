"""One live writer per session file: a lease, held as a lock file next to the session.

``<session>.lease`` holds JSON ``{"pid", "started", "host"}``. It is created with
O_CREAT|O_EXCL, so of two processes racing for one session exactly one wins. A lease whose
process is gone (same host, pid no longer alive) is stale and is taken over; a live one is
refused with `LeaseHeld`, whose message names the process holding it. Releasing removes the
file only if it is still ours. This guards against two interactive writers interleaving
attempts in one file; it is not a security boundary.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mulligan.session.store import now_iso, private_dirs


class LeaseHeld(RuntimeError):
    """Another live process holds the lease on this session."""

    def __init__(self, session: Path, holder: dict[str, Any]) -> None:
        self.session, self.holder = session, holder
        super().__init__(
            f"{session} is in use by another mulligan (pid {holder.get('pid')} on "
            f"{holder.get('host')}, since {holder.get('started')}). Quit that one first, or "
            f"start a new session; if that process is gone, its lease is taken over "
            f"automatically.")


def lease_path(session: Path) -> Path:
    """The lock file that leases `session`."""
    return session.with_name(session.name + ".lease")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, it is just not ours
    return True


def read_holder(session: Path) -> dict[str, Any] | None:
    """The lease's contents, or None when there is no lease file (or it is unreadable)."""
    try:
        data = json.loads(lease_path(session).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def is_stale(holder: dict[str, Any] | None) -> bool:
    """True when the holder can no longer be writing: unreadable, or its process is gone on
    this host. A lease from another host is never judged stale from here."""
    if holder is None or not isinstance(holder.get("pid"), int):
        return True
    if holder.get("host") != socket.gethostname():
        return False
    return not _alive(holder["pid"])


@dataclass
class Lease:
    """A held lease. `release()` is idempotent and also runs at interpreter exit."""

    session: Path
    pid: int
    started: str
    released: bool = False

    def release(self) -> None:
        if self.released:
            return
        self.released = True
        holder = read_holder(self.session)
        if holder is not None and holder.get("pid") == self.pid \
                and holder.get("started") == self.started:
            with contextlib.suppress(FileNotFoundError):
                lease_path(self.session).unlink()

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def acquire(session: Path) -> Lease:
    """Take the lease on `session` for this process. A stale lease is taken over; a live one
    raises `LeaseHeld` and nothing is changed. Re-acquiring a lease this process already holds
    is refused too: one writer means one writer. The session's folder is created (0700) if
    needed; the session file itself is not."""
    session = Path(session)
    private_dirs(session.parent)
    lock = lease_path(session)
    pid, started = os.getpid(), now_iso()
    me = {"pid": pid, "started": started, "host": socket.gethostname()}
    for _ in range(3):  # a stale lease removed under us by a third process: try again
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            holder = read_holder(session)
            if not is_stale(holder):
                raise LeaseHeld(session, holder or {}) from None
            with contextlib.suppress(FileNotFoundError):
                lock.unlink()
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(me, f)
        lease = Lease(session, pid, started)
        atexit.register(lease.release)
        return lease
    raise LeaseHeld(session, read_holder(session) or {})
