"""/try in the REPL, in tmux (a terminal that answers cursor-position requests, so the toolbar
is drawn): one live line per attempt while they run, Ctrl-C stops them all, /attempts is the
table, /adopt puts the chosen attempt's files into the folder and /tree labels the attempts.
The models are scripted files (`--model scripted:FILE`), a different script per attempt."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mulligan.testing import call, reply, say

PYTHON = sys.executable
TMUX = shutil.which("tmux")
if TMUX is None and os.environ.get("CI") == "true":
    raise RuntimeError("CI must run the tmux screen tests: tmux is not installed")


def scripts(tmp_path: Path, command: str) -> list[str]:
    """Three scripts: a bash call running `command` (its {k}: the attempt's number), then a
    write of calc.py, then done."""
    names = []
    for k in (1, 2, 3):
        body = f"def add(a, b):\n    return a + b  # attempt {k}\n" if k != 3 else \
            "def add(a, b):\n    return a * b\n"
        steps = [reply(call("bash", {"command": command.format(k=k)}, id=f"b{k}")),
                 reply(call("write", {"path": "calc.py", "content": body}, id=f"w{k}")),
                 say(f"attempt {k} done")]
        path = tmp_path / f"r{k}.json"
        path.write_text(json.dumps(steps))
        names += ["--model", f"scripted:{path}"]
    return names


class Screen:
    def __init__(self, tmp_path: Path) -> None:
        assert TMUX is not None
        self.tmux = [TMUX, "-L", f"mulligan-attempts-{os.getpid()}-{tmp_path.name}"]
        work = tmp_path / "work"
        work.mkdir()
        (work / "calc.py").write_text("def add(a, b):\n    return a - b\n")
        (work / "test_calc.py").write_text("from calc import add\nassert add(2, 3) == 5\n")
        (tmp_path / "main.json").write_text(json.dumps(["hello"]))
        command = (f"cd {work} && MULLIGAN_HOME={tmp_path / 'home'} PYTHONPATH="
                   f"{os.environ.get('PYTHONPATH', '')} {PYTHON} -m mulligan --model "
                   f"scripted:{tmp_path / 'main.json'}")
        subprocess.run([*self.tmux, "new-session", "-d", "-s", "t", "-x", "150", "-y", "40",
                        command], check=True)

    def text(self) -> str:
        return subprocess.run([*self.tmux, "capture-pane", "-t", "t", "-p", "-S", "-200"],
                              capture_output=True, text=True).stdout

    def wait_for(self, found: str | Callable[[str], bool], limit: float = 60) -> str:
        deadline = time.monotonic() + limit
        check = found if callable(found) else (lambda shown: found in shown)
        while time.monotonic() < deadline:
            shown = self.text()
            if check(shown):
                return shown
            time.sleep(0.1)
        raise AssertionError(f"no {found!r} on the screen:\n{self.text()}")

    def send(self, *keys: str) -> None:
        subprocess.run([*self.tmux, "send-keys", "-t", "t", *keys], check=True)

    def close(self) -> None:
        subprocess.run([*self.tmux, "kill-server"], capture_output=True)


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_try_shows_a_live_line_per_attempt_then_the_table_then_adopts_one(tmp_path):
    screen = Screen(tmp_path)
    try:
        screen.wait_for("/help for commands")
        # Each attempt's command waits for the file `go`, made once all three live lines
        # have been seen: they last until then, whatever the speed.
        go = tmp_path / "go"
        waiting = f"until [ -e {go} ]; do sleep 0.05; done; echo {{k}}"
        line = " ".join(["/try 3", *scripts(tmp_path, waiting), "--check",
                         "'python3 test_calc.py'", "Fix add."])
        screen.send(line, "Enter")
        live = screen.wait_for(lambda s: all(f"attempt {k}/3 · scripted/r{k}.json · bash("
                                             in s for k in (1, 2, 3)))
        assert "Ctrl-C stops them all" in live
        go.touch()
        screen.wait_for(lambda s: "Ctrl-C stops them all" not in s)  # all ended
        screen.send("/attempts", "Enter")
        table = screen.wait_for("/compare A B shows")
        rows = [row for row in table.splitlines() if "scripted/r" in row and "turns" not in
                row and "·" not in row]
        assert [("passed" in row, "failed (exit 1)" in row) for row in rows[-3:]] == [
            (True, False), (True, False), (False, True)]
        screen.send("/adopt 2", "Enter")
        screen.wait_for("adopted attempt 2")
        assert (tmp_path / "work" / "calc.py").read_text().endswith("# attempt 2\n")
        screen.send("/tree", "Enter")
        screen.wait_for("attempt 2/3 · scripted/r2.json · check passed")
    finally:
        screen.close()


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_ctrl_c_stops_every_attempt_and_the_folder_stays_as_it_was(tmp_path):
    screen = Screen(tmp_path)
    try:
        screen.wait_for("/help for commands")
        screen.send(" ".join(["/try 3", *scripts(tmp_path, "sleep 3{k}"), "Fix add."]), "Enter")
        screen.wait_for(lambda s: s.count("· bash(sleep 3") == 3)
        screen.send("C-c")
        screen.wait_for("stopping every attempt")
        screen.wait_for(lambda s: "Ctrl-C stops them all" not in s)
        # One capture without the live line can be a redraw in progress, not the attempts
        # ended: /attempts then lists them running, and is asked again until the table shows.
        for _ in range(12):
            screen.send("/attempts", "Enter")
            try:
                table = screen.wait_for("/compare A B shows", limit=5)
                break
            except AssertionError:
                continue
        else:
            raise AssertionError(f"the attempts did not end within 60 s:\n{screen.text()}")
        rows = [row for row in table.splitlines() if "scripted/r" in row and "·" not in row]
        assert len(rows) == 3 and all(row.rstrip().endswith("stopped") or " stopped " in row
                                      for row in rows), table
        assert (tmp_path / "work" / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"
    finally:
        screen.close()
