"""Sessions in PostgreSQL: the same append-only lines, in a database many machines share.

`Database(url)` is one PostgreSQL database holding sessions; `database.log(id)` is a
`SessionLog` over one of them (`PostgresStorage`), with the file's API and refusals: the log
parses the same bytes the file would hold. The schema (created on first use, idempotently):

    mulligan_sessions  id, cwd, host, name, created, last_activity, entries   (the catalog)
    mulligan_entries   session, seq, id, parent_id, type, timestamp, entry jsonb, line bytea
                       primary key (session, seq), unique (session, id); INSERT only
    mulligan_folders   session, host, cwd        (the working folder of a session, per host)

`line` is the entry's exact JSON bytes (the record: `pull` writes them back byte for byte);
`entry` is the same as jsonb, for queries. A trigger refuses UPDATE, DELETE and TRUNCATE on
mulligan_entries, so the database keeps the append-only promise too. An append is one
transaction: lock the session's row (SELECT ... FOR UPDATE), read the lines after the ones
the log has, insert the next with id "e" + seq, update the catalog row, commit -- the id is
returned after the commit, with synchronous_commit as the server sets it. The lease is a
session-level advisory lock held by a connection of its own: the server drops it when the
process or its connection dies, as the kernel drops the file's flock (`pg_lease`).

psycopg is imported here, and this module is imported only when a database store is used:
the file store never loads it. A server that cannot be reached is `StoreUnavailable`, an
OSError naming the database (never the password).
"""

from __future__ import annotations

import contextlib
import queue
import secrets
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import errors as pg_errors

from mulligan.session.errors import DuplicateId, MissingLine
from mulligan.session.log import SessionLog
from mulligan.session.stores.pg_lease import HELD, AdvisoryLease, StoreUnavailable, unavailable
from mulligan.session.stores.pg_lease import first_line as _first_line

