"""The real REPL in tmux against a local server speaking Anthropic's streaming protocol
(tests/fakes/), paced, as a user sees it: the reply while it is written, the questions and
keys, the status line at 80 columns."""

from __future__ import annotations

import json
import threading

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
    # The stream is held after the list's second item, then before the block's end, until the
    # screen there has been seen: each moment checked lasts until then, whatever the speed
    # (events: message_start, ping, block start, then PLAN's pieces from event 3).
    listed, said = threading.Event(), threading.Event()
    plan = wire.reply(wire.text_block(0, *PLAN), pace=0.5, holds={6: listed, 8: said})
    with ScriptedServer([plan]) as server, started(tmp_path, server, width=80) as screen:
        screen.text("make a plan")
        screen.keys("Enter")
        # The first paragraph has ended: printed rendered (no asterisks) while the list is
        # still being written, raw, in the live area, with the spinner under it.
        live = screen.wait_until(
            lambda shown: "2. Cache the parsed rows" in shown and
            "Here is the plan, in full, as I see it now:" in shown,
            "the list being written under the first paragraph, printed")
        assert "Esc or Ctrl-C aborts" in live and "nothing else changes" not in live
        assert "1. Read `main.py`" in live  # raw: the list is not finished yet
        listed.set()
        # The last paragraph, longer than a line: wrapped at words while it streams.
        live = screen.wait_for("nothing else changes")
        said.set()
        for line in live.splitlines():
            assert len(line) <= 80
        assert "Then it is done, and that is all of it: nothing else changes in the" in live
        assert "Esc or Ctrl-C aborts" in live  # still streaming: the live area's wrapping
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


def test_a_retry_says_why_how_long_and_which_try_it_is(tmp_path):
    # The second try's answer is held back until the screen of the first wait has been seen:
    # that screen lasts until then, however slowly the REPL or the terminal draws it (with
    # only the 2 s wait to draw it in, a loaded machine could skip it).
    seen = threading.Event()
    script = [wire.error(429, "rate_limit_error", "Number of request tokens has exceeded "
                         "your per-minute rate limit", {"retry-after": "2"}),
              wire.error(529, "overloaded_error", "Overloaded", hold=seen),
              wire.text_reply("at last", pace=0.2)]
    with ScriptedServer(script) as server, started(tmp_path, server) as screen:
        screen.text("hello")
        screen.keys("Enter")
        # While it waits: the reason printed, and the spinner saying the wait and the try.
        # Two lines say it (the printed reason, then the spinner under it), whenever the
        # terminal gets to draw the second: waited for, not read at one moment.
        waiting = screen.wait_until(
            lambda shown: sum("retrying in 2 s (2/5)" in line
                              for line in shown.splitlines()) >= 2,
            "the reason and the spinner both saying the wait")
        seen.set()
        assert "429 rate_limit_error: Number of request tokens has exceeded your per-minute " \
            "rate limit; retrying in 2 s (2/5)" in " ".join(waiting.split())
        spinner = [line for line in waiting.splitlines() if "retrying in 2 s (2/5)" in line][-1]
        assert "rate_limit_error" not in spinner  # the spinner's own line, not the reason
        shown = screen.settled("at last", "Esc or Ctrl-C aborts")
        assert "529 overloaded_error: Overloaded; retrying in" in shown and "(3/5)" in shown


def test_esc_aborts_a_run_and_the_reply_is_marked_aborted(tmp_path):
    stalled = wire.reply(wire.text_block(0, "I am starting ", "to write"), stall_after=4)
    with ScriptedServer([stalled]) as server, started(tmp_path, server) as screen:
        screen.text("go")
        screen.keys("Enter")
        screen.wait_for("I am starting")
        screen.keys("Escape")
        shown = screen.settled("(aborted)", "Esc or Ctrl-C aborts", limit=10)
        assert "aborting the run" in shown


def test_slash_opens_the_command_list_and_narrows_it_as_you_type(tmp_path):
    with ScriptedServer([]) as server, started(tmp_path, server) as screen:
        screen.text("/")
        menu = screen.wait_for("/usage")  # no Tab pressed
        assert "/tree" in menu and "/compact" in menu
        screen.text("us")
        narrowed = screen.wait_gone("/tree")
        assert "/usage" in narrowed and "/compact" not in narrowed


def test_up_on_an_empty_prompt_recalls_the_last_message(tmp_path):
    with ScriptedServer([wire.text_reply("first answer")]) as server, \
            started(tmp_path, server) as screen:
        screen.text("my first message")
        screen.keys("Enter")
        screen.settled("first answer", "Esc or Ctrl-C aborts")
        screen.keys("Up")
        screen.wait_until(lambda shown: shown.count("› my first message") == 2,
                          "the message back in the input box")


def test_ctrl_o_shows_the_last_folded_output_whole(tmp_path):
    listing = "\n".join(f"line {n}" for n in range(1, 13))
    script = [wire.reply(wire.tool_use_block(0, "toolu_1", "bash", json.dumps(
        {"command": f"printf '{listing}\\n'"})), stop_reason="tool_use"),
        wire.text_reply("printed")]
    with ScriptedServer(script) as server, \
            started(tmp_path, server, "--permission-mode", "auto") as screen:
        screen.text("print")
        screen.keys("Enter")
        folded = screen.settled("printed", "Esc or Ctrl-C aborts")
        assert "8 earlier lines (Ctrl-O shows them)" in folded and "line 2\n" not in folded
        screen.keys("C-o")
        shown = screen.wait_for("│ line 2")
        assert "│ line 1" in shown and "│ line 12" in shown


def test_help_at_120_columns_breaks_no_word(tmp_path):
    from mulligan.frontends.slash import listed

    with ScriptedServer([]) as server, started(tmp_path, server, width=120,
                                                height=50) as screen:
        screen.text("/help")
        screen.keys("Enter")
        shown = screen.wait_for("Ctrl-D, quits.", history=True)
    words = " ".join(shown.split())
    for each in listed():
        assert " ".join(each.help.split()) in words, each.name
    assert "Esc or Ctrl-C aborts the run." in words
