"""The real REPL in tmux, against a local server speaking Anthropic's streaming protocol: what
bash prints shows under its line while it runs (its last lines, the time it has taken), then
gives way to the folded result, each line once; what a command prints never drives the
terminal."""

from __future__ import annotations

import json
import subprocess

from fakes import anthropic_server as wire
from fakes.http_server import ScriptedServer
from tmux_screen import Screen, needs_tmux

pytestmark = needs_tmux

# line3 waits for the test to have seen line1 and line2 (it makes the file `go`): the screens
# checked while the command runs last until then, whatever the speed.
COUNTING = "echo line1; sleep 1; echo line2; until [ -e go ]; do sleep 0.05; done; echo line3"
BUSY = "Esc or Ctrl-C aborts"


def bash_then(command: str, answer: str) -> list:
    return [wire.reply(wire.tool_use_block(0, "toolu_1", "bash", json.dumps(
        {"command": command})), stop_reason="tool_use"), wire.text_reply(answer)]


def started(tmp_path, server, width=100, height=30):
    screen = Screen(tmp_path, server.url, "--permission-mode", "auto", width=width,
                    height=height)
    screen.wait_for("/help for commands")
    screen.wait_for("›")
    return screen


def test_bash_output_shows_while_the_command_runs_then_the_result_once(tmp_path):
    with ScriptedServer(bash_then(COUNTING, "counted")) as server, \
            started(tmp_path, server) as screen:
        screen.text("count")
        screen.keys("Enter")
        # The first line while the command still runs.
        live = screen.wait_until(lambda shown: "│ line1" in shown, "line1 on the screen")
        assert "│ line3" not in live and "running bash" in live
        assert f"$ {COUNTING}" in " ".join(live.split())
        # The time it has taken, updating in place under the lines so far.
        later = screen.wait_until(lambda shown: "│ line2" in shown, "line2 on the screen")
        spinner = next(line for line in later.splitlines() if "running bash" in line)
        assert BUSY in spinner and float(spinner.split("running bash ")[1].split("s")[0]) >= 1
        assert later.count("│ line1") == 1
        (tmp_path / "work" / "go").touch()
        final = screen.settled("counted", BUSY)
        after = final.split("› count", 1)[1]
        # The live lines gave way to the folded result: each line once, in order.
        for line in ("line1", "line2", "line3"):
            assert after.count(f"│ {line}") == 1, after
        assert after.index("│ line1") < after.index("│ line3") < after.index("counted")


def test_what_a_command_prints_never_drives_the_terminal(tmp_path):
    # A clear-screen, a window title and a bidi override, printed while it runs and ended.
    hostile = (r"printf 'before\033[2J\033]0;pwned\007 mid\342\200\256x\n'; sleep 1.5; "
               r"printf 'after\n'")
    with ScriptedServer(bash_then(hostile, "shown")) as server, \
            started(tmp_path, server) as screen:
        screen.text("go")
        screen.keys("Enter")
        live = screen.wait_until(lambda shown: "│ before mid" in shown, "the live line")
        assert "/help for commands" in live  # the banner: the screen was not cleared
        final = screen.settled("shown", BUSY)
        assert "│ before midx" in final and "/help for commands" in final
        title = subprocess.run([*screen.tmux, "display-message", "-p", "-t", "t",
                                "#{pane_title}"], capture_output=True, text=True).stdout
        assert "pwned" not in title
