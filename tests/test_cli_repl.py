"""The real `mulligan` REPL on a pseudo-terminal: type, go back, quit, reopen with -c and with
-r, and find the branch point and the same tree."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import shutil
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

from mulligan.session import SessionLog

PYTHON = sys.executable
ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\r")


class Terminal:
    """One mulligan process on a pty; `expect` reads until some text has appeared."""

    def __init__(self, tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> None:
        extra = env or {}
        env = {**os.environ, "MULLIGAN_HOME": str(tmp_path / "home"), "TERM": "xterm",
               "COLUMNS": "100", "LINES": "40", "PROMPT_TOOLKIT_NO_CPR": "1"}
        env.pop("ANTHROPIC_API_KEY", None)
        env.pop("OPENAI_API_KEY", None)
        env.update(extra)
        self.fd, child = pty.openpty()
        # A real terminal has a size: 40 rows of 100 columns (the toolbar needs rows).
        fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
        os.set_blocking(self.fd, True)
        self.process = subprocess.Popen([PYTHON, "-m", "mulligan", *args], cwd=tmp_path / "work",
                                        env=env, stdin=child, stdout=child, stderr=child,
                                        close_fds=True)
        os.close(child)
        self.seen = b""
        self.cursor = 0  # where in the (cleaned) output the last expect matched

    def expect(self, text: str, limit: float = 30.0) -> str:
        """Read until `text` appears after what earlier calls matched; returns what was shown
        from there up to and including it (what follows it stays for the next call)."""
        while True:
            clean = ANSI.sub(b"", self.seen).decode(errors="replace")
            at = clean.find(text, self.cursor)
            if at >= 0:
                break
            ready, _, _ = select.select([self.fd], [], [], limit)
            assert ready, f"no {text!r} in {clean[self.cursor:][-600:]!r}"
            try:
                self.seen += os.read(self.fd, 65536)
            except OSError:
                raise AssertionError(f"no {text!r} before the terminal closed: "
                                     f"{clean[-600:]!r}") from None
        shown, self.cursor = clean[self.cursor:at + len(text)], at + len(text)
        return shown

    def type(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def close(self) -> int:
        try:
            return self.process.wait(timeout=30)
        finally:
            os.close(self.fd)


def replies(tmp_path: Path, *texts: str) -> str:
    path = tmp_path / "replies.json"
    path.write_text(json.dumps(list(texts)))
    return f"scripted:{path}"


def test_back_then_quit_then_continue_follows_the_branch_point(tmp_path):
    (tmp_path / "work").mkdir()
    model = replies(tmp_path, "one", "two", "three")
    term = Terminal(tmp_path, "--model", model)
    term.expect("/help for commands")
    term.type("first\r")
    term.expect("one")
    term.type("second\r")
    term.expect("two")
    term.type("/back e3\r")
    term.expect("back at e3")
    term.type("/quit\r")
    term.expect("mulligan -c to continue")
    assert term.close() == 0

    term = Terminal(tmp_path, "-c", "--model", model)
    term.expect("/help for commands")
    term.type("/tree all\r")
    tree = term.expect("◀ tip")
    assert "e6  ↩ back to e3 ◀ tip" in tree
    term.type("again\r")
    term.expect("one")  # the scripted model starts its list again in a new process
    term.type("/quit\r")
    assert term.close() == 0

    (file,) = (tmp_path / "home" / "sessions").glob("*/*.jsonl")
    assert [m["content"] for m in SessionLog(file).replay() if m["role"] == "user"] == [
        "first", "again"]


def test_resume_picks_a_session_with_the_arrow_keys(tmp_path):
    (tmp_path / "work").mkdir()
    model = replies(tmp_path, "ok")
    for prompt in ("older session", "newer session"):
        done = subprocess.run([PYTHON, "-m", "mulligan", "-p", prompt, "--model", model],
                              cwd=tmp_path / "work", capture_output=True, text=True,
                              env={**os.environ, "MULLIGAN_HOME": str(tmp_path / "home")})
        assert done.returncode == 0
    term = Terminal(tmp_path, "-r", "--model", model)
    listed = term.expect("older session")
    assert "↑/↓ and Enter" in listed and listed.index("newer session") < listed.index(
        "older session")
    term.type("\x1b[B")  # arrow down, to the older one
    term.type("\r")
    banner = term.expect("/help for commands")
    assert "(2 messages)" in banner
    term.type("/tree\r")
    assert "you: older session" in term.expect("◀ tip")
    term.type("/quit\r")
    assert term.close() == 0


def tool_then(tmp_path: Path, name: str, arguments: dict, *replies: str) -> Terminal:
    """A REPL on a pty whose model first calls tool `name`, then answers `replies`."""
    (tmp_path / "work").mkdir()
    path = tmp_path / "replies.json"
    path.write_text(json.dumps([
        {"role": "assistant", "content": [{"type": "toolCall", "id": "c1", "name": name,
                                           "arguments": arguments}],
         "stop_reason": "toolUse"}, *replies]))
    term = Terminal(tmp_path, "--model", f"scripted:{path}", "--permission-mode", "auto")
    term.expect("/help for commands")
    return term


def test_back_in_a_real_terminal_asks_about_the_files_and_restores_them_on_enter(tmp_path):
    term = tool_then(tmp_path, "write", {"path": "NOTES.md", "content": "a note\n"},
                     "wrote it", "and again")
    term.type("take a note\r")
    term.expect("wrote it")
    term.type("/diff\r")
    assert "+a note" in term.expect("+a note")
    term.type("/tree\r")
    term.expect("✎1")
    term.type("/back e1\r")
    term.expect("NOTES.md")
    term.expect("Enter: restore the files")
    assert (tmp_path / "work" / "NOTES.md").exists()
    term.type("\r")  # Enter alone answers
    term.expect("restored 1 file(s): NOTES.md")
    assert not (tmp_path / "work" / "NOTES.md").exists()
    term.type("/quit\r")
    assert term.close() == 0


def test_back_in_a_real_terminal_can_keep_the_files_or_cancel(tmp_path):
    term = tool_then(tmp_path, "bash", {"command": "echo b > by-bash.txt"}, "ran it")
    term.type("run it\r")
    term.expect("ran it")
    term.type("/back e1\r")
    term.expect("c: cancel")
    term.type("c")  # one key, no Enter
    term.expect("cancelled: nothing was changed")
    term.type("/edit e2\r")
    term.expect("c: cancel")
    term.type("k")
    term.expect("kept as they are: by-bash.txt")
    assert (tmp_path / "work" / "by-bash.txt").exists()
    term.expect("run it")  # the prompt is back, holding the message /edit put back
    term.type("\x03")  # Ctrl-C clears it
    term.type("/quit\r")
    assert term.close() == 0


def test_back_with_a_summary_in_a_real_terminal(tmp_path):
    term = tool_then(tmp_path, "bash", {"command": "echo b > by-bash.txt"}, "ran it",
                     "Goal: make a file. Tried: bash. Left: nothing.", "second answer",
                     "Summary two.")
    term.type("run it\r")
    term.expect("ran it")
    term.type("/back e1\r")
    term.expect("c: cancel")
    term.type("s")
    term.expect("summarising the attempt")
    term.expect("summary of the attempt left (written by the model)")
    term.expect("Goal: make a file.")
    assert not (tmp_path / "work" / "by-bash.txt").exists()
    term.type("again\r")
    term.expect("second answer")
    term.type("/back e1 --summary\r")  # nothing changed on disk: no question, a summary
    term.expect("Summary two.")
    term.type("/quit\r")
    assert term.close() == 0
    (file,) = (tmp_path / "home" / "sessions").glob("*/*.jsonl")
    kinds = [e["type"] for e in SessionLog(file).entries()]
    assert kinds.count("branch_summary") == 2


def test_no_session_writes_nothing_not_even_the_input_history(tmp_path):
    (tmp_path / "work").mkdir()
    term = Terminal(tmp_path, "--model", replies(tmp_path, "an answer"), "--no-session")
    term.expect("/help for commands")
    term.type("a question\r")
    term.expect("an answer")
    term.type("/quit\r")
    assert term.close() == 0
    assert not (tmp_path / "home").exists()


def test_back_picks_a_message_with_the_arrow_keys_in_a_real_terminal(tmp_path):
    (tmp_path / "work").mkdir()
    term = Terminal(tmp_path, "--model", replies(tmp_path, "one", "two", "three"))
    term.expect("/help for commands")
    term.type("first\r")
    term.expect("one")
    term.type("second\r")
    term.expect("two")
    term.type("/back\r")
    term.expect("first")  # the picker lists your messages, newest first
    term.type("\x1b[B")  # arrow down: "first"
    term.type("\r")
    term.expect("back before e2")
    term.type("/quit\r")
    assert term.close() == 0


TMUX = shutil.which("tmux")
if TMUX is None and os.environ.get("CI") == "true":
    raise RuntimeError("CI must run the tmux screen tests: tmux is not installed")


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_a_slow_stream_shows_live_with_a_spinner_then_markdown_and_the_status_line(tmp_path):
    """In tmux (a terminal that answers cursor-position requests, so the toolbar is drawn),
    against a local server speaking Anthropic's streaming protocol, slowly: the partial
    line is on screen before the reply ends, with a spinner; then the reply as Markdown and
    the status line with the context used."""
    from fakes import anthropic_server as wire
    from fakes.http_server import ScriptedServer

    (tmp_path / "work").mkdir()
    pieces = ["Here is ", "**the plan**", ":\n\n", "- one\n", "- two\n", "done."]
    # Held before ":" (event 5: message_start, ping and the block's start come first) until
    # the partial line has been seen: it lasts until then, whatever the speed.
    seen = threading.Event()
    slow = wire.reply(wire.text_block(0, *pieces), input_tokens=1200, output_tokens=40,
                      pace=0.5, holds={5: seen})
    socket_name = f"mulligan-test-{os.getpid()}"
    tmux = [TMUX, "-L", socket_name]

    def screen() -> str:
        return subprocess.run([*tmux, "capture-pane", "-t", "t", "-p"], capture_output=True,
                              text=True).stdout

    def wait_for(text: str, limit: float = 20) -> str:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            shown = screen()
            if text in shown:
                return shown
            time.sleep(0.1)
        raise AssertionError(f"no {text!r} on the screen:\n{screen()}")

    with ScriptedServer([slow]) as server:
        command = (f"cd {tmp_path / 'work'} && MULLIGAN_HOME={tmp_path / 'home'} "
                   f"ANTHROPIC_API_KEY=sk-ant-test-local {PYTHON} -m mulligan --model "
                   f"anthropic/claude-sonnet-4-6 --base-url {server.url}")
        subprocess.run([*tmux, "new-session", "-d", "-s", "t", "-x", "100", "-y", "30",
                        command], check=True)
        try:
            wait_for("/help for commands")
            subprocess.run([*tmux, "send-keys", "-t", "t", "make a plan", "Enter"], check=True)
            live = wait_for("**the plan**")  # the partial line, raw, while it streams
            seen.set()
            assert "Ctrl-C aborts" in live and "done." not in live  # the spinner line
            final = wait_for("• one")  # the reply, rendered: a bullet, no asterisks
            assert "**" not in final.split("make a plan", 1)[1].split("• one")[0]
            status = wait_for("context 1.2k/200.0k")  # the status line, from usage
            assert "claude-sonnet-4-6" in status and "$0.00" in status
            subprocess.run([*tmux, "send-keys", "-t", "t", "/usage", "Enter"], check=True)
            assert "1200" in wait_for("this branch:")
        finally:
            subprocess.run([*tmux, "kill-server"], capture_output=True)
