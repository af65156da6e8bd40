"""run_agent: the loop as a generator of events over a record it appends to."""

from __future__ import annotations

import copy
import threading
from typing import Any

from mulligan.loop import ABORTED, INTERRUPTED, Event, run_agent
from mulligan.messages import Message, user_message
from mulligan.testing import (
    Request,
    ScriptedModel,
    StreamingScriptedModel,
    call,
    reply,
    say,
    shape,
    user,
)
from test_loop_support import assert_balanced, is_valid, kinds, tool


def run(model: Any, tools: list[dict[str, Any]], prompt: str = "go",
        messages: list[Message] | None = None, **options: Any) -> tuple[list[Event], list[Message]]:
    record: list[Message] = [] if messages is None else messages
    events = list(run_agent(model, "system", record, tools, prompt, **options))
    return events, record


def test_a_two_turn_tool_run_emits_exactly_these_events_in_this_order() -> None:
    model = ScriptedModel([reply("Reading.", call("read", id="c1")), say("Done.")])
    events, record = run(model, [tool("read")])
    assert kinds(events) == [
        "agent_start",
        "turn_start", "message_end", "message_end",
        "tool_execution_start", "message_end", "tool_execution_end", "turn_end",
        "turn_start", "message_end", "turn_end",
        "agent_end",
    ]
    assert shape(record) == "U A[c1] R(c1) A"
    assert events[-1]["messages"] == record


def test_the_tool_events_carry_the_call_and_its_result() -> None:
    model = ScriptedModel([reply(call("read", {"path": "a"}, id="c1")), say("Done.")])
    events, record = run(model, [tool("read")])
    start = next(e for e in events if e["type"] == "tool_execution_start")
    end = next(e for e in events if e["type"] == "tool_execution_end")
    assert start == {"type": "tool_execution_start", "tool_call_id": "c1", "tool_name": "read",
                     "arguments": {"path": "a"}}
    assert end["result"] is record[2] and end["is_error"] is False
    turn_end = next(e for e in events if e["type"] == "turn_end")
    assert turn_end["message"] is record[1] and turn_end["tool_results"] == [record[2]]


def test_every_message_is_in_the_record_before_its_message_end_is_yielded() -> None:
    model = ScriptedModel([reply(call("read", id="c1")), say("Done.")])
    record: list[Message] = []
    announced = 0
    for event in run_agent(model, "system", record, [tool("read")], "go"):
        if event["type"] == "message_end":
            assert record[announced] is event["message"]
            announced += 1
    assert announced == len(record) == 4


def test_the_model_is_sent_the_record_so_far_and_the_tool_specs_without_execute() -> None:
    model = ScriptedModel([reply(call("read", id="c1")), say("Done.")])
    before = [user("earlier"), say("noted")]
    _, record = run(model, [tool("read")], messages=list(before))
    assert model.calls[0].messages == [*before, user("go")]
    assert model.calls[1].messages == record[:5]
    assert model.calls[0].tools == [{"name": "read", "description": "the read tool",
                                     "parameters": tool("read")["parameters"]}]


def test_a_runaway_model_is_stopped_by_max_turns_after_exactly_max_turns_calls() -> None:
    model = ScriptedModel(lambda request: reply(call("read")))
    events, record = run(model, [tool("read")], max_turns=3)
    assert len(model.calls) == 3
    assert record[-1]["stop_reason"] == "error"
    assert "max_turns=3" in record[-1]["error_message"]
    assert_balanced(events)
    assert is_valid(record)


def test_max_turns_zero_records_the_error_without_calling_the_model() -> None:
    model = ScriptedModel([say("never")])
    _, record = run(model, [], max_turns=0)
    assert model.calls == []
    assert shape(record) == "U A!"


def test_a_model_that_raises_ends_the_run_with_an_error_message_in_the_record() -> None:
    model = ScriptedModel([reply(call("read", id="c1")), ConnectionError("socket closed")])
    events, record = run(model, [tool("read")])
    assert shape(record) == "U A[c1] R(c1) A!"
    assert "ConnectionError: socket closed" in record[-1]["error_message"]
    assert_balanced(events)


