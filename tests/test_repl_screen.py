"""The real REPL in tmux against a local server speaking Anthropic's streaming protocol
(tests/fakes/), paced, as a user sees it: the reply while it is written, the questions and
keys, the status line at 80 columns."""

from __future__ import annotations

from fakes import anthropic_server as wire
from fakes.http_server import ScriptedServer
from tmux_screen import Screen, needs_tmux

pytestmark = needs_tmux

PLAN = ["Here is the plan, in **full**, as I see it now:\n\n",
        "1. Read `main.py` and find the slow loop that walks every line of the input twice.\n",
        "2. Cache the parsed rows in a dict keyed by line number, so the second pass is free.\n",
        "\n", "Then it is done, and that is all of it: nothing else changes in the folder "
        "or outside it, and no test is skipped.\n"]


def started(tmp_path, server, *args, width=100, height=30):
    screen = Screen(tmp_path, server.url, *args, width=width, height=height)
    screen.wait_for("/help for commands")
    screen.wait_for("›")
    return screen


def test_the_whole_reply_shows_as_it_is_written_then_rendered_once(tmp_path):
    with ScriptedServer([wire.reply(wire.text_block(0, *PLAN), pace=0.5)]) as server, \
            started(tmp_path, server, width=80) as screen:
        screen.text("make a plan")
        screen.keys("Enter")
        # The first paragraph has ended: printed rendered (no asterisks) while the list is
        # still being written, raw, in the live area, with the spinner under it.
        live = screen.wait_for("2. Cache the parsed rows")
        assert "Here is the plan, in full, as I see it now:" in live
        assert "Esc or Ctrl-C aborts" in live and "nothing else changes" not in live
        assert "1. Read `main.py`" in live  # raw: the list is not finished yet
        # The last paragraph, longer than a line: wrapped at words while it streams.
        live = screen.wait_for("nothing else changes")
        for line in live.splitlines():
            assert len(line) <= 80
        assert "Then it is done, and that is all of it: nothing else changes in the" in live
        final = screen.settled("no test is skipped.", "Esc or Ctrl-C aborts")
        reply = final.split("make a plan", 1)[1]
        # Rendered, each line once: the list as rich draws it, no raw Markdown left.
        assert reply.count("Here is the plan") == 1 and "**" not in reply
        assert reply.count(" 1 Read main.py") == 1 and "1. Read" not in reply
        assert reply.count(" 2 Cache the parsed rows") == 1
        assert reply.count("Then it is done") == 1
        words = " ".join(reply.split())
        assert "nothing else changes in the folder or outside it, and no test is skipped." \
            in words
