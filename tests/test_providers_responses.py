"""OpenAIResponsesModel against a local server speaking the Responses API's streaming protocol,
through the official SDK: text, a tool round, reasoning carried across turns, an image, usage,
a 429 with retry-after, a stall, a failed response; and which API an openai/ name speaks."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fakes import responses_server as wire
from fakes.http_server import ScriptedServer, server_factory, stream_all
from mulligan import Harness
from mulligan.providers.openai.chat import OpenAIChatModel
from mulligan.providers.openai.responses import OpenAIResponsesModel
from mulligan.providers.registry import resolve_model
from mulligan.providers.retry import Backoff
from mulligan.testing import user
from mulligan.tools import read_tool
from mulligan.wire import ToolSpec

KEY = "sk-proj-test-0123456789abcdef"
READ: ToolSpec = {"name": "read", "description": "Read a file.",
                  "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                                 "required": ["path"]}}
PNG_B64 = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJ"
           "RU5ErkJggg==")


@pytest.fixture
def serve() -> Iterator[Any]:
    with server_factory(base_path="/v1") as start:
        yield start


def model(server: ScriptedServer, sleeps: list[float] | None = None,
          **options: Any) -> OpenAIResponsesModel:
    options.setdefault("backoff", Backoff(max_retries=2, base=0.5, random=lambda: 1.0))
    return OpenAIResponsesModel("gpt-5.5", api_key=KEY, base_url=server.url, timeout=5.0,
                                sleep=(sleeps if sleeps is not None else []).append, **options)


def test_text_streams_and_usage_counts_cached_and_reasoning_tokens(serve: Any) -> None:
    server = serve(wire.text_reply("Hello", ", world.", input_tokens=1000, cached=800,
                                   output_tokens=50, reasoning_tokens=30))
    deltas, message = stream_all(model(server), [user("Hi")], [READ])
    assert deltas == [{"type": "text", "delta": "Hello"}, {"type": "text", "delta": ", world."}]
    assert message == {"role": "assistant", "content": [{"type": "text",
                                                         "text": "Hello, world."}],
                       "stop_reason": "stop", "model": "openai/gpt-5.5",
                       "usage": {"input": 200, "output": 50, "cache_read": 800,
                                 "reasoning": 30}}
    sent = server.requests[0]
    assert sent.path == "/v1/responses"
    assert sent.body == {
        "model": "gpt-5.5", "stream": True, "store": False,
        "include": ["reasoning.encrypted_content"], "instructions": "You are terse.",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "Hi"}]}],
        "tools": [{"type": "function", "name": "read", "description": "Read a file.",
                   "parameters": READ["parameters"], "strict": False}]}


def test_a_tool_round_with_reasoning_sends_the_reasoning_item_back_before_its_call(
        serve: Any, tmp_path: Path) -> None:
    (tmp_path / "main.py").write_text("print(1)\n")
    server = serve(
        wire.Reply().reasoning(["Need the file.", "Then answer."], "gAAAAB-enc-1")
        .call("call_R", "read", '{"path": ', '"main.py"}').sse(),
        wire.text_reply("It prints 1."))
    harness = Harness(model(server, reasoning_effort="high"), "Be brief.",
                      [read_tool(tmp_path)])
    events = list(harness.prompt("What does main.py do?"))
    first = harness.messages[1]
    assert first["content"][0] == {
        "type": "thinking", "thinking": "Need the file.\n\nThen answer.", "provider": "openai",
        "item_id": "rs_6820f383d7c08191846711c5df8233bc0ac5ba57aafcbac7",
        "encrypted_content": "gAAAAB-enc-1"}
    assert first["content"][1] == {"type": "toolCall", "id": "call_R", "name": "read",
                                   "arguments": {"path": "main.py"}}
    assert harness.messages[-1]["content"] == [{"type": "text", "text": "It prints 1."}]
    updates = [e["delta"] for e in events if e["type"] == "message_update"]
    assert {"type": "toolcall", "id": "call_R", "name": "read", "delta": '"main.py"}'} in updates
    assert {"type": "thinking", "delta": "Need the file."} in updates
    second = server.requests[1].body
    assert second["reasoning"] == {"effort": "high", "summary": "auto"}
    assert second["input"][1:] == [
        {"type": "reasoning", "id": "rs_6820f383d7c08191846711c5df8233bc0ac5ba57aafcbac7",
         "summary": [{"type": "summary_text", "text": "Need the file.\n\nThen answer."}],
         "encrypted_content": "gAAAAB-enc-1"},
        {"type": "function_call", "call_id": "call_R", "name": "read",
         "arguments": '{"path": "main.py"}'},
        {"type": "function_call_output", "call_id": "call_R", "output": "print(1)\n"}]


def test_an_image_goes_as_an_input_image_in_user_content_and_in_a_tool_output(
        serve: Any) -> None:
    server = serve(wire.text_reply("A pixel."))
    image = {"type": "image", "mime_type": "image/png", "data": PNG_B64}
    messages: list[Any] = [
        user([{"type": "text", "text": "And this?"}, image]),  # type: ignore[list-item]
        {"role": "assistant", "content": [{"type": "toolCall", "id": "c1", "name": "read",
                                           "arguments": {"path": "a.png"}}],
         "stop_reason": "toolUse"},
        {"role": "toolResult", "tool_call_id": "c1", "tool_name": "read",
         "content": [{"type": "text", "text": "[a.png]"}, image], "is_error": False}]
    stream_all(model(server), messages)
    url = f"data:image/png;base64,{PNG_B64}"
    sent = server.requests[0].body["input"]
    assert sent[0]["content"] == [{"type": "input_text", "text": "And this?"},
                                  {"type": "input_image", "detail": "auto", "image_url": url}]
    assert sent[2] == {"type": "function_call_output", "call_id": "c1", "output": [
        {"type": "input_text", "text": "[a.png]"},
        {"type": "input_image", "detail": "auto", "image_url": url}]}


def test_a_failed_response_and_a_cut_off_one_are_named(serve: Any) -> None:
    server = serve(wire.failed("server_error", "The model crashed."))
    _, message = stream_all(model(server), [user("Hi")])
    assert message["stop_reason"] == "error"
    assert message["error_message"] == "openai: server_error: The model crashed."
    server = serve(wire.Reply().text("Long").sse(incomplete="max_output_tokens"))
    _, message = stream_all(model(server), [user("Hi")])
    assert message["stop_reason"] == "length" and message["content"][0]["text"] == "Long"


def test_openai_names_speak_responses_at_openai_and_chat_on_a_base_url_unless_configured(
        tmp_path: Path) -> None:
    env = {"OPENAI_API_KEY": KEY}
    assert isinstance(resolve_model("openai/gpt-5.5", env=env, home=tmp_path),
                      OpenAIResponsesModel)
    local = resolve_model("openai/qwen", base_url="http://127.0.0.1:9/v1", env=env,
                          home=tmp_path)
    assert isinstance(local, OpenAIChatModel)
    (tmp_path / "config.toml").write_text('[providers.openai]\nopenai_api = "responses"\n')
    assert isinstance(resolve_model("openai/qwen", base_url="http://127.0.0.1:9/v1", env=env,
                                    home=tmp_path), OpenAIResponsesModel)
    (tmp_path / "config.toml").write_text('[providers.openai]\nopenai_api = "completions"\n')
    with pytest.raises(ValueError, match=r"openai_api = 'completions': \"responses\""):
        resolve_model("openai/qwen", env=env, home=tmp_path)


def test_p_with_an_image_sends_a_responses_input_image(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[providers.openai]\nopenai_api = "responses"\n')
    (tmp_path / "dot.png").write_bytes(__import__("base64").b64decode(PNG_B64))
    environment = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    environment.update(MULLIGAN_HOME=str(home), OPENAI_API_KEY=KEY)
    with ScriptedServer([wire.text_reply("A dot.")], base_path="/v1") as server:
        done = subprocess.run(
            [sys.executable, "-m", "mulligan", "-p", "What?", "--image",
             str(tmp_path / "dot.png"), "--model", "openai/gpt-5.5", "--base-url", server.url],
            cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "A dot."
    assert server.requests[0].body["input"][-1] == {"role": "user", "content": [
        {"type": "input_text", "text": "What?"},
        {"type": "input_image", "detail": "auto",
         "image_url": f"data:image/png;base64,{PNG_B64}"}]}