def test_a_reply_with_stop_reason_error_ends_the_run_and_its_tool_call_is_never_run() -> None:
    ran: list[str] = []
    model = ScriptedModel([reply(call("write", id="c1"), stop_reason="error",
                                 error_message="overloaded"), say("never")])
    events, record = run(model, [tool("write", lambda a: ran.append("write") or "x")])
    assert ran == []
    assert len(model.calls) == 1
    assert "tool_execution_start" not in kinds(events)
    assert shape(record) == "U A![c1]"
    assert is_valid(record)


def test_a_tool_that_raises_and_a_tool_that_does_not_exist_get_two_results_in_order() -> None:
    def explode(arguments: dict[str, Any]) -> str:
        raise OSError("disk on fire")

    model = ScriptedModel([reply(call("explode", id="c1"), call("missing", id="c2")),
                           say("Both failed.")])
    events, record = run(model, [tool("explode", explode)])
    results = [m for m in record if m["role"] == "toolResult"]
    assert [(r["tool_call_id"], r["is_error"]) for r in results] == [("c1", True), ("c2", True)]
    assert "disk on fire" in results[0]["content"]
    assert "missing" in results[1]["content"]
    assert shape(record) == "U A[c1,c2] R(c1) R(c2) A"
    assert_balanced(events)


def test_the_tool_calls_of_one_reply_run_one_at_a_time_in_call_order() -> None:
    order: list[str] = []

    def note(name: str) -> dict[str, Any]:
        return tool(name, lambda a: order.append(name) or name)

    model = ScriptedModel([reply(call("b", id="c1"), call("a", id="c2"), call("b", id="c3")),
                           say("ok")])
    run(model, [note("a"), note("b")])
    assert order == ["b", "a", "b"]


def test_steering_is_asked_for_once_the_tool_batch_is_answered_and_opens_the_next_turn() -> None:
    queue: list[str] = []
    asked_with_results: list[int] = []
    record: list[Message] = []

    def steering() -> list[str]:
        asked_with_results.append(sum(m["role"] == "toolResult" for m in record))
        taken = list(queue)
        queue.clear()
        return taken

    def read(arguments: dict[str, Any]) -> str:
        queue.append("use spaces")  # the user speaks while the tool runs
        return "text"

    model = ScriptedModel([reply(call("read", id="c1"), call("read", id="c2")), say("ok")])
    events = list(run_agent(model, "system", record, [tool("read", read)], "go",
                            get_steering=steering))
    assert shape(record) == "U A[c1,c2] R(c1) R(c2) U U A"
    assert [m["content"] for m in record[4:6]] == ["use spaces", "use spaces"]
    assert asked_with_results[1] == 2  # the second ask came after both results
    assert model.calls[1].messages == record[:6]
    assert_balanced(events)


def test_steering_is_asked_for_when_the_model_stops_before_the_run_ends() -> None:
    queue: list[str] = []

    def first(request: Request) -> Any:
        queue.append("one more thing")  # arrives while the model is answering
        return say("first")

    model = ScriptedModel([first, say("second")])
    _, record = run(model, [], get_steering=lambda: [queue.pop()] if queue else [])
    assert shape(record) == "U A U A"
    assert record[2] == user_message("one more thing")


def test_steering_waiting_when_the_run_starts_goes_in_with_the_prompt() -> None:
    queue = ["and be brief"]
    model = ScriptedModel([say("ok")])
    _, record = run(model, [], get_steering=lambda: [queue.pop()] if queue else [])
    assert record[:2] == [user("go"), user("and be brief")]
    assert len(model.calls) == 1


