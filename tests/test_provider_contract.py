"""What every hosted provider must do, checked once over all four fake servers.

Each provider (Anthropic Messages, OpenAI Chat Completions, OpenAI Responses, Gemini) is driven
through its official SDK against a local server speaking its real streaming protocol
(tests/fakes/). A `Provider` adapter says, for that protocol, how to script a text reply, a
tool call, usage, a 429 with its wait, a 500, a 400, a stall, and what an image looks like on
the wire; the cases below are the same for all four. Shapes only one provider has (thinking
signatures, reasoning items, refusals, stop-reason maps, the request bodies) stay in
tests/test_providers_<name>.py."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fakes import anthropic_server as claude
from fakes import gemini_server as gemini
from fakes import openai_server as chat
from fakes import responses_server as responses
from fakes.http_server import Drop, ScriptedServer, Sse, Status, server_factory, stream_all
from mulligan import Harness
from mulligan.providers.anthropic import AnthropicModel
from mulligan.providers.gemini import GeminiModel
from mulligan.providers.openai.chat import OpenAIChatModel
from mulligan.providers.openai.responses import OpenAIResponsesModel
from mulligan.providers.retry import Backoff
from mulligan.testing import user
from mulligan.tools import read_tool
from mulligan.wire import ToolSpec

READ: ToolSpec = {"name": "read", "description": "Read a file.",
                  "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                                 "required": ["path"]}}
PNG_B64 = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJ"
           "RU5ErkJggg==")
CACHED_USAGE = {"input": 200, "output": 9, "cache_read": 800}


@dataclass(frozen=True)
class Provider:
    """How one protocol scripts the contract's situations."""

    name: str  # the error messages' prefix and the model name's provider
    base_path: str
    build: Callable[..., Any]  # (url, **options) -> the model
    text: Callable[..., Sse]  # (*pieces, **sse) -> a streamed text reply
    # (id, name, argument pieces) -> "Reading it." then a tool call
    tool: Callable[[str, str, list[str]], Sse]
    cached: Callable[[], Sse]  # "ok" with 1000 prompt tokens, 800 of them cached, 9 out
    rate_limited: Callable[[int], Status]  # a 429 asking for that many seconds
    server_error: Callable[[], Status]  # a 500
    server_error_says: str  # its error message, after three attempts
    bad_request: Callable[[], Status]  # a 400 (never worth retrying)
    bad_request_says: str
    # Streams "Working on it" (and, where the protocol streams arguments, the start of a tool
    # call), then goes silent; `abort_at` is the last delta before the silence.
    stalls_after_text: Callable[[], Sse]
    abort_at: str
    image_sent: Callable[[dict[str, Any]], Any]  # the request body -> the first user content
    image_shape: Any  # what "And this?" + the PNG must look like there
    # (words, opaque token) -> thinking, then a read of main.py; `carries_token`: whether the
    # token goes back with the next request (Chat Completions' reasoning never does)
    thinks: Callable[[str, str], Sse]
    carries_token: bool


def _claude_cached() -> Sse:
    return claude.reply(claude.text_block(0, "ok"), input_tokens=200, cache_read=800,
                        output_tokens=9)


ANTHROPIC = Provider(
    name="anthropic", base_path="",
    build=lambda url, **o: AnthropicModel("claude-sonnet-4-6", api_key="sk-ant-test-0123456789",
                                          base_url=url, prompt_caching=False, **o),
    text=claude.text_reply,
    tool=lambda id, name, pieces: claude.reply(claude.text_block(0, "Reading it."),
                                               claude.tool_use_block(1, id, name, *pieces),
                                               stop_reason="tool_use"),
    cached=_claude_cached,
    rate_limited=lambda s: claude.error(429, "rate_limit_error", "Rate limited",
                                        {"retry-after": str(s)}),
    server_error=lambda: claude.error(500, "api_error", "Internal server error"),
    server_error_says="anthropic: gave up after 3 attempts: 500 api_error: Internal server error",
    bad_request=lambda: claude.error(400, "invalid_request_error", "messages: required"),
    bad_request_says="anthropic: 400 invalid_request_error: messages: required (not retried)",
    stalls_after_text=lambda: claude.reply(
        claude.text_block(0, "Working", " on it"),
        claude.tool_use_block(1, "toolu_01A", "read", '{"pa'), stall_after=8),
    abort_at='{"pa',
    image_sent=lambda body: body["messages"][0]["content"],
    image_shape=[{"type": "text", "text": "And this?"},
                 {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                              "data": PNG_B64}}],
    thinks=lambda words, token: claude.reply(
        claude.thinking_block(0, [words], token),
        claude.tool_use_block(1, "call_01A", "read", '{"path": "main.py"}'),
        stop_reason="tool_use"),
    carries_token=True,
)

