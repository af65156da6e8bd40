"""Branch summaries with a scripted model that records its requests: what the summariser is
sent, what the next attempt is sent, the fallback, the details, and the REPL and the shell."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from mulligan.app import Controller
from mulligan.app.sessions.catalog import new_session_path
from mulligan.app.settings import Settings
from mulligan.app.workspace.checkpoints import Checkpoints
from mulligan.app.workspace.store.snapshots import Store
from mulligan.session import SessionLog
from mulligan.session.maintenance import check
from mulligan.session.view import SUMMARY_PREAMBLE
from mulligan.testing import ScriptedModel, StreamingScriptedModel, call, reply, say
from mulligan.tools import coding_tools

PYTHON = sys.executable


def session(tmp_path: Path, model) -> Controller:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir(exist_ok=True)
    return Controller(model, coding_tools(work), Settings(cwd=work, home=home),
                      new_session_path(home, work),
                      checkpoints=Checkpoints(Store(home), work))


def test_the_summary_request_holds_the_abandoned_attempt_and_the_next_one_only_the_summary(
        tmp_path):
    model = ScriptedModel([say("Use a cache?"), say("Done: a module-level CACHE dict."),
                           say("Goal: speed. Tried: a global CACHE. Decisions: rejected."),
                           say("Then functools.cache.")])
    c = session(tmp_path, model)
    list(c.run_prompt("Make main.py faster."))  # e2 e3
    list(c.run_prompt("Do it, then."))  # e4 e5: the part to take back
    done = c.back("e3", summarize=True)
    assert done.summary is not None and not done.summary.fallback
    asked = model.calls[2]
    assert "Do it, then." in asked.text and "module-level CACHE" in asked.text
    assert "Make main.py faster." not in asked.text  # before the fork: kept, not summarised
    list(c.run_prompt("No global, please."))
    sent = model.calls[3]
    assert "Do it, then." not in sent.text and "module-level CACHE" not in sent.text
    assert SUMMARY_PREAMBLE + "Goal: speed." in sent.messages[2]["content"]
    entry = SessionLog(c.session_file).entries()[5]
    assert (entry["type"], entry["parent_id"], entry["from_id"]) == ("branch_summary", "e3",
                                                                      "e5")
    assert check(c.session_file).ok


def test_a_failing_model_gives_the_deterministic_summary_saying_so(tmp_path):
    model = ScriptedModel([reply(call("bash", {"command": "echo x > from-bash.txt; exit 3"},
                                      id="b1")),
                           say("hm"), RuntimeError("offline")])
    c = session(tmp_path, model)
    list(c.run_prompt("try bash"))
    done = c.back("e1", files="restore", summarize=True)
    assert done.summary is not None and done.summary.fallback
    assert done.summary.text.startswith("(A summary made from the session's entries")
    assert "The user asked: try bash" in done.summary.text
    details = done.summary.details
    assert details["files_changed"] == ["from-bash.txt"]  # only bash changed it
    assert details["commands"] == [{"command": "echo x > from-bash.txt; exit 3",
                                    "exit_code": 3}]
    assert details["restored"] is True
    assert not (tmp_path / "work" / "from-bash.txt").exists()


def test_an_attempt_that_began_from_a_summary_carries_its_file_lists_forward(tmp_path):
    model = ScriptedModel([reply(call("write", {"path": "a.txt", "content": "1\n"}, id="w1")),
                           say("wrote a"), say("summary one"),
                           reply(call("read", {"path": "a.txt"}, id="r1")), say("read"),
                           say("summary two")])
    c = session(tmp_path, model)
    list(c.run_prompt("write a"))
    c.back("e1", files="keep", summarize=True)
    list(c.run_prompt("read a"))
    done = c.back("e1", summarize=True)
    assert done.summary.details["files_changed"] == ["a.txt"]
    assert done.summary.details["files_read"] == ["a.txt"]


def test_aborting_the_summary_leaves_a_plain_branch_line(tmp_path):
    model = StreamingScriptedModel([say("one"), say("a long summary " * 50)], pause=0.05)
    c = session(tmp_path, model)
    list(c.run_prompt("go"))
    threading.Timer(0.3, c.abort).start()
    done = c.back("e1", summarize=True)
    assert done.summary is None
    assert SessionLog(c.session_file).entries()[-1]["type"] == "branch"


def test_sessions_back_summarize_writes_the_entry_from_the_shell(tmp_path):
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    run = tmp_path / "run.json"
    run.write_text(json.dumps(["first answer"]))
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps(["Goal: x. Tried: y."]))
    env = {**os.environ, "MULLIGAN_HOME": str(home)}
    subprocess.run([PYTHON, "-m", "mulligan", "-p", "q", "--model", f"scripted:{run}"],
                   cwd=work, env=env, check=True, capture_output=True)
    (file,) = (home / "sessions").glob("*/*.jsonl")
    done = subprocess.run([PYTHON, "-m", "mulligan", "sessions", "back", str(file), "e1",
                           "--summarize", "--model", f"scripted:{summary}"], cwd=work, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "a branch summary" in done.stdout and "Goal: x. Tried: y." in done.stdout
    last = SessionLog(file).entries()[-1]
    assert last["type"] == "branch_summary" and last["summary"] == "Goal: x. Tried: y."
    shown = subprocess.run([PYTHON, "-m", "mulligan", "sessions", "tree", str(file)],
                           env=env, capture_output=True, text=True).stdout
    assert "summary" in shown