def test_follow_ups_are_asked_for_only_when_the_run_would_otherwise_end() -> None:
    queue = ["now run the tests"]
    asked_after: list[str] = []
    record: list[Message] = []

    def follow_ups() -> list[str]:
        asked_after.append(shape(record))
        return [queue.pop()] if queue else []

    model = ScriptedModel([reply(call("read", id="c1")), say("read it"), say("tests pass")])
    events = list(run_agent(model, "system", record, [tool("read")], "go",
                            get_follow_ups=follow_ups))
    assert asked_after == ["U A[c1] R(c1) A", "U A[c1] R(c1) A U A"]
    assert shape(record) == "U A[c1] R(c1) A U A"
    assert_balanced(events)


def test_neither_queue_is_asked_after_a_failed_reply() -> None:
    asked: list[str] = []
    model = ScriptedModel([RuntimeError("down")])
    run(model, [], get_steering=lambda: asked.append("s") or [],
        get_follow_ups=lambda: asked.append("f") or [])
    assert asked == ["s"]  # only the ask at the start, with the prompt


def test_a_tool_that_sets_abort_leaves_the_rest_of_its_batch_interrupted() -> None:
    abort = threading.Event()
    ran: list[str] = []

    def stop(arguments: dict[str, Any]) -> str:
        abort.set()
        return "stopping"

    model = ScriptedModel([reply(call("stop", id="c1"), call("other", id="c2")), say("never")])
    events, record = run(model, [tool("stop", stop), tool("other", lambda a: ran.append("x"))],
                         abort=abort)
    assert ran == []
    assert len(model.calls) == 1
    assert shape(record) == "U A[c1,c2] R(c1) R(c2) A~"
    assert record[2]["content"] == "stopping"
    assert record[3]["content"] == INTERRUPTED and record[3]["is_error"] is True
    assert record[-1]["error_message"] == ABORTED
    assert_balanced(events)
    assert is_valid(record)


def test_an_interruptible_tool_is_handed_the_abort_event_and_can_stop_early() -> None:
    abort = threading.Event()
    started = threading.Event()

    def wait(arguments: dict[str, Any], abort: threading.Event | None = None) -> str:
        started.set()
        assert abort is not None
        abort.wait()
        return "stopped early"

    threading.Thread(target=lambda: started.wait() and abort.set(), daemon=True).start()
    model = ScriptedModel([reply(call("wait", id="c1")), say("never")])
    events, record = run(model, [tool("wait", wait, interruptible=True)], abort=abort)
    assert record[2]["content"] == "stopped early"
    assert shape(record) == "U A[c1] R(c1) A~"
    assert_balanced(events)


def test_an_abort_set_before_the_run_records_an_aborted_reply_and_calls_nothing() -> None:
    abort = threading.Event()
    abort.set()
    model = ScriptedModel([say("never")])
    events, record = run(model, [], abort=abort)
    assert model.calls == []
    assert shape(record) == "U A~"
    assert_balanced(events)


def test_a_streaming_model_builds_the_partial_message_from_its_deltas() -> None:
    model = StreamingScriptedModel([reply("Let me look.", call("read", {"path": "a.py"}, id="c1")),
                                    say("Done.")])
    record: list[Message] = []
    events, seen = [], []
    for event in run_agent(model, "system", record, [tool("read")], "go"):
        events.append(event)
        if event["type"] == "message_update":  # the partial as it is when the event comes
            seen.append(copy.deepcopy(event["message"]))
    assert kinds(events)[:4] == ["agent_start", "turn_start", "message_end", "message_start"]
    first_reply = [m for m in seen if m["content"][0].get("text") != "Done."]
    assert [m["content"][0]["text"] for m in first_reply[:3]] == [
        "Let", "Let me", "Let me look."]
    assert first_reply[2]["stop_reason"] == "stop"
    assert first_reply[3]["content"][1] == {"type": "toolCall", "id": "c1", "name": "read",
                                            "arguments": {}}  # half of its JSON so far
    last = first_reply[-1]
    assert last["content"][1] == {"type": "toolCall", "id": "c1", "name": "read",
                                  "arguments": {"path": "a.py"}}
    assert last["stop_reason"] == "toolUse"
    assert shape(record) == "U A[c1] R(c1) A"
    assert_balanced(events)