CHAT = Provider(
    name="openai", base_path="/v1",
    build=lambda url, **o: OpenAIChatModel("qwen2.5-coder", api_key="sk-proj-test-0123456789",
                                           base_url=url, **o),
    text=chat.text_reply,
    tool=lambda id, name, pieces: chat.reply(chat.text("Reading it."),
                                             chat.tool_call(0, id, name, *pieces),
                                             finish_reason="tool_calls"),
    cached=lambda: chat.reply(chat.text("ok"), prompt=1000, completion=9, cached=800),
    rate_limited=lambda s: chat.error(429, "Rate limit reached", "requests",
                                      "rate_limit_exceeded", {"retry-after": str(s)}),
    server_error=lambda: chat.error(500, "The server had an error", "server_error"),
    server_error_says="openai: gave up after 3 attempts: 500 server_error: The server had an error",
    bad_request=lambda: chat.error(400, "Invalid 'messages'", "invalid_request_error"),
    bad_request_says="openai: 400 invalid_request_error: Invalid 'messages' (not retried)",
    stalls_after_text=lambda: chat.reply(chat.text("Working", " on it"),
                                         chat.tool_call(0, "call_A", "read", '{"pa'),
                                         stall_after=5),
    abort_at='{"pa',
    image_sent=lambda body: body["messages"][1]["content"],
    image_shape=[{"type": "text", "text": "And this?"},
                 {"type": "image_url",
                  "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}}],
    thinks=lambda words, token: chat.reply(
        chat.reasoning(words), chat.tool_call(0, "call_01A", "read", '{"path": "main.py"}'),
        finish_reason="tool_calls"),
    carries_token=False,
)

RESPONSES = Provider(
    name="openai", base_path="/v1",
    build=lambda url, **o: OpenAIResponsesModel("gpt-5.5", api_key="sk-proj-test-0123456789",
                                                base_url=url, **o),
    text=responses.text_reply,
    tool=lambda id, name, pieces: responses.Reply().text("Reading it.")
    .call(id, name, *pieces).sse(),
    cached=lambda: responses.Reply().text("ok").sse(input_tokens=1000, cached=800,
                                                    output_tokens=9, reasoning_tokens=0),
    rate_limited=lambda s: responses.error(429, "Rate limit reached", "requests",
                                           "rate_limit_exceeded", {"retry-after": str(s)}),
    server_error=lambda: responses.error(500, "The server had an error", "server_error"),
    server_error_says="openai: gave up after 3 attempts: 500 server_error: The server had an error",
    bad_request=lambda: responses.error(400, "Invalid 'input'", "invalid_request_error"),
    bad_request_says="openai: 400 invalid_request_error: Invalid 'input' (not retried)",
    # created, in_progress, text item (added, part, 2 deltas, done, part done, item done),
    # the call's item added and its first arguments delta: 12 events, then silence
    stalls_after_text=lambda: responses.Reply().text("Working", " on it")
    .call("call_A", "read", '{"pa', 'th": "a"}').sse(stall_after=12),
    abort_at='{"pa',
    image_sent=lambda body: body["input"][0]["content"],
    image_shape=[{"type": "input_text", "text": "And this?"},
                 {"type": "input_image", "detail": "auto",
                  "image_url": f"data:image/png;base64,{PNG_B64}"}],
    thinks=lambda words, token: responses.Reply().reasoning([words], token)
    .call("call_01A", "read", '{"path": "main.py"}').sse(),
    carries_token=True,
)

GEMINI = Provider(
    name="google", base_path="",
    build=lambda url, **o: GeminiModel("gemini-2.5-pro", api_key="AIzaSyTest0123456789abcdef",
                                       base_url=url, **o),
    text=gemini.text_reply,
    # Gemini sends a call's arguments whole, in one part
    tool=lambda id, name, pieces: gemini.reply(
        [gemini.text("Reading it.")],
        [gemini.function_call(name, json.loads("".join(pieces)), id=id)]),
    cached=lambda: gemini.reply([gemini.text("ok")], prompt=1000, cached=800, output=9),
    rate_limited=lambda s: gemini.error(429, "RESOURCE_EXHAUSTED", "Quota exceeded.",
                                        retry_delay=f"{s}s"),
    server_error=lambda: gemini.error(500, "INTERNAL", "An internal error has occurred."),
    server_error_says=("google: gave up after 3 attempts: 500 INTERNAL: An internal error has "
                       "occurred."),
    bad_request=lambda: gemini.error(400, "INVALID_ARGUMENT", "Bad function declaration."),
    bad_request_says="google: 400 INVALID_ARGUMENT: Bad function declaration. (not retried)",
    stalls_after_text=lambda: gemini.reply([gemini.text("Working")], [gemini.text(" on it")],
                                           [gemini.text("never")], stall_after=2),
    abort_at=" on it",
    image_sent=lambda body: body["contents"][0]["parts"],
    image_shape=[{"text": "And this?"},
                 {"inlineData": {"mime_type": "image/png", "data": PNG_B64}}],
    thinks=lambda words, token: gemini.reply(
        [gemini.thought(words)],
        [gemini.function_call("read", {"path": "main.py"}, signature=token)]),
    carries_token=True,
)

PROVIDERS = [ANTHROPIC, CHAT, RESPONSES, GEMINI]
IDS = ["anthropic", "openai-chat", "openai-responses", "gemini"]


@pytest.fixture(params=PROVIDERS, ids=IDS)
def provider(request: Any) -> Provider:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def serve(provider: Provider) -> Iterator[Callable[..., ScriptedServer]]:
    with server_factory(base_path=provider.base_path) as start:
        yield start


def model(provider: Provider, server: ScriptedServer, sleeps: list[float] | None = None,
          **options: Any) -> Any:
    options.setdefault("backoff", Backoff(max_retries=2, base=0.5, random=lambda: 1.0))
    options.setdefault("timeout", 5.0)
    return provider.build(server.url, sleep=(sleeps if sleeps is not None else []).append,
                          **options)


def retries(deltas: list[Any]) -> list[Any]:
    return [d for d in deltas if d["type"] == "retry"]


def test_streamed_text_arrives_in_pieces_and_ends_as_one_message(
        provider: Provider, serve: Any) -> None:
    server = serve(provider.text("Hello", ", world."))
    deltas, message = stream_all(model(provider, server), [user("Hi")])
    assert deltas == [{"type": "text", "delta": "Hello"}, {"type": "text", "delta": ", world."}]
    assert message["role"] == "assistant" and message["stop_reason"] == "stop"
    assert message["content"] == [{"type": "text", "text": "Hello, world."}]
    assert message["model"].startswith(f"{provider.name}/")
    assert len(server.requests) == 1


def test_complete_returns_the_message_stream_ends_with(provider: Provider, serve: Any) -> None:
    server = serve(provider.text("Hel", "lo"), provider.text("Hel", "lo"))
    m = model(provider, server)
    assert m.complete("You are terse.", [user("Hi")], []) == stream_all(m, [user("Hi")])[1]


def test_usage_is_recorded_with_cached_prompt_tokens_apart(
        provider: Provider, serve: Any) -> None:
    server = serve(provider.cached())
    _, message = stream_all(model(provider, server), [user("Hi")])
    usage = message["usage"]
    assert {k: usage[k] for k in CACHED_USAGE} == CACHED_USAGE


def test_a_tool_round_carries_the_arguments_there_and_the_result_back(
        provider: Provider, serve: Any, tmp_path: Path) -> None:
    (tmp_path / "main.py").write_text("print(1)\n")
    server = serve(provider.tool("call_01A", "read", ['{"pa', 'th": "ma', 'in.py"}']),
                   provider.text("It prints 1."))
    harness = Harness(model(provider, server), "Be brief.", [read_tool(tmp_path)])
    events = list(harness.prompt("What does main.py do?"))
    first = harness.messages[1]
    assert first["stop_reason"] == "toolUse"  # type: ignore[typeddict-item]
    text, call = first["content"]  # type: ignore[typeddict-item]
    assert text == {"type": "text", "text": "Reading it."}
    assert call["type"] == "toolCall" and call["id"] == "call_01A"
    assert call["name"] == "read" and call["arguments"] == {"path": "main.py"}
    pieces = [e["delta"]["delta"] for e in events if e["type"] == "message_update"
              and e["delta"]["type"] == "toolcall"]
    assert json.loads("".join(pieces)) == {"path": "main.py"}
    assert harness.messages[-1]["content"] == [{"type": "text", "text": "It prints 1."}]
    assert len(server.requests) == 2 and "print(1)\\n" in json.dumps(server.requests[1].body)


def test_a_429_is_retried_after_the_wait_the_server_asked_for_and_the_retry_is_shown(
        provider: Provider, serve: Any) -> None:
    server = serve(provider.rate_limited(3), provider.text("Finally."))
    sleeps: list[float] = []
    deltas, message = stream_all(model(provider, server, sleeps), [user("Hi")])
    assert message["content"] == [{"type": "text", "text": "Finally."}]
    assert sleeps == [3.0] and len(server.requests) == 2
    assert server.requests[1].body == server.requests[0].body
    [retry] = retries(deltas)
    assert retry["attempt"] == 2 and retry["of"] == 3 and retry["delay"] == 3.0


def test_a_500_every_time_gives_up_after_the_bounded_attempts_as_an_error_message(
        provider: Provider, serve: Any) -> None:
    server = serve(provider.server_error(), provider.server_error(), provider.server_error(),
                   provider.text("never asked for"))
    sleeps: list[float] = []
    deltas, message = stream_all(model(provider, server, sleeps), [user("Hi")])
    assert len(server.requests) == 3 and sleeps == [0.5, 1.0]
    assert [(r["attempt"], r["delay"]) for r in retries(deltas)] == [(2, 0.5), (3, 1.0)]
    assert message["stop_reason"] == "error" and message["content"] == []
    assert message["error_message"] == provider.server_error_says


def test_a_400_is_an_error_message_and_not_retried(provider: Provider, serve: Any) -> None:
    server = serve(provider.bad_request(), provider.text("never"))
    sleeps: list[float] = []
    deltas, message = stream_all(model(provider, server, sleeps), [user("Hi")])
    assert len(server.requests) == 1 and sleeps == [] and retries(deltas) == []
    assert message["stop_reason"] == "error"
    assert message["error_message"] == provider.bad_request_says


def test_a_dropped_connection_before_any_answer_is_retried(
        provider: Provider, serve: Any) -> None:
    server = serve(Drop(), provider.text("ok"))
    sleeps: list[float] = []
    deltas, message = stream_all(model(provider, server, sleeps), [user("Hi")])
    assert message["stop_reason"] == "stop" and message["content"] == [{"type": "text",
                                                                        "text": "ok"}]
    assert len(server.requests) == 2 and len(sleeps) == 1 and len(retries(deltas)) == 1


def test_a_stall_before_any_text_is_tried_again(provider: Provider, serve: Any) -> None:
    server = serve(provider.text("never", stall_after=0), provider.text("here"))
    deltas, message = stream_all(model(provider, server, idle_timeout=0.3), [user("Hi")])
    assert message["content"] == [{"type": "text", "text": "here"}]
    assert len(server.requests) == 2 and len(retries(deltas)) == 1


def test_stalls_are_retried_a_bounded_number_of_times_then_named(
        provider: Provider, serve: Any) -> None:
    silent = [provider.text("never", stall_after=0) for _ in range(3)]
    server = serve(*silent, provider.text("too late"))
    m = model(provider, server, backoff=Backoff(max_retries=5, base=0.01, random=lambda: 1.0),
              idle_timeout=0.3)
    _, message = stream_all(m, [user("Hi")])
    assert message["stop_reason"] == "error"
    assert "the server sent nothing for 0.3 s" in message["error_message"]
    assert len(server.requests) == 3  # the first try and two more


def test_a_stall_after_some_text_ends_at_once_as_an_error_keeping_the_text(
        provider: Provider, serve: Any) -> None:
    # 1 s, not 0.3: a gap between two events on a busy machine must not pass for the stall
    server = serve(provider.stalls_after_text(), provider.text("never asked for"))
    _, message = stream_all(model(provider, server, idle_timeout=1.0), [user("Hi")], [READ])
    assert message["stop_reason"] == "error", message
    assert message["content"] == [{"type": "text", "text": "Working on it"}]
    assert "sent nothing for 1 s (part of the reply" in message["error_message"]
    assert len(server.requests) == 1


def test_abort_mid_stream_ends_promptly_with_the_partial_text(
        provider: Provider, serve: Any) -> None:
    # The server stays silent for longer than the idle timeout: ending "aborted" (not an
    # idle-timeout error) well inside it is the abort's doing.
    server = serve(provider.stalls_after_text())
    abort = threading.Event()
    seen: list[Any] = []
    m = model(provider, server, idle_timeout=30.0, timeout=30.0)
    set_at = 0.0
    for delta in m.stream("sys", [user("Hi")], [READ], abort=abort):
        seen.append(delta)
        if delta.get("delta") == provider.abort_at:
            set_at = time.monotonic()
            abort.set()
    waited = time.monotonic() - set_at
    message = seen[-1]["message"]
    assert message["stop_reason"] == "aborted"
    assert message["content"] == [{"type": "text", "text": "Working on it"}]
    assert len(server.requests) == 1 and waited < 10.0


def test_an_abort_before_the_request_sends_nothing(provider: Provider, serve: Any) -> None:
    server = serve(provider.text("never"))
    abort = threading.Event()
    abort.set()
    _, message = stream_all(model(provider, server), [user("Hi")], abort=abort)
    assert message["stop_reason"] == "aborted" and server.requests == []


def test_an_image_goes_in_the_providers_own_shape(provider: Provider, serve: Any) -> None:
    server = serve(provider.text("A pixel."))
    image = {"type": "image", "mime_type": "image/png", "data": PNG_B64}
    stream_all(model(provider, server),
               [user([{"type": "text", "text": "And this?"}, image])])  # type: ignore[list-item]
    assert provider.image_sent(server.requests[0].body) == provider.image_shape


def test_thinking_is_streamed_kept_and_sent_back_as_the_provider_takes_it(
        provider: Provider, serve: Any, tmp_path: Path) -> None:
    (tmp_path / "main.py").write_text("print(1)\n")
    token = "EqQBCkgIARABGAIiQLy-opaque-token"
    server = serve(provider.thinks("I should read main.py.", token), provider.text("It prints 1."))
    harness = Harness(model(provider, server), "Be brief.", [read_tool(tmp_path)])
    events = list(harness.prompt("What does main.py do?"))
    thinking = [e["delta"]["delta"] for e in events if e["type"] == "message_update"
                and e["delta"]["type"] == "thinking"]
    assert thinking == ["I should read main.py."]
    first = harness.messages[1]["content"]
    assert first[0]["type"] == "thinking"  # type: ignore[index]
    assert first[0]["thinking"] == "I should read main.py."  # type: ignore[index,typeddict-item]
    assert harness.messages[-1]["content"] == [{"type": "text", "text": "It prints 1."}]
    sent_back = json.dumps(server.requests[1].body)
    if provider.carries_token:
        assert token in sent_back
    else:
        assert token not in sent_back and "I should read main.py." not in sent_back
