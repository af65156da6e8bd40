"""The user's setup in the REPL on a real pseudo-terminal: the one question about a folder's
own .mcp.json and .claude/settings.json (asked once, remembered), an MCP tool asking like bash
with `a` allowing it for the session, each hook that ran as a line, /mcp, and a custom
command from .claude/commands sending its text."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mulligan.session import SessionLog
from mulligan.testing import call, reply, say
from test_cli_repl import Terminal
from test_permissions import script

ODD = Path(__file__).resolve().parent / "mcp_servers" / "odd_server.py"


def project(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    (work / ".claude" / "commands").mkdir(parents=True)
    (work / ".mcp.json").write_text(json.dumps({"mcpServers": {"odd": {
        "command": sys.executable, "args": [str(ODD)]}}}))
    (work / ".claude" / "settings.json").write_text(json.dumps({"hooks": {"PreToolUse": [
        {"matcher": "mcp__.*", "hooks": [{"type": "command", "command": "exit 0"}]}]}}))
    (work / ".claude" / "commands" / "greet.md").write_text(
        "---\ndescription: Greet someone\n---\nSay hello to $1.\n")
    (work / ".claude" / "commands" / "help.md").write_text("Not the built-in help.\n")
    return work


def test_a_trusted_folders_servers_hooks_and_commands_in_the_repl(tmp_path):
    work = project(tmp_path)
    replies = [reply(call("mcp__odd__echo", {"word": "one"}, id="m1")),
               reply(call("mcp__odd__echo", {"word": "two"}, id="m2")), say("echoed twice"),
               say("Hello, Bob!")]
    term = Terminal(tmp_path, "--model", script(tmp_path, *replies))
    term.expect(".mcp.json: MCP servers odd")
    term.expect(".claude/settings.json: 1 hook command(s)")
    term.expect("Trust this folder and use it? [y/N]")
    term.type("y\r")
    term.expect("/help for commands")
    term.expect("built-in command; not loaded (rename the file)")  # help.md, wrapped
    term.type("go\r")
    term.expect("allow mcp__odd__echo?")
    term.type("a\r")
    # Each hook's line comes with its call's result, in the order of the run's events.
    term.expect("hook pre_tool_use (mcp__odd__echo): exit 0 -> exit 0, ok")
    term.expect("hook pre_tool_use (mcp__odd__echo)")  # the second call: no question
    term.expect("echoed twice")
    term.type("/mcp\r")
    term.expect("odd  ready")
    term.expect("mcp__odd__echo")
    term.type("/greet Bob\r")
    term.expect("Hello, Bob!")
    term.type("/quit\r")
    assert term.close() == 0
    (file,) = (tmp_path / "home" / "sessions").glob("*/*.jsonl")
    messages = SessionLog(file).replay()
    assert [m["content"] for m in messages if m["role"] == "toolResult"] == [
        "echo: one", "echo: two"]
    assert messages[-2] == {"role": "user", "content": "Say hello to Bob.\n"}

    again = Terminal(tmp_path, "--model", script(tmp_path, say("x")))
    shown = again.expect("/help for commands")
    assert "Trust this folder" not in shown  # remembered
    again.type("/quit\r")
    assert again.close() == 0
    assert work.is_dir()


def test_an_untrusted_folders_servers_and_hooks_are_not_used(tmp_path):
    project(tmp_path)
    term = Terminal(tmp_path, "--model", script(
        tmp_path, reply(call("mcp__odd__echo", {"word": "x"}, id="m1")), say("no such tool")))
    term.expect("Trust this folder and use it? [y/N]")
    term.type("n\r")
    term.expect("not used (remembered")
    term.expect("/help for commands")
    term.type("/mcp\r")
    term.expect("no MCP servers")
    term.type("go\r")
    term.expect("no such tool")
    term.type("/quit\r")
    assert term.close() == 0
    (file,) = (tmp_path / "home" / "sessions").glob("*/*.jsonl")
    (result,) = [m for m in SessionLog(file).replay() if m["role"] == "toolResult"]
    assert result["is_error"] and "Tool mcp__odd__echo not found" in result["content"]