def test_message_update_carries_one_partial_message_changed_in_place() -> None:
    events, _ = run(StreamingScriptedModel([say("one two three")]), [])
    updates = [e["message"] for e in events if e["type"] == "message_update"]
    assert len(updates) == 3 and all(m is updates[0] for m in updates)
    assert updates[0]["content"] == [{"type": "text", "text": "one two three"}]
    start = next(e["message"] for e in events if e["type"] == "message_start")
    assert start["content"] == [] and start is not updates[0]


def test_an_abort_mid_stream_records_the_streamed_aborted_message_as_it_came() -> None:
    abort = threading.Event()
    model = StreamingScriptedModel([say("one two three four five six"), say("never")],
                                   pause=0.001)
    record: list[Message] = []
    events = []
    for event in run_agent(model, "system", record, [], "go", abort=abort):
        events.append(event)
        if event["type"] == "message_update":
            abort.set()  # after the first word: the model's wait before the next one ends
    assert shape(record) == "U A~"
    assert record[-1]["content"] == [{"type": "text", "text": "one"}]
    assert record[-1]["error_message"] == ABORTED  # the provider records the same reason
    assert_balanced(events)


def test_a_stream_that_raises_keeps_the_words_that_had_arrived_in_its_error_message() -> None:
    class Broken(ScriptedModel):
        def stream(self, system: str, messages: list[Message], tools: Any,
                   abort: threading.Event | None = None) -> Any:
            yield {"type": "text", "delta": "Half"}
            raise ConnectionResetError("peer went away")

    events, record = run(Broken([]), [])
    assert shape(record) == "U A!"
    assert record[-1]["content"] == [{"type": "text", "text": "Half"}]
    assert "ConnectionResetError" in record[-1]["error_message"]
    assert_balanced(events)


def test_a_model_returning_something_that_is_not_a_message_becomes_an_error() -> None:
    model = ScriptedModel(lambda request: None)  # type: ignore[arg-type,return-value]
    _, record = run(model, [])
    assert shape(record) == "U A!"
    assert "not an assistant message" in record[-1]["error_message"]


def test_a_reply_with_a_malformed_block_ends_the_run_as_an_error_instead_of_raising() -> None:
    no_id = {"type": "toolCall", "name": "read", "arguments": {}}
    for content in ([no_id], ["bare words"], [{"type": "text"}]):
        malformed: Any = {"role": "assistant", "content": content, "stop_reason": "toolUse"}
        model = ScriptedModel([malformed])
        events, record = run(model, [tool("read")])
        assert shape(record) == "U A!", content
        assert "malformed content block" in record[-1]["error_message"]
        assert_balanced(events)
        assert is_valid(record)


def test_closing_the_loop_early_answers_open_calls_and_runs_nothing_more() -> None:
    ran: list[str] = []
    model = ScriptedModel([reply(call("a", id="c1"), call("b", id="c2")), say("never")])
    record: list[Message] = []
    events = run_agent(model, "system", record,
                       [tool("a", lambda x: ran.append("a") or "a"), tool("b")], "go")
    for event in events:
        if event["type"] == "tool_execution_end":
            break  # c1 answered, c2 not yet started
    events.close()
    assert ran == ["a"]
    assert shape(record) == "U A[c1,c2] R(c1) R(c2)"
    assert record[-1]["content"] == INTERRUPTED
    assert len(model.calls) == 1
    assert is_valid(record)


def test_a_failed_reply_with_partial_text_is_sent_back_as_text_without_its_tool_calls() -> None:
    def second(request: Request) -> Any:
        return say("retrying")

    model = ScriptedModel([reply("Half an answer", call("read", id="c1"), stop_reason="aborted"),
                           second])
    record: list[Message] = []
    run(model, [tool("read")], messages=record, prompt="first")
    run(model, [tool("read")], messages=record, prompt="again")
    sent = model.calls[1].messages
    assert shape(sent) == "U A~ U"
    assert sent[1]["content"] == [{"type": "text", "text": "Half an answer"}]
    assert shape(record) == "U A~[c1] U A"  # the record keeps what happened
