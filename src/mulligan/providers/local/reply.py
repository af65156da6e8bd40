"""The reply format of the local model: one JSON object per reply, forced by a grammar.

A small local model cannot be trusted to follow a tool-call convention on its own, so each reply
(when tools are offered) is constrained to exactly one of:

    {"tool": "<name>", "arguments": {...schema-valid arguments...}}
    {"answer": "<text for the user>"}

In: tool specs (to build the schema), the reply's text fragments as they are generated, the
finish reason. Out: the JSON schema, stream deltas (answer text; tool-call argument fragments),
and the final assistant message. Nothing here imports xllamacpp, and nothing here raises on a
bad reply: an unparseable reply becomes a message with stop_reason "length" or "error".
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from mulligan.messages import AssistantMessage, Block, assistant_message, error_message
from mulligan.wire import StreamDelta, ToolSpec

# Compact separators and no free whitespace: every token spent on indentation is a token of a
# small context window (and ~20 ms of a small CPU). "lenient" makes llguidance skip schema
# keywords it cannot enforce (e.g. "format") instead of refusing the whole request.
_GUIDANCE = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": ",
             "lenient": True}


def _closed_object(parameters: dict[str, Any]) -> dict[str, Any]:
    """The tool's parameter schema with extra top-level keys forbidden (unless it says
    otherwise): a tiny model will otherwise invent arguments the tool then rejects."""
    schema = copy.deepcopy(parameters) if parameters else {}
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    if schema.get("type") == "object":
        schema.setdefault("additionalProperties", False)
    return schema


def reply_schema(tools: list[ToolSpec]) -> dict[str, Any]:
    """The JSON schema every constrained reply must match: a call to one named tool with
    arguments valid against that tool's parameters, or a final answer."""
    options: list[dict[str, Any]] = [
        {"type": "object",
         "properties": {"tool": {"const": tool["name"]},
                        "arguments": _closed_object(tool.get("parameters") or {})},
         "required": ["tool", "arguments"], "additionalProperties": False}
        for tool in tools
    ]
    options.append({"type": "object", "properties": {"answer": {"type": "string"}},
                    "required": ["answer"], "additionalProperties": False})
    return {"anyOf": options, "x-guidance": _GUIDANCE}


def _argument_summary(parameters: dict[str, Any]) -> str:
    """`{"path": string, "limit"?: integer}`: a one-line picture of a tool's arguments."""
    properties = parameters.get("properties") or {}
    required = set(parameters.get("required") or [])
    parts = []
    for key, prop in properties.items():
        kind = prop.get("type", "any") if isinstance(prop, dict) else "any"
        if isinstance(kind, list):
            kind = "|".join(str(k) for k in kind)
        parts.append(f'"{key}"{"" if key in required else "?"}: {kind}')
    return "{" + ", ".join(parts) + "}"


def _first_sentence(text: str, limit: int = 120) -> str:
    line = text.strip().split("\n", 1)[0]
    match = re.match(r"(.+?[.!?])(\s+[A-Z]|$)", line)
    short = match.group(1) if match else line
    return short if len(short) <= limit else short[: limit - 3] + "..."


def tool_catalogue(tools: list[ToolSpec]) -> str:
    """The tools, one line each, for the system prompt: name, argument shape, first sentence
    of the description. Kept short on purpose: the context window is small."""
    lines = ["Tools:"]
    for tool in tools:
        summary = _argument_summary(tool.get("parameters") or {})
        lines.append(f"- {tool['name']} {summary}: {_first_sentence(tool['description'])}")
    return "\n".join(lines)


def render_call(name: str, arguments: dict[str, Any]) -> str:
    """A tool call written exactly as the model is constrained to write it."""
    return json.dumps({"tool": name, "arguments": arguments}, ensure_ascii=False,
                      separators=(", ", ": "))


def render_answer(text: str) -> str:
    """An answer written exactly as the model is constrained to write it."""
    return json.dumps({"answer": text}, ensure_ascii=False)


_ANSWER_HEAD = re.compile(r'\s*\{\s*"answer"\s*:\s*"')
_TOOL_HEAD = re.compile(r'\s*\{\s*"tool"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"arguments"\s*:\s*')


def _decodable(piece: str) -> str:
    """The longest prefix of a JSON string's inside that can be decoded now: it stops before
    a dangling backslash, a partial \\uXXXX, or a high surrogate whose low half is missing."""
    i = safe = 0
    while i < len(piece):
        if piece[i] != "\\":
            i += 1
        elif i + 1 >= len(piece):
            break
        elif piece[i + 1] != "u":
            i += 2
        elif i + 6 > len(piece):
            break
        elif piece[i + 2:i + 4].lower() in ("d8", "d9", "da", "db"):
            if i + 12 > len(piece):
                break
            i += 12 if piece[i + 6:i + 8] == "\\u" else 6
        else:
            i += 6
        safe = i
    return piece[:safe]


