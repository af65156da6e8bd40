"""What the session spent, in the real REPL in tmux against a local server speaking Anthropic's
streaming protocol (issue 24 item 3): a /try of two attempts is in the status line's total
and in /usage's, beside the branch's share."""

from __future__ import annotations

from fakes import anthropic_server as wire
from fakes.http_server import ScriptedServer
from test_repl_screen import started
from tmux_screen import needs_tmux

pytestmark = needs_tmux


def test_a_try_of_two_attempts_is_counted_in_the_sessions_total(tmp_path):
    # claude-sonnet-4-6 at $3 / $15 per million: each reply of 1000 + 1000 costs $0.018.
    big = {"input_tokens": 1000, "output_tokens": 1000}
    script = [wire.reply(wire.text_block(0, "first answer"), **big),
              wire.reply(wire.text_block(0, "an attempt's answer"), **big),
              wire.reply(wire.text_block(0, "an attempt's answer"), **big)]
    with ScriptedServer(script) as server, started(tmp_path, server, width=120) as screen:
        screen.text("one")
        screen.keys("Enter")
        screen.settled("first answer", "Esc or Ctrl-C aborts")
        screen.wait_for("$0.02")
        screen.text("/try 2 try it")
        screen.keys("Enter")
        screen.wait_for("/attempts", limit=30)
        screen.wait_until(lambda shown: "running" not in shown.splitlines()[-1]
                          and "$0.05" in shown, "the attempts ended and counted", limit=30)
        screen.text("/usage")
        screen.keys("Enter")
        shown = screen.wait_for("the whole session, every attempt")
        words = " ".join(shown.split())
        assert "the whole session, every attempt: 3000 in, 3000 out, cost $0.0540" in words
        assert "this branch: 1000 in, 1000 out, cost $0.0180" in words
