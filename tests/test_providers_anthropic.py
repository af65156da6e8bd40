"""AnthropicModel against a local server that speaks the Messages API's streaming protocol."""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from fakes import anthropic_server as wire
from fakes.http_server import ScriptedServer, Sse, server_factory, stream_all
from mulligan.messages import AssistantMessage, Message
from mulligan.providers.anthropic import AnthropicModel
from mulligan.providers.base import ToolSpec
from mulligan.providers.retry import Backoff
from mulligan.testing import call, reply, tool_result, user

KEY = "sk-ant-test-0123456789abcdef"
READ: ToolSpec = {"name": "read", "description": "Read a file.",
                  "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                                 "required": ["path"]}}


@pytest.fixture
def serve() -> Iterator[Any]:
    with server_factory() as start:
        yield start


def model(server: ScriptedServer, sleeps: list[float] | None = None,
          **options: Any) -> AnthropicModel:
    options.setdefault("backoff", Backoff(max_retries=2, base=0.5, random=lambda: 1.0))
    return AnthropicModel("claude-sonnet-4-6", api_key=KEY, base_url=server.url, timeout=5.0,
                          sleep=(sleeps if sleeps is not None else []).append, **options)


run = stream_all


def test_the_request_carries_model_system_tools_and_the_key_only_in_a_header(serve: Any) -> None:
    server = serve(wire.text_reply("ok"))
    run(model(server, max_tokens=1000), [user("Hi")], [READ])
    sent = server.requests[0]
    assert sent.path == "/v1/messages"
    assert sent.body == {
        "model": "claude-sonnet-4-6", "max_tokens": 1000, "stream": True,
        "system": [{"type": "text", "text": "You are terse.",
                    "cache_control": {"type": "ephemeral"}}],
        "tools": [{"name": "read", "description": "Read a file.",
                   "input_schema": READ["parameters"]}],
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "Hi", "cache_control": {"type": "ephemeral"}}]}]}
    assert KEY in (sent.headers.get("x-api-key", "") + sent.headers.get("authorization", ""))
    assert "anthropic-version" in sent.headers


def test_usage_records_cache_reads_and_writes(serve: Any) -> None:
    server = serve(wire.reply(wire.text_block(0, "ok"), input_tokens=5, cache_read=900,
                              cache_write=40, output_tokens=3))
    _, message = run(model(server), [user("Hi")])
    assert message["usage"] == {"input": 5, "output": 3, "cache_read": 900, "cache_write": 40}


def test_a_tool_call_whose_arguments_are_not_json_is_kept_with_its_raw_text(serve: Any) -> None:
    server = serve(wire.reply(wire.tool_use_block(0, "toolu_01A", "read", '{"path": ', 'x}'),
                              stop_reason="tool_use"))
    _, message = run(model(server), [user("Read main.py")], [READ])
    assert message["stop_reason"] == "toolUse"
    assert message["content"] == [
        {"type": "toolCall", "id": "toolu_01A", "name": "read", "arguments": {},
         "invalid_arguments": '{"path": x}'}]

def test_two_tool_calls_in_one_reply_both_arrive_in_order(serve: Any) -> None:
    server = serve(wire.reply(
        wire.tool_use_block(0, "toolu_01A", "read", '{"path": "a.py"}'),
        wire.tool_use_block(1, "toolu_01B", "read", '{"path":', ' "b.py"}'),
        stop_reason="tool_use"))
    _, message = run(model(server), [user("Read both")], [READ])
    assert [(b["id"], b["arguments"]) for b in message["content"]] == [  # type: ignore[typeddict-item]
        ("toolu_01A", {"path": "a.py"}), ("toolu_01B", {"path": "b.py"})]


def test_tool_results_go_back_as_tool_result_blocks_in_one_user_turn(serve: Any) -> None:
    server = serve(wire.text_reply("Both read."))
    a, b = call("read", {"path": "a.py"}, id="toolu_01A"), call("read", {"path": "b.py"},
                                                                  id="toolu_01B")
    history: list[Message] = [user("Read both"), reply("On it.", a, b),
                              tool_result(a, "A"), tool_result(b, "no such file", is_error=True),
                              user("and be quick")]
    run(model(server, prompt_caching=False), history, [READ])
    assert server.requests[0].body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Read both"}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "On it."},
            {"type": "tool_use", "id": "toolu_01A", "name": "read", "input": {"path": "a.py"}},
            {"type": "tool_use", "id": "toolu_01B", "name": "read", "input": {"path": "b.py"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "A"},
            {"type": "tool_result", "tool_use_id": "toolu_01B", "content": "no such file",
             "is_error": True},
            {"type": "text", "text": "and be quick"}]}]


