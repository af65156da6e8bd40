"""The wire shapes and the public test helpers that every other test leans on."""

from __future__ import annotations

import copy
import threading
import time

import pytest

from mulligan.messages import (
    assistant_message,
    error_message,
    is_failed,
    shape_problem,
    text_of,
    tool_calls,
    user_message,
)
from mulligan.testing import (
    ScriptedModel,
    ScriptExhausted,
    StreamingScriptedModel,
    call,
    reply,
    say,
    shape,
    show,
    text,
    tool_result,
    user,
)


def test_user_message_is_a_plain_string_content() -> None:
    assert user_message("hi") == {"role": "user", "content": "hi"}


def test_text_of_joins_only_the_text_blocks_of_an_assistant_message() -> None:
    message = reply(text("Reading "), call("read", {"path": "a"}, id="c1"), text("it."))
    assert text_of(message) == "Reading it."
    assert text_of(user("plain")) == "plain"


def test_tool_calls_are_read_from_content_in_order() -> None:
    first, second = call("read", id="c1"), call("bash", {"command": "ls"}, id="c2")
    message = reply(first, "between", second)
    assert [c["id"] for c in tool_calls(message)] == ["c1", "c2"]
    assert tool_calls(user("no calls")) == []


def test_assistant_message_stop_reason_follows_its_blocks() -> None:
    assert assistant_message([text("done")])["stop_reason"] == "stop"
    assert assistant_message([call("ls", id="c9")])["stop_reason"] == "toolUse"
    assert reply("cut", stop_reason="length")["stop_reason"] == "length"


def test_error_message_keeps_partial_content_and_is_failed() -> None:
    failed = error_message("boom", content=[text("half an ans")])
    assert failed["stop_reason"] == "error" and failed["error_message"] == "boom"
    assert text_of(failed) == "half an ans"
    assert is_failed(failed) and is_failed(error_message("stop", stop_reason="aborted"))
    assert not is_failed(say("fine"))


def test_shape_and_show_draw_a_transcript() -> None:
    read = call("read", {"path": "main.py"}, id="c1")
    messages = [user("Make main.py faster."), reply("Reading it.", read),
                tool_result(read, "def slow(n): ..."), say("Done."), error_message("boom")]
    assert shape(messages) == "U A[c1] R(c1) A A!"
    assert show(messages[:2]) == (
        'user -> "Make main.py faster."\n'
        'assistant -> "Reading it." + toolCall c1 read({"path": "main.py"})')
    assert show([user("abcdef")], clip=3) == 'user -> "abc..."'


def test_scripted_model_answers_in_turn_and_records_copies_of_requests() -> None:
    model = ScriptedModel([say("one"), lambda request: say(f"saw {len(request.messages)}")])
    sent = [user("hello")]
    assert text_of(model.complete("sys", sent, [])) == "one"
    sent.append(say("one"))
    assert text_of(model.complete("sys", sent, [])) == "saw 2"
    sent.clear()  # the record is a copy: later changes by the caller do not rewrite history
    assert [len(r.messages) for r in model.calls] == [1, 2]
    assert '"hello"' in model.calls[0].text


def test_scripted_model_that_does_not_record_answers_in_turn_and_keeps_nothing() -> None:
    model = ScriptedModel([say("one"), lambda request: say(f"saw {len(request.messages)}")],
                          record=False)
    assert text_of(model.complete("sys", [user("hello")], [])) == "one"
    assert text_of(model.complete("sys", [user("hello"), say("one")], [])) == "saw 2"
    assert model.calls == []
    with pytest.raises(ScriptExhausted, match="request 3"):
        model.complete("", [], [])


def test_scripted_model_raises_when_the_script_runs_out_or_says_so() -> None:
    model = ScriptedModel([RuntimeError("provider down")])
    with pytest.raises(RuntimeError, match="provider down"):
        model.complete("", [user("x")], [])
    with pytest.raises(ScriptExhausted, match="request 2"):
        model.complete("", [user("x")], [])


def test_scripted_model_with_a_function_answers_every_request() -> None:
    model = ScriptedModel(lambda request: say(str(len(model.calls))))
    assert [text_of(model.complete("", [], [])) for _ in range(3)] == ["1", "2", "3"]


def test_streaming_scripted_model_streams_deltas_then_one_done() -> None:
    answer = reply("two words", call("read", {"path": "a.txt"}, id="c7"))
    model = StreamingScriptedModel([answer])
    deltas = list(model.stream("", [user("go")], []))
    assert [d["type"] for d in deltas] == ["text", "text", "toolcall", "toolcall", "done"]
    assert "".join(d["delta"] for d in deltas if d["type"] == "text") == "two words"
    assert deltas[-1]["message"] == answer


def test_streaming_scripted_model_stops_with_partial_text_on_abort() -> None:
    abort = threading.Event()
    model = StreamingScriptedModel([say("a b c d")], pause=0.0)
    stream = model.stream("", [user("go")], [], abort=abort)
    first = next(stream)
    abort.set()
    rest = list(stream)
    assert first == {"type": "text", "delta": "a"}
    done = rest[-1]
    assert done["type"] == "done" and done["message"]["stop_reason"] == "aborted"
    assert text_of(done["message"]) == "a"


def test_streaming_scripted_model_pauses_before_each_delta_without_an_abort_event() -> None:
    model = StreamingScriptedModel([say("a b c")], pause=0.1)
    started = time.monotonic()
    deltas = list(model.stream("", [user("go")], []))
    assert len(deltas) == 4
    assert time.monotonic() - started >= 0.3


def test_builders_never_share_state_with_their_input() -> None:
    block = call("read", {"path": "x"}, id="c1")
    message = reply(block)
    before = copy.deepcopy(message)
    tool_result(block, "content")
    assert message == before


def test_shape_problem_accepts_every_wire_shape_and_names_what_is_wrong() -> None:
    read = call("read", {"path": "a"}, id="c1")
    for good in (user("hi"), reply("t", read), tool_result(read, "x"), error_message("e"),
                 reply({"type": "thinking", "thinking": "hm", "signature": "s"})):
        assert shape_problem(good) is None, good
    assert shape_problem("hi") == "not a message object but str"
    assert "unknown role 'system'" in str(shape_problem({"role": "system", "content": "x"}))
    no_stop = {"role": "assistant", "content": []}
    assert "'stop_reason' is missing" in str(shape_problem(no_stop))
    bad_block = {"role": "assistant", "content": [{"type": "toolCall", "name": "read"}],
                 "stop_reason": "toolUse"}
    assert "malformed content block" in str(shape_problem(bad_block))
    assert "'is_error'" in str(shape_problem({**tool_result(read, "x"), "is_error": "no"}))
