"""The instant prompt (`frontends.terminal.instant`) in real terminals: the REPL's first prompt
drawn before prompt_toolkit is imported, then taken over in place by the real one.

In tmux (a terminal that answers cursor-position requests, as a user's does): every key typed
from the start until after the real prompt took over reaches the model once, in order; the
screen then shows one prompt line, right under the banner; the terminal's modes (`stty -a`)
after the REPL are those before, after a quit and after a start that fails. On a pty: Ctrl-C
and SIGTERM while the instant prompt holds the terminal end the start with the modes as they
were; `-p`, and a REPL whose stdout is not the terminal, draw no instant prompt.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import pty
import select
import signal
import string
import subprocess
import sys
import termios
from pathlib import Path

from fakes import anthropic_server as wire
from fakes.http_server import ScriptedServer
from tmux_screen import Screen, needs_tmux

NOWHERE = "http://127.0.0.1:9"  # nothing is sent unless a prompt is typed
STATUS = "in 0 out 0"  # the status line: drawn under the real prompt only
INSTANT = "\x1b[A\u203a ".encode()  # the instant prompt's bytes (a line kept under it)


@needs_tmux
def test_keys_typed_while_the_repl_starts_reach_the_model_once_and_in_order(tmp_path):
    with ScriptedServer([wire.text_reply("got it")]) as server, \
            Screen(tmp_path, server.url) as screen:
        # Typed from the start (before the instant prompt, while it is up, and after the
        # real prompt took over), each key different from the one before.
        keys = itertools.cycle(string.ascii_lowercase + string.digits)
        typed, after = "", 0
        while after < 3:
            key = next(keys)
            screen.text(key)
            typed += key
            if len(typed) % 5 == 0 and STATUS in screen.screen():
                after += 1
            assert len(typed) < 3000, screen.screen()
        screen.keys("Enter")
        screen.wait_for("got it")
    (request,) = server.requests
    assert json.dumps(request.body["messages"][0]["content"]).count(typed) == 1
    assert [block["text"] for block in request.body["messages"][0]["content"]] == [typed]


@needs_tmux
def test_the_real_prompt_draws_over_the_instant_one_in_place(tmp_path):
    # With the cursor-position answer (the status line drawn once it comes) and without it.
    for cpr in (True, False):
        folder = tmp_path / f"cpr-{cpr}"
        folder.mkdir()
        env = {} if cpr else {"PROMPT_TOOLKIT_NO_CPR": "1"}
        with Screen(folder, NOWHERE, env=env) as screen:
            screen.wait_for(STATUS if cpr else "\u203a")
            screen.text("abc")
            lines = screen.wait_for("abc").splitlines()
            prompts = [at for at, line in enumerate(lines) if "\u203a" in line]
            assert len(prompts) == 1, lines  # one prompt line, once
            assert lines[prompts[0]] == "\u203a abc", lines
            assert lines[prompts[0] - 1].endswith("Ctrl-D quits")  # right under the banner
            assert lines[0].startswith("mulligan ")  # nothing above the banner
            assert sum(STATUS in line for line in lines) == (1 if cpr else 0)


@needs_tmux
def test_the_terminal_modes_after_the_repl_are_those_before(tmp_path):
    for model, ending in (("anthropic/claude-sonnet-4-6", "[exited 0]"),
                          ("nosuch/model", "[exited 1]")):  # a start that fails, held
        folder = tmp_path / model.split("/")[0]
        folder.mkdir()
        before, after = folder / "stty-before", folder / "stty-after"
        with Screen(folder, NOWHERE, model=model, before=f"stty -a > {before}",
                    after=f"stty -a > {after}") as screen:
            if ending == "[exited 0]":
                screen.wait_for(STATUS)
                screen.keys("C-d")
            shown = screen.wait_for("[exited")
            assert ending in shown, shown
            written = after
            screen.wait_until(lambda _, f=written: f.exists() and f.stat().st_size, "stty -a")
            assert {"echo", "icanon"} <= set(before.read_text().split())
            # (stty wraps its lines at the width it finds: the words are what count)
            assert after.read_text().split() == before.read_text().split()


class _Pty:
    """`mulligan ARGS` with stdin (and, `stdout_too`, stdout and stderr) on a pty whose other
    end this side keeps open, so its modes can be read after the process ended."""

    def __init__(self, tmp_path: Path, *args: str, stdout_too: bool = True) -> None:
        (tmp_path / "work").mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "MULLIGAN_HOME": str(tmp_path / "home"), "TERM": "xterm",
               "PROMPT_TOOLKIT_NO_CPR": "1", "ANTHROPIC_API_KEY": "test-dummy"}
        env.pop("OPENAI_API_KEY", None)
        self.fd, self.child = pty.openpty()
        self.modes = termios.tcgetattr(self.child)
        out = self.child if stdout_too else subprocess.PIPE
        # In a session of its own, the pty its controlling terminal: Ctrl-C is SIGINT there.
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mulligan", "--base-url", NOWHERE, *args],
            cwd=tmp_path / "work", env=env, stdin=self.child, stdout=out, stderr=out,
            close_fds=True, start_new_session=True,
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
        self.seen = b""
        self.reading = self.fd  # where its output is read

    def read_until(self, wanted: bytes) -> None:
        while wanted not in self.seen:
            ready, _, _ = select.select([self.reading], [], [], 30)
            assert ready, f"no {wanted!r} in {self.seen[-600:]!r}"
            more = os.read(self.reading, 65536)
            assert more, f"no {wanted!r} before the end: {self.seen[-600:]!r}"
            self.seen += more

    def ended(self) -> int:
        try:
            return self.process.wait(timeout=30)
        finally:
            os.close(self.fd)
            os.close(self.child)


def test_ctrl_c_and_sigterm_while_held_end_the_start_with_the_modes_as_they_were(tmp_path):
    for name, stop, status in (("ctrl-c", "\x03", 130), ("sigterm", None, -signal.SIGTERM)):
        term = _Pty(tmp_path / name)
        term.read_until(INSTANT)  # the real prompt would read Ctrl-C as a key, not end
        if stop is None:
            term.process.send_signal(signal.SIGTERM)
        else:
            os.write(term.fd, stop.encode())
        assert term.process.wait(timeout=30) == status  # by the signal, as without it
        assert termios.tcgetattr(term.child) == term.modes
        if stop is not None:  # the instant prompt erased: the start did not end at a prompt
            term.read_until(b"\x1b[?2004l")
            assert term.seen.rpartition(INSTANT)[2].startswith(b"\x1b[?2004h\r\x1b[K")
        term.ended()


def test_print_mode_and_a_stdout_that_is_not_the_terminal_draw_no_instant_prompt(tmp_path):
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps(["the answer"]))
    term = _Pty(tmp_path / "print", "-p", "hello", "--model", f"scripted:{replies}")
    term.read_until(b"the answer")
    assert term.process.wait(timeout=30) == 0
    assert termios.tcgetattr(term.child) == term.modes
    term.ended()
    assert INSTANT not in term.seen and b"\x1b[?2004h" not in term.seen

    term = _Pty(tmp_path / "piped", stdout_too=False)
    assert term.process.stdout is not None
    term.reading = term.process.stdout.fileno()
    term.read_until(b"Ctrl-D quits")
    term.read_until("Ctrl-D quits\n\u203a".encode())  # prompt_toolkit's, drawn once it reads
    os.write(term.fd, b"\x04")  # Ctrl-D quits
    assert term.ended() == 0
    assert INSTANT not in term.seen
