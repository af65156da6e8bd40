"""bash's output while it runs: tool_execution_update events from the loop (a real bash, a
scripted model), a view only -- the record and the session file hold the one result."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from mulligan.harness import Harness
from mulligan.loop import run_agent
from mulligan.messages import Message
from mulligan.session import SessionLog, persist_to
from mulligan.testing import ScriptedModel, call, reply, say
from mulligan.tools import Sandbox, bash_tool, read_tool, run_tool
from mulligan.tools.running import ToolRun
from test_sandbox import needs_bwrap

COUNTING = "for i in 1 2 3; do echo line$i; sleep 0.4; done"


def _run(tmp_path: Path, command: str, **options: Any) -> tuple[list[dict[str, Any]],
                                                                list[Message]]:
    model = ScriptedModel([reply(call("bash", {"command": command}, id="c1")), say("done")])
    record: list[Message] = []
    events = []
    for event in run_agent(model, "system", record, [bash_tool(tmp_path)], "go", **options):
        events.append({**event, "_at": time.monotonic()})
    return events, record


def test_bash_output_arrives_as_updates_before_its_result_and_is_recorded_once(
        tmp_path: Path) -> None:
    events, record = _run(tmp_path, COUNTING)
    kinds = [e["type"] for e in events]
    start = kinds.index("tool_execution_start")
    result_end = next(i for i, e in enumerate(events) if e["type"] == "message_end"
                      and e["message"]["role"] == "toolResult")
    updates = [e for e in events if e["type"] == "tool_execution_update"]
    # Each line as it is printed: several updates, all between the start and the result.
    assert len(updates) >= 2
    assert all(start < events.index(u) < result_end for u in updates)
    assert updates[0]["output"].startswith("line1") and "line3" not in updates[0]["output"]
    assert {u["tool_call_id"] for u in updates} == {"c1"}
    assert {u["tool_name"] for u in updates} == {"bash"}
    assert "".join(u["output"] for u in updates) == "line1\nline2\nline3\n"
    elapsed = [u["elapsed"] for u in updates]
    assert elapsed == sorted(elapsed) and elapsed[-1] >= 0.8
    # The first line was shown while the command still ran (the last line came 0.8 s later).
    assert events[result_end]["_at"] - updates[0]["_at"] >= 0.6
    # The record: one result, the same as without the updates.
    results = [m for m in record if m["role"] == "toolResult"]
    assert len(results) == 1 and results[0]["content"] == "line1\nline2\nline3\n"
    assert "tool_execution_update" not in json.dumps(record)


def test_updates_are_coalesced_to_at_most_ten_a_second(tmp_path: Path) -> None:
    events, record = _run(tmp_path, "for i in $(seq 1 3000); do echo n$i; done; sleep 0.5")
    updates = [e for e in events if e["type"] == "tool_execution_update"]
    took = updates[-1]["elapsed"] if updates else 0.0
    assert 1 <= len(updates) <= took * 10 + 2
    assert "".join(u["output"] for u in updates).count("\n") == 3000
    assert len([m for m in record if m["role"] == "toolResult"]) == 1


def test_a_tool_that_does_not_stream_gives_no_update(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    model = ScriptedModel([reply(call("read", {"path": "a.txt"}, id="c1")), say("done")])
    events = list(run_agent(model, "system", [], [read_tool(tmp_path)], "go"))
    assert not [e for e in events if e["type"] == "tool_execution_update"]


def test_the_session_file_holds_the_one_result_and_no_update(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    model = ScriptedModel([reply(call("bash", {"command": COUNTING}, id="c1")), say("done")])
    harness = Harness(model, "system", [bash_tool(work)])
    log = SessionLog(tmp_path / "s.jsonl")
    harness.subscribe(persist_to(log))
    heard = [e["type"] for e in harness.prompt("go")]
    assert heard.count("tool_execution_update") >= 2
    text = (tmp_path / "s.jsonl").read_text()
    assert "tool_execution_update" not in text and text.count('"toolResult"') == 1
    assert [m["role"] for m in log.replay()] == ["user", "assistant", "toolResult",
                                                 "assistant"]


def test_an_abort_while_bash_streams_stops_it_within_half_a_second(tmp_path: Path) -> None:
    abort = threading.Event()
    model = ScriptedModel([reply(call("bash", {"command": "echo started; sleep 30"},
                                      id="c1"))])
    record: list[Message] = []
    aborted_at = None
    for event in run_agent(model, "system", record, [bash_tool(tmp_path)], "go",
                           abort=abort):
        if event["type"] == "tool_execution_update" and aborted_at is None:
            aborted_at = time.monotonic()
            abort.set()
        if event["type"] == "tool_execution_end":
            assert aborted_at is not None and time.monotonic() - aborted_at < 0.5
    result = next(m for m in record if m["role"] == "toolResult")
    assert "started" in result["content"] and "[Aborted" in result["content"]


def test_closing_the_run_at_an_update_stops_bash_and_keeps_its_result(tmp_path: Path) -> None:
    model = ScriptedModel([reply(call("bash", {"command": "echo started; sleep 30"},
                                      id="c1"))])
    record: list[Message] = []
    run = run_agent(model, "system", record, [bash_tool(tmp_path)], "go")
    for event in run:
        if event["type"] == "tool_execution_update":
            break
    began = time.monotonic()
    run.close()  # no abort was given: the call's own is set
    assert time.monotonic() - began < 0.5
    result = record[-1]
    assert result["role"] == "toolResult" and result["tool_call_id"] == "c1"
    assert "started" in result["content"] and "[Aborted" in result["content"]


def test_a_tool_run_returns_what_run_tool_returns(tmp_path: Path) -> None:
    tools = [bash_tool(tmp_path)]
    command = call("bash", {"command": "printf 'a\\nb\\n'; exit 3"}, id="c9")
    run = ToolRun(tools, command)
    shown = "".join(u["output"] for u in run.updates())
    assert shown == "a\nb\n"
    assert run.result() == run_tool(tools, command)


def test_json_mode_writes_the_updates_through_the_permission_and_hook_wrappers(
        tmp_path: Path) -> None:
    from test_cli import mulligan, script, session_files

    home = tmp_path / "home"
    home.mkdir()
    # A pre_tool_use hook wraps bash (app/extensions), and so does the permission guard.
    (home / "config.toml").write_text('[[hooks.pre_tool_use]]\ncommand = "true"\n')
    bash = {"role": "assistant", "stop_reason": "toolUse", "content": [
        {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": COUNTING}}]}
    done = mulligan(tmp_path, "-p", "count", "--mode", "json", "--permission-mode", "auto",
                    "--model", script(tmp_path, bash, "done"))
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = [e["type"] for e in lines]
    updates = [e for e in lines if e["type"] == "tool_execution_update"]
    assert len(updates) >= 2 and "".join(u["output"] for u in updates) == \
        "line1\nline2\nline3\n"
    assert kinds.index("tool_execution_start") < kinds.index("tool_execution_update") < \
        kinds.index("tool_execution_end")
    (file,) = session_files(tmp_path)
    assert "tool_execution_update" not in file.read_text()


@needs_bwrap
def test_sandboxed_bash_streams_too(tmp_path: Path) -> None:
    tools = [bash_tool(tmp_path, sandbox=Sandbox())]
    run = ToolRun(tools, call("bash", {"command": "echo one; sleep 0.4; echo two"}, id="c1"))
    pieces = [u["output"] for u in run.updates()]
    assert pieces[0] == "one\n" and "".join(pieces) == "one\ntwo\n"
    assert run.result()["content"] == "one\ntwo\n"
