"""Where Mulligan keeps its files (`MULLIGAN_HOME`, default ``~/.mulligan``), and the one way
it creates a private file there or anywhere.

Nothing here creates anything on import; callers create what they write into, when they write.
Every file Mulligan creates may hold what the tools read (source, secrets in it), so files are
0600 and the folders made for them 0700, whatever the umask.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import Mapping
from pathlib import Path


def mulligan_home(env: Mapping[str, str] | None = None) -> Path:
    """The Mulligan home folder: $MULLIGAN_HOME if set and non-empty, else ~/.mulligan."""
    env = os.environ if env is None else env
    configured = env.get("MULLIGAN_HOME", "").strip()
    return Path(configured).expanduser() if configured else Path.home() / ".mulligan"


def private_dirs(folder: str | os.PathLike[str]) -> None:
    """Create `folder` and any missing parents with mode 0700 (existing ones are left as
    they are)."""
    folder = Path(folder)
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for made in reversed(missing):
        made.mkdir(mode=0o700, exist_ok=True)


def open_private(path: str | os.PathLike[str], flags: int = os.O_WRONLY) -> int:
    """Create `path` exclusively with mode 0600 and return its open descriptor (`flags` adds
    the access mode, e.g. ``os.O_RDWR | os.O_APPEND``). FileExistsError if anything is already
    there, so nothing is ever written into or over an existing file by accident. The folder
    must exist (`private_dirs`)."""
    fd = os.open(path, flags | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    os.fchmod(fd, 0o600)  # the umask may have taken bits away; never added any
    return fd


def create_private(path: str | os.PathLike[str]) -> None:
    """Create `path` empty (0600, its folders 0700) if it does not exist yet; an existing file
    is left exactly as it is."""
    private_dirs(Path(path).parent)
    with contextlib.suppress(FileExistsError):
        os.close(open_private(path))


def folder_slug(cwd: Path) -> str:
    """A file name for the working folder `cwd`: its path with separators turned into dashes,
    then eight hex digits of a hash of the full path, e.g. ``work-main-1a2b3c4d``."""
    resolved = str(Path(cwd).resolve())
    readable = re.sub(r"[^A-Za-z0-9._]+", "-", resolved).strip("-")[-60:] or "root"
    digest = hashlib.sha1(resolved.encode()).hexdigest()[:8]
    return f"{readable}-{digest}"
