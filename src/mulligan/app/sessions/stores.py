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
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from mulligan.app.sessions.catalog import (
    SessionSummary,
    find_session_file,
    list_sessions,
    new_session_path,
    newest_session,
    session_folder,
)
from mulligan.session import SessionLog
from mulligan.session.entries import Entry

if TYPE_CHECKING:
    from mulligan.session.stores.postgres import Database


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


class Sessions(Protocol):
    """Where this machine's sessions live. Everything a caller needs is here, so no caller
    asks which store it has.

    `shared`: several machines use this store (a session records the host it was worked on);
    `name`: what names the store in messages; `host`: this machine. `new`, `newest`, `named`,
    `listing`: hand out `SessionLog`s and summaries (a session *file* named is always that
    file). `folder_notice(log, cwd)`: WrongFolder, or what to tell the user about a session
    carried on here from another machine, or None. `folder_of(log, entries)`: the session's
    working folder on this machine. `push(lines, cwd, name)` -> the new session's id, and
    `referenced()` -> the snapshot ids the store's sessions name (for gc): a store that cannot
    take pushes (`can_push` false) raises ValueError saying so."""

    home: Path
    host: str
    name: str
    shared: bool
    can_push: bool

    def new(self, cwd: Path) -> SessionLog: ...
    def newest(self, cwd: Path) -> SessionLog | None: ...
    def named(self, name: str, cwd: Path) -> SessionLog: ...
    def listing(self, cwd: Path | None) -> list[SessionSummary]: ...
    def folder_notice(self, log: SessionLog, cwd: Path) -> str | None: ...
    def folder_of(self, log: SessionLog, entries: Sequence[Entry]) -> Path | None: ...
    def push(self, lines: list[bytes], *, cwd: str | None, name: str | None) -> str: ...
    def referenced(self) -> set[str]: ...


def sessions_for(home: Path, config: Mapping[str, Any],
                 environ: Mapping[str, str] = os.environ) -> Sessions:
    url = store_url(config, environ)
    return DatabaseSessions(url, home) if url is not None else FileSessions(home)


class FileSessions:
    """Session files under MULLIGAN_HOME/sessions (see `mulligan.app.sessions.catalog`)."""

    shared = False
    can_push = False

    def __init__(self, home: Path) -> None:
        self.home = Path(home)
        self.host = os.uname().nodename  # gethostname(), without socket's import
        self.name = str(self.home / "sessions")

    def push(self, lines: list[bytes], *, cwd: str | None, name: str | None) -> str:
        raise ValueError("sessions push needs a database store: set MULLIGAN_STORE (or store "
                         "in config.toml) to a postgresql:// URL")

    def referenced(self) -> set[str]:
        from mulligan.app.sessions.catalog import referenced_snapshots

        return referenced_snapshots(self.home)

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

    def folder_of(self, log: SessionLog, entries: Sequence[Entry]) -> Path | None:
        """The working folder the session belongs to on this machine."""
        return session_folder(entries)


class DatabaseSessions:
    """Sessions in one PostgreSQL database (`mulligan.session.stores.postgres.Database`)."""

    shared = True
    can_push = True

    def __init__(self, url: str, home: Path) -> None:
        from mulligan.session.stores.postgres import (
            Database,  # psycopg only when a database is used
        )

        self.home = Path(home)
        self.database: Database = Database(url)
        self.host = os.uname().nodename  # gethostname(), without socket's import
        self.name = self.database.name

    def push(self, lines: list[bytes], *, cwd: str | None, name: str | None) -> str:
        return self.database.push(lines, cwd=cwd, name=name, host=self.host)

    def referenced(self) -> set[str]:
        """The snapshots this machine's session files name, and every database session's
        (an unreachable database raises: nothing may be freed then)."""
        from mulligan.app.sessions.catalog import referenced_snapshots, snapshot_ids

        return referenced_snapshots(self.home).union(
            *map(snapshot_ids, self.database.workspaces()))

    def new(self, cwd: Path) -> SessionLog:
        from mulligan.session.stores.postgres import new_session_id

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

    def folder_of(self, log: SessionLog, entries: Sequence[Entry]) -> Path | None:
        """The working folder the session belongs to on this machine: for a database
        session, the one recorded for this host (its first session_info names the folder
        of the machine it started on)."""
        mine = self.database.folder(log.storage.short, self.host) \
            if log.storage.file is None else None
        return Path(mine) if mine is not None else session_folder(entries)

    def folder_notice(self, log: SessionLog, cwd: Path) -> str | None:
        """For a database session: WrongFolder if this host has it in another folder; a
        notice (and the folder recorded) if this host has never had it; else None."""
        storage = log.storage
        if storage.file is not None or not storage.exists():
            return None
        session_id = storage.short
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
    sessions: Sessions, cwd: Path, *, no_session: bool = False,
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
        if sessions.shared and not given.exists() and "/" not in session:
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
    return log.storage.whole()


def short_name(log: SessionLog) -> str:
    """A session's short name: its file's stem, or its database id."""
    return log.storage.short
