"""The session catalog: where each session file lives, finding one again, and listing them.

Layout: ``MULLIGAN_HOME/sessions/<folder-slug>/<timestamp>_<short-id>.jsonl``. The folder slug is
the working folder's path made into one readable name plus a short hash (two folders never share
a slug). Session files are created (by the Controller, `mulligan.home.create_private`) with mode
0600 in folders of mode 0700: a transcript holds whatever the tools read. Nothing here writes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from mulligan.home import folder_slug
from mulligan.messages import content_text
from mulligan.session import SessionError, SessionLog
from mulligan.session.branches import message_leaves, message_of
from mulligan.session.entries import Entry
from mulligan.session.sidecar import USER_MESSAGE, Table

SUFFIX = ".jsonl"


def sessions_root(home: Path) -> Path:
    """The folder holding every folder's sessions."""
    return home / "sessions"


def folder_dir(home: Path, cwd: Path) -> Path:
    """Where the sessions of working folder `cwd` live (not created here)."""
    return sessions_root(home) / folder_slug(cwd)


def new_session_path(home: Path, cwd: Path, now: datetime | None = None) -> Path:
    """A fresh, unused file name for a new session of `cwd`: ``<timestamp>_<short-id>.jsonl``.
    The timestamp (UTC) comes first so that names sort oldest to newest. Nothing is created."""
    now = now or datetime.now(UTC)
    stamp = now.strftime("%Y-%m-%dT%H-%M-%S")
    # secrets.token_hex(3) is exactly this; its import (hmac, random) was on the REPL's way
    # to its first prompt.
    return folder_dir(home, cwd) / f"{stamp}_{os.urandom(3).hex()}{SUFFIX}"


@dataclass
class SessionSummary:
    """One line of `mulligan sessions ls`. `problem` is set (and the counts are 0) when the
    file could not be read as a session. A database session has no `path` but a `session_id`
    (and `hosts`, the machines it has a folder on); `where` is what names it either way."""

    path: Path | None
    name: str
    cwd: str
    entries: int
    branches: int
    last_activity: str
    first_message: str
    problem: str = ""
    origin: str = ""  # the session a fork or an export was copied from
    session_id: str = ""
    hosts: str = ""

    @property
    def where(self) -> str:
        return self.session_id or str(self.path)


def overview(path: Path) -> SessionSummary:
    """What a session file holds, read from the file: its name (the newest session_info
    naming one), working folder, entry count, branch count (attempts that end in a message
    nothing follows), last activity (the last entry's timestamp, else the file's mtime) and
    the first words of its first user message. A file that cannot be read is listed with
    `problem` naming why, never raised."""
    mtime = datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")  # as entries write it, to sort beside them
    try:
        log = SessionLog(path)
        table = log.table()
        attempts = table.attempts() if table is not None else None
        if table is not None and attempts is not None:
            return _from_table(path, log, table, attempts, mtime)
        entries = log.entries()
    except (SessionError, OSError, ValueError) as exc:
        return SessionSummary(path, "", "", 0, 0, mtime, "", problem=str(exc))
    name, cwd, first, origin = "", "", "", ""
    for entry in entries:
        if entry.get("type") == "session_info":
            name = str(entry.get("name") or "") or name
            cwd = cwd or str(entry.get("cwd") or "")
            origin = origin or str(entry.get("origin_file") or "")
        message = message_of(entry)
        if not first and message is not None and message.get("role") == "user":
            first = " ".join(content_text(message.get("content")).split())
    last = entries[-1].get("timestamp") if entries else None
    last = last if isinstance(last, str) else None  # a hand-edited file may hold anything
    return SessionSummary(path, name, cwd, len(entries), len(message_leaves(entries)),
                          last or mtime, first, origin=origin)


def _from_table(path: Path, log: SessionLog, table: Table, attempts: int,
                mtime: str) -> SessionSummary:
    """`overview` through the line table: the counts from it, and only the lines shown
    parsed (the session_info entries, the first user message, the last entry)."""
    name, cwd, origin = "", "", ""
    for entry in log.of_type("session_info"):
        name = str(entry.get("name") or "") or name
        cwd = cwd or str(entry.get("cwd") or "")
        origin = origin or str(entry.get("origin_file") or "")
    users = table.positions_of(USER_MESSAGE)
    message = message_of(log.entry(f"e{users[0] + 1}")) if users else None
    first = " ".join(content_text(message.get("content")).split()) if message is not None else ""
    last = log.entry(f"e{table.count}").get("timestamp")
    return SessionSummary(path, name, cwd, table.count, attempts,
                          last if isinstance(last, str) else mtime, first, origin=origin)


