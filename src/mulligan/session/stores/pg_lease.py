"""The lease of a database session: a PostgreSQL advisory lock, held by a connection of its own.

One live writer per session, as the file's flock'd lease file gives: `pg_try_advisory_lock`
on the session's key, on a connection named "mulligan <pid>@<host>" so that a refusal
(`LeaseHeld`) names the holder. The server releases the lock when the process or that
connection dies, so a killed holder's session is simply free for the next one.

The lock can also go while its holder lives on: the server restarted, or the lease's
connection dropped. Another process may then take it, so a holder must not go on writing
on the strength of a lock it no longer has: every append of the storage that took the lease
asks, in the same statement that locks the session's row, whether the lock is still held by
this lease's backend (`HELD`), and if not takes it again (`regain`) or refuses with
`LeaseHeld` naming the new holder, writing nothing.

Also here, because the lease needs it as much as the store: `StoreUnavailable` and
`unavailable`, the one translation of a lost connection into an error naming the database.
This module imports nothing from `mulligan.session.stores.postgres`: the lease is given what it
needs (a way to connect, the session's id and name), not the storage.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from mulligan.session.stores.lease import LeaseHeld, alive

_LEASE_WAIT = 2.0  # seconds a lease held by a dead process on this host is waited for

# Whether the advisory lock of key (classid, objid) is held by backend pid: the condition
# an append adds to the statement that locks the session's row.
HELD = ("EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND "
        "objsubid = 1 AND pid = %s AND classid = %s::oid AND objid = %s::oid)")


class StoreUnavailable(OSError):
    """The database cannot be reached, or the connection dropped: names the database."""


@contextmanager
def unavailable(name: str) -> Iterator[None]:
    """Turn a lost or unusable connection into StoreUnavailable naming the database."""
    try:
        yield
    except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
        raise StoreUnavailable(f"{name}: the database connection failed: "
                               f"{first_line(exc)}") from None


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def lease_key(session_id: str) -> int:
    """The signed 64-bit advisory lock key of a session."""
    return int.from_bytes(hashlib.sha1(f"mulligan:{session_id}".encode()).digest()[:8], "big",
                          signed=True)


class AdvisoryLease:
    """The lease of a database session: `pg_try_advisory_lock` on a connection of its own,
    named "mulligan <pid>@<host>" so a refusal can name the holder. `release()` closes that
    connection (idempotent; also at exit); the server releases the lock by itself when the
    process or the connection dies. A lock whose holder names a dead process on this host is
    waited for a moment (its server backend is still ending).

    In: `connect(application_name=...)` giving an autocommit connection, the session's id,
    and `name` for messages. `held_by()` -> the parameters of `HELD` for this lease's backend
    (None once released); `regain()` takes the lock again after it was lost, or raises
    LeaseHeld naming who has it now. Never: two connections of this lease holding it."""

    def __init__(self, connect: Callable[..., psycopg.Connection[Any]], session_id: str,
                 name: str) -> None:
        self.session = name
        self._connect = connect
        self.key = lease_key(session_id)
        self._conn: psycopg.Connection[Any] | None = None
        self._released = False
        self._take()
        atexit.register(self.release)

    def _take(self) -> None:
        me = f"mulligan {os.getpid()}@{socket.gethostname()}"
        patience = time.monotonic() + _LEASE_WAIT
        while True:
            conn = self._connect(application_name=me)
            with unavailable(self.session):
                got = conn.execute("SELECT pg_try_advisory_lock(%s)", (self.key,)).fetchone()
                holder = {} if got and got[0] else _holder(conn, self.key)
            if got and got[0]:
                self._conn = conn
                return
            conn.close()
            if holder and not alive(holder) and time.monotonic() < patience:
                time.sleep(0.05)
                continue
            raise LeaseHeld(self.session, holder)

    def held_by(self) -> tuple[int, int, int] | None:
        """(backend pid, classid, objid): what `HELD` asks about -- pid 0, held by nobody,
        while a `regain` has not succeeded; None once released."""
        if self._released:
            return None
        conn = self._conn
        pid = conn.info.backend_pid if conn is not None and not conn.closed else 0
        unsigned = self.key & 0xFFFFFFFFFFFFFFFF
        return pid, unsigned >> 32, unsigned & 0xFFFFFFFF

    def regain(self) -> None:
        """The lock was found lost (a restart, a dropped connection): take it again on a new
        connection, or LeaseHeld naming the process that took it meanwhile (or
        StoreUnavailable); until it succeeds every append through this lease asks again."""
        old, self._conn = self._conn, None
        if old is not None:
            old.close()
        self._take()

    def release(self) -> None:
        self._released = True
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def __enter__(self) -> AdvisoryLease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _holder(conn: psycopg.Connection[Any], key: int) -> dict[str, Any]:
    """pid, host and start of the connection holding the advisory lock `key`."""
    unsigned = key & 0xFFFFFFFFFFFFFFFF
    row = conn.execute(
        "SELECT a.application_name, a.backend_start FROM pg_locks l JOIN pg_stat_activity a "
        "ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
        "AND l.classid = %s::oid AND l.objid = %s::oid",
        (unsigned >> 32, unsigned & 0xFFFFFFFF)).fetchone()
    if row is None:
        return {}
    who = str(row[0] or "")
    pid, _, host = who.removeprefix("mulligan ").partition("@")
    started = row[1].isoformat(timespec="seconds") if row[1] is not None else None
    return {"pid": int(pid) if pid.isdigit() else None, "host": host, "started": started}
