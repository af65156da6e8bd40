"""What the session spent, in the real REPL in tmux against a local server speaking
Anthropic's streaming protocol (issue 24 item 3): going back does not make the cost drop; the
status line and /usage count every model call of the session, the branch's share beside."""

from __future__ import annotations

from fakes import anthropic_server as wire
from fakes.http_server import ScriptedServer
from test_repl_screen import started
from tmux_screen import needs_tmux

pytestmark = needs_tmux


def test_going_back_keeps_the_sessions_cost_and_shows_the_branchs_share(tmp_path):
    # claude-sonnet-4-6 at $3 / $15 per million: each reply costs $0.018.
    script = [wire.reply(wire.text_block(0, "first answer"), input_tokens=1000,
                         output_tokens=1000),
              wire.reply(wire.text_block(0, "second answer"), input_tokens=1000,
                         output_tokens=1000)]
    with ScriptedServer(script) as server, started(tmp_path, server, width=120) as screen:
        screen.text("one")
        screen.keys("Enter")
        screen.settled("first answer", "Esc or Ctrl-C aborts")
        screen.text("two")
        screen.keys("Enter")
        shown = screen.settled("second answer", "Esc or Ctrl-C aborts")
        screen.wait_for("$0.04")
        screen.text("/back e3")  # after the first answer: the second is left behind
        screen.keys("Enter")
        shown = screen.wait_for("(branch $0.02)")
        assert "$0.04 (branch $0.02)" in shown.splitlines()[-1] or \
            "$0.04 (branch $0.02)" in shown
        screen.text("/usage")
        screen.keys("Enter")
        shown = screen.wait_for("the whole session, every attempt")
        words = " ".join(shown.split())
        assert "the whole session, every attempt: 2000 in, 2000 out, cost $0.0360" in words
        assert "this branch: 1000 in, 1000 out, cost $0.0180" in words


def test_a_branch_summarys_model_call_is_counted_and_recorded_in_its_entry(tmp_path):
    from mulligan.session import SessionLog

    big = {"input_tokens": 1000, "output_tokens": 1000}
    script = [wire.reply(wire.text_block(0, "first answer"), **big),
              wire.reply(wire.text_block(0, "second answer"), **big),
              wire.reply(wire.text_block(0, "the attempt asked two"), **big)]  # the summary
    with ScriptedServer(script) as server, started(tmp_path, server, width=120) as screen:
        for prompt, answer in (("one", "first answer"), ("two", "second answer")):
            screen.text(prompt)
            screen.keys("Enter")
            screen.settled(answer, "Esc or Ctrl-C aborts")
        screen.text("/back e3 --summary")
        screen.keys("Enter")
        # Three calls at $0.018: the session's $0.05 (not $0.04: the summary counts).
        shown = screen.wait_for("(branch $0.02)")
        assert "$0.05 (branch $0.02)" in shown
    (file,) = (tmp_path / "home" / "sessions").glob("*/*.jsonl")
    (summary,) = SessionLog(file).of_type("branch_summary")
    assert summary["usage"]["input"] == 1000 and summary["usage"]["output"] == 1000
