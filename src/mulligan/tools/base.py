"""The tool boundary: the tool dict, argument checks against its schema, and `run_tool`.

A tool is a plain dict (`Tool`): "name", "description", "parameters" (a JSON schema) and
"execute". `execute(arguments) -> str` just raises when it cannot do its job; `run_tool` is the
one place in the codebase that catches everything and turns it into a toolResult the model can
read. Nothing else here catches broadly, and nothing here ever raises out of `run_tool`.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any, NotRequired, TypedDict

from mulligan.messages import Content, ToolCallBlock, ToolResultMessage, is_content
from mulligan.wire import ToolSpec

__all__ = ["OnOutput", "Tool", "ToolError", "ToolSpec", "check_arguments", "invoke", "run_tool",
           "tool_specs"]

# What a streaming tool hands each piece of its output to, as it comes (see `Tool`).
OnOutput = Callable[[str], None]


class Tool(TypedDict):
    """A tool. "name", "description" and "parameters" are advertised to the model; "execute" is
    only ever run by this program. With "interruptible": True, execute is called as
    ``execute(arguments, abort=<threading.Event | None>)`` and should stop early once it is set.
    With "streams": True it is also handed ``on_output=<OnOutput | None>``: a function it may
    call with each piece of its output as it is produced (bash's lines while the command
    runs), for a live view only -- the result it returns is what is recorded, the same with
    or without it. `invoke` calls execute so; a tool that wraps another's execute calls
    `invoke` and keeps the wrapped tool's "streams"."""

    name: str
    description: str
    parameters: dict[str, Any]
    execute: Callable[..., Content]  # text, or text and image blocks (`read` of an image)
    interruptible: NotRequired[bool]
    streams: NotRequired[bool]


class ToolError(Exception):
    """A tool could not do its job; the message is written for the model and shown as is."""


def tool_specs(tools: list[Tool]) -> list[ToolSpec]:
    """What the model is told about `tools`: everything except the function, in order."""
    return [{"name": t["name"], "description": t["description"], "parameters": t["parameters"]}
            for t in tools]


def check_arguments(tool: Tool, arguments: Any) -> None:
    """Check `arguments` against the tool's JSON schema (the draft its "$schema" names, else
    2020-12). Returns None when they fit; otherwise raises ToolError("Invalid arguments for
    <tool>: ...") naming each offending argument, then the arguments the tool expects. Never
    changes `arguments`."""
    # Imported at the first tool call, not at start: jsonschema is a fifth of the REPL's
    # time to its first prompt.
    from jsonschema import Draft202012Validator
    from jsonschema.validators import validator_for

    schema = tool["parameters"]
    validator = validator_for(schema, default=Draft202012Validator)(schema)
    errors = sorted(validator.iter_errors(arguments),
                    key=lambda e: [str(part) for part in e.absolute_path])
    if not errors:
        return
    problems = []
    for error in errors:
        where = _argument_name(error.absolute_path)
        problems.append(f"argument {where!r}: {error.message}" if where else error.message)
    raise ToolError(f"Invalid arguments for {tool['name']}: {'; '.join(problems)}. "
                    f"Expected: {_signature(tool['parameters'])}.")


def invoke(tool: Tool, arguments: Any, *, abort: threading.Event | None = None,
           on_output: OnOutput | None = None) -> Content:
    """``tool["execute"](arguments)``, with `abort` when the tool is interruptible and
    `on_output` when it streams (see `Tool`); what it returns or raises, as is."""
    extra: dict[str, Any] = {}
    if tool.get("interruptible"):
        extra["abort"] = abort
    if tool.get("streams") and on_output is not None:
        extra["on_output"] = on_output
    return tool["execute"](arguments, **extra)


def run_tool(
    tools: list[Tool], call: ToolCallBlock, *, abort: threading.Event | None = None,
    on_output: OnOutput | None = None,
) -> ToolResultMessage:
    """Run one tool call and return the toolResult that answers it.

    One call in, exactly one result out, on every path; it never raises an Exception. An unknown
    tool, arguments that were not JSON (`invalid_arguments` on the call) or do not fit the
    schema, an exception inside the tool, or a tool that returns something other than text all
    come back with is_error True and a readable reason.
    is_error means the tool could not do its job: a shell command that exits non-zero has still
    run, and says so in its content. `abort` is handed to interruptible tools only, and
    `on_output` to streaming ones only (it never changes the result).

    `call` is never changed: the tool gets its own copy of the arguments, so a tool that
    fills in defaults in place cannot alter the assistant message in the record (or in a
    session log's cache of it)."""
    fields: dict[str, Any] = call if isinstance(call, dict) else {}  # type: ignore[assignment]
    call_id, name = str(fields.get("id", "")), str(fields.get("name", ""))
    try:
        invalid = fields.get("invalid_arguments")
        if invalid is not None:
            raise ToolError(f"The arguments of this {name} call were not a JSON object, so it was "
                            f"not run: {str(invalid)[:500]!r}. Call it again with the arguments "
                            "as one JSON object.")
        content = _execute(tools, name, fields.get("arguments"), abort, on_output)
        is_error = False
    except ToolError as exc:
        content, is_error = str(exc), True
    except Exception as exc:  # the one catch-all: a tool's failure becomes a message, not a crash
        content, is_error = f"{name} failed: {type(exc).__name__}: {exc}", True
    return {"role": "toolResult", "tool_call_id": call_id, "tool_name": name,
            "content": content, "is_error": is_error}


def _execute(
    tools: list[Tool], name: str, arguments: Any, abort: threading.Event | None,
    on_output: OnOutput | None,
) -> Content:
    tool = next((t for t in tools if t["name"] == name), None)
    if tool is None:
        available = ", ".join(t["name"] for t in tools) or "none"
        raise ToolError(f"Tool {name} not found. Available: {available}")
    check_arguments(tool, arguments)
    arguments = copy.deepcopy(arguments)
    result = invoke(tool, arguments, abort=abort, on_output=on_output)
    if not is_content(result):
        raise ToolError(f"Tool {name} returned {type(result).__name__}, not text")
    return result


def _argument_name(path: Any) -> str:
    """'offset', or 'edits[0].old_text' for a nested one; '' for the arguments as a whole."""
    name = ""
    for part in path:
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else str(part))
    return name


def _signature(schema: dict[str, Any]) -> str:
    """The arguments a schema asks for, compactly: "path (string, required), offset (integer)"."""
    properties = schema.get("properties") or {}
    if not properties:
        return "no arguments"
    required = set(schema.get("required") or ())
    parts = []
    for key, spec in properties.items():
        kind = spec.get("type", "any") if isinstance(spec, dict) else "any"
        kind = "/".join(kind) if isinstance(kind, list) else str(kind)
        parts.append(f"{key} ({kind}, required)" if key in required else f"{key} ({kind})")
    return ", ".join(parts)
