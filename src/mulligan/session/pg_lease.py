"""The lease of a database session: a PostgreSQL advisory lock, held by a connection of its own.

One live writer per session, as the file's flock'd lease file gives: `pg_try_advisory_lock`
on the session's key, on a connection named "mulligan <pid>@<host>" so that a refusal
(`LeaseHeld`) names the holder. The server releases the lock when the process or that
connection dies, so a killed holder's session is simply free for the next one.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import socket
import time
from typing import Any

import psycopg

from mulligan.session.lease import LeaseHeld, alive
from mulligan.session.postgres import PostgresStorage, unavailable

_LEASE_WAIT = 2.0  # seconds a lease held by a dead process on this host is waited for


def lease_key(session_id: str) -> int:
    """The signed 64-bit advisory lock key of a session."""
    return int.from_bytes(hashlib.sha1(f"mulligan:{session_id}".encode()).digest()[:8], "big",
                          signed=True)


class AdvisoryLease:
    """The lease of a database session: `pg_try_advisory_lock` on a connection of its own,
    named "mulligan <pid>@<host>" so a refusal can name the holder. `release()` closes that
    connection (idempotent; also at exit); the server releases the lock by itself when the
    process or the connection dies. A lock whose holder names a dead process on this host is
    waited for a moment (its server backend is still ending)."""

    def __init__(self, storage: PostgresStorage) -> None:
        self.session = storage.name
        me = f"mulligan {os.getpid()}@{socket.gethostname()}"
        key = lease_key(storage.session_id)
        patience = time.monotonic() + _LEASE_WAIT
        while True:
            conn = storage.database.connect(application_name=me)
            with unavailable(storage.name):
                got = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
                holder = {} if got and got[0] else _holder(conn, key)
            if got and got[0]:
                break
            conn.close()
            if holder and not alive(holder) and time.monotonic() < patience:
                time.sleep(0.05)
                continue
            raise LeaseHeld(storage.name, holder)
        self._conn: psycopg.Connection[Any] | None = conn
        atexit.register(self.release)

    def release(self) -> None:
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
