"""The REPL's first prompt pays only for what draws it: the real program on a pty, every import
it makes recorded (with the thread that made it) by an audit hook installed before mulligan
is imported.

The instant prompt is drawn before prompt_toolkit is imported. Before the real prompt is on
the screen, the main thread imports no provider SDK, no Markdown
parser, no gitignore matcher, not rich (the banner is printed without it), none of the
machinery of going back, restoring or running attempts, no HTML parser, no difflib and no
importlib.resources; the hosted model's SDK is imported
afterwards, on the model's own loading thread, without a key being pressed. A top-level
import re-added anywhere on the way to the prompt fails the first assertion; the loading
thread started before the prompt fails the second.
"""

from __future__ import annotations

import io
import json
import os
import pty
import random
import select
import subprocess
import sys
import time
from pathlib import Path

from mulligan.testing import call, reply

# What the first prompt must not wait for (a module absent from this machine is trivially
# absent from the list: the test still guards the others).
DEFERRED = ("anthropic", "openai", "google.genai", "pydantic", "httpx", "mcp", "PIL",
            "xllamacpp", "markdown_it", "pathspec", "merge3", "rich",
            "mulligan.providers.anthropic", "mulligan.app.rewind.back",
            "mulligan.app.workspace.restore", "mulligan.app.attempts.run",
            "mulligan.app.attempts.session", "mulligan.app.exports.html",
            # the fetch tool's HTML parser, the permission question's diff, and the package
            # resources machinery the system prompt was read through (issue 29)
            "html.parser", "mulligan.tools.html_text", "difflib", "importlib.resources",
            "zipfile")

# What the instant prompt does not wait for, though the real one does (asyncio brings
# concurrent.futures): the checkpoint store (made at the first snapshot), the TOML parser
# (no config.toml here), the slash commands.
INSTANT_DEFERRED = ("prompt_toolkit", "asyncio", "concurrent.futures", "tomllib",
                    "mulligan.app.workspace.store", "mulligan.app.workspace.monitor",
                    "mulligan.frontends.slash", "mulligan.frontends.commands")

DRIVER = """\
import os, sys, threading
log = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
def seen(event, args):
    if event == "import":
        os.write(log, f"{threading.current_thread().name}\\t{args[0]}\\n".encode())
        if args[0] == "anthropic":  # the SDK loads once the prompt is drawn: the collector then
            import gc
            os.write(log, f"collector\\t{gc.isenabled()}\\n".encode())
sys.addaudithook(seen)
sys.argv = ["mulligan"]
from mulligan.cli import run
run()
"""


INSTANT = "\x1b[A\u203a ".encode()  # the instant prompt (`frontends.terminal.instant`)


def real_prompt(shown: bytes) -> bool:
    """Whether prompt_toolkit's first prompt is on the screen: its "›", drawn over the
    instant prompt's when there is one."""
    after = shown.partition(b"Ctrl-D quits")[2]
    return after.count("\u203a".encode()) >= (2 if INSTANT in after else 1)


def imports(log: Path) -> list[tuple[str, str]]:
    """(thread name, module) of each import so far, in the order they happened."""
    text = log.read_text() if log.exists() else ""
    return [tuple(line.split("\t", 1)) for line in text.splitlines()]  # type: ignore[misc]


