"""A throwaway PostgreSQL server for tests and benchmarks: Debian's server binaries, really run.

`binaries()` finds initdb and pg_ctl (on PATH, else /usr/lib/postgresql/<newest>/bin).
`Server.start()` runs initdb in a fresh temp folder and starts the server on a free loopback
port with the defaults a real install has (fsync and synchronous_commit on); as root it runs
both as the `postgres` user (PostgreSQL refuses to run as root). `stop()` stops it and removes
the folder. `problem()` says why no server can be started here, or None.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any


def binaries() -> Path | None:
    initdb = shutil.which("initdb")
    if initdb and shutil.which("pg_ctl"):
        return Path(initdb).parent
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parent.parent.name)
                   if Path(p).parent.parent.name.isdigit() else 0)
    return Path(found[-1]).parent if found else None


def problem() -> str | None:
    if binaries() is None:
        return "PostgreSQL's server binaries (initdb, pg_ctl) are not installed: " \
               "apt-get install postgresql"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no postgres user to run the server as"
    return None


def require() -> None:
    """Skip the calling test when the server cannot run here, saying why; under CI=true fail
    instead (CI must run the PostgreSQL tests)."""
    import pytest

    found = problem()
    if found is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the PostgreSQL tests: {found}")
        pytest.skip(found)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    def __init__(self) -> None:
        # /tmp itself, not $TMPDIR: as root the server runs as postgres, who must reach it.
        root = os.geteuid() == 0
        self.folder = Path(tempfile.mkdtemp(prefix="mulligan-pg-", dir="/tmp" if root else None))
        self.port = _free_port()
        self.url = f"postgresql://mulligan@127.0.0.1:{self.port}/postgres"
        self._as: dict[str, Any] = {}
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.folder, user.pw_uid, user.pw_gid)
            self._as = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}

    def _run(self, *args: str) -> None:
        bin_dir = binaries()
        assert bin_dir is not None, problem()
        subprocess.run([str(bin_dir / args[0]), *args[1:]], check=True, cwd=self.folder,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **self._as)

    def start(self) -> Server:
        data = self.folder / "data"
        self._run("initdb", "-D", str(data), "-A", "trust", "-U", "mulligan", "-E", "UTF8",
                  "--locale=C", "--no-sync")
        options = (f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.folder} "
                   "-c fsync=on -c synchronous_commit=on -c max_connections=100")
        self._run("pg_ctl", "-D", str(data), "-l", str(self.folder / "log"), "-o", options,
                  "-w", "-t", "60", "start")
        return self

    def restart(self) -> None:
        """Stop the server (every connection dropped, every advisory lock gone) and start it
        again on the same port and data."""
        data = str(self.folder / "data")
        self._run("pg_ctl", "-D", data, "-m", "fast", "-w", "-t", "60", "restart")

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.folder / "data"), "-m", "immediate", "-w",
                      "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def database(self, name: str) -> str:
        """A new, empty database on the server; returns its URL."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url.rsplit("/", 1)[0] + f"/{name}"
