"""Helpers shared by the loop and harness tests (no tests in here)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mulligan.loop import Event, repair_tool_history
from mulligan.messages import Message

OPEN_ARGS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": True}


def tool(name: str, execute: Callable[..., str] | None = None, *,
         interruptible: bool = False) -> dict[str, Any]:
    """A tiny tool dict: `execute` (default: answers "<name> ok") over any arguments."""
    made: dict[str, Any] = {"name": name, "description": f"the {name} tool",
                            "parameters": OPEN_ARGS,
                            "execute": execute or (lambda arguments: f"{name} ok")}
    if interruptible:
        made["interruptible"] = True
    return made


def kinds(events: Sequence[Event]) -> list[str]:
    return [event["type"] for event in events]


def assert_balanced(events: Sequence[Event]) -> None:
    """agent_start first and agent_end last; turns neither nested nor left open; every tool
    execution and every streamed message opened and closed inside one turn."""
    types = kinds(events)
    assert types[0] == "agent_start" and types[-1] == "agent_end", types
    assert types.count("agent_start") == types.count("agent_end") == 1, types
    in_turn = in_tool = in_message = False
    for kind in types[1:-1]:
        if kind == "turn_start":
            assert not in_turn, types
            in_turn = True
        elif kind == "turn_end":
            assert in_turn and not in_tool and not in_message, types
            in_turn = False
        else:
            assert in_turn, f"{kind} outside a turn: {types}"
        if kind == "tool_execution_start":
            assert not in_tool, types
            in_tool = True
        elif kind == "tool_execution_end":
            assert in_tool, types
            in_tool = False
        elif kind == "message_start":
            in_message = True
        elif kind == "message_update":
            assert in_message, types
        elif kind == "message_end":
            in_message = False
    assert not in_turn, types


def is_valid(messages: Sequence[Message]) -> bool:
    """Every tool call answered at once by exactly one result: repair has nothing to do."""
    return repair_tool_history(list(messages)) == list(messages)
