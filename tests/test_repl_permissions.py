"""Permissions without noise, in the real REPL in tmux and the real `-p` command, against a
local server speaking Anthropic's streaming protocol: the diff once and real, the refusal
punctuated, Shift-Tab cycling the modes, plan mode, the sandbox shown; the status line that
keeps model and mode at 80 columns."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from fakes import anthropic_server as wire
from fakes.http_server import ScriptedServer
from mulligan.session import SessionLog
from mulligan.tools import sandbox_problem
from tmux_screen import Screen, needs_tmux

BUSY = "Esc or Ctrl-C aborts"


def call(name: str, arguments: dict) -> object:
    return wire.reply(wire.tool_use_block(0, "toolu_1", name, json.dumps(arguments)),
                      stop_reason="tool_use")


def started(tmp_path, server, *args, width=100, height=30):
    screen = Screen(tmp_path, server.url, *args, width=width, height=height)
    screen.wait_for("/help for commands")
    screen.wait_for("›")
    return screen


def session(tmp_path) -> SessionLog:
    (file,) = (tmp_path / "home" / "sessions").glob("*/*.jsonl")
    return SessionLog(file)


@needs_tmux
def test_a_write_over_a_file_is_asked_with_its_real_diff_shown_once(tmp_path):
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "notes.md").write_text("old line\nkept line\n")
    script = [call("write", {"path": "notes.md", "content": "new line\nkept line\nmore\n"}),
              wire.text_reply("wrote it")]
    with ScriptedServer(script) as server, started(tmp_path, server) as screen:
        screen.text("take a note")
        screen.keys("Enter")
        screen.wait_for("allow write?")
        asked = screen.wait_for("+more")  # printed through the background writer
        assert "▸ write notes.md  -1 +2" in asked  # the real change, not "-0 +3"
        assert asked.count("+new line") == 1 and asked.count("-old line") == 1
        assert " kept line" in asked
        screen.wait_for("waiting for your answer about write")  # not "running write"
        screen.text("y")
        screen.keys("Enter")
        screen.settled("wrote it", BUSY)
    assert (tmp_path / "work" / "notes.md").read_text() == "new line\nkept line\nmore\n"


@needs_tmux
def test_a_refusal_reaches_the_model_punctuated(tmp_path):
    script = [call("bash", {"command": "rm -rf build"}), wire.text_reply("fine, I won't")]
    with ScriptedServer(script) as server, started(tmp_path, server) as screen:
        screen.text("clean up")
        screen.keys("Enter")
        screen.wait_for("allow bash?")
        asked = screen.wait_for("rm -rf build")
        assert asked.count("rm -rf build") == 1  # the command once, on the call's line
        screen.text("n not now")
        screen.keys("Enter")
        screen.settled("fine, I won't", BUSY)
    (result,) = [m for m in session(tmp_path).replay() if m["role"] == "toolResult"]
    assert "Their reason: not now. Do not run it again" in result["content"]


@needs_tmux
def test_shift_tab_cycles_ask_edits_auto_plan(tmp_path):
    with ScriptedServer([]) as server, started(tmp_path, server) as screen:
        screen.wait_for("claude-sonnet-4-6 · ask")
        for mode in ("edits", "auto", "plan", "ask"):
            screen.keys("BTab")
            shown = screen.wait_for(f"permission mode {mode}:")
            screen.wait_for(f"claude-sonnet-4-6 · {mode}")
        assert "planning: read-only tools only" in shown


def test_plan_mode_refuses_every_change_and_command_with_a_note(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("hello\n")
    script = [call("bash", {"command": "touch made-by-bash"}),
              call("write", {"path": "new.txt", "content": "x\n"}),
              call("read", {"path": "a.txt"}), wire.text_reply("Here is the plan.")]
    env = {**os.environ, "MULLIGAN_HOME": str(tmp_path / "home"),
           "ANTHROPIC_API_KEY": "sk-ant-test-local"}
    with ScriptedServer(script) as server:
        done = subprocess.run([sys.executable, "-m", "mulligan", "-p", "plan it", "--model",
                               "anthropic/claude-sonnet-4-6", "--base-url", server.url,
                               "--permission-mode", "plan"], cwd=work, env=env,
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in work.iterdir()) == ["a.txt"]
    results = [m for m in session(tmp_path).replay() if m["role"] == "toolResult"]
    assert [r["is_error"] for r in results] == [True, True, False]
    for refused in results[:2]:
        assert "the user is planning (permission mode plan)" in refused["content"]
        assert "Leaving plan mode is the user's choice." in refused["content"]
    assert results[2]["content"].strip().endswith("hello")


@needs_tmux
@pytest.mark.skipif(sandbox_problem(False) is not None and os.environ.get("CI") != "true",
                    reason=str(sandbox_problem(False)))
def test_the_banner_and_the_status_line_show_the_sandbox(tmp_path):
    with ScriptedServer([]) as server, started(tmp_path, server, "--sandbox") as screen:
        shown = screen.wait_for("claude-sonnet-4-6 · ask · sandbox")
        assert "bash in a sandbox (only the working folder writable)" in " ".join(shown.split())


@needs_tmux
def test_the_status_line_keeps_model_and_mode_at_80_columns(tmp_path):
    script = [wire.reply(wire.text_block(0, "ok"), input_tokens=1200, output_tokens=30)]
    with ScriptedServer(script) as server, \
            started(tmp_path, server, "--permission-mode", "edits", width=80) as screen:
        screen.text("hello")
        screen.keys("Enter")
        screen.settled("ok", BUSY)
        screen.text("/name a rather long session name for the status line")
        screen.keys("Enter")
        screen.wait_for("session named")
        shown = screen.wait_for("anthropic/claude-sonnet-4-6 · edits · ")  # the status line
        status = [line for line in shown.splitlines() if "claude-sonnet-4-6 ·" in line][-1]
        assert len(status) < 80
        assert status.startswith("anthropic/claude-sonnet-4-6 · edits · ")
        assert "$0.00" in status