class ReplyScanner:
    """Reads a constrained reply as it is generated and says what can be shown already.

    `feed(fragment)` returns stream deltas: the answer's text (decoded from its JSON string,
    escape by escape) or, for a tool call, the raw fragments of the "arguments" object (the
    name is known once `"tool": "<name>", "arguments":` has been read). How: until the head of
    the object is recognised the text is only buffered; after it, characters are consumed one
    by one tracking string/escape state (answer) or bracket depth (arguments). Anything the
    scanner cannot recognise is simply not streamed; the final parse of the whole reply is
    what the message is made from. Never raises.
    """

    def __init__(self, call_id: str) -> None:
        self.call_id = call_id
        self.raw = ""
        self.phase = "head"          # head -> answer | arguments -> tail
        self.tool_name = ""
        self.answer_text = ""        # decoded answer text streamed so far
        self._pending = ""           # answer string characters not yet decoded
        self._escaped = False
        self._in_string = False
        self._depth = 0

    def feed(self, fragment: str) -> list[StreamDelta]:
        self.raw += fragment
        if self.phase == "head":
            return self._head()
        if self.phase == "answer":
            return self._answer(fragment)
        if self.phase == "arguments":
            return self._arguments(fragment)
        return []

    def _head(self) -> list[StreamDelta]:
        match = _ANSWER_HEAD.match(self.raw)
        if match:
            self.phase = "answer"
            return self._answer(self.raw[match.end():])
        match = _TOOL_HEAD.match(self.raw)
        if match:
            try:
                self.tool_name = json.loads('"' + match.group(1) + '"')
            except ValueError:
                self.phase = "tail"
                return []
            self.phase = "arguments"
            return self._arguments(self.raw[match.end():])
        return []

    def _answer(self, chars: str) -> list[StreamDelta]:
        taken: list[str] = []
        for ch in chars:
            if self._escaped:
                self._escaped = False
            elif ch == "\\":
                self._escaped = True
            elif ch == '"':
                self.phase = "tail"
                break
            taken.append(ch)
        self._pending += "".join(taken)
        ready = self._pending if self.phase == "tail" else _decodable(self._pending)
        if not ready:
            return []
        try:
            text = json.loads('"' + ready + '"', strict=False)
        except ValueError:
            return []
        self._pending = self._pending[len(ready):]
        self.answer_text += text
        return [{"type": "text", "delta": text}]

    def _arguments(self, chars: str) -> list[StreamDelta]:
        taken: list[str] = []
        for ch in chars:
            if not taken and self._depth == 0 and ch.isspace():
                continue
            taken.append(ch)
            if self._in_string:
                if self._escaped:
                    self._escaped = False
                elif ch == "\\":
                    self._escaped = True
                elif ch == '"':
                    self._in_string = False
            elif ch == '"':
                self._in_string = True
            elif ch in "{[":
                self._depth += 1
            elif ch in "}]":
                self._depth -= 1
                if self._depth == 0:
                    self.phase = "tail"
                    break
        if not taken:
            return []
        return [{"type": "toolcall", "id": self.call_id, "name": self.tool_name,
                 "delta": "".join(taken)}]

    def partial_content(self) -> list[Block]:
        """What can be kept of a reply that stopped early: the answer text streamed so far
        (a tool call without its complete arguments cannot be kept)."""
        return [{"type": "text", "text": self.answer_text}] if self.answer_text else []


def parse_reply(raw: str, finish_reason: str | None, *, call_id: str, max_tokens: int,
                scanner: ReplyScanner | None = None) -> AssistantMessage:
    """The assistant message for a complete constrained reply.

    {"answer": s} -> a text block, stop_reason "stop"; {"tool": n, "arguments": a} -> a toolCall
    block with id `call_id`, stop_reason "toolUse". A reply that is not one of those: stop_reason
    "length" when generation hit `max_tokens` (partial answer text kept), else "error"; either
    way `error_message` says what happened. Never raises."""
    try:
        reply = json.loads(raw)
    except ValueError:
        reply = None
    if isinstance(reply, dict):
        if isinstance(reply.get("answer"), str):
            return assistant_message([{"type": "text", "text": reply["answer"]}], "stop")
        if isinstance(reply.get("tool"), str) and isinstance(reply.get("arguments"), dict):
            return assistant_message([{"type": "toolCall", "id": call_id, "name": reply["tool"],
                                       "arguments": reply["arguments"]}], "toolUse")
    partial = scanner.partial_content() if scanner else []
    if finish_reason == "length":
        return assistant_message(
            partial, "length",
            error_message=f"the local model's reply was cut off at max_tokens={max_tokens} "
                          f"before its JSON was complete ({len(raw)} characters generated); "
                          "raise max_tokens under [local] in config.toml for longer replies")
    return error_message(f"the local model's reply is not one JSON tool call or answer: "
                         f"{raw[:200]!r}", content=partial)
