"""Harness: one transcript, one run at a time, queues for the user, listeners."""

from __future__ import annotations

import gc
import threading
from pathlib import Path
from typing import Any

import pytest

from mulligan.harness import Harness
from mulligan.loop import ABORTED, INTERRUPTED, Event
from mulligan.messages import Message
from mulligan.session import SessionLog, persist_to
from mulligan.testing import (
    Request,
    ScriptedModel,
    StreamingScriptedModel,
    call,
    reply,
    say,
    shape,
    tool_result,
    user,
)
from test_loop_support import assert_balanced, is_valid, kinds, tool


def drain(h: Harness, text: str) -> list[Event]:
    return list(h.prompt(text))


def test_a_harness_resumed_from_a_log_sends_exactly_those_messages_plus_the_prompt(
        tmp_path: Path) -> None:
    read = call("read", {"path": "main.py"}, id="c1")
    earlier: list[Message] = [user("Make main.py faster."), reply("Reading it.", read),
                              tool_result(read, "def slow(n): ..."),
                              say("Cache the results in a global dict.")]
    log = SessionLog(tmp_path / "session.jsonl")
    for message in earlier:
        log.append_message(message)
    model = ScriptedModel([say("Then functools.cache."), say("Done.")])
    h = Harness(model, "system", [], messages=log.replay())
    h.subscribe(persist_to(log))
    drain(h, "No global, please.")
    drain(h, "Do that, then.")
    assert model.calls[0].messages == [*earlier, user("No global, please.")]
    assert model.calls[1].messages == [*earlier, user("No global, please."),
                                       say("Then functools.cache."), user("Do that, then.")]
    assert log.replay() == list(h.messages)


def test_messages_is_a_tuple_snapshot_that_nobody_outside_can_append_to() -> None:
    h = Harness(ScriptedModel([say("hi")]), "system", [])
    snapshot = h.messages
    drain(h, "hello")
    assert isinstance(snapshot, tuple) and snapshot == ()
    assert shape(h.messages) == "U A"


def test_prompt_raises_runtime_error_on_the_callers_line_while_a_run_is_going_on() -> None:
    h = Harness(ScriptedModel([say("one"), say("two")]), "system", [])
    run = h.prompt("first")  # not iterated yet: the run has still begun
    assert h.is_running
    with pytest.raises(RuntimeError, match="already"):
        h.prompt("second")
    list(run)
    assert not h.is_running
    drain(h, "second")
    assert shape(h.messages) == "U A U A"


def test_a_run_dropped_before_its_first_event_records_nothing_and_frees_the_harness() -> None:
    model = ScriptedModel([say("never")])
    h = Harness(model, "system", [])
    h.prompt("go")  # dropped at once
    gc.collect()
    assert not h.is_running
    assert h.messages == () and model.calls == []


def test_the_model_and_system_can_be_replaced_between_runs_but_not_during_one() -> None:
    first, second = ScriptedModel([say("a")]), ScriptedModel([say("b")])
    h = Harness(first, "old", [])
    run = h.prompt("go")
    with pytest.raises(RuntimeError):
        h.set_model(second)
    with pytest.raises(RuntimeError):
        h.system = "new"
    list(run)
    h.set_model(second)
    h.system = "new"
    drain(h, "again")
    assert h.model is second
    assert second.calls[0].system == "new" and len(second.calls[0].messages) == 3


def test_a_listener_sees_the_message_already_in_h_messages_at_its_message_end() -> None:
    h = Harness(ScriptedModel([reply(call("read", id="c1")), say("ok")]), "system",
                [tool("read")])
    seen: list[bool] = []
    h.subscribe(lambda e: seen.append(e["type"] != "message_end"
                                      or h.messages[-1] is e["message"]))
    drain(h, "go")
    assert seen and all(seen)


