"""The real `mulligan` REPL in tmux (a terminal that answers cursor-position requests, so the
toolbar and pickers are drawn as a user sees them), for the screen tests.

`Screen(tmp_path, server_url, *args, width=, height=)` starts `python -m mulligan` against a
local scripted provider server (tests/fakes/) in a detached tmux session of its own socket;
`keys(...)` types (tmux key names), `text(...)` types literally, `wait_for(text)` polls
capture-pane until the text is on screen and returns the screen. Without tmux the tests skip,
except under CI=true where a missing tmux fails.
"""

from __future__ import annotations

import itertools
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

TMUX = shutil.which("tmux")
if TMUX is None and os.environ.get("CI") == "true":
    raise RuntimeError("CI must run the tmux screen tests: tmux is not installed")

needs_tmux = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
_count = itertools.count()


class Screen:
    def __init__(self, tmp_path: Path, server_url: str | None, *args: str, width: int = 100,
                 height: int = 30, model: str = "anthropic/claude-sonnet-4-6",
                 env: dict[str, str] | None = None, before: str = "", after: str = "") -> None:
        """`before`/`after`: shell commands run in the terminal before mulligan starts and
        after it ends (e.g. `stty -a > FILE`)."""
        assert TMUX is not None
        work = tmp_path / "work"
        work.mkdir(exist_ok=True)
        self.tmux = [TMUX, "-L", f"mulligan-test-{os.getpid()}-{next(_count)}"]
        settings = {"MULLIGAN_HOME": str(tmp_path / "home"),
                    "ANTHROPIC_API_KEY": "sk-ant-test-local", **(env or {})}
        base = ["--base-url", server_url] if server_url else []
        command = " ".join([f"cd {shlex.quote(str(work))} &&",
                            *([f"{before};"] if before else []),
                            *(f"{k}={shlex.quote(v)}" for k, v in settings.items()),
                            shlex.quote(sys.executable), "-m", "mulligan", "--model",
                            shlex.quote(model), *base, *map(shlex.quote, args),
                            "; echo '[exited '$?']';", *([f"{after};"] if after else []),
                            "sleep 30"])
        subprocess.run([*self.tmux, "new-session", "-d", "-s", "t", "-x", str(width), "-y",
                        str(height), command], check=True)
        subprocess.run([*self.tmux, "set-option", "-t", "t", "history-limit", "5000"],
                       check=True)

    def keys(self, *keys: str) -> None:
        subprocess.run([*self.tmux, "send-keys", "-t", "t", *keys], check=True)

    def text(self, text: str) -> None:
        subprocess.run([*self.tmux, "send-keys", "-t", "t", "-l", text], check=True)

    def screen(self, history: bool = False) -> str:
        more = ["-S", "-2000"] if history else []
        return subprocess.run([*self.tmux, "capture-pane", "-t", "t", "-p", *more],
                              capture_output=True, text=True).stdout

    def wait_for(self, text: str, limit: float = 20, history: bool = False) -> str:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            shown = self.screen(history)
            if text in shown:
                return shown
            time.sleep(0.05)
        raise AssertionError(f"no {text!r} on the screen:\n{self.screen(history)}")

    def wait_until(self, ok, what: str, limit: float = 20, history: bool = False) -> str:
        """The screen once `ok(screen)` holds (`what` says what was awaited, if never)."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            shown = self.screen(history)
            if ok(shown):
                return shown
            time.sleep(0.05)
        raise AssertionError(f"never {what}:\n{self.screen(history)}")

    def settled(self, text: str, busy: str, limit: float = 20) -> str:
        """The screen and its history once `text` is there and `busy` (a run's spinner) has
        been gone from two captures in a row: the output of a run is printed through a
        background writer, after the run's end is drawn."""
        deadline = time.monotonic() + limit
        calm = 0
        while time.monotonic() < deadline:
            shown = self.screen(history=True)
            calm = calm + 1 if text in shown and busy not in shown else 0
            if calm >= 2:
                return shown
            time.sleep(0.1)
        raise AssertionError(f"no {text!r} without {busy!r}:\n{self.screen(history=True)}")

    def wait_gone(self, text: str, limit: float = 20) -> str:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            shown = self.screen()
            if text not in shown:
                return shown
            time.sleep(0.05)
        raise AssertionError(f"{text!r} stays on the screen:\n{self.screen()}")

    def close(self) -> None:
        subprocess.run([*self.tmux, "kill-server"], capture_output=True)

    def __enter__(self) -> Screen:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
