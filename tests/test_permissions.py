"""Permission modes against real processes and real files, in -p and in the REPL on a real
pseudo-terminal: the agent asks before it acts, and a no is the call's recorded result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mulligan.app.permissions import Answer, Permissions
from mulligan.session import SessionLog
from mulligan.testing import call, reply, say, tool_result
from mulligan.tools import coding_tools, run_tool
from test_cli_repl import Terminal

PYTHON = sys.executable


def script(tmp_path: Path, *replies) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(list(replies)))
    return f"scripted:{path}"


def calls():
    return [reply(call("write", {"path": "w.txt", "content": "written\n"}, id="w1")),
            reply(call("bash", {"command": "echo ran > b.txt"}, id="b1")), say("done")]


def results(tmp_path: Path) -> list[dict]:
    (file,) = (tmp_path / "home" / "sessions").glob("*/*.jsonl")
    return [m for m in SessionLog(file).replay() if m["role"] == "toolResult"]


@pytest.mark.parametrize("mode, wrote, ran", [("auto", True, True), ("edits", True, False),
                                              ("ask", False, False)])
def test_print_mode_lets_through_what_the_mode_allows_and_records_refusals(
        tmp_path, mode, wrote, ran):
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "MULLIGAN_HOME": str(tmp_path / "home")}
    done = subprocess.run([PYTHON, "-m", "mulligan", "-p", "go", "--model",
                           script(tmp_path, *calls()), "--permission-mode", mode], cwd=work,
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert (work / "w.txt").exists() is wrote and (work / "b.txt").exists() is ran
    write_result, bash_result = results(tmp_path)
    assert write_result["is_error"] is not wrote and bash_result["is_error"] is not ran
    if not ran:
        assert "nobody to ask" in bash_result["content"]


def test_print_mode_defaults_to_auto(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "MULLIGAN_HOME": str(tmp_path / "home")}
    subprocess.run([PYTHON, "-m", "mulligan", "-p", "go", "--model",
                    script(tmp_path, *calls())], cwd=work, env=env, check=True,
                   capture_output=True, timeout=60)
    assert (work / "b.txt").exists()


def test_an_edit_is_previewed_as_its_diff_and_a_no_carries_the_reason(tmp_path):
    (tmp_path / "m.py").write_text("x = 1\ny = 2\n")
    asked = []

    def asker(question, abort):
        asked.append(question)
        return Answer("no", "keep y")

    permissions = Permissions("ask", tmp_path, asker)
    tools = permissions.guard(coding_tools(tmp_path))
    edit = call("edit", {"path": "m.py", "old_text": "y = 2", "new_text": "y = 3"}, id="e1")
    result = run_tool(tools, edit)
    assert result["is_error"] and "Their reason: keep y" in result["content"]
    assert "-y = 2" in asked[0].preview and "+y = 3" in asked[0].preview
    assert (tmp_path / "m.py").read_text() == "x = 1\ny = 2\n"
    read = run_tool(tools, call("read", {"path": "m.py"}, id="r1"))
    assert not read["is_error"] and len(asked) == 1  # read-only tools never ask
    assert tool_result(edit, "x")["tool_call_id"] == "e1"


def repl(tmp_path: Path, *replies) -> Terminal:
    (tmp_path / "work").mkdir()
    term = Terminal(tmp_path, "--model", script(tmp_path, *replies))
    term.expect("permission mode ask")
    term.expect("/help for commands")
    return term


def test_in_the_repl_y_runs_the_call_and_a_stops_asking_for_that_tool(tmp_path):
    term = repl(tmp_path, reply(call("bash", {"command": "echo 1 > one.txt"}, id="b1")),
                reply(call("bash", {"command": "echo 2 > two.txt"}, id="b2")), say("both"))
    term.type("go\r")
    term.expect("$ echo 1 > one.txt")
    term.expect("allow bash?")
    term.type("a\r")
    term.expect("both")  # the second bash call was not asked about
    assert (tmp_path / "work" / "one.txt").exists() and (tmp_path / "work" / "two.txt").exists()
    term.type("/permissions\r")
    term.expect("allowed for this session: bash")
    term.type("/quit\r")
    assert term.close() == 0


def test_in_the_repl_a_write_shows_its_diff_and_n_with_a_reason_is_recorded(tmp_path):
    term = repl(tmp_path, reply(call("write", {"path": "new.txt", "content": "hello\n"},
                                     id="w1")), say("fine, I will not"))
    term.type("write it\r")
    term.expect("+hello")
    term.expect("allow write?")
    term.type("y\r")  # one yes ...
    term.expect("fine, I will not")
    assert (tmp_path / "work" / "new.txt").exists()
    term.type("/quit\r")
    assert term.close() == 0


def test_in_the_repl_no_with_a_reason_and_ctrl_c_at_the_question_refuse(tmp_path):
    term = repl(tmp_path, reply(call("bash", {"command": "rm -rf build"}, id="b1")),
                say("understood"), reply(call("bash", {"command": "echo x > x.txt"}, id="b2")))
    term.type("clean up\r")
    term.expect("allow bash?")
    term.type("n not the build folder\r")
    term.expect("understood")
    term.type("again\r")
    term.expect("allow bash?")
    term.type("\x03")  # Ctrl-C at the question: no, and the run is aborted
    term.expect("aborted")
    term.type("/quit\r")
    assert term.close() == 0
    first, second = results(tmp_path)
    assert first["is_error"] and "Their reason: not the build folder" in first["content"]
    assert second["is_error"] and not (tmp_path / "work" / "x.txt").exists()


def test_under_edits_a_change_inside_git_asks_like_a_command(tmp_path):
    # A hook or a `core.fsmonitor` line in .git/config runs a program at the user's next
    # `git status`: under edits, such a change asks (and -p, with nobody to ask, refuses it).
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)
    (work / "cfg").symlink_to(".git/config")
    env = {**os.environ, "MULLIGAN_HOME": str(tmp_path / "home")}
    done = subprocess.run([PYTHON, "-m", "mulligan", "-p", "go", "--permission-mode", "edits",
                           "--model", script(
        tmp_path,
        reply(call("write", {"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\n"},
                   id="w1")),
        reply(call("edit", {"path": "cfg", "old_text": "[core]",
                            "new_text": "[core]\n\tfsmonitor = touch pwned"}, id="w2")),
        reply(call("write", {"path": "sub/.GIT/x", "content": "x\n"}, id="w3")),
        reply(call("write", {"path": "notes.txt", "content": "fine\n"}, id="w4")),
        say("done"))], cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    hook, config, other_git, notes = results(tmp_path)
    for refused in (hook, config, other_git):
        assert refused["is_error"] and "nobody to ask" in refused["content"]
    assert not (work / ".git/hooks/pre-commit").exists()
    assert "fsmonitor" not in (work / ".git/config").read_text()
    assert not notes["is_error"] and (work / "notes.txt").read_text() == "fine\n"