def test_listeners_hear_each_event_before_the_consumer_does() -> None:
    h = Harness(ScriptedModel([reply(call("read", id="c1")), say("ok")]), "system",
                [tool("read")])
    heard: list[Event] = []
    h.subscribe(heard.append)
    for event in h.prompt("go"):
        assert heard[-1] is event
    assert_balanced(heard)


def test_unsubscribing_twice_is_harmless_and_the_listener_hears_nothing_more() -> None:
    h = Harness(ScriptedModel([say("a"), say("b")]), "system", [])
    heard: list[Event] = []
    unsubscribe = h.subscribe(heard.append)
    drain(h, "one")
    unsubscribe()
    unsubscribe()
    count = len(heard)
    drain(h, "two")
    assert len(heard) == count


def test_undoing_one_of_two_subscriptions_of_one_listener_twice_leaves_the_other() -> None:
    h = Harness(ScriptedModel([say("a")]), "system", [])
    heard: list[Event] = []
    first = h.subscribe(heard.append)
    h.subscribe(heard.append)
    first()
    first()
    events = drain(h, "one")
    assert heard == events


def test_a_listener_that_raises_ends_the_run_and_its_error_reaches_the_consumer() -> None:
    ran: list[str] = []

    def fussy(event: Event) -> None:
        if event["type"] == "tool_execution_start":
            raise OSError("disk full")

    h = Harness(ScriptedModel([reply(call("write", id="c1")), say("never")]), "system",
                [tool("write", lambda a: ran.append("write") or "ok")])
    others: list[Event] = []
    h.subscribe(fussy)
    h.subscribe(others.append)
    consumed: list[Event] = []
    with pytest.raises(OSError, match="disk full"):
        for event in h.prompt("go"):
            consumed.append(event)
    assert ran == []  # the tool whose start the listener choked on never ran
    assert kinds(consumed)[-1] == "message_end"  # the consumer never got the start event
    assert_balanced(others)
    assert shape(h.messages) == "U A[c1] R(c1) A~"
    assert h.messages[2]["content"] == INTERRUPTED
    assert is_valid(h.messages)
    assert not h.is_running


def test_steering_queued_from_inside_a_tool_opens_the_next_turn() -> None:
    h: Harness

    def read(arguments: dict[str, Any]) -> str:
        h.steer("use spaces, not tabs")
        return "text"

    model = ScriptedModel([reply(call("read", id="c1")), say("ok")])
    h = Harness(model, "system", [tool("read", read)])
    drain(h, "go")
    assert shape(h.messages) == "U A[c1] R(c1) U A"
    assert model.calls[1].messages[-1] == user("use spaces, not tabs")


def test_steering_queued_from_a_listener_goes_in_at_the_next_gap_between_turns() -> None:
    model = ScriptedModel([reply(call("read", id="c1")), say("ok")])
    h = Harness(model, "system", [tool("read")])
    h.subscribe(lambda e: e["type"] == "tool_execution_start" and h.steer("stop reading"))
    drain(h, "go")
    assert shape(h.messages) == "U A[c1] R(c1) U A"
    assert h.messages[3] == user("stop reading")


def test_a_follow_up_queued_mid_run_waits_until_the_run_would_otherwise_end() -> None:
    h: Harness

    def read(arguments: dict[str, Any]) -> str:
        h.follow_up("now run the tests")
        return "text"

    model = ScriptedModel([reply(call("read", id="c1")), say("read it"), say("tests pass")])
    h = Harness(model, "system", [tool("read", read)])
    events = drain(h, "go")
    assert shape(h.messages) == "U A[c1] R(c1) A U A"
    assert h.messages[4] == user("now run the tests")
    assert kinds(events).count("agent_start") == 1
    assert_balanced(events)


