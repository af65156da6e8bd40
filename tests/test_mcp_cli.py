"""MCP from the command line, as subprocesses: `-p` with `--mcp-config`, the permission modes,
a folder's own `.mcp.json`, `mulligan mcp list`, and nothing of MCP when nothing is set.

The server is tests/mcp_servers/odd_server.py (the `mcp` SDK, started by Python), so these need
no npm install."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mulligan.app.extensions.mcp_config import Trust
from mulligan.app.extensions.setup import Extensions
from mulligan.frontends.terminal.trust import ask_trust
from test_cli import PYTHON, mulligan, script

ODD = Path(__file__).resolve().parent / "mcp_servers" / "odd_server.py"


def mcp_json(folder: Path, name: str = "odd", file: str = "mcp.json") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file
    path.write_text(json.dumps({"mcpServers": {name: {"command": sys.executable,
                                                       "args": [str(ODD)]}}}))
    return path


def call(name: str, arguments: dict) -> dict:
    return {"role": "assistant", "stop_reason": "toolUse", "content": [
        {"type": "toolCall", "id": "c1", "name": name, "arguments": arguments}]}


def results(stdout: str) -> list[dict]:
    events = [json.loads(line) for line in stdout.splitlines()]
    return [e["message"] for e in events
            if e["type"] == "message_end" and e["message"]["role"] == "toolResult"]


def test_print_mode_calls_a_tool_of_a_server_named_with_mcp_config(tmp_path):
    config = mcp_json(tmp_path)
    done = mulligan(tmp_path, "-p", "x", "--mode", "json", "--mcp-config", str(config),
                    "--model", script(tmp_path, call("mcp__odd__echo", {"word": "hi"}), "ok"))
    assert done.returncode == 0, done.stderr
    (result,) = results(done.stdout)
    assert (result["content"], result["is_error"]) == ("echo: hi", False)


def test_print_mode_under_ask_refuses_an_mcp_call_as_its_recorded_result(tmp_path):
    config = mcp_json(tmp_path)
    done = mulligan(tmp_path, "-p", "x", "--mode", "json", "--mcp-config", str(config),
                    "--permission-mode", "ask",
                    "--model", script(tmp_path, call("mcp__odd__echo", {"word": "hi"}), "ok"))
    (result,) = results(done.stdout)
    assert result["is_error"] is True
    assert result["content"].startswith("Refused: permission mode ask asks before "
                                        "mcp__odd__echo")


def test_edits_mode_asks_for_mcp_tools_like_bash(tmp_path):
    config = mcp_json(tmp_path)
    done = mulligan(tmp_path, "-p", "x", "--mode", "json", "--mcp-config", str(config),
                    "--permission-mode", "edits",
                    "--model", script(tmp_path, call("mcp__odd__echo", {"word": "hi"}), "ok"))
    (result,) = results(done.stdout)
    assert result["is_error"] is True and "Refused" in result["content"]


def test_a_folders_own_mcp_json_is_not_started_by_print_mode(tmp_path):
    mcp_json(tmp_path / "work", file=".mcp.json")
    Trust(tmp_path / "home").remember(tmp_path / "work", True)  # even when trusted
    done = mulligan(tmp_path, "-p", "x", "--mode", "json",
                    "--model", script(tmp_path, call("mcp__odd__echo", {"word": "hi"}), "ok"))
    (result,) = results(done.stdout)
    assert result["is_error"] is True and "Tool mcp__odd__echo not found" in result["content"]
    named = mulligan(tmp_path, "-p", "x", "--mode", "json", "--mcp-config", ".mcp.json",
                     "--model", script(tmp_path, call("mcp__odd__echo", {"word": "hi"}),
                                       "ok"))
    assert results(named.stdout)[0]["content"] == "echo: hi"


def test_a_server_that_cannot_start_is_an_event_and_the_run_goes_on(tmp_path):
    config = tmp_path / "bad.json"
    config.write_text(json.dumps({"mcpServers": {"ghost": {"command": str(tmp_path / "nope")}}}))
    done = mulligan(tmp_path, "-p", "x", "--mode", "json", "--mcp-config", str(config),
                    "--model", script(tmp_path, "fine"))
    assert done.returncode == 0
    events = [json.loads(line) for line in done.stdout.splitlines()]
    (notice,) = [e for e in events if e["type"] == "mcp"]
    assert (notice["server"], notice["state"]) == ("ghost", "failed")
    assert "nope" in notice["error"]


def test_mcp_list_prints_each_server_its_state_and_tools(tmp_path):
    good = mcp_json(tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"mcpServers": {"ghost": {"command": str(tmp_path / "nope")}}}))
    done = mulligan(tmp_path, "mcp", "list", "--mcp-config", str(good), "--mcp-config", str(bad))
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[0].startswith("odd  ready  (stdio: ")
    assert "mcp__odd__echo" in lines[1] and "mcp__odd__picture" in lines[1]
    assert lines[2].startswith("ghost  failed: FileNotFoundError")
    only_good = mulligan(tmp_path, "mcp", "list", "--mcp-config", str(good))
    assert only_good.returncode == 0


def test_mcp_list_names_an_untrusted_folders_servers_without_starting_them(tmp_path):
    mcp_json(tmp_path / "work", name="project", file=".mcp.json")
    done = mulligan(tmp_path, "mcp", "list")
    assert done.returncode == 0
    assert done.stdout.startswith("project  not started: .mcp.json of an untrusted folder")


def test_a_bad_mcp_config_is_a_usage_error_naming_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"mcpServers": {"x": {"command": "a", "url": "http://b"}}}))
    done = mulligan(tmp_path, "-p", "x", "--mcp-config", str(bad),
                    "--model", script(tmp_path, "ok"))
    assert done.returncode == 2 and f"{bad}: MCP server 'x'" in done.stderr


def test_nothing_of_mcp_is_imported_or_started_when_no_server_is_set(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    code = ("import sys\nfrom mulligan.cli import main\n"
            f"main(['-p', 'x', '--model', {script(tmp_path, 'ok')!r}])\n"
            "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.') "
            "or m.startswith('mcp_types') or 'mcp_client' in m))\n")
    env = {**os.environ, "MULLIGAN_HOME": str(tmp_path / "home")}
    done = subprocess.run([PYTHON, "-c", code], cwd=work, capture_output=True, text=True,
                          env=env, timeout=60)
    assert done.stdout.splitlines() == ["ok", "[]"], done.stderr
    with_one = code.replace("'x', ", f"'x', '--mcp-config', {str(mcp_json(tmp_path))!r}, ")
    done = subprocess.run([PYTHON, "-c", with_one], cwd=work, capture_output=True, text=True,
                          env=env, timeout=60)
    assert "'mcp'" in done.stdout.splitlines()[-1]  # the same check sees it when one is set


def test_the_repl_asks_once_per_folder_about_its_own_setup_and_remembers(tmp_path):
    work, home = tmp_path / "work", tmp_path / "home"
    mcp_json(work, name="project", file=".mcp.json")
    asked: list[str] = []
    said: list[str] = []
    assert ask_trust(work, home, ask=lambda q: asked.append(q) or "y",
                     say=said.append) is True
    assert len(asked) == 1 and any("MCP servers project" in line for line in said)
    assert ask_trust(work, home, ask=lambda q: asked.append(q) or "n", say=said.append) is True
    assert len(asked) == 1  # remembered
    found = Extensions.load({}, home, work, project_servers=True)
    assert [s.name for s in found.servers] == ["project"]
    other = tmp_path / "other"
    mcp_json(other, file=".mcp.json")
    assert ask_trust(other, home, ask=lambda q: "", say=said.append) is False
    assert Trust(home).answer(other) is False
    assert ask_trust(tmp_path, home, ask=lambda q: 1 / 0, say=said.append) is None  # nothing


def test_mcp_tools_ask_like_bash_and_a_allows_that_one_tool_for_the_session(tmp_path):
    from mulligan.app.permissions import Answer, Permissions
    from mulligan.tools import ToolError

    asked = []
    permissions = Permissions("ask", tmp_path,
                              asker=lambda q, abort: asked.append(q) or Answer("always"))
    permissions.check("mcp__db__query", {"sql": "select 1"}, None)
    permissions.check("mcp__db__query", {"sql": "select 2"}, None)
    assert [q.tool for q in asked] == ["mcp__db__query"]
    assert asked[0].preview == ["{", ' "sql": "select 1"', "}"]
    permissions.check("mcp__db__drop", {}, None)  # another tool asks again
    assert len(asked) == 2
    edits = Permissions("edits", tmp_path, asker=lambda q, abort: asked.append(q) or Answer("no"))
    with pytest.raises(ToolError, match="The user refused this mcp__db__query call"):
        edits.check("mcp__db__query", {}, None)
    Permissions("auto", tmp_path).check("mcp__db__query", {}, None)  # asks nothing
    with pytest.raises(ToolError, match="nobody to ask"):
        Permissions("ask", tmp_path).check("mcp__db__query", {}, None)
    planning = Permissions("auto", tmp_path)
    planning.mode = "plan"  # the plan mode refuses MCP calls whatever else it allows
    with pytest.raises(ToolError, match=r"permission mode plan.*mcp__db__query call did not run"):
        planning.check("mcp__db__query", {}, None)