def test_the_callers_messages_and_tools_are_never_changed(serve: Any) -> None:
    # The transcript's dicts are shared with the session log: marking the newest turn for
    # caching must build new blocks, never touch these.
    server = serve(wire.text_reply("ok"), wire.text_reply("ok"))
    a = call("read", {"path": "a.py"}, id="toolu_01A")
    thought: AssistantMessage = {"role": "assistant", "stop_reason": "toolUse", "content": [
        {"type": "thinking", "thinking": "Read it.", "signature": "EqQB"}, a]}
    m = model(server, thinking_budget=2048)
    for history in ([user("Read a.py"), thought, tool_result(a, "print(1)")],
                    [user("Read a.py"), thought, tool_result(a, "print(1)"), user("and?")]):
        tools = [READ]
        before = copy.deepcopy((history, tools))
        run(m, history, tools)
        assert (history, tools) == before
    assert "cache_control" in server.requests[1].body["messages"][-1]["content"][-1]


def test_thinking_is_streamed_kept_with_its_signature_and_sent_back_with_it(serve: Any) -> None:
    server = serve(
        wire.reply(wire.thinking_block(0, ["Two files, ", "read the first."], "EqQBCkgIARAB"),
                   wire.redacted_thinking_block(1, "EmwKAhgBEgy3va"),
                   wire.tool_use_block(2, "toolu_01A", "read", '{"path": "a.py"}'),
                   stop_reason="tool_use"),
        wire.text_reply("Done."))
    m = model(server, thinking_budget=2048, max_tokens=1024, prompt_caching=False)
    deltas, first = run(m, [user("Read a.py")], [READ])
    assert [d for d in deltas if d["type"] == "thinking"] == [
        {"type": "thinking", "delta": "Two files, "},
        {"type": "thinking", "delta": "read the first."}]
    assert first["content"][:2] == [
        {"type": "thinking", "thinking": "Two files, read the first.",
         "signature": "EqQBCkgIARAB"},
        {"type": "thinking", "thinking": "", "redacted": True, "data": "EmwKAhgBEgy3va"}]
    read = first["content"][2]
    run(m, [user("Read a.py"), first, tool_result(read, "print(1)")],  # type: ignore[arg-type]
        [READ])
    assert server.requests[0].body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert server.requests[0].body["max_tokens"] > 2048
    assert server.requests[1].body["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "Two files, read the first.",
         "signature": "EqQBCkgIARAB"},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va"},
        {"type": "tool_use", "id": "toolu_01A", "name": "read", "input": {"path": "a.py"}}]


@pytest.mark.parametrize(("wire_reason", "ours"), [
    ("end_turn", "stop"), ("stop_sequence", "stop"), ("max_tokens", "length"),
    ("model_context_window_exceeded", "length")])
def test_stop_reasons_are_mapped(serve: Any, wire_reason: str, ours: str) -> None:
    server = serve(wire.reply(wire.text_block(0, "text"), stop_reason=wire_reason))
    _, message = run(model(server), [user("Hi")])
    assert message["stop_reason"] == ours


def test_a_refusal_is_an_error_that_keeps_the_text(serve: Any) -> None:
    server = serve(wire.reply(wire.text_block(0, "I can't"), stop_reason="refusal"))
    _, message = run(model(server), [user("Hi")])
    assert message["stop_reason"] == "error"
    assert message["content"] == [{"type": "text", "text": "I can't"}]
    assert "refusal" in message["error_message"]


def test_overloaded_529_is_retried(serve: Any) -> None:
    server = serve(wire.error(529, "overloaded_error", "Overloaded"), wire.text_reply("ok"))
    _, message = run(model(server), [user("Hi")])
    assert message["stop_reason"] == "stop" and len(server.requests) == 2


def test_an_overloaded_error_event_before_any_content_is_retried(serve: Any) -> None:
    early = Sse([wire.message_start(), wire.ping(),
                 wire.error_event("overloaded_error", "Overloaded")])
    server = serve(early, wire.text_reply("ok"))
    deltas, message = run(model(server), [user("Hi")])
    assert message["content"] == [{"type": "text", "text": "ok"}]
    assert deltas == [{"type": "retry", "reason": "overloaded_error: Overloaded", "attempt": 2,
                       "of": 3, "delay": 0.5},
                      {"type": "text", "delta": "ok"}]
    assert len(server.requests) == 2


def test_an_error_event_after_text_has_streamed_ends_as_an_error_keeping_the_text(
        serve: Any) -> None:
    late = Sse([wire.message_start(), *wire.text_block(0, "Half an ans")[:2],
                wire.error_event("overloaded_error", "Overloaded")])
    server = serve(late, wire.text_reply("never asked for"))
    _, message = run(model(server), [user("Hi")])
    assert len(server.requests) == 1
    assert message["stop_reason"] == "error"
    assert message["content"] == [{"type": "text", "text": "Half an ans"}]
    assert message["error_message"] == ("anthropic: overloaded_error: Overloaded (part of the "
                                        "reply had already arrived; not retried)")


