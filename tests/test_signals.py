"""SIGTERM and SIGHUP (a closed terminal) end a run the way Ctrl-C does: the running bash
command's whole process group is killed, its result and the aborted reply are recorded, and
mulligan exits -- in print mode and in the REPL on a real pseudo-terminal."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mulligan.messages import ABORTED, HUNG_UP, TERMINATED
from mulligan.session import SessionLog
from mulligan.testing import call, reply, say
from test_tools_bash import gone

PYTHON = sys.executable


def setup(tmp_path: Path) -> tuple[dict[str, str], str]:
    (tmp_path / "work").mkdir()
    script = tmp_path / "script.json"
    command = "echo $$ > sleeper.pid; exec sleep 60"
    script.write_text(json.dumps([reply(call("bash", {"command": command}, id="c1")),
                                  say("not reached")]))
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(MULLIGAN_HOME=str(tmp_path / "home"), TERM="xterm", PROMPT_TOOLKIT_NO_CPR="1")
    return env, f"scripted:{script}"


def wait_for(path: Path) -> int:
    for _ in range(400):
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.025)
    raise AssertionError(f"{path} never appeared")


def recorded(tmp_path: Path) -> list[dict]:
    (file,) = (tmp_path / "home" / "sessions").glob("*/*.jsonl")
    return SessionLog(file).replay()


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_in_print_mode_kills_the_command_records_it_and_exits(tmp_path, number):
    env, model = setup(tmp_path)
    process = subprocess.Popen([PYTHON, "-m", "mulligan", "-p", "run it", "--model", model],
                               cwd=tmp_path / "work", env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    sleeper = wait_for(tmp_path / "work" / "sleeper.pid")
    process.send_signal(number)
    assert process.wait(timeout=30) == 128 + number
    assert gone(sleeper)
    messages = recorded(tmp_path)
    assert messages[-2]["role"] == "toolResult" and "Aborted" in messages[-2]["content"]
    assert messages[-1]["stop_reason"] == "aborted"
    # Recorded as what happened, not as the user's doing (issue 24 item 10).
    assert messages[-1]["error_message"] == (HUNG_UP if number == signal.SIGHUP else TERMINATED)


def test_sighup_in_the_repl_kills_the_command_records_it_and_exits(tmp_path):
    env, model = setup(tmp_path)
    main, child = pty.openpty()
    process = subprocess.Popen([PYTHON, "-m", "mulligan", "--model", model,
                                "--permission-mode", "auto"],
                               cwd=tmp_path / "work", env=env, stdin=child, stdout=child,
                               stderr=child, close_fds=True)
    os.close(child)
    seen = b""
    while b"/help for commands" not in seen:
        ready, _, _ = select.select([main], [], [], 30)
        assert ready, seen[-300:]
        seen += os.read(main, 65536)
    os.write(main, b"run it\r")
    sleeper = wait_for(tmp_path / "work" / "sleeper.pid")
    process.send_signal(signal.SIGHUP)
    try:
        assert process.wait(timeout=30) == 128 + signal.SIGHUP
    finally:
        os.close(main)
    assert gone(sleeper)
    messages = recorded(tmp_path)
    assert messages[-2]["role"] == "toolResult" and "Aborted" in messages[-2]["content"]
    assert messages[-1]["stop_reason"] == "aborted"
    assert messages[-1]["error_message"] == HUNG_UP != ABORTED
