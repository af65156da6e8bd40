"""A Harness with the real coding tools, driven by each SDK adapter against a local server that
speaks the provider's wire protocol: a two-turn tool-using task, then the exact requests."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from fakes import anthropic_server as claude
from fakes import openai_server as gpt
from fakes.http_server import ScriptedServer
from mulligan import Harness
from mulligan.providers.anthropic import AnthropicModel
from mulligan.providers.openai.chat import OpenAIChatModel
from mulligan.testing import shape
from mulligan.tools import coding_tools, tool_specs

SYSTEM = "You are a careful coding assistant. Work in the current folder."
MAIN_PY = 'def greet():\n    return "hi"\n'
EDIT = {"path": "main.py", "old_text": '"hi"', "new_text": '"hello"'}


def workspace(tmp_path: Path) -> Path:
    (tmp_path / "main.py").write_text(MAIN_PY)
    (tmp_path / "README.md").write_text("# demo\n")
    return tmp_path


def run_task(model: Any, root: Path) -> tuple[Harness, list[dict[str, Any]]]:
    tools = coding_tools(root)
    harness = Harness(model, SYSTEM, tools)
    events = list(harness.prompt("Make greet() say hello."))
    return harness, events


def test_claude_reads_then_edits_through_the_harness_and_the_server_sees_paired_results(
        tmp_path: Path) -> None:
    root = workspace(tmp_path)
    with ScriptedServer([
        claude.reply(claude.text_block(0, "Reading it first."),
                     claude.tool_use_block(1, "toolu_01R", "read", '{"path": ', '"main.py"}'),
                     claude.tool_use_block(2, "toolu_01L", "ls", "{}"), stop_reason="tool_use"),
        claude.reply(claude.tool_use_block(0, "toolu_01E", "edit", json.dumps(EDIT)[:20],
                                           json.dumps(EDIT)[20:]), stop_reason="tool_use"),
        claude.text_reply("Done: greet() now says hello."),
    ]) as server:
        model = AnthropicModel("claude-sonnet-4-6", api_key="sk-ant-e2e", base_url=server.url,
                               timeout=10.0, prompt_caching=False)
        harness, events = run_task(model, root)

    assert (root / "main.py").read_text() == 'def greet():\n    return "hello"\n'
    assert shape(harness.messages) == "U A[toolu_01R,toolu_01L] R(toolu_01R) R(toolu_01L) " \
                                      "A[toolu_01E] R(toolu_01E) A"
    assert any(e["type"] == "message_update" for e in events)
    results = {m["tool_call_id"]: m for m in harness.messages if m["role"] == "toolResult"}
    assert results["toolu_01R"]["content"] == MAIN_PY
    assert "README.md" in results["toolu_01L"]["content"]

    assert len(server.requests) == 3
    schemas = [{"name": t["name"], "description": t["description"],
                "input_schema": t["parameters"]} for t in tool_specs(coding_tools(root))]
    for sent in server.requests:
        assert sent.body["system"] == [{"type": "text", "text": SYSTEM}]
        assert sent.body["tools"] == schemas
        assert sent.body["model"] == "claude-sonnet-4-6" and sent.body["stream"] is True

    def result(call_id: str) -> dict[str, Any]:
        return {"type": "tool_result", "tool_use_id": call_id,
                "content": results[call_id]["content"]}

    first_turn = [
        {"role": "user", "content": [{"type": "text", "text": "Make greet() say hello."}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Reading it first."},
            {"type": "tool_use", "id": "toolu_01R", "name": "read",
             "input": {"path": "main.py"}},
            {"type": "tool_use", "id": "toolu_01L", "name": "ls", "input": {}}]},
        {"role": "user", "content": [result("toolu_01R"), result("toolu_01L")]}]
    assert server.requests[0].body["messages"] == first_turn[:1]
    assert server.requests[1].body["messages"] == first_turn
    assert server.requests[2].body["messages"] == [
        *first_turn,
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_01E", "name": "edit", "input": EDIT}]},
        {"role": "user", "content": [result("toolu_01E")]}]
    final = harness.messages[-1]
    assert final["role"] == "assistant" and final["stop_reason"] == "stop"
    assert final["usage"]["input"] == 12 and final["model"] == "anthropic/claude-sonnet-4-6"


def test_an_openai_compatible_server_reads_then_edits_through_the_harness(
        tmp_path: Path) -> None:
    root = workspace(tmp_path)
    with ScriptedServer([
        gpt.reply(gpt.tool_call(0, "call_R", "read", '{"path": ', '"main.py"}'),
                  gpt.tool_call(1, "call_L", "ls", "{}"), finish_reason="tool_calls"),
        gpt.reply(gpt.text("Now the edit."),
                  gpt.tool_call(0, "call_E", "edit", json.dumps(EDIT)),
                  finish_reason="tool_calls"),
        gpt.text_reply("Done: greet() now says hello."),
    ], base_path="/v1") as server:
        model = OpenAIChatModel("qwen2.5-coder", api_key="not-needed", base_url=server.url,
                                timeout=10.0)
        harness, _ = run_task(model, root)

    assert (root / "main.py").read_text() == 'def greet():\n    return "hello"\n'
    assert shape(harness.messages) == "U A[call_R,call_L] R(call_R) R(call_L) A[call_E] " \
                                      "R(call_E) A"
    results = {m["tool_call_id"]: m["content"] for m in harness.messages
               if m["role"] == "toolResult"}
    functions = [{"type": "function", "function": {
        "name": t["name"], "description": t["description"], "parameters": t["parameters"]}}
        for t in tool_specs(coding_tools(root))]
    for sent in server.requests:
        assert sent.body["tools"] == functions
        assert sent.body["messages"][0] == {"role": "system", "content": SYSTEM}
    assert server.requests[2].body["messages"][1:] == [
        {"role": "user", "content": "Make greet() say hello."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_R", "type": "function",
             "function": {"name": "read", "arguments": '{"path": "main.py"}'}},
            {"id": "call_L", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_R", "content": results["call_R"]},
        {"role": "tool", "tool_call_id": "call_L", "content": results["call_L"]},
        {"role": "assistant", "content": "Now the edit.", "tool_calls": [
            {"id": "call_E", "type": "function",
             "function": {"name": "edit", "arguments": json.dumps(EDIT)}}]},
        {"role": "tool", "tool_call_id": "call_E", "content": results["call_E"]}]
    assert results["call_R"] == MAIN_PY


def test_harness_abort_stops_a_silent_stream_and_the_next_prompt_sends_the_partial_text(
        tmp_path: Path) -> None:
    with ScriptedServer([claude.reply(claude.text_block(0, "Working", " on it"), stall_after=5),
                         claude.text_reply("Fine.")]) as server:
        model = AnthropicModel("claude-sonnet-4-6", api_key="sk-ant-e2e", base_url=server.url,
                               timeout=30.0, prompt_caching=False)
        harness = Harness(model, SYSTEM, coding_tools(workspace(tmp_path)))
        for event in harness.prompt("Go"):
            if event["type"] == "message_update" and event["delta"].get("delta") == " on it":
                threading.Timer(0.05, harness.abort).start()
        aborted = harness.messages[-1]
        list(harness.prompt("Again"))

    assert aborted["stop_reason"] == "aborted"
    assert aborted["content"] == [{"type": "text", "text": "Working on it"}]
    assert shape(harness.messages) == "U A~ U A"
    assert server.requests[1].body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Go"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Working on it"}]},
        {"role": "user", "content": [{"type": "text", "text": "Again"}]}]