def test_the_first_prompt_imports_no_sdk_and_the_model_loads_after_it_is_drawn(tmp_path):
    (tmp_path / "work").mkdir()
    log = tmp_path / "imports.log"
    env = {**os.environ, "MULLIGAN_HOME": str(tmp_path / "home"), "TERM": "xterm",
           "PROMPT_TOOLKIT_NO_CPR": "1", "ANTHROPIC_API_KEY": "test-dummy",
           "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}  # nothing is sent: no prompt is typed
    env.pop("OPENAI_API_KEY", None)
    fd, child = pty.openpty()
    process = subprocess.Popen([sys.executable, "-c", DRIVER, str(log)], cwd=tmp_path / "work",
                               env=env, stdin=child, stdout=child, stderr=child,
                               close_fds=True)
    os.close(child)
    shown = b""
    try:
        while not real_prompt(shown):
            ready, _, _ = select.select([fd], [], [], 30)
            assert ready, f"no prompt: {shown[-600:]!r}"
            shown += os.read(fd, 65536)
        at_prompt = imports(log)
        mine = [module for thread, module in at_prompt if thread == "MainThread"]
        assert "mulligan.frontends.repl" in mine  # the hook saw the way to the prompt
        # The instant prompt is drawn right before the REPL's layer is imported: nothing
        # imported before it brings prompt_toolkit in.
        assert INSTANT in shown
        toolkit = [at for at, m in enumerate(mine) if m.split(".")[0] == "prompt_toolkit"]
        assert min(toolkit) > mine.index("mulligan.frontends.repl"), \
            f"prompt_toolkit imported before the instant prompt: {mine[min(toolkit)]}"
        early = mine[:mine.index("mulligan.frontends.repl")]
        paid = [m for m in early if any(m == d or m.startswith(d + ".") for d in INSTANT_DEFERRED)]
        assert paid == [], f"the instant prompt waited for {paid}"
        paid = [m for m in mine if any(m == d or m.startswith(d + ".") for d in DEFERRED)]
        assert paid == [], f"the first prompt waited for {paid}"

        deadline = time.monotonic() + 60
        while not any(module == "anthropic" for _, module in imports(log)):
            assert time.monotonic() < deadline, "the model's SDK never loaded"
            time.sleep(0.05)
        seen = imports(log)
        loader = [at for at, (thread, _) in enumerate(seen) if thread.startswith("mulligan-load-")]
        assert ("mulligan-load-anthropic/claude-sonnet-4-6", "anthropic") in seen
        # The cyclic collector, off while the REPL started (mulligan.cli), is on again.
        assert ("collector", "True") in seen
        # Every import the prompt needed came before the loading thread's first one.
        assert min(loader) >= len(mine), \
            f"the model's SDK started loading before the prompt was drawn: {seen[min(loader)]}"
        os.write(fd, b"\x04")  # Ctrl-D quits
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
        os.close(fd)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_lines_before_the_first_prompt_are_printed_as_rich_prints_them(monkeypatch):
    """`print_lines` stands in for rich before the first prompt: the same bytes for the same
    line -- wrapped at the same places (long words folded, wide characters counted as two
    cells), dimmed the same way -- and an escape sequence in a folder's name taken out."""
    from rich.console import Console

    from mulligan.frontends.terminal.banner import print_lines

    words = ["session:", "/tmp/pytest-of-root/pytest-12/test_resume_picks_a_session_wi0/home/"
             "sessions/2026-12-01T17-57-13_abcdef.jsonl", "(2", "messages)", "·", "model",
             "anthropic/claude-sonnet-4-6", "a", "", "  ", "日本語のフォルダ", "x" * 37]
    rnd = random.Random(3)
    for _ in range(2000):
        line = " ".join(rnd.choice(words) for _ in range(rnd.randint(0, 12)))
        line = rnd.choice(["", "  "]) + line + rnd.choice(["", "   "])
        width = rnd.choice([10, 20, 33, 80, 100])
        monkeypatch.setenv("COLUMNS", str(width))
        theirs, mine = io.StringIO(), _Terminal()
        Console(file=theirs, width=width, force_terminal=True, color_system="standard").print(
            line, style="dim", markup=False, highlight=False)
        print_lines([line], "dim", out=mine)
        assert mine.getvalue() == theirs.getvalue(), (line, width)
    mine = _Terminal()
    print_lines(["cwd /tmp/a\x1b]0;owned\x07b\x1b[2Jc"], "dim", out=mine)
    assert mine.getvalue() == "\x1b[2mcwd /tmp/abc\x1b[0m\n"


def test_the_store_made_at_the_first_snapshot_leaves_out_the_session_file_attached_before(
        tmp_path):
    """The checkpoint store is made when the first snapshot is taken, not when the session
    starts (its modules are off the way to the first prompt); the session file attached
    before -- here inside the working folder, and outside the home -- is still never
    recorded, and is remembered for gc then."""
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps([reply(call("bash", {"command": "echo x > made.txt"})),
                                   "done"]))
    session = work / "notes.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "mulligan", "-p", "make a file", "--model", f"scripted:{replies}",
         "--session", str(session)], cwd=work, capture_output=True, text=True,
        env={**os.environ, "MULLIGAN_HOME": str(home)})
    assert done.returncode == 0, done.stderr
    (result,) = [e for e in map(json.loads, session.read_text().splitlines())
                 if e.get("message", {}).get("role") == "toolResult"]
    assert result["workspace"]["changed"] == ["made.txt"]
    assert result["workspace"]["outside"] == []
    assert (home / "checkpoints" / "sessions.list").read_text() == f"{session}\n"
