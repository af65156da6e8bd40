"""The bash sandbox is Debian's bubblewrap, really started: it blocks a write outside the
working folder and a connection to a local port, and allows a write inside. Skipped on a
machine without bubblewrap -- except in CI (CI=true), where that is a missing install step."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from mulligan.testing import call, reply
from mulligan.tools import Sandbox, bash_tool, sandbox_problem

PYTHON = sys.executable
PROBLEM = sandbox_problem()
if PROBLEM is not None and os.environ.get("CI") == "true":
    raise RuntimeError(f"CI must run the sandbox tests: {PROBLEM}")
needs_bwrap = pytest.mark.skipif(PROBLEM is not None, reason=PROBLEM or "")


def listening() -> tuple[socket.socket, int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    threading.Thread(target=lambda: server.accept(), daemon=True).start()
    return server, server.getsockname()[1]


def run(tmp_path: Path, command: str, network: bool = False) -> str:
    return bash_tool(tmp_path, sandbox=Sandbox(network=network))["execute"](
        {"command": command})


@needs_bwrap
def test_a_write_inside_the_folder_goes_through(tmp_path):
    assert "[exit code" not in run(tmp_path, "echo in > inside.txt")
    assert (tmp_path / "inside.txt").read_text() == "in\n"


@needs_bwrap
def test_a_write_outside_the_folder_is_blocked(tmp_path):
    outside = Path(tempfile.mkdtemp(dir=Path.home()))  # not under /tmp, which is private
    try:
        out = run(tmp_path, f"echo out > {outside}/escaped.txt")
        assert "[exit code 1]" in out  # the user's home is not even there
        assert "Read-only file system" in run(tmp_path, "touch /usr/escaped")
        assert not (outside / "escaped.txt").exists()
    finally:
        shutil.rmtree(outside)


@needs_bwrap
def test_tmp_is_private_to_the_command(tmp_path):
    marker = Path(tempfile.gettempdir()) / f"mulligan-sandbox-{os.getpid()}"
    run(tmp_path, f"echo x > {marker}")
    assert not marker.exists()


@needs_bwrap
def test_no_network_unless_asked_for(tmp_path):
    server, port = listening()
    try:
        probe = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"
        assert "connected" not in run(tmp_path, probe)
        assert "connected" in run(tmp_path, probe, network=True)
    finally:
        server.close()


@needs_bwrap
def test_the_cli_runs_bash_in_the_sandbox(tmp_path):
    import json

    work = tmp_path / "work"
    work.mkdir()
    script = tmp_path / "s.json"
    script.write_text(json.dumps([reply(call("bash", {"command": "touch /usr/x; echo $?"})),
                                  "done"]))
    env = {**os.environ, "MULLIGAN_HOME": str(tmp_path / "home")}
    done = subprocess.run([PYTHON, "-m", "mulligan", "-p", "go", "--sandbox", "--model",
                           f"scripted:{script}"], cwd=work, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    (file,) = (tmp_path / "home" / "sessions").glob("*/*.jsonl")
    assert "Read-only file system" in file.read_text()


def test_sandbox_network_without_sandbox_is_a_usage_error(tmp_path):
    done = subprocess.run([PYTHON, "-m", "mulligan", "-p", "x", "--sandbox-network"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--sandbox-network goes with --sandbox" in done.stderr


def test_sandbox_refuses_to_start_without_bubblewrap_never_running_bash_unconfined(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {**os.environ, "PATH": str(empty), "MULLIGAN_HOME": str(tmp_path / "home")}
    done = subprocess.run([PYTHON, "-m", "mulligan", "-p", "x", "--sandbox"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "bubblewrap, which is not installed" in done.stderr
    assert "apt-get install bubblewrap" in done.stderr


@needs_bwrap
def test_the_command_cannot_see_or_signal_mulligan(tmp_path):
    # This process stands for Mulligan: its pid means nothing in the sandbox's PID namespace.
    out = run(tmp_path, f"kill -0 {os.getpid()} && echo SIGNALLED; ls /proc | grep -c '^[0-9]'")
    assert "SIGNALLED" not in out
    assert int(out.split()[-1]) <= 5  # bwrap's init, bash, ls, grep: nothing of the host


@needs_bwrap
def test_no_host_unix_socket_can_be_reached(tmp_path):
    outside = Path(tempfile.mkdtemp(dir=Path.home()))  # not under /tmp, which is private
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(outside / "agent.sock"))
        server.listen(1)
        probe = ("python3 -c 'import socket, sys; s = socket.socket(socket.AF_UNIX); "
                 f"s.connect(sys.argv[1]); print(\"CONNECTED\")' {outside}/agent.sock")
        assert "CONNECTED" not in run(tmp_path, probe)
        assert run(tmp_path, "find /run -mindepth 1 | wc -l").split()[0] == "0"  # private
    finally:
        server.close()
        shutil.rmtree(outside)


@needs_bwrap
def test_root_in_the_sandbox_has_no_capabilities_and_cannot_remount(tmp_path):
    out = run(tmp_path, "grep CapEff /proc/self/status; mount -o remount,rw / && echo REMOUNTED")
    assert "REMOUNTED" not in out
    assert "CapEff:\t0000000000000000" in out


@needs_bwrap
def test_every_process_ends_with_the_command_setsid_ones_included(tmp_path):
    mark = f"{os.getpid() % 1000 + 4000}.{time.time_ns() % 1000}"
    out = run(tmp_path, f"setsid sleep {mark} > /dev/null 2>&1 & nohup sleep {mark} "
                        "> /dev/null 2>&1 & echo started")
    assert "started" in out
    time.sleep(0.3)
    alive = [pid for pid in os.listdir("/proc") if pid.isdigit() and _cmdline(pid) ==
             f"sleep\0{mark}\0"]
    assert alive == []


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return ""