def test_each_queued_text_is_one_user_message_handed_over_one_per_ask() -> None:
    model = ScriptedModel([say("a"), say("b"), say("c")])
    h = Harness(model, "system", [])
    texts = ["one", "two"]

    def speak_once(event: Event) -> None:
        if event["type"] == "turn_start" and texts:  # both queued while the first turn runs
            h.steer(texts.pop(0))
            h.steer(texts.pop(0))

    h.subscribe(speak_once)
    drain(h, "go")
    assert shape(h.messages) == "U A U A U A"
    assert [h.messages[i]["content"] for i in (2, 4)] == ["one", "two"]


def test_queues_outlive_runs_and_steering_sent_while_idle_goes_in_with_the_next_prompt() -> None:
    model = ScriptedModel([say("ok")])
    h = Harness(model, "system", [])
    h.steer("and be brief")
    drain(h, "go")
    assert model.calls[0].messages == [user("go"), user("and be brief")]


def test_a_thread_calling_abort_while_a_slow_tool_runs_stops_the_run_with_balanced_events(
        ) -> None:
    started, release = threading.Event(), threading.Event()
    ran: list[str] = []

    def slow(arguments: dict[str, Any]) -> str:
        started.set()
        release.wait()
        return "slow result"

    model = ScriptedModel([reply(call("slow", id="c1"), call("fast", id="c2")), say("never")])
    h = Harness(model, "system",
                [tool("slow", slow), tool("fast", lambda a: ran.append("fast") or "x")])

    def user_presses_stop() -> None:
        started.wait()
        h.abort()
        release.set()

    threading.Thread(target=user_presses_stop, daemon=True).start()
    events = drain(h, "go")
    assert_balanced(events)
    assert ran == [] and len(model.calls) == 1
    assert shape(h.messages) == "U A[c1,c2] R(c1) R(c2) A~"
    assert h.messages[2]["content"] == "slow result"
    assert h.messages[3]["content"] == INTERRUPTED
    assert h.messages[-1]["error_message"] == ABORTED
    assert is_valid(h.messages)


def test_an_interruptible_tool_waiting_on_the_abort_is_released_by_h_abort() -> None:
    started = threading.Event()

    def wait(arguments: dict[str, Any], abort: threading.Event | None = None) -> str:
        started.set()
        assert abort is not None and abort.wait()
        return "cut short"

    h = Harness(ScriptedModel([reply(call("wait", id="c1")), say("never")]), "system",
                [tool("wait", wait, interruptible=True)])
    threading.Thread(target=lambda: started.wait() and h.abort(), daemon=True).start()
    events = drain(h, "go")
    assert_balanced(events)
    assert shape(h.messages) == "U A[c1] R(c1) A~"
    assert is_valid(h.messages)


def test_a_thread_calling_abort_mid_stream_records_the_models_aborted_message() -> None:
    model = StreamingScriptedModel([say("a long answer that never arrives")], pause=60.0)
    h = Harness(model, "system", [])
    streaming = threading.Event()
    h.subscribe(lambda e: e["type"] == "message_start" and streaming.set())
    threading.Thread(target=lambda: streaming.wait() and h.abort(), daemon=True).start()
    events = drain(h, "go")  # the model waits 60s before each word, unless aborted
    assert_balanced(events)
    assert shape(h.messages) == "U A~"
    assert h.messages[-1]["error_message"] == ABORTED  # the provider records the same reason


def test_an_abort_mid_stream_keeps_the_words_that_had_arrived() -> None:
    model = StreamingScriptedModel([say("one two three four")], pause=0.001)
    h = Harness(model, "system", [])
    h.subscribe(lambda e: e["type"] == "message_update" and h.abort())
    events = drain(h, "go")
    assert_balanced(events)
    assert h.messages[-1]["stop_reason"] == "aborted"
    assert h.messages[-1]["content"] == [{"type": "text", "text": "one"}]