def session_files(home: Path, cwd: Path | None = None) -> list[Path]:
    """The session files of folder `cwd` (every folder when None), newest name first."""
    root = sessions_root(home)
    folders = [folder_dir(home, cwd)] if cwd is not None else (
        sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else [])
    files = [f for d in folders if d.is_dir() for f in d.glob(f"*{SUFFIX}")]
    return sorted(files, key=lambda f: f.name, reverse=True)


def list_sessions(home: Path, cwd: Path | None = None) -> list[SessionSummary]:
    """Summaries of the sessions of `cwd` (every folder when None), most recent activity
    first. Empty files (created, never written) are skipped."""
    found = [overview(f) for f in session_files(home, cwd) if f.stat().st_size > 0]
    return sorted(found, key=lambda s: (s.last_activity, s.where), reverse=True)


def newest_session(home: Path, cwd: Path) -> Path | None:
    """The session of `cwd` written to most recently (its file's mtime: every entry is an
    append), or None if it has none. Reads no file: `mulligan -c` starts as fast with a
    year of sessions as with one. A damaged one is not skipped: `mulligan -c` then refuses
    it by name, with the way to repair it, rather than carry on in an older conversation."""
    found = []
    for file in session_files(home, cwd):
        try:
            stat = file.stat()
        except FileNotFoundError:  # deleted since it was listed
            continue
        if stat.st_size > 0:  # created, never written: not a session yet
            found.append((stat.st_mtime_ns, file.name, file))
    return max(found)[2] if found else None


def find_session_file(name: str, home: Path, cwd: Path) -> Path:
    """A session named on the command line: a path, or a file name (or its start) among the
    sessions of `cwd`. FileNotFoundError naming it when there is none; when several match,
    the error lists them."""
    given = Path(name).expanduser()
    if given.is_file():
        return given
    folder = folder_dir(home, cwd)
    matches = sorted(folder.glob(f"{name}*")) if folder.is_dir() and "/" not in name else []
    matches = [m for m in matches if m.suffix == SUFFIX]
    if len(matches) == 1:
        return matches[0]
    if matches:
        listed = "\n  ".join(m.name for m in matches[:20])
        raise FileNotFoundError(f"{name!r} matches {len(matches)} sessions in {folder}; "
                                f"give more of the name:\n  {listed}")
    raise FileNotFoundError(f"no session file {name} (not a file, and no session of this "
                            f"folder starts with it; mulligan sessions ls lists them)")


def session_folder(entries: Sequence[Entry]) -> Path | None:
    """The working folder a session belongs to: the cwd of its first session_info."""
    for entry in entries:
        if entry.get("type") == "session_info" and isinstance(entry.get("cwd"), str):
            return Path(entry["cwd"])
    return None


def referenced_snapshots(home: Path) -> set[str]:
    """Every snapshot id any session file under `home` names in its entries' workspace
    metadata (see `snapshots_in`)."""
    return snapshots_in(session_files(home))


def snapshots_in(files: Iterable[Path]) -> set[str]:
    """Every snapshot id the session `files` name in their entries' workspace metadata.
    Lines are read one by one and a damaged line is passed over, never the file: a session
    that cannot be opened still keeps its snapshots; a file that is gone names none."""
    found: set[str] = set()
    for file in files:
        try:
            data = file.read_bytes()
        except OSError:
            continue
        for line in data.splitlines():
            if b'"workspace"' not in line:
                continue
            try:
                entry = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            found |= snapshot_ids(entry.get("workspace") if isinstance(entry, dict) else None)
    return found


def snapshot_ids(meta: Any) -> set[str]:
    """The snapshot ids one entry's workspace metadata names (before, after, safety)."""
    if not isinstance(meta, dict):
        return set()
    return {v for k, v in meta.items() if k in ("before", "after", "safety")
            and isinstance(v, str)}
