"""Where this machine's sessions live: files under MULLIGAN_HOME, or a PostgreSQL database.

`sessions_for(home, config, environ)` reads `MULLIGAN_STORE` (else `store` in config.toml):
unset or "file" -> `FileSessions(home)`, the default; a postgresql:// URL -> `DatabaseSessions`.
Both offer the same five things the commands need -- a new session, this folder's newest,
one named on the command line, a listing, and `folder_notice` -- and hand out `SessionLog`s,
so the Controller, the REPL and print mode never know which is behind them. A session *file*
named on the command line is always the file, whichever store is set.

A database session records its working folder per host (`mulligan_folders`). Opening it on a
host where it has a folder elsewhere is refused (`WrongFolder`, naming the folder); on a host
where it has none, the folder here is recorded and `folder_notice` says where it came from,
so a session is never silently carried on in the wrong folder.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mulligan.app.sessions.catalog import (
    SessionSummary,
    find_session_file,
    list_sessions,
    new_session_path,
    newest_session,
    session_folder,
)
from mulligan.session import SessionLog

if TYPE_CHECKING:
    from mulligan.session.postgres import Database


class WrongFolder(ValueError):
    """A database session opened from a folder that is not its folder on this host."""


def store_url(config: Mapping[str, Any], environ: Mapping[str, str]) -> str | None:
    """The database URL sessions go to, or None for files. ValueError for anything else."""
    value = environ.get("MULLIGAN_STORE") or config.get("store") or ""
    if not isinstance(value, str):
        raise ValueError("store in config.toml must be a string (a postgresql:// URL)")
    if value in ("", "file", "files"):
        return None
    if not value.startswith(("postgresql://", "postgres://")):
        raise ValueError(f"store {value!r}: set MULLIGAN_STORE (or store in config.toml) to a "
                         "postgresql:// URL, or to file")
    return value


def sessions_for(home: Path, config: Mapping[str, Any],
                 environ: Mapping[str, str] = os.environ) -> FileSessions | DatabaseSessions:
    url = store_url(config, environ)
    return DatabaseSessions(url, home) if url is not None else FileSessions(home)


class FileSessions:
    """Session files under MULLIGAN_HOME/sessions (see `mulligan.app.sessions.catalog`)."""

    database: Database | None = None

    def __init__(self, home: Path) -> None:
        self.home = Path(home)
        self.host = socket.gethostname()

    def new(self, cwd: Path) -> SessionLog:
        return SessionLog(new_session_path(self.home, cwd))

    def newest(self, cwd: Path) -> SessionLog | None:
        found = newest_session(self.home, cwd)
        return SessionLog(found) if found is not None else None

    def named(self, name: str, cwd: Path) -> SessionLog:
        """A path, or a file name (or its start) among this folder's sessions."""
        return SessionLog(find_session_file(name, self.home, cwd))

    def listing(self, cwd: Path | None) -> list[SessionSummary]:
        return list_sessions(self.home, cwd)

    def folder_notice(self, log: SessionLog, cwd: Path) -> str | None:
        return None

    def folder_of(self, log: SessionLog, entries: list[dict[str, Any]]) -> Path | None:
        """The working folder the session belongs to on this machine."""
        return session_folder(entries)