__all__ = ["Database", "PostgresStorage", "StoreUnavailable", "UnknownSession", "unavailable"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS mulligan_sessions (
    id text PRIMARY KEY,
    cwd text,
    host text,
    name text,
    created timestamptz NOT NULL DEFAULT now(),
    last_activity timestamptz NOT NULL DEFAULT now(),
    entries integer NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS mulligan_entries (
    session text NOT NULL REFERENCES mulligan_sessions (id),
    seq integer NOT NULL CHECK (seq > 0),
    id text NOT NULL,
    parent_id text,
    type text NOT NULL,
    timestamp text,
    entry jsonb NOT NULL,
    line bytea NOT NULL CHECK (position('\\x0a'::bytea IN line) = 0),
    inserted timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session, seq),
    UNIQUE (session, id)
);
-- Replay reads every line: kept in the row (MAIN), compressed with lz4 where the server has
-- it (measured: a third faster to read back than the default out-of-line pglz, and smaller).
ALTER TABLE mulligan_entries ALTER COLUMN line SET STORAGE MAIN;
DO $$ BEGIN
    ALTER TABLE mulligan_entries ALTER COLUMN line SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN NULL;
END $$;
CREATE TABLE IF NOT EXISTS mulligan_folders (
    session text NOT NULL REFERENCES mulligan_sessions (id),
    host text NOT NULL,
    cwd text NOT NULL,
    PRIMARY KEY (session, host)
);
CREATE OR REPLACE FUNCTION mulligan_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'mulligan_entries is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE OR REPLACE TRIGGER mulligan_entries_append_only
    BEFORE UPDATE OR DELETE ON mulligan_entries
    FOR EACH ROW EXECUTE FUNCTION mulligan_append_only();
CREATE OR REPLACE TRIGGER mulligan_entries_no_truncate
    BEFORE TRUNCATE ON mulligan_entries
    FOR EACH STATEMENT EXECUTE FUNCTION mulligan_append_only();
"""
_SCHEMA_LOCK = 0x6D756C6C  # "mull": one schema creator at a time


class UnknownSession(ValueError):
    """No session has that id in the database."""


def display(url: str) -> str:
    """`url` without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = (parts.username or "") + ":***"
    return urlunsplit(parts._replace(netloc=f"{user}@{netloc[-1]}"))


def new_session_id(now: datetime | None = None) -> str:
    """A fresh session id, shaped like a session file's name: 2026-12-01T10-00-00_a1b2c3."""
    now = now or datetime.now(UTC)
    return f"{now.strftime('%Y-%m-%dT%H-%M-%S')}_{secrets.token_hex(3)}"


class Database:
    """One PostgreSQL database of sessions, named by a postgresql:// URL. Thread-safe; holds
    no connection of its own (each log and each lease opens its own, lazily)."""

    _ready: set[str] = set()  # URLs whose schema this process has made sure of
    _ready_lock = threading.Lock()

    def __init__(self, url: str) -> None:
        if not url.startswith(("postgresql://", "postgres://")):
            raise ValueError(f"store {url!r}: a database store is a postgresql:// URL")
        self.url = url
        self.name = display(url)
        self._catalog: psycopg.Connection[Any] | None = None
        self._catalog_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Database({self.name!r})"

    def connect(self, *, application_name: str = "mulligan") -> psycopg.Connection[Any]:
        """An autocommit connection, the schema made sure of. StoreUnavailable if the server
        cannot be reached."""
        try:
            conn = psycopg.connect(self.url, autocommit=True,
                                   application_name=application_name[:63])
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(f"{self.name}: cannot connect: {_first_line(exc)}") from None
        if self.url not in Database._ready:
            with Database._ready_lock, unavailable(self.name), conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                conn.execute(SCHEMA)
                Database._ready.add(self.url)
        return conn

    def log(self, session_id: str) -> SessionLog:
        """The SessionLog of session `session_id` (created by its first append)."""
        return SessionLog(storage=PostgresStorage(self, session_id))

    def sessions(self, *, host: str | None = None, cwd: str | None = None,
                 prefix: str = "") -> list[dict[str, Any]]:
        """The catalog rows (id, cwd, host, name, created, last_activity, entries, folders:
        {host: cwd}, first_message: the first user message's text), most recent activity
        first; with `host` and `cwd`, only the sessions whose folder on that host is `cwd`;
        `prefix` keeps ids starting with it."""
        query = ("SELECT s.id, s.cwd, s.host, s.name, s.created, s.last_activity, s.entries, "
                 "coalesce((SELECT jsonb_object_agg(f.host, f.cwd) FROM mulligan_folders f "
                 "WHERE f.session = s.id), '{}'::jsonb), (SELECT e.entry->'message'->>'content' "
                 "FROM mulligan_entries e WHERE e.session = s.id AND e.type = 'message' AND "
                 "e.entry->'message'->>'role' = 'user' ORDER BY e.seq LIMIT 1) "
                 "FROM mulligan_sessions s WHERE s.entries > 0 AND s.id LIKE %s")
        params: list[Any] = [_like_prefix(prefix)]
        if host is not None and cwd is not None:
            query += (" AND EXISTS (SELECT 1 FROM mulligan_folders f WHERE f.session = s.id "
                      "AND f.host = %s AND f.cwd = %s)")
            params += [host, cwd]
        query += " ORDER BY s.last_activity DESC, s.id DESC"
        keys = ("id", "cwd", "host", "name", "created", "last_activity", "entries", "folders",
                "first_message")
        with self._query() as conn:
            return [dict(zip(keys, row, strict=True))
                    for row in conn.execute(query, params).fetchall()]

    def folder(self, session_id: str, host: str) -> str | None:
        """The working folder recorded for the session on `host`, or None."""
        with self._query() as conn:
            row = conn.execute("SELECT cwd FROM mulligan_folders WHERE session = %s AND "
                               "host = %s", (session_id, host)).fetchone()
        return row[0] if row else None

    def record_folder(self, session_id: str, host: str, cwd: str) -> None:
        """Record (or move) the session's working folder on `host`."""
        with self._query() as conn:
            conn.execute("INSERT INTO mulligan_folders (session, host, cwd) VALUES (%s, %s, %s) "
                         "ON CONFLICT (session, host) DO UPDATE SET cwd = EXCLUDED.cwd",
                         (session_id, host, cwd))

    def workspaces(self) -> list[Any]:
        """The workspace metadata of every entry of every session that has one (what the
        app's checkpoints recorded there; the file format does not look inside)."""
        with self._query() as conn:
            rows = conn.execute("SELECT DISTINCT entry->'workspace' FROM mulligan_entries "
                                "WHERE entry ? 'workspace'").fetchall()
        return [row[0] for row in rows]

    def push(self, lines: list[bytes], *, cwd: str | None, name: str | None,
             host: str) -> str:
        """Store already validated session lines (each without its newline) as a new
        session, in one transaction; returns its id. Nothing is stored if anything fails."""
        session_id = new_session_id()
        with self._query() as conn, conn.transaction():
            conn.execute("INSERT INTO mulligan_sessions (id, cwd, host, name, entries) VALUES "
                         "(%s, %s, %s, %s, %s)", (session_id, cwd, host, name, len(lines)))
            with conn.cursor().copy(
                    "COPY mulligan_entries (session, seq, id, parent_id, type, timestamp, "
                    "entry, line) FROM STDIN") as copy:
                for seq, line in enumerate(lines, 1):
                    parsed = _parse(line)
                    copy.write_row((session_id, seq, parsed.get("id"), parsed.get("parent_id"),
                                    parsed.get("type"), _text(parsed.get("timestamp")),
                                    _jsonb_text(line), line))
            if cwd is not None:
                conn.execute("INSERT INTO mulligan_folders (session, host, cwd) VALUES "
                             "(%s, %s, %s)", (session_id, host, cwd))
        return session_id

    def pull(self, session_id: str) -> bytes:
        """Every line of the session, newline-ended, exactly as stored. UnknownSession
        naming it when there is none."""
        with self._query() as conn:
            rows = conn.execute("SELECT line FROM mulligan_entries WHERE session = %s ORDER BY "
                                "seq", (session_id,), binary=True).fetchall()
        if not rows:
            raise UnknownSession(f"{self.name}: no session {session_id!r} (mulligan sessions "
                                 "ls --all lists them)")
        return b"".join(row[0] + b"\n" for row in rows)

    @contextmanager
    def _query(self) -> Iterator[psycopg.Connection[Any]]:
        """The catalog's connection, one per Database, opened on first use and again after it
        dropped; held by one caller at a time (any thread: the logs keep their own)."""
        with self._catalog_lock:
            if self._catalog is None or self._catalog.closed or self._catalog.broken:
                self._catalog = self.connect()
            with unavailable(self.name):
                yield self._catalog


class PostgresStorage:
    """The `Storage` of one database session (see `mulligan.session.stores.storage`). Its
    mark is the number of lines the log accepted; the lines after it are fetched as one bytea,
    newlines between. One connection per storage, opened on first use, reopened after it drops."""

    def __init__(self, database: Database, session_id: str) -> None:
        self.database = database
        self.session_id = session_id
        self.name = f"{database.name} session {session_id}"
        self.file: Path | None = None
        self.short = session_id
        self._conn: psycopg.Connection[Any] | None = None
        self._seq = 0
        self._exists = False
        self._lease: AdvisoryLease | None = None

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = self.database.connect()
        return self._conn

    def forget(self) -> None:
        self._seq = 0

    def whole(self) -> bytes:
        return self.database.pull(self.session_id)

    def exists(self) -> bool:
        """Once true, true for good (nothing is deleted). Asked on the catalog's connection,
        not the log's: it is asked from any thread (the REPL's), outside the log's lock,
        while the log's connection may be in an append's transaction."""
        if not self._exists:
            with self.database._query() as conn:
                self._exists = conn.execute(
                    "SELECT 1 FROM mulligan_sessions WHERE id = %s AND entries > 0",
                    (self.session_id,)).fetchone() is not None
        return self._exists

    def lease(self) -> AdvisoryLease:
        """The session's lease, kept: every later append through this storage first makes
        sure the lease still holds its lock (see `appending`)."""
        self._lease = AdvisoryLease(self.database.connect, self.session_id, self.name)
        return self._lease

    def fetch(self) -> tuple[bool, bytes | Iterator[bytes]]:
        with unavailable(self.name):
            return self._fetch(self._connection())

    def _fetch(self, conn: psycopg.Connection[Any]) -> tuple[bool, bytes | Iterator[bytes]]:
        # Rows in binary: bytea comes as the bytes themselves (text format would be hex).
        if self._seq == 0:  # a first read, likely big: stream it (see _stream)
            return False, _stream(conn, self.name, (self.session_id,))
        rows = conn.execute(_LINES_AFTER, (self.session_id, self._seq), binary=True).fetchall()
        if rows and rows[-1][0] != self._seq + len(rows):  # a gap: the lines up to it, then no
            return False, _up_to_gap(rows, self._seq + 1, self.name)
        return False, _joined(rows)

    def accept(self, data: bytes, used: int) -> None:
        self._seq += data.count(b"\n", 0, used)

    @contextmanager
    def appending(self, create: bool) -> Iterator[_PostgresWriter | None]:
        with unavailable(self.name):
            conn = self._connection()
            with conn.transaction():
                if create:
                    conn.execute("INSERT INTO mulligan_sessions (id, host) VALUES (%s, %s) "
                                 "ON CONFLICT (id) DO NOTHING",
                                 (self.session_id, socket.gethostname()))
                lease = self._lease
                held = lease.held_by() if lease is not None else None
                if held is None:
                    row = conn.execute("SELECT entries, true FROM mulligan_sessions WHERE "
                                       "id = %s FOR UPDATE", (self.session_id,)).fetchone()
                else:  # the lease's lock, asked for in the same round trip
                    row = conn.execute(f"SELECT entries, {HELD} FROM mulligan_sessions WHERE "
                                       "id = %s FOR UPDATE", (*held, self.session_id)
                                       ).fetchone()
                if row is not None and not row[1] and lease is not None:
                    # The lock went (a server restart, the lease's connection dropped) and
                    # another process may have taken it: write only once it is ours again.
                    lease.regain()
                yield None if row is None else _PostgresWriter(self, conn)


_LINES_AFTER = ("SELECT seq, line FROM mulligan_entries WHERE session = %s AND seq > %s "
                "ORDER BY seq")
_CHUNK = 1000  # rows a streamed read hands over at a time
_DONE = object()


def _joined(rows: list[Any]) -> bytes:
    """(seq, line) rows as the bytes of their lines, each newline-ended."""
    if not rows:
        return b""
    lines = [row[1] for row in rows]
    lines.append(b"")
    return b"\n".join(lines)


def _up_to_gap(rows: list[Any], seq: int, name: str) -> Iterator[bytes]:
    """The lines before the first gap in the (seq, line) rows, the first meant to be line
    `seq`; then MissingLine naming the line that is not there. A gap can only be made by
    hand (INSERT past the log): read on, every later line would be named by a wrong number."""
    for at, row in enumerate(rows):
        if row[0] != seq + at:
            yield _joined(rows[:at])
            raise MissingLine(f"the database has no line {seq + at}: the next line it holds "
                              f"is line {row[0]} (a line inserted by hand past the log)",
                              file=name, line=seq + at)
    yield _joined(rows)


def _stream(conn: psycopg.Connection[Any], name: str, params: tuple[str]) -> Iterator[bytes]:
    """The session's lines in chunks of _CHUNK rows, read by a server-side cursor on a thread
    of their own while the caller parses the chunk before: receiving and parsing overlap
    (measured on a 10k-entry session: fetch + parse 77 ms instead of 108 ms one after the
    other). The connection is used by that thread only until the stream ends or is closed;
    a failure there is raised here, as StoreUnavailable for a lost connection."""
    chunks: queue.Queue[Any] = queue.Queue(maxsize=4)
    stop = threading.Event()

    def produce() -> None:
        try:
            with conn.transaction(), conn.cursor(name="mulligan_replay", binary=True) as cur:
                cur.execute(_LINES_AFTER, (*params, 0))
                seq = 1
                while not stop.is_set():
                    rows = cur.fetchmany(_CHUNK)
                    if not rows:
                        break
                    if rows[-1][0] != seq + len(rows) - 1:
                        chunks.put(_up_to_gap(rows, seq, name))
                        break
                    chunks.put(_joined(rows))
                    seq += len(rows)
            chunks.put(_DONE)
        except BaseException as exc:  # handed to the reader, which raises it
            chunks.put(exc)

    reader = threading.Thread(target=produce, name="mulligan-replay", daemon=True)
    reader.start()
    try:
        while True:
            item = chunks.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                with unavailable(name):
                    raise item
            if isinstance(item, bytes):
                yield item
            else:  # the lines up to a gap, then the refusal: after the reader has stopped
                yield from item
    finally:
        stop.set()
        while reader.is_alive():  # let it finish its chunk and close the cursor
            with contextlib.suppress(queue.Empty):
                chunks.get(timeout=0.05)
        reader.join()


class _PostgresWriter:
    def __init__(self, storage: PostgresStorage, conn: psycopg.Connection[Any]) -> None:
        self._storage, self._conn = storage, conn

    def fetch(self) -> tuple[bool, bytes | Iterator[bytes]]:
        return self._storage._fetch(self._conn)

    def write(self, line: bytes, entry: dict[str, Any]) -> None:
        storage, conn = self._storage, self._conn
        seq, body = storage._seq + 1, line.rstrip(b"\n")
        try:
            with conn.transaction():  # a savepoint: a clash leaves the outer one usable
                conn.execute(
                    "INSERT INTO mulligan_entries (session, seq, id, parent_id, type, "
                    "timestamp, entry, line) VALUES (%s, %s, %s, %s, %s, %s, %s::jsonb, %s)",
                    (storage.session_id, seq, entry["id"], entry["parent_id"], entry["type"],
                     entry["timestamp"], _jsonb_text(body), body))
        except pg_errors.UniqueViolation:
            raise DuplicateId(f"the next line would take the id {entry['id']}, which the "
                              "session already has", file=storage.name, line=seq,
                              entry_id=entry["id"]) from None
        name = entry.get("name") if entry["type"] == "session_info" else None
        cwd = entry.get("cwd") if entry["type"] == "session_info" else None
        conn.execute("UPDATE mulligan_sessions SET entries = %s, last_activity = now(), "
                     "name = coalesce(%s, name), cwd = coalesce(cwd, %s) WHERE id = %s",
                     (seq, name if isinstance(name, str) else None,
                      cwd if isinstance(cwd, str) else None, storage.session_id))
        if isinstance(cwd, str):
            conn.execute("INSERT INTO mulligan_folders (session, host, cwd) VALUES "
                         "(%s, %s, %s) ON CONFLICT (session, host) DO UPDATE SET cwd = "
                         "EXCLUDED.cwd", (storage.session_id, _host_of(entry), cwd))


def _parse(line: bytes) -> dict[str, Any]:
    import orjson

    value = orjson.loads(line)
    return value if isinstance(value, dict) else {}


def _jsonb_text(line: bytes) -> str:
    """The line as text jsonb accepts: jsonb has no NUL character, so a \\u0000 escape is
    stored as U+FFFD there (the `line` column keeps the exact bytes)."""
    text = line.decode()
    return text.replace("\\u0000", "\\ufffd") if "\\u0000" in text else text


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _host_of(entry: dict[str, Any]) -> str:
    host = entry.get("host")
    return host if isinstance(host, str) and host else socket.gethostname()


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
