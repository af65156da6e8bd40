"""run_tool: one call in, exactly one toolResult out, on every path; never raises."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from mulligan.testing import call
from mulligan.tools import (
    MAX_BYTES,
    MAX_LINES,
    Tool,
    coding_tools,
    run_tool,
    tool_specs,
    truncate_head,
    truncate_tail,
)


def echo_tool() -> Tool:
    return {"name": "echo", "description": "Say it back.",
            "parameters": {"type": "object", "properties": {"text": {"type": "string"}},
                           "required": ["text"], "additionalProperties": False},
            "execute": lambda arguments: arguments["text"]}


def raising_tool() -> Tool:
    def execute(arguments: dict[str, Any]) -> str:
        raise RuntimeError("the disk is on fire")
    return {"name": "boom", "description": "Fails.", "parameters": {"type": "object"},
            "execute": execute}


def test_a_good_call_returns_the_tools_text_as_one_result() -> None:
    result = run_tool([echo_tool()], call("echo", {"text": "hi"}, id="c1"))
    assert result == {"role": "toolResult", "tool_call_id": "c1", "tool_name": "echo",
                      "content": "hi", "is_error": False}


def test_a_tool_that_changes_its_arguments_leaves_the_call_as_it_was() -> None:
    def fill_in(arguments: dict[str, Any]) -> str:
        arguments.setdefault("options", {})["verbose"] = True
        arguments.pop("text")
        return "done"

    tool: Tool = {"name": "fill", "description": "Fills in defaults in place.",
                  "parameters": {"type": "object"}, "execute": fill_in}
    made = call("fill", {"text": "hi", "options": {}}, id="c1")
    assert run_tool([tool], made)["content"] == "done"
    assert made["arguments"] == {"text": "hi", "options": {}}


def test_an_unknown_tool_is_one_error_result_listing_the_available_tools(tmp_path: Path) -> None:
    tools = coding_tools(tmp_path)
    result = run_tool(tools, call("frobnicate", {}, id="c7"))
    assert result["tool_call_id"] == "c7"
    assert result["is_error"] is True
    assert result["content"] == (
        "Tool frobnicate not found. Available: read, write, edit, bash, ls, grep, find")


def test_a_missing_argument_is_an_error_naming_it() -> None:
    result = run_tool([echo_tool()], call("echo", {}, id="c2"))
    assert result["tool_call_id"] == "c2"
    assert result["is_error"] is True
    assert result["content"].startswith("Invalid arguments for echo: 'text' is a required property")


def test_an_argument_of_the_wrong_type_is_an_error_naming_it(tmp_path: Path) -> None:
    result = run_tool(coding_tools(tmp_path), call("read", {"path": "a", "offset": "ten"}, id="c3"))
    assert result["is_error"] is True
    assert "Invalid arguments for read: argument 'offset': 'ten' is not of type 'integer'" in (
        result["content"])


def test_an_unexpected_argument_is_an_error_naming_it() -> None:
    result = run_tool([echo_tool()], call("echo", {"text": "a", "loud": True}))
    assert result["is_error"] is True
    assert "'loud' was unexpected" in result["content"]


def test_arguments_that_are_not_an_object_are_an_error_not_a_crash() -> None:
    broken = {"type": "toolCall", "id": "c4", "name": "echo", "arguments": "{not json"}
    result = run_tool([echo_tool()], broken)  # type: ignore[arg-type]
    assert result["tool_call_id"] == "c4"
    assert result["is_error"] is True
    assert "is not of type 'object'" in result["content"]


def test_a_call_whose_arguments_were_not_json_is_answered_with_them_and_never_run() -> None:
    ran: list[Any] = []
    tool = {**echo_tool(), "parameters": {"type": "object"}, "execute": ran.append}
    broken = {**call("echo", {}, id="c5"), "invalid_arguments": '{"text": hi}'}
    result = run_tool([tool], broken)  # type: ignore[list-item]
    assert (result["tool_call_id"], result["is_error"], ran) == ("c5", True, [])
    assert "not a JSON object" in result["content"] and '{"text": hi}' in result["content"]


def test_an_exception_in_the_tool_is_one_error_result_with_its_reason() -> None:
    result = run_tool([raising_tool()], call("boom", {}, id="c5"))
    assert result["tool_call_id"] == "c5"
    assert result["tool_name"] == "boom"
    assert result["is_error"] is True
    assert result["content"] == "boom failed: RuntimeError: the disk is on fire"


def test_a_tool_that_returns_something_other_than_text_is_an_error_result() -> None:
    tool: Tool = {"name": "num", "description": "", "parameters": {"type": "object"},
                  "execute": lambda arguments: 42}  # type: ignore[typeddict-item,return-value]
    result = run_tool([tool], call("num", {}, id="c6"))
    assert result["is_error"] is True
    assert result["content"] == "Tool num returned int, not text"


def test_an_interruptible_tool_is_handed_the_abort_event() -> None:
    seen = []

    def execute(arguments: dict[str, Any], abort: threading.Event | None = None) -> str:
        seen.append(abort)
        return "ok"
    tool: Tool = {"name": "slow", "description": "", "parameters": {"type": "object"},
                  "execute": execute, "interruptible": True}
    event = threading.Event()
    run_tool([tool], call("slow", {}), abort=event)
    assert seen == [event]


def test_tool_specs_advertise_everything_except_the_function(tmp_path: Path) -> None:
    specs = tool_specs(coding_tools(tmp_path))
    assert [s["name"] for s in specs] == ["read", "write", "edit", "bash", "ls", "grep", "find"]
    assert all(set(s) == {"name", "description", "parameters"} for s in specs)


def test_every_coding_tool_description_states_its_budget(tmp_path: Path) -> None:
    for spec in tool_specs(coding_tools(tmp_path)):
        if spec["name"] in ("read", "bash", "ls", "grep", "find"):
            assert str(MAX_LINES) in spec["description"], spec["name"]
            assert str(MAX_BYTES) in spec["description"], spec["name"]


def test_the_budget_functions_are_exported_with_their_defaults() -> None:
    assert (MAX_LINES, MAX_BYTES) == (2000, 50_000)
    assert truncate_head("a\n").text == truncate_tail("a\n").text == "a\n"


def test_errors_in_nested_arguments_are_named_by_their_path() -> None:
    tool: Tool = {"name": "multi", "description": "",
                  "parameters": {"type": "object", "properties": {"edits": {
                      "type": "array", "items": {"type": "object", "required": ["old"],
                                                 "properties": {"old": {"type": "string"}}}}}},
                  "execute": lambda arguments: "ok"}
    result = run_tool([tool], call("multi", {"edits": [{"old": 1}, {}]}))
    assert result["is_error"] is True
    assert result["content"].startswith(
        "Invalid arguments for multi: argument 'edits[0].old': 1 is not of type 'string'; "
        "argument 'edits[1]': 'old' is a required property.")
