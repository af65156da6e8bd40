"""context_for_model and repair_tool_history: the view the model is sent, built from the record."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mulligan.loop import INTERRUPTED, context_for_model, repair_tool_history
from mulligan.messages import Message, error_message, tool_calls
from mulligan.testing import call, reply, say, shape, tool_result, user
from test_loop_support import is_valid

C1, C2, C3 = call("read", id="c1"), call("ls", id="c2"), call("bash", id="c3")


def test_a_valid_transcript_comes_back_equal_to_itself() -> None:
    messages = [user("go"), reply(C1, C2), tool_result(C1, "a"), tool_result(C2, "b"), say("ok")]
    assert repair_tool_history(messages) == messages


def test_results_are_moved_next_to_their_calls_in_call_order() -> None:
    messages = [user("go"), reply(C1, C2), user("hurry"), tool_result(C2, "b"),
                tool_result(C1, "a"), say("ok")]
    repaired = repair_tool_history(messages)
    assert shape(repaired) == "U A[c1,c2] R(c1) R(c2) U A"
    assert repaired[2] is messages[4] and repaired[3] is messages[3]


def test_the_first_of_two_results_for_one_call_wins() -> None:
    first, second = tool_result(C1, "first"), tool_result(C1, "second")
    repaired = repair_tool_history([user("go"), reply(C1), first, second, say("ok")])
    assert shape(repaired) == "U A[c1] R(c1) A"
    assert repaired[2] is first


def test_a_call_id_reused_in_a_later_turn_is_answered_by_the_result_after_it() -> None:
    # An OpenAI-compatible server that sends no ids gets "call_1" in every reply.
    first, again = call("read", id="call_1"), call("read", id="call_1")
    messages = [user("go"), reply(first), tool_result(first, "old"), reply(again),
                tool_result(again, "new"), say("ok")]
    assert repair_tool_history(messages) == messages
    assert context_for_model(messages) == messages


def test_a_reused_call_id_without_its_own_result_is_interrupted_not_given_an_older_one() -> None:
    first, again = call("read", id="call_1"), call("read", id="call_1")
    repaired = repair_tool_history([user("go"), reply(first), tool_result(first, "old"),
                                    reply(again)])
    assert shape(repaired) == "U A[call_1] R(call_1) A[call_1] R(call_1)"
    assert repaired[2]["content"] == "old" and repaired[4]["content"] == INTERRUPTED


def test_a_result_whose_call_is_nowhere_is_dropped() -> None:
    repaired = repair_tool_history([user("go"), tool_result(C3, "orphan"), say("ok")])
    assert shape(repaired) == "U A"


def test_a_call_without_a_result_gets_an_interrupted_error_result() -> None:
    repaired = repair_tool_history([user("go"), reply(C1, C2), tool_result(C2, "b")])
    assert shape(repaired) == "U A[c1,c2] R(c1) R(c2)"
    assert repaired[2] == {"role": "toolResult", "tool_call_id": "c1", "tool_name": "read",
                           "content": INTERRUPTED, "is_error": True}


def test_a_tool_call_inside_a_failed_reply_gets_no_result_and_its_result_is_dropped() -> None:
    failed = reply("Half", C1, stop_reason="error", error_message="overloaded")
    assert repair_tool_history([user("go"), failed]) == [user("go"), failed]
    assert shape(repair_tool_history([user("go"), failed, tool_result(C1, "x")])) == "U A![c1]"


def test_repair_never_changes_its_input() -> None:
    messages = [user("go"), tool_result(C1, "early"), reply(C1, C2), tool_result(C1, "again"),
                tool_result(C3, "orphan"), say("ok")]
    before = copy.deepcopy(messages)
    repair_tool_history(messages)
    assert messages == before


def test_context_leaves_out_failed_replies_with_nothing_in_them() -> None:
    messages = [user("go"), error_message("overloaded"), user("again"),
                error_message("stopped", stop_reason="aborted"), user("third"), say("ok")]
    assert shape(context_for_model(messages)) == "U U U A"


def test_context_keeps_the_text_of_a_failed_reply_and_drops_its_tool_calls() -> None:
    failed = reply("Let me", C1, stop_reason="aborted", error_message="aborted by the user")
    messages = [user("go"), failed, user("go on")]
    before = copy.deepcopy(messages)
    view = context_for_model(messages)
    assert shape(view) == "U A~ U"
    assert view[1]["content"] == [{"type": "text", "text": "Let me"}]
    assert view[1]["error_message"] == "aborted by the user"
    assert messages == before


def test_context_repairs_the_tool_history_after_dropping_failed_replies() -> None:
    messages = [user("go"), reply(C1), error_message("connection reset")]
    assert shape(context_for_model(messages)) == "U A[c1] R(c1)"


# -- properties --------------------------------------------------------------------------------

IDS = st.sampled_from(["c1", "c2", "c3", "c4"])


def _message(kind: str, ids: list[str], text: str) -> Message:
    if kind == "user":
        return user(text)
    if kind == "result":
        return tool_result(call("t", id=ids[0]), text)
    blocks: list[Any] = [text] + [call("t", id=i) for i in ids]
    if kind == "failed":
        return reply(*blocks, stop_reason="error", error_message="x")
    if kind == "empty_failed":
        return error_message("x", stop_reason="aborted")
    return reply(*blocks)


MESSAGES = st.lists(
    st.builds(_message,
              st.sampled_from(["user", "assistant", "result", "failed", "empty_failed"]),
              st.lists(IDS, min_size=1, max_size=3, unique=True),
              st.sampled_from(["", "a", "b"])),
    max_size=12)


def _every_call_answered_at_once(messages: list[Message]) -> bool:
    position = 0
    while position < len(messages):
        message = messages[position]
        position += 1
        if message["role"] == "assistant" and message["stop_reason"] not in ("error", "aborted"):
            for made in tool_calls(message):
                answer = messages[position] if position < len(messages) else None
                if answer is None or answer["role"] != "toolResult" \
                        or answer["tool_call_id"] != made["id"]:
                    return False
                position += 1
        elif message["role"] == "toolResult":
            return False  # a result that does not follow its call
    return True


@settings(deadline=None)  # tiny examples; a loaded CI machine must not fail them on time
@given(MESSAGES)
def test_repair_is_idempotent_and_leaves_every_call_answered_at_once(
        messages: list[Message]) -> None:
    before = copy.deepcopy(messages)
    once = repair_tool_history(messages)
    assert repair_tool_history(once) == once
    assert _every_call_answered_at_once(once)
    assert messages == before


@settings(deadline=None)  # tiny examples; a loaded CI machine must not fail them on time
@given(MESSAGES)
def test_context_for_model_is_valid_idempotent_and_never_changes_the_record(
        messages: list[Message]) -> None:
    before = copy.deepcopy(messages)
    view = context_for_model(messages)
    assert context_for_model(view) == view
    assert is_valid(view)
    assert not any(m["role"] == "assistant" and m["stop_reason"] in ("error", "aborted")
                   and (not m["content"] or tool_calls(m)) for m in view)
    assert messages == before


@settings(deadline=None)
@given(st.lists(st.lists(IDS, max_size=3, unique=True), max_size=6))
def test_a_transcript_the_loop_could_write_comes_back_unchanged_however_ids_repeat(
        turns: list[list[str]]) -> None:
    messages: list[Message] = [user("go")]
    for ids in turns:
        calls = [call("t", id=i) for i in ids]
        messages.append(reply("", *calls))
        messages.extend(tool_result(made, f"{made['id']} at {len(messages)}") for made in calls)
    assert repair_tool_history(messages) == messages