def test_a_stream_cut_off_mid_message_keeps_the_partial_text_and_the_next_request_is_valid(
        serve: Any) -> None:
    cut = wire.reply(wire.text_block(0, "The answer ", "is forty"),
                     wire.tool_use_block(1, "toolu_01A", "read", '{"path": "a'),
                     cut_after=8)
    server = serve(cut, wire.text_reply("Sorry, again: 42."))
    m = model(server, prompt_caching=False)
    deltas, broken = run(m, [user("What is it?")], [READ])
    assert [d["type"] for d in deltas] == ["text", "text", "toolcall", "toolcall"]
    assert broken["stop_reason"] == "error"
    assert broken["content"] == [{"type": "text", "text": "The answer is forty"}]
    assert broken["error_message"].startswith("anthropic: connection lost")
    assert len(server.requests) == 1
    _, fixed = run(m, [user("What is it?"), broken, user("Go on")], [READ])
    assert fixed["stop_reason"] == "stop"
    assert server.requests[1].body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "What is it?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "The answer is forty"}]},
        {"role": "user", "content": [{"type": "text", "text": "Go on"}]}]


def test_a_failed_message_without_text_is_left_out_of_the_next_request(serve: Any) -> None:
    server = serve(wire.text_reply("ok"))
    failed: AssistantMessage = {"role": "assistant", "content": [], "stop_reason": "error",
                                "error_message": "anthropic: 500"}
    run(model(server, prompt_caching=False), [user("one"), failed, user("two")])
    assert server.requests[0].body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "one"},
                                     {"type": "text", "text": "two"}]}]


def test_a_stream_that_ends_without_message_stop_before_any_content_is_retried(
        serve: Any) -> None:
    server = serve(Sse([wire.message_start()]), wire.text_reply("ok"))
    _, message = run(model(server), [user("Hi")])
    assert message["stop_reason"] == "stop" and len(server.requests) == 2


def test_a_401_is_not_retried_and_says_what_was_wrong(serve: Any) -> None:
    server = serve(wire.error(401, "authentication_error", "invalid x-api-key"),
                   wire.text_reply("never"))
    sleeps: list[float] = []
    _, message = run(model(server, sleeps), [user("Hi")])
    assert len(server.requests) == 1 and sleeps == []
    assert message["stop_reason"] == "error"
    assert message["error_message"] == ("anthropic: 401 authentication_error: "
                                        "invalid x-api-key (not retried)")


def test_a_key_the_server_echoes_never_reaches_the_error_message(serve: Any) -> None:
    server = serve(wire.error(403, "permission_error", f"key {KEY} may not use this model"))
    _, message = run(model(server), [user("Hi")])
    assert KEY not in message["error_message"]
    assert "[redacted]" in message["error_message"]
    assert KEY not in repr(model(server))


def test_an_abort_before_the_server_answers_leaves_no_reader_thread_behind(
        serve: Any) -> None:
    # Headers come 0.4 s after the request, then nothing: the helper that made the request
    # must hang up once they arrive, not wait for the 5 s read timeout.
    server = serve(wire.reply(wire.text_block(0, "late"), delay=0.4, stall_after=0))
    abort = threading.Event()
    threading.Timer(0.1, abort.set).start()
    before = set(threading.enumerate())
    _, message = run(model(server), [user("Hi")], abort=abort)
    assert message["stop_reason"] == "aborted"
    readers = [t for t in threading.enumerate()
               if t not in before and t.name == "mulligan-provider-stream"]
    for reader in readers:
        reader.join(timeout=2.0)
    assert readers and not any(reader.is_alive() for reader in readers)


def test_a_server_that_goes_silent_mid_reply_times_out_as_an_error_keeping_the_text(
        serve: Any) -> None:
    server = serve(wire.reply(wire.text_block(0, "Still ", "thinking"), stall_after=5))
    m = AnthropicModel("claude-sonnet-4-6", api_key=KEY, base_url=server.url, timeout=0.3)
    _, message = run(m, [user("Hi")])
    assert message["stop_reason"] == "error"
    assert message["content"] == [{"type": "text", "text": "Still thinking"}]
    assert message["error_message"] == ("anthropic: timed out waiting for the server (part of "
                                        "the reply had already arrived; not retried)")


def stalled() -> Sse:
    return wire.reply(wire.text_block(0, "never"), stall_after=0)  # headers, then silence


def test_one_request_never_waits_past_its_deadline(serve: Any) -> None:
    server = serve(stalled(), stalled(), stalled())
    m = model(server, backoff=Backoff(max_retries=5, base=0.01, random=lambda: 1.0),
              idle_timeout=0.4, deadline=0.6)
    _, message = run(m, [user("Hi")])
    assert message["stop_reason"] == "error" and "0.6 s" in message["error_message"]
    assert len(server.requests) <= 2