def test_the_transcript_after_an_interruption_is_accepted_by_the_next_run() -> None:
    def second(request: Request) -> Any:
        assert is_valid(request.messages)
        return say("fresh start")

    h = Harness(ScriptedModel([reply(call("a", id="c1"), call("a", id="c2")), second]),
                "system", [tool("a")])
    h.subscribe(lambda e: e["type"] == "tool_execution_end" and h.abort())
    drain(h, "go")
    assert is_valid(h.messages)
    drain(h, "again")
    assert shape(h.messages) == "U A[c1,c2] R(c1) R(c2) A~ U A"


def test_an_abort_while_idle_does_not_abort_the_next_run() -> None:
    h = Harness(ScriptedModel([say("ok")]), "system", [])
    h.abort()
    drain(h, "go")
    assert shape(h.messages) == "U A"


def test_closing_a_run_early_still_finishes_it_for_the_listeners() -> None:
    ran: list[str] = []
    model = ScriptedModel([reply(call("a", id="c1"), call("b", id="c2")), say("never")])
    h = Harness(model, "system", [tool("a"), tool("b", lambda x: ran.append("b") or "b")])
    heard: list[Event] = []
    h.subscribe(heard.append)
    run = h.prompt("go")
    consumed = []
    for event in run:
        consumed.append(event)
        if event["type"] == "tool_execution_end":
            break
    run.close()
    assert not h.is_running
    assert ran == [] and len(model.calls) == 1
    assert_balanced(heard)
    assert kinds(consumed)[-1] == "tool_execution_end"
    assert shape(h.messages) == "U A[c1,c2] R(c1) R(c2) A~"
    assert [e["message"] for e in heard if e["type"] == "message_end"] == list(h.messages)
    assert is_valid(h.messages)


def test_a_run_closed_early_leaves_a_session_log_equal_to_the_transcript(
        tmp_path: Path) -> None:
    log = SessionLog(tmp_path / "s.jsonl")
    h = Harness(ScriptedModel([reply(call("a", id="c1")), say("never")]), "system", [tool("a")])
    h.subscribe(persist_to(log))
    for event in h.prompt("go"):
        if event["type"] == "message_end" and event["message"]["role"] == "assistant":
            break
    gc.collect()
    assert not h.is_running
    assert log.replay() == list(h.messages)
    assert is_valid(log.replay())


def test_clear_queues_hands_back_what_was_queued_and_leaves_them_empty() -> None:
    model = ScriptedModel([say("ok")])
    h = Harness(model, "system", [])
    h.steer("a")
    h.steer("b")
    h.follow_up("c")
    assert h.clear_queues() == (["a", "b"], ["c"])
    drain(h, "go")
    assert shape(h.messages) == "U A"


def test_a_follow_up_queued_from_a_listener_opens_a_turn_after_the_model_stops() -> None:
    model = ScriptedModel([say("first answer"), say("second answer")])
    h = Harness(model, "system", [])
    asked: list[str] = []

    def listener(event: Event) -> None:
        if event["type"] == "turn_start" and not asked:
            asked.append("once")
            h.follow_up("and now the tests")

    h.subscribe(listener)
    events = drain(h, "go")
    assert shape(h.messages) == "U A U A"
    assert h.messages[2] == user("and now the tests")
    assert_balanced(events)


def test_h_abort_from_a_thread_kills_a_real_bash_command_and_leaves_a_valid_transcript(
        tmp_path: Path) -> None:
    from mulligan.tools import bash_tool

    model = ScriptedModel([reply(call("bash", {"command": "echo started; sleep 60"}, id="c1")),
                           say("never")])
    h = Harness(model, "system", [bash_tool(tmp_path)])
    running = threading.Event()
    h.subscribe(lambda e: e["type"] == "tool_execution_start" and running.set())
    threading.Thread(target=lambda: running.wait() and h.abort(), daemon=True).start()
    events = drain(h, "go")
    assert_balanced(events)
    assert shape(h.messages) == "U A[c1] R(c1) A~"
    assert "Aborted" in h.messages[2]["content"]
    assert len(model.calls) == 1
    assert is_valid(h.messages)
