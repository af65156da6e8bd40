"""Resuming in the real REPL in tmux (issue 24 item 9): `-c` and `/resume` show where the
branch left off as the run showed it -- Markdown rendered, tool calls and their output as their
lines -- not squashed one-liners."""

from __future__ import annotations

import json

from fakes import anthropic_server as wire
from fakes.http_server import ScriptedServer
from test_repl_screen import started
from tmux_screen import needs_tmux

pytestmark = needs_tmux

REPLY = ["Done. The plan, in **full**:\n\n", "1. Read `main.py` first.\n",
         "2. Cache the rows.\n"]


def _one_session(tmp_path) -> None:
    script = [wire.reply(wire.tool_use_block(0, "toolu_1", "bash", json.dumps(
        {"command": "printf 'alpha\\nbeta\\n'"})), stop_reason="tool_use"),
        wire.reply(wire.text_block(0, *REPLY))]
    with ScriptedServer(script) as server, \
            started(tmp_path, server, "--permission-mode", "auto") as screen:
        screen.text("list it")
        screen.keys("Enter")
        screen.settled("Cache the rows", "Esc or Ctrl-C aborts")
        screen.text("/quit")
        screen.keys("Enter")
        screen.wait_for("[exited 0]")


def _rendered(shown: str) -> None:
    assert "› list it" in shown
    assert "▸ bash $ printf" in shown and "│ alpha" in shown and "│ beta" in shown
    assert "The plan, in full:" in shown and "**" not in shown  # Markdown, rendered
    assert " 1 Read main.py first." in shown and "1. Read" not in shown
    assert "ai:" not in shown and "you:" not in shown  # not the one-liners


def test_continue_shows_the_last_exchanges_rendered(tmp_path):
    _one_session(tmp_path)
    with ScriptedServer([]) as server, started(tmp_path, server, "-c") as screen:
        _rendered(screen.wait_for("Cache the rows"))


def test_resume_shows_the_branch_rendered(tmp_path):
    _one_session(tmp_path)
    file = next((tmp_path / "home" / "sessions").glob("*/*.jsonl"))
    with ScriptedServer([]) as server, started(tmp_path, server, "--no-session") as screen:
        screen.text(f"/resume {file}")
        screen.keys("Enter")
        shown = screen.wait_for("Cache the rows")
        assert "resumed" in shown
        _rendered(shown.split("resumed", 1)[1])
