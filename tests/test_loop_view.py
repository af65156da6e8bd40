"""The view kept up to date (`mulligan.loop.View`): fed a record that grows by appends, it
gives at every step exactly what the whole-record rules give -- checked against the rules as
they were written before the view was incremental (kept here as the reference) -- and it starts
over when the record was replaced rather than appended to. A turn's work does not grow with
the record: an appended message makes it read that message, not the record again."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mulligan.loop import INTERRUPTED, View, context_for_model
from mulligan.messages import Message, ToolResultMessage, is_failed, tool_calls
from mulligan.testing import call, reply, say, tool_result, user
from test_loop_history import MESSAGES


def _interrupted(call: Any) -> ToolResultMessage:
    return {"role": "toolResult", "tool_call_id": call["id"], "tool_name": call["name"],
            "content": INTERRUPTED, "is_error": True}


def reference_repair(messages: list[Message]) -> list[Message]:
    """repair_tool_history as it was: two passes over the whole record."""
    answers: dict[int, ToolResultMessage] = {}
    latest: dict[str, list[int]] = {}
    early: dict[str, list[ToolResultMessage]] = {}

    def claim(numbers: list[int], result: ToolResultMessage) -> None:
        number = next((n for n in numbers if n not in answers), None)
        if number is not None:
            answers[number] = result

    count = 0
    for message in messages:
        if message["role"] == "toolResult":
            numbers = latest.get(message["tool_call_id"])
            if numbers is None:
                early.setdefault(message["tool_call_id"], []).append(message)
            else:
                claim(numbers, message)
        elif message["role"] == "assistant" and not is_failed(message):
            made: dict[str, list[int]] = {}
            for call in tool_calls(message):
                made.setdefault(call["id"], []).append(count)
                count += 1
            for call_id, numbers in made.items():
                latest[call_id] = numbers
                for result in early.pop(call_id, ()):  # earlier than any later result: first
                    claim(numbers, result)
    repaired: list[Message] = []
    count = 0
    for message in messages:
        if message["role"] == "toolResult":
            continue  # put back below, after its call
        repaired.append(message)
        if message["role"] == "assistant" and not is_failed(message):
            for call in tool_calls(message):
                repaired.append(answers.get(count) or _interrupted(call))
                count += 1
    return repaired


def reference_context(messages: list[Message]) -> list[Message]:
    """context_for_model as it was: failed replies without their calls, then the repair."""
    view: list[Message] = []
    for message in messages:
        if message["role"] == "assistant" and is_failed(message):
            kept = [b for b in message["content"] if b["type"] != "toolCall"]
            if not kept:
                continue
            if len(kept) != len(message["content"]):
                message = {**message, "content": kept}  # type: ignore[typeddict-item]
        view.append(message)
    return reference_repair(view)


@settings(max_examples=300, deadline=None)
@given(MESSAGES, st.lists(st.integers(min_value=0, max_value=4), max_size=12))
def test_a_view_fed_appends_gives_what_the_rules_give_at_every_step(
        record: list[Message], steps: list[int]) -> None:
    view, repaired = View(), View(for_model=False)
    grown: list[Message] = []
    for step in [*steps, len(record)]:
        grown.extend(record[len(grown):len(grown) + step])
        assert view(grown) == reference_context(list(grown))
        assert context_for_model(grown) == reference_context(list(grown))
        assert repaired(grown) == reference_repair(list(grown))


def test_a_view_starts_over_when_the_record_was_replaced() -> None:
    view = View()
    record: list[Message] = [user("one"), say("1"), user("two"), say("2")]
    assert view(record) == record
    record[:] = [user("summary"), say("2")]  # what a compaction does to the record in memory
    assert view(record) == record
    kept = record[-1]
    record[:] = [user("another summary"), kept]  # as long as before, the same last message
    assert view(record) == record
    record.append(user("three"))
    assert view(record) == record


def test_an_appended_message_is_the_only_one_read() -> None:
    class Counted(list):  # type: ignore[type-arg]
        """A record that counts the messages read out of it: by index, slice or walk."""

        read = 0

        def __getitem__(self, index: Any) -> Any:
            got = super().__getitem__(index)
            Counted.read += len(got) if isinstance(index, slice) else 1
            return got

        def __iter__(self) -> Any:
            Counted.read += len(self)
            return super().__iter__()

    record = Counted()
    view = View()
    for n in range(200):
        asked = call("read", {}, id=f"c{n}")
        record.extend([user(f"q{n}"), reply(asked), tool_result(asked, "x")])
        Counted.read = 0
        view(record)
        assert Counted.read <= 7  # the three new ones and four look-ups: never the record
