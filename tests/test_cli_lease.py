"""One live writer: an interactive mulligan (on a real pseudo-terminal) holds its session's
lease, and a second mulligan on that session is refused with the holder's pid."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys

from mulligan.session import SessionLog

PYTHON = sys.executable


def read_until(fd: int, needle: bytes, limit: float = 30.0) -> bytes:
    seen = b""
    while needle not in seen.replace(b"\r\n", b"\n"):
        ready, _, _ = select.select([fd], [], [], limit)
        assert ready, f"no {needle!r} in {seen[-500:]!r}"
        try:
            seen += os.read(fd, 65536)
        except OSError:  # the other end closed: everything it wrote has been read
            break
    assert needle in seen, seen[-500:]
    return seen


def test_a_second_mulligan_on_a_leased_session_is_refused_with_the_pid(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "MULLIGAN_HOME": str(tmp_path / "home"), "TERM": "xterm",
           "COLUMNS": "100", "LINES": "30"}
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps(["first answer", "second answer"]))
    model = ["--model", f"scripted:{replies}"]
    session = tmp_path / "s.jsonl"
    first = subprocess.run([PYTHON, "-m", "mulligan", "-p", "hello", "--session", str(session),
                            *model], cwd=work, env=env, capture_output=True, text=True)
    assert first.returncode == 0

    main_fd, child_fd = pty.openpty()
    repl = subprocess.Popen([PYTHON, "-m", "mulligan", "--session", str(session), *model],
                            cwd=work, env=env, stdin=child_fd, stdout=child_fd,
                            stderr=child_fd, close_fds=True)
    os.close(child_fd)
    try:
        read_until(main_fd, b"/help for commands")
        second = subprocess.run(
            [PYTHON, "-m", "mulligan", "-p", "again", "--session", str(session), *model],
            cwd=work, env=env, capture_output=True, text=True, timeout=60)
        assert second.returncode == 1
        assert f"pid {repl.pid}" in second.stderr
        os.write(main_fd, b"/quit\r")
        read_until(main_fd, b"mulligan -c to continue")
        assert repl.wait(timeout=30) == 0
    finally:
        if repl.poll() is None:
            repl.kill()
        os.close(main_fd)
    third = subprocess.run(
        [PYTHON, "-m", "mulligan", "-p", "again", "--session", str(session), *model],
        cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert third.returncode == 0
    assert [m["content"] for m in SessionLog(session).replay() if m["role"] == "user"] == [
        "hello", "again"]
