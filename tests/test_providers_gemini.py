"""GeminiModel against a local server speaking Gemini's streamGenerateContent SSE protocol,
through the official google-genai SDK: text, a tool round, thinking and its signature carried
back, an image, usage, a 429 with a retry delay, a stall; google/<id> and its keys.

The request bodies are asserted as the SDK (google-genai 3.6) writes them: it renames the
fields it knows to the API's lowerCamelCase and leaves some nested ones in snake_case
(``inlineData.mime_type``, ``thinkingConfig.thinking_budget``), which the API's JSON reader
accepts either way."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fakes import gemini_server as wire
from fakes.http_server import ScriptedServer, server_factory, stream_all
from mulligan import Harness
from mulligan.providers.errors import MissingApiKey
from mulligan.providers.gemini import GeminiModel
from mulligan.providers.registry import resolve_model
from mulligan.providers.retry import Backoff
from mulligan.testing import user
from mulligan.tools import read_tool
from mulligan.wire import ToolSpec

KEY = "AIzaSyTest0123456789abcdefghijklmnop"
READ: ToolSpec = {"name": "read", "description": "Read a file.",
                  "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                                 "required": ["path"]}}
PNG_B64 = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJ"
           "RU5ErkJggg==")
SIGNATURE = base64.b64encode(b"gemini-thought-signature-1").decode()
STREAM_PATH = "/v1/models/gemini-2.5-pro:streamGenerateContent?alt=sse"


@pytest.fixture
def serve() -> Iterator[Any]:
    with server_factory() as start:
        yield start


def model(server: ScriptedServer, sleeps: list[float] | None = None,
          **options: Any) -> GeminiModel:
    options.setdefault("backoff", Backoff(max_retries=2, base=0.5, random=lambda: 1.0))
    return GeminiModel("gemini-2.5-pro", api_key=KEY, base_url=server.url, timeout=5.0,
                       sleep=(sleeps if sleeps is not None else []).append, **options)


def test_text_streams_and_usage_counts_cached_and_thinking_tokens(serve: Any) -> None:
    server = serve(wire.reply([wire.text("Hello")], [wire.text(", world.")], prompt=1000,
                              cached=800, output=20, thoughts=30))
    deltas, message = stream_all(model(server), [user("Hi")], [READ])
    assert deltas == [{"type": "text", "delta": "Hello"}, {"type": "text", "delta": ", world."}]
    assert message == {"role": "assistant", "content": [{"type": "text",
                                                         "text": "Hello, world."}],
                       "stop_reason": "stop", "model": "google/gemini-2.5-pro",
                       "usage": {"input": 200, "output": 50, "cache_read": 800,
                                 "reasoning": 30}}
    sent = server.requests[0]
    assert sent.path == STREAM_PATH and sent.headers["x-goog-api-key"] == KEY
    assert sent.body["contents"] == [{"role": "user", "parts": [{"text": "Hi"}]}]
    assert sent.body["systemInstruction"]["parts"] == [{"text": "You are terse."}]
    assert sent.body["tools"] == [{"functionDeclarations": [{
        "name": "read", "description": "Read a file.",
        "parameters_json_schema": READ["parameters"]}]}]
    assert sent.body["generationConfig"] == {}  # no thinking_config unless --thinking is given


def test_a_tool_round_with_thinking_sends_the_signature_back_on_its_call(
        serve: Any, tmp_path: Path) -> None:
    (tmp_path / "main.py").write_text("print(1)\n")
    server = serve(
        wire.reply([wire.thought("I should read it.")],
                   [wire.function_call("read", {"path": "main.py"}, signature=SIGNATURE)]),
        wire.text_reply("It prints 1."))
    harness = Harness(model(server, thinking_budget=2048), "Be brief.", [read_tool(tmp_path)])
    events = list(harness.prompt("What does main.py do?"))
    first = harness.messages[1]
    assert first["content"][0] == {"type": "thinking", "thinking": "I should read it.",
                                   "provider": "google", "encrypted_content": SIGNATURE}
    call = first["content"][1]
    assert call["type"] == "toolCall" and call["name"] == "read" and \
        call["arguments"] == {"path": "main.py"}
    assert first["stop_reason"] == "toolUse"
    assert harness.messages[-1]["content"] == [{"type": "text", "text": "It prints 1."}]
    assert {"type": "thinking", "delta": "I should read it."} in \
        [e["delta"] for e in events if e["type"] == "message_update"]
    second = server.requests[1].body
    assert second["generationConfig"]["thinkingConfig"] == {"thinking_budget": 2048,
                                                            "include_thoughts": True}
    assert second["contents"][1:] == [
        {"role": "model", "parts": [{"functionCall": {"name": "read",
                                                      "args": {"path": "main.py"}},
                                     "thoughtSignature": SIGNATURE}]},
        {"role": "user", "parts": [{"functionResponse": {
            "name": "read", "response": {"output": "print(1)\n"}}}]}]


def test_a_safety_stop_is_an_error_that_keeps_the_text(serve: Any) -> None:
    server = serve(wire.reply([wire.text("Here is")], finish="SAFETY"))
    _, message = stream_all(model(server), [user("Hi")])
    assert message["stop_reason"] == "error" and message["content"][0]["text"] == "Here is"
    assert "finish reason SAFETY" in message["error_message"]


def test_google_names_take_gemini_or_google_api_key(tmp_path: Path) -> None:
    assert isinstance(resolve_model("google/gemini-2.5-pro", env={"GOOGLE_API_KEY": KEY},
                                    home=tmp_path), GeminiModel)
    with pytest.raises(MissingApiKey, match="set GEMINI_API_KEY or GOOGLE_API_KEY"):
        resolve_model("google/gemini-2.5-pro", env={}, home=tmp_path)


def test_p_with_an_image_sends_gemini_inline_data(tmp_path: Path) -> None:
    (tmp_path / "dot.png").write_bytes(base64.b64decode(PNG_B64))
    environment = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    environment.update(MULLIGAN_HOME=str(tmp_path / "home"), GEMINI_API_KEY=KEY)
    with ScriptedServer([wire.text_reply("A dot.")]) as server:
        done = subprocess.run(
            [sys.executable, "-m", "mulligan", "-p", "What?", "--image",
             str(tmp_path / "dot.png"), "--model", "google/gemini-2.5-pro", "--base-url",
             server.url], cwd=tmp_path, env=environment, capture_output=True, text=True,
            timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "A dot."
    assert server.requests[0].body["contents"][-1] == {"role": "user", "parts": [
        {"text": "What?"}, {"inlineData": {"mime_type": "image/png", "data": PNG_B64}}]}
