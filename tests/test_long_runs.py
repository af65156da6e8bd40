"""Long runs never die at the window: one prompt with many tool rounds is compacted inside the
run (cut at an assistant message, never between a call and its result, the run's start and
request summarised), between its tool rounds, and a single tool result too large for the
window is sent clipped. End to end: `mulligan -p` against the local Anthropic-protocol server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from fakes import anthropic_server as wire
from fakes.http_server import ScriptedServer
from mulligan.app import Controller
from mulligan.app.rewind.compaction import SYSTEM as COMPACT_SYSTEM
from mulligan.app.sessions.catalog import new_session_path
from mulligan.app.settings import Settings as RunSettings
from mulligan.providers.anthropic import AnthropicModel
from mulligan.session import SessionLog
from mulligan.session.view import COMPACTION_PREAMBLE
from mulligan.tools import coding_tools

KEY = "sk-ant-test-0123456789abcdef"
TASK = "Read notes.txt and tell me what it says."
PROMPT_TOO_LONG = wire.error(400, "invalid_request_error",
                             "prompt is too long: 210000 tokens > 200000 maximum")


def read_call(input_tokens: int, path: str = "notes.txt") -> Any:
    return wire.reply(wire.text_block(0, "Reading it."),
                      wire.tool_use_block(1, "toolu_01R", "read", json.dumps({"path": path})),
                      stop_reason="tool_use", input_tokens=input_tokens)


def print_mode(tmp_path: Path, server: ScriptedServer, *args: str,
               config: str = "") -> tuple[subprocess.CompletedProcess[str], Path]:
    """`mulligan -p TASK ARGS` in a fresh folder holding notes.txt, against `server`; the
    result and the session file."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir(exist_ok=True)
    work.mkdir(exist_ok=True)
    if not (work / "notes.txt").exists():
        (work / "notes.txt").write_text("The meeting moved to Thursday.\n")
    (home / "config.toml").write_text(
        f'[providers.anthropic]\nbase_url = "{server.url}"\ntimeout = 10\n{config}')
    env = {**os.environ, "MULLIGAN_HOME": str(home), "ANTHROPIC_API_KEY": KEY}
    done = subprocess.run([sys.executable, "-m", "mulligan", "-p", TASK, *args, "--model",
                           "anthropic/claude-sonnet-4-6"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=60)
    files = [p for p in home.rglob("*.jsonl")]
    assert len(files) == 1, (files, done.stderr)
    return done, files[0]


def entries(file: Path) -> list[dict[str, Any]]:
    return list(SessionLog(file, sidecar=False).entries())


def test_an_overflow_in_the_first_tool_round_is_compacted_inside_the_run(tmp_path: Path) -> None:
    # The first reply reports 150k of a 200k window; the next request is refused as too long.
    with ScriptedServer([read_call(150_000), PROMPT_TOO_LONG,
                         wire.text_reply("Request: read notes.txt. Done: called read."),
                         wire.text_reply("It says the meeting moved to Thursday.")]) as server:
        done, file = print_mode(tmp_path, server)
    assert done.returncode == 0, done.stderr
    assert "nothing to compact" not in done.stdout + done.stderr
    assert done.stdout.strip() == "It says the meeting moved to Thursday."

    # The summary request: the compaction prompt, and the run's start with its request.
    summary_request = server.requests[2].body
    assert summary_request["system"][0]["text"] == COMPACT_SYSTEM
    assert TASK in summary_request["messages"][0]["content"][0]["text"]

    # The cut is at the assistant message that made the call: kept, with its result after it.
    log = entries(file)
    compaction = next(e for e in log if e["type"] == "compaction")
    kept = next(e for e in log if e["id"] == compaction["first_kept_entry_id"])
    assert kept["message"]["role"] == "assistant"
    retried = server.requests[3].body["messages"]
    assert retried[0]["content"][0]["text"].startswith(COMPACTION_PREAMBLE)
    assert [b["type"] for b in retried[1]["content"]] == ["text", "tool_use"]
    assert retried[2]["content"][0]["type"] == "tool_result"
    assert retried[2]["content"][0]["tool_use_id"] == "toolu_01R"
    assert TASK not in json.dumps(retried)  # the request itself went into the summary


def test_a_run_nearing_the_window_compacts_between_its_tool_rounds(tmp_path: Path) -> None:
    # 190k of 200k after the first round: past the window minus the 16k reserve.
    with ScriptedServer([read_call(190_000),
                         wire.text_reply("Request: read notes.txt. Done: called read."),
                         wire.text_reply("Thursday.")]) as server:
        done, file = print_mode(tmp_path, server, "--mode", "json")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = [e["type"] for e in events]
    assert kinds.count("agent_start") == 1  # one run
    start = kinds.index("compaction_start")
    assert events[start]["reason"] == "threshold"
    assert kinds.index("tool_execution_end") < start < kinds.index("compaction_end")
    end = next(e for e in events if e["type"] == "compaction_end")
    assert end["error"] == "" and end["tokens_after"] < end["tokens_before"]
    assert len(server.requests) == 3
    assert server.requests[1].body["system"][0]["text"] == COMPACT_SYSTEM
    after = server.requests[2].body["messages"]
    assert after[0]["content"][0]["text"].startswith(COMPACTION_PREAMBLE)
    assert after[1]["role"] == "assistant"


def test_a_tool_result_larger_than_the_window_is_sent_clipped_and_recorded_whole(
        tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    lines = "".join(f"line {n:05d} of a long log\n" for n in range(1000))  # 25 KB
    (work / "notes.txt").write_text(lines)
    with ScriptedServer([read_call(50), wire.text_reply("A long log.")]) as server:
        done, file = print_mode(tmp_path, server, config="context_window = 2000\n"
                                "[compaction]\nauto = false\n")
    assert done.returncode == 0, done.stderr
    sent = server.requests[1].body["messages"][2]["content"][0]["content"]
    assert len(sent) < 4_600  # half the 2,000-token window, 4 characters a token, and a note
    assert sent.startswith("line 00000") and "line 00999" in sent
    assert "characters of this tool result left out" in sent
    result = next(e["message"] for e in entries(file)
                  if e.get("message", {}).get("role") == "toolResult")
    assert "line 00500 of a long log" in result["content"]  # the record keeps it whole


def test_an_automatic_compactions_summary_request_stops_on_abort(tmp_path: Path) -> None:
    stalled = wire.reply(wire.text_block(0, "never"), stall_after=0)
    with ScriptedServer([read_call(190_000), stalled]) as server:
        model = AnthropicModel("claude-sonnet-4-6", api_key=KEY, base_url=server.url,
                               timeout=30.0, idle_timeout=30.0)
        work, home = tmp_path / "work", tmp_path / "home"
        work.mkdir()
        (work / "notes.txt").write_text("hello\n")
        c = Controller(model, coding_tools(work), RunSettings(cwd=work, home=home),
                       new_session_path(home, work))

        def abort_once_summarising() -> None:
            while len(server.requests) < 2:
                threading.Event().wait(0.01)
            threading.Event().wait(0.2)  # the summary request is in flight, the server silent
            c.abort()

        threading.Thread(target=abort_once_summarising, daemon=True).start()
        began = time.monotonic()
        events = list(c.run_prompt(TASK))
        took = time.monotonic() - began
    assert took < 10  # not the 30 s the server's silence would take
    end = next(e for e in events if e["type"] == "compaction_end")
    assert end["error"] == "" and "not by the model" in end["summary"]  # made from the entries
    assert events[-1]["type"] == "agent_end"
    assert c.harness.messages[-1]["stop_reason"] == "aborted"
    assert len(server.requests) == 2  # no model call after the abort