class DatabaseSessions:
    """Sessions in one PostgreSQL database (`mulligan.session.postgres.Database`)."""

    def __init__(self, url: str, home: Path) -> None:
        from mulligan.session.postgres import Database  # psycopg only when a database is used

        self.home = Path(home)
        self.database: Database = Database(url)
        self.host = socket.gethostname()

    def new(self, cwd: Path) -> SessionLog:
        from mulligan.session.postgres import new_session_id

        return self.database.log(new_session_id())

    def newest(self, cwd: Path) -> SessionLog | None:
        found = self.database.sessions(host=self.host, cwd=str(cwd))
        return self.database.log(found[0]["id"]) if found else None

    def named(self, name: str, cwd: Path) -> SessionLog:
        """A session file (a path to one), else a session id in the database, or the start
        of one when only one id starts so. FileNotFoundError naming what was asked."""
        given = Path(name).expanduser()
        if given.is_file():
            return SessionLog(given)
        found = [row["id"] for row in self.database.sessions(prefix=name)]
        if name in found:
            return self.database.log(name)
        if len(found) == 1:
            return self.database.log(found[0])
        if found:
            listed = "\n  ".join(found[:20])
            raise FileNotFoundError(f"{name!r} matches {len(found)} sessions in "
                                    f"{self.database.name}; give more of it:\n  {listed}")
        raise FileNotFoundError(f"no session {name} in {self.database.name} (and no such "
                                "file; mulligan sessions ls --all lists them)")

    def listing(self, cwd: Path | None) -> list[SessionSummary]:
        rows = self.database.sessions(host=self.host if cwd is not None else None,
                                      cwd=str(cwd) if cwd is not None else None)
        return [SessionSummary(
            path=None, session_id=row["id"], name=row["name"] or "",
            cwd=row["folders"].get(self.host) or row["cwd"] or "",
            entries=row["entries"], branches=0,
            last_activity=row["last_activity"].isoformat(timespec="milliseconds").replace(
                "+00:00", "Z"),
            first_message=" ".join(str(row["first_message"] or "").split()),
            hosts=", ".join(sorted(row["folders"])) or row["host"] or "")
            for row in rows]

    def folder_of(self, log: SessionLog, entries: list[dict[str, Any]]) -> Path | None:
        """The working folder the session belongs to on this machine: for a database
        session, the one recorded for this host (its first session_info names the folder
        of the machine it started on)."""
        session_id = getattr(log.storage, "session_id", None)
        mine = self.database.folder(session_id, self.host) if isinstance(session_id, str) \
            else None
        return Path(mine) if mine is not None else session_folder(entries)

    def folder_notice(self, log: SessionLog, cwd: Path) -> str | None:
        """For a database session: WrongFolder if this host has it in another folder; a
        notice (and the folder recorded) if this host has never had it; else None."""
        from mulligan.session.postgres import PostgresStorage

        storage = log.storage
        if not isinstance(storage, PostgresStorage) or not storage.exists():
            return None
        session_id = storage.session_id
        mine = self.database.folder(session_id, self.host)
        if mine is not None and Path(mine) != cwd:
            raise WrongFolder(f"session {session_id} works in {mine} on this machine "
                              f"({self.host}), not in {cwd}: run mulligan there (or pass "
                              f"--cwd {mine})")
        if mine is not None:
            return None
        rows = self.database.sessions(prefix=session_id)
        elsewhere: dict[str, str] = next(
            (row["folders"] for row in rows if row["id"] == session_id), {})
        self.database.record_folder(session_id, self.host, str(cwd))
        if not elsewhere:
            return None
        where = "; ".join(f"{folder} on {host}" for host, folder in sorted(elsewhere.items()))
        return (f"session {session_id} was worked on in {where}; on {self.host} it now works "
                f"in {cwd}")


def choose_session(
    sessions: FileSessions | DatabaseSessions, cwd: Path, *, no_session: bool = False,
    session: str | None = None, continue_: bool = False,
    pick: Callable[[list[SessionSummary]], str | None] | None = None,
) -> SessionLog | None:
    """The session a run will use (None for --no-session); it may not exist yet.

    `session`: that one (--session: a file path, made absolute; with a database store, a
    session id there when no such file exists). `continue_`: this folder's newest (-c),
    FileNotFoundError when it has none. `pick`: the frontend's picker (-r), handed this
    folder's sessions, returning the `where` of one; FileNotFoundError when it chooses none.
    Else a new session."""
    if no_session:
        return None
    if session:
        given = Path(session).expanduser().resolve()
        if given.is_dir():
            raise IsADirectoryError(f"--session {given}: is a folder, not a session file")
        if isinstance(sessions, DatabaseSessions) and not given.exists() and "/" not in session:
            return sessions.named(session, cwd)
        return SessionLog(given)
    if continue_:
        found = sessions.newest(cwd)
        if found is None:
            raise FileNotFoundError(f"no session to continue in {cwd} (mulligan sessions ls)")
        return found
    if pick is not None:
        picked = pick(sessions.listing(cwd))
        if picked is None:
            raise FileNotFoundError("no session chosen")
        return sessions.named(picked, cwd)
    return sessions.new(cwd)


def session_bytes(log: SessionLog) -> bytes:
    """The session's lines exactly as stored: the file's bytes, or the database's lines."""
    from mulligan.session.storage import FileStorage

    if isinstance(log.storage, FileStorage):
        return Path(log.path).read_bytes()
    from mulligan.session.postgres import PostgresStorage

    assert isinstance(log.storage, PostgresStorage)
    return log.storage.database.pull(log.storage.session_id)


def short_name(log: SessionLog) -> str:
    """A session's short name: its file's stem, or its database id."""
    session_id = getattr(log.storage, "session_id", None)
    return session_id if isinstance(session_id, str) else Path(log.path).stem
