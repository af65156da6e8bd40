"""OpenAIChatModel against a local server that speaks Chat Completions' streaming protocol (the
protocol of OpenAI and of every OpenAI-compatible server on a base URL)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from fakes import openai_server as wire
from fakes.http_server import ScriptedServer, Sse, server_factory, stream_all
from mulligan.messages import Message, tool_calls
from mulligan.providers.base import ToolSpec
from mulligan.providers.openai.chat import OpenAIChatModel
from mulligan.providers.retry import Backoff
from mulligan.testing import call, reply, tool_result, user

KEY = "sk-proj-test-0123456789abcdef"
READ: ToolSpec = {"name": "read", "description": "Read a file.",
                  "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                                 "required": ["path"]}}


@pytest.fixture
def serve() -> Iterator[Any]:
    with server_factory(base_path="/v1") as start:
        yield start


def model(server: ScriptedServer, sleeps: list[float] | None = None,
          **options: Any) -> OpenAIChatModel:
    options.setdefault("backoff", Backoff(max_retries=2, base=0.5, random=lambda: 1.0))
    return OpenAIChatModel("qwen2.5-coder", api_key=KEY, base_url=server.url, timeout=5.0,
                           sleep=(sleeps if sleeps is not None else []).append, **options)


run = stream_all


def test_the_request_has_the_system_prompt_first_tools_as_functions_and_asks_for_usage(
        serve: Any) -> None:
    server = serve(wire.text_reply("ok"))
    run(model(server, max_tokens=300), [user("Hi")], [READ])
    sent = server.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.body == {
        "model": "qwen2.5-coder", "stream": True, "stream_options": {"include_usage": True},
        "max_tokens": 300,
        "messages": [{"role": "system", "content": "You are terse."},
                     {"role": "user", "content": "Hi"}],
        "tools": [{"type": "function", "function": {
            "name": "read", "description": "Read a file.", "parameters": READ["parameters"]}}]}
    assert sent.headers["authorization"] == f"Bearer {KEY}"


def test_a_server_that_sends_no_usage_gives_a_message_without_usage(serve: Any) -> None:
    server = serve(wire.reply(wire.text("ok"), with_usage=False))
    _, message = run(model(server), [user("Hi")])
    assert "usage" not in message and message["stop_reason"] == "stop"


def test_a_tool_call_whose_arguments_are_not_json_is_kept_with_its_raw_text(serve: Any) -> None:
    server = serve(wire.reply(wire.tool_call(0, "call_Ab1", "read", '{"path": src/main.py}'),
                              finish_reason="tool_calls"))
    _, message = run(model(server), [user("Read main.py")], [READ])
    assert message["stop_reason"] == "toolUse"
    assert message["content"] == [
        {"type": "toolCall", "id": "call_Ab1", "name": "read", "arguments": {},
         "invalid_arguments": '{"path": src/main.py}'}]

def test_two_tool_calls_in_one_reply_are_told_apart_by_index(serve: Any) -> None:
    first, second = wire.tool_call(0, "call_A", "read", '{"path":', ' "a.py"}'), \
        wire.tool_call(1, "call_B", "read", '{"path": "b.py"}')
    interleaved = [first[0], second[0], first[1], second[1], first[2]]
    server = serve(wire.reply(interleaved, finish_reason="tool_calls"))
    _, message = run(model(server), [user("Read both")], [READ])
    assert [(b["id"], b["arguments"]) for b in message["content"]] == [  # type: ignore[typeddict-item]
        ("call_A", {"path": "a.py"}), ("call_B", {"path": "b.py"})]


def test_tool_calls_from_a_server_that_sends_no_ids_get_ids_unique_across_replies(
        serve: Any) -> None:
    def id_less_call(path: str) -> list[Any]:
        return [wire.chunk({"tool_calls": [{"index": 0, "type": "function", "function": {
            "name": "read", "arguments": json.dumps({"path": path})}}]})]

    server = serve(wire.reply(id_less_call("a.py"), finish_reason="tool_calls"),
                   wire.reply(id_less_call("b.py"), finish_reason="tool_calls"))
    m = model(server)
    _, first = run(m, [user("Read a")], [READ])
    [a] = tool_calls(first)
    _, second = run(m, [user("Read a"), first, tool_result(a, "A")], [READ])
    [b] = tool_calls(second)
    assert (a["arguments"], b["arguments"]) == ({"path": "a.py"}, {"path": "b.py"})
    assert a["id"] and b["id"] and a["id"] != b["id"]


def test_tool_calls_go_back_on_the_assistant_message_and_results_as_tool_messages(
        serve: Any) -> None:
    server = serve(wire.text_reply("Both read."))
    a, b = call("read", {"path": "a.py"}, id="call_A"), call("read", {"path": "b.py"},
                                                               id="call_B")
    history: list[Message] = [user("Read both"), reply(a, b), tool_result(a, "A"),
                              tool_result(b, "no such file", is_error=True)]
    run(model(server), history, [READ])
    assert server.requests[0].body["messages"][1:] == [
        {"role": "user", "content": "Read both"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_A", "type": "function",
             "function": {"name": "read", "arguments": '{"path": "a.py"}'}},
            {"id": "call_B", "type": "function",
             "function": {"name": "read", "arguments": '{"path": "b.py"}'}}]},
        {"role": "tool", "tool_call_id": "call_A", "content": "A"},
        {"role": "tool", "tool_call_id": "call_B", "content": "no such file"}]


def test_the_callers_messages_and_tools_are_never_changed(serve: Any) -> None:
    server = serve(wire.text_reply("ok"))
    a = call("read", {"path": "a.py"}, id="call_A")
    history: list[Message] = [user("Read a.py"), reply("On it.", a), tool_result(a, "A")]
    tools = [READ]
    before = copy.deepcopy((history, tools))
    run(model(server), history, tools)
    assert (history, tools) == before


def test_reasoning_deltas_become_thinking_that_is_never_sent_back(serve: Any) -> None:
    server = serve(wire.reply(wire.reasoning("Hmm, ", "easy."), wire.text("4")),
                   wire.text_reply("ok"))
    m = model(server)
    deltas, message = run(m, [user("2+2?")])
    assert [d["type"] for d in deltas] == ["thinking", "thinking", "text"]
    assert message["content"] == [{"type": "thinking", "thinking": "Hmm, easy."},
                                  {"type": "text", "text": "4"}]
    run(m, [user("2+2?"), message, user("thanks")])
    assert server.requests[1].body["messages"][2] == {"role": "assistant", "content": "4"}


@pytest.mark.parametrize(("finish", "ours"), [("stop", "stop"), ("length", "length")])
def test_finish_reasons_are_mapped(serve: Any, finish: str, ours: str) -> None:
    server = serve(wire.reply(wire.text("text"), finish_reason=finish))
    _, message = run(model(server), [user("Hi")])
    assert message["stop_reason"] == ours


def test_a_tool_call_ended_by_stop_is_still_a_tool_use(serve: Any) -> None:
    # Some compatible servers say "stop" even when the reply is a tool call.
    server = serve(wire.reply(wire.tool_call(0, "call_A", "read", '{"path": "a.py"}')))
    _, message = run(model(server), [user("Read")], [READ])
    assert message["stop_reason"] == "toolUse"


def test_a_content_filter_stop_is_an_error_that_keeps_the_text(serve: Any) -> None:
    server = serve(wire.reply(wire.text("Here is"), finish_reason="content_filter"))
    _, message = run(model(server), [user("Hi")])
    assert message["stop_reason"] == "error"
    assert message["content"] == [{"type": "text", "text": "Here is"}]
    assert "content filter" in message["error_message"]


def test_a_refusal_is_shown_and_ends_as_an_error_that_keeps_it(serve: Any) -> None:
    server = serve(wire.reply([wire.chunk({"content": None, "refusal": "I'm sorry, "}),
                               wire.chunk({"refusal": "I can't help with that."})]))
    deltas, message = run(model(server), [user("Hi")])
    assert deltas == [{"type": "text", "delta": "I'm sorry, "},
                      {"type": "text", "delta": "I can't help with that."}]
    assert message["stop_reason"] == "error"
    assert message["content"] == [{"type": "text", "text": "I'm sorry, I can't help with that."}]
    assert "refusal" in message["error_message"]


def test_an_error_object_in_place_of_the_first_chunk_is_retried(serve: Any) -> None:
    # OpenRouter and vLLM report an upstream failure inside a 200 stream.
    broken = Sse([(None, {"error": {"message": "Upstream provider timed out", "code": 502}})])
    server = serve(broken, wire.text_reply("ok"))
    _, message = run(model(server), [user("Hi")])
    assert message["content"] == [{"type": "text", "text": "ok"}]
    assert len(server.requests) == 2


def test_an_error_object_in_the_stream_with_a_4xx_code_is_not_retried(serve: Any) -> None:
    refused = Sse([(None, {"error": {"message": "This endpoint's maximum context length is "
                                                "8192 tokens", "code": 400}})])
    server = serve(refused, wire.text_reply("never"))
    sleeps: list[float] = []
    _, message = run(model(server, sleeps), [user("Hi")])
    assert len(server.requests) == 1 and sleeps == []
    assert message["error_message"] == (
        "openai: the server sent an error: 400: This endpoint's maximum context length is "
        "8192 tokens (not retried)")


def test_a_stream_cut_off_mid_message_keeps_the_partial_text_and_the_next_request_is_valid(
        serve: Any) -> None:
    cut = wire.reply(wire.text("The answer ", "is forty"),
                     wire.tool_call(0, "call_A", "read", '{"path": "a'), cut_after=5)
    server = serve(cut, wire.text_reply("42."))
    m = model(server)
    deltas, broken = run(m, [user("What is it?")], [READ])
    assert [d["type"] for d in deltas] == ["text", "text", "toolcall", "toolcall"]
    assert broken["stop_reason"] == "error"
    assert broken["content"] == [{"type": "text", "text": "The answer is forty"}]
    assert "not retried" in broken["error_message"] and len(server.requests) == 1
    _, fixed = run(m, [user("What is it?"), broken, user("Go on")], [READ])
    assert fixed["stop_reason"] == "stop"
    assert server.requests[1].body["messages"][1:] == [
        {"role": "user", "content": "What is it?"},
        {"role": "assistant", "content": "The answer is forty"},
        {"role": "user", "content": "Go on"}]


def test_a_stream_that_ends_without_a_finish_reason_is_an_error(serve: Any) -> None:
    server = serve(Sse([wire.role(), *wire.text("Half"), wire.DONE]))
    _, message = run(model(server), [user("Hi")])
    assert message["stop_reason"] == "error"
    assert message["content"] == [{"type": "text", "text": "Half"}]
    assert "ended before the reply was complete" in message["error_message"]


def test_a_401_is_not_retried_says_what_was_wrong_and_never_shows_the_key(serve: Any) -> None:
    server = serve(wire.error(401, f"Incorrect API key provided: {KEY}. You can find your "
                              "API key at https://platform.openai.com/account/api-keys.",
                              "invalid_request_error", "invalid_api_key"))
    sleeps: list[float] = []
    _, message = run(model(server, sleeps), [user("Hi")])
    assert len(server.requests) == 1 and sleeps == []
    assert message["error_message"] == (
        "openai: 401 invalid_api_key: Incorrect API key provided: [redacted]. You can find "
        "your API key at https://platform.openai.com/account/api-keys. (not retried)")


def test_a_404_for_a_model_the_server_lacks_is_not_retried(serve: Any) -> None:
    server = serve(wire.error(404, 'model "qwen2.5-coder" not found, try pulling it first',
                              "api_error"))
    _, message = run(model(server), [user("Hi")])
    assert len(server.requests) == 1
    assert message["error_message"] == ('openai: 404 api_error: model "qwen2.5-coder" not '
                                        'found, try pulling it first (not retried)')


def test_a_server_silent_before_any_content_times_out_and_is_retried(serve: Any) -> None:
    server = serve(wire.reply(wire.text("never"), stall_after=1), wire.text_reply("ok"))
    sleeps: list[float] = []
    m = OpenAIChatModel("qwen2.5-coder", api_key=KEY, base_url=server.url, timeout=0.3,
                        sleep=sleeps.append)
    _, message = run(m, [user("Hi")])
    assert message["content"] == [{"type": "text", "text": "ok"}]
    assert len(server.requests) == 2 and len(sleeps) == 1
