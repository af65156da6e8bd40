"""Public helpers for tests and docs: message and session-entry builders, a scripted model,
and two readers.

`ScriptedModel` is the test double for every layer above the providers: it answers from a
script and records every request it was sent, so a test asserts on what the model *saw*
rather than monkeypatching internals.
"""

from __future__ import annotations

import copy
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from mulligan.brief import call_text
from mulligan.messages import (
    ABORTED,
    AssistantMessage,
    Block,
    Content,
    Message,
    TextBlock,
    ToolCallBlock,
    ToolResultMessage,
    UserMessage,
    assistant_message,
    content_text,
    error_message,
    user_message,
)
from mulligan.wire import StreamDelta, ToolSpec

_call_ids = itertools.count(1)


def user(text: str) -> UserMessage:
    """A user message."""
    return user_message(text)


def text(words: str) -> TextBlock:
    """A text block, for `reply`."""
    return {"type": "text", "text": words}


def call(
    name: str, arguments: dict[str, Any] | None = None, id: str | None = None
) -> ToolCallBlock:
    """A toolCall block. Without `id`, a fresh one ("c1", "c2", ...) for this process."""
    return {"type": "toolCall", "id": id or f"c{next(_call_ids)}", "name": name,
            "arguments": dict(arguments or {})}


def reply(*blocks: Block | str, **extra: Any) -> AssistantMessage:
    """An assistant message of `blocks` (a bare string is a text block). stop_reason is "toolUse"
    when a block is a tool call, else "stop"; pass stop_reason=... to say otherwise."""
    made: list[Block] = [text(b) if isinstance(b, str) else b for b in blocks]
    stop_reason = extra.pop("stop_reason", None)
    return assistant_message(made, stop_reason, **extra)


def say(words: str) -> AssistantMessage:
    """An assistant message of plain text that ends the turn."""
    return reply(words)


def tool_result(
    for_call: ToolCallBlock, content: Content, is_error: bool = False
) -> ToolResultMessage:
    """The toolResult that answers `for_call`."""
    return {"role": "toolResult", "tool_call_id": for_call["id"], "tool_name": for_call["name"],
            "content": content, "is_error": is_error}


def entry(entry_id: str, parent: str | None, kind: str = "message",
          **fields: Any) -> dict[str, Any]:
    """A session entry as a file holds it, for writing hand-made (or damaged) sessions; a
    message entry without a `message` gets a user message naming its id."""
    if kind == "message" and "message" not in fields:
        fields["message"] = {"role": "user", "content": f"said at {entry_id}"}
    return {"id": entry_id, "type": kind, "parent_id": parent, "timestamp": "t", **fields}


def message_entry(entry_id: str, parent: str | None, text: str,
                  role: str = "user") -> dict[str, Any]:
    """A message entry: a user message, or (`role` "assistant") a finished text reply."""
    message: Message = user(text) if role == "user" else say(text)
    return entry(entry_id, parent, message=message)


def write_entries(path: Any, *entries: dict[str, Any] | str, tail: bytes = b"") -> Any:
    """Write `entries` one JSON line each (a str is written as it is: a damaged line), then
    `tail` (e.g. a torn last line); returns `path`."""
    data = b"".join((e.encode() if isinstance(e, str) else json.dumps(e).encode()) + b"\n"
                    for e in entries)
    with open(path, "wb") as out:
        out.write(data + tail)
    return path


@dataclass
class Request:
    """One request a model was sent, deep-copied at the moment it was made."""

    system: str
    messages: list[Message]
    tools: list[ToolSpec]

    @property
    def text(self) -> str:
        """The request as one string, for "was X sent?" checks."""
        return json.dumps({"system": self.system, "messages": self.messages,
                           "tools": self.tools}, ensure_ascii=False)


Reply = AssistantMessage | Callable[[Request], AssistantMessage] | BaseException


class ScriptExhausted(RuntimeError):
    """The script had no reply left for a request."""


@dataclass
class ScriptedModel:
    """A model that answers from a script and records every request in `calls`.

    `script` is either a sequence whose items are used in turn -- an assistant message, a
    function of the `Request` returning one, or an exception to raise -- or a single function
    used for every request. Raising is deliberate: it is how a test plays a provider that breaks
    its contract, and the loop must turn it into an error message. Past the end of a sequence the
    model raises `ScriptExhausted`, naming the request number.
    """

    script: Sequence[Reply] | Callable[[Request], AssistantMessage]
    calls: list[Request] = field(default_factory=list)
    # False: no request is copied or kept, as a provider keeps none (a benchmark's long
    # session: a deep copy of every transcript sent, kept, made its garbage collections
    # grow with the session -- 0.4 s pauses by turn 200)
    record: bool = True
    _answered: int = field(default=0, init=False, repr=False)

    def complete(
        self, system: str, messages: list[Message], tools: list[ToolSpec]
    ) -> AssistantMessage:
        request = Request(system, copy.deepcopy(list(messages)) if self.record else messages,
                          [{"name": t["name"], "description": t["description"],
                            "parameters": t["parameters"]} for t in tools])
        if self.record:
            self.calls.append(request)
        self._answered += 1
        if callable(self.script) and not isinstance(self.script, Sequence):
            return copy.deepcopy(self.script(request))
        index = self._answered - 1
        if index >= len(self.script):
            raise ScriptExhausted(f"ScriptedModel has no reply for request {index + 1}")
        item = self.script[index]
        if isinstance(item, BaseException):
            raise item
        answer = item(request) if callable(item) else item
        return copy.deepcopy(answer)


@dataclass
class StreamingScriptedModel(ScriptedModel):
    """A `ScriptedModel` that also streams: each reply's text goes out a word at a time, each
    tool call's arguments in two fragments, then the done message. `abort` is honoured between
    deltas (the done message then has stop_reason "aborted" and the text so far). `pause` seconds
    are slept before each delta (waiting on `abort` when there is one) so that tests can abort
    mid-stream."""

    pause: float = 0.0

    def stream(
        self, system: str, messages: list[Message], tools: list[ToolSpec],
        abort: threading.Event | None = None,
    ) -> Iterator[StreamDelta]:
        answer = self.complete(system, messages, tools)
        sent: list[Block] = []
        for block in answer["content"]:
            words = ""
            for delta in _deltas(block):
                if abort is None:
                    time.sleep(self.pause)
                elif abort.wait(self.pause):
                    partial: list[Block] = [b for b in sent if b["type"] != "toolCall"]
                    if words:
                        partial.append(text(words))
                    yield {"type": "done", "message": error_message(
                        ABORTED, stop_reason="aborted", content=partial)}
                    return
                if delta["type"] == "text":
                    words += delta["delta"]
                yield delta
            sent.append(block)
        yield {"type": "done", "message": answer}


def _deltas(block: Block) -> Iterable[StreamDelta]:
    if block["type"] == "text":
        words = block["text"].split(" ")
        for i, word in enumerate(words):
            yield {"type": "text", "delta": word if i == 0 else " " + word}
    elif block["type"] == "thinking":
        yield {"type": "thinking", "delta": block["thinking"]}
    else:
        encoded = json.dumps(block["arguments"])
        half = len(encoded) // 2
        for part in (encoded[:half], encoded[half:]):
            yield {"type": "toolcall", "id": block["id"], "name": block["name"], "delta": part}


def shape(messages: Iterable[Message]) -> str:
    """A one-line picture of a transcript: "U A[c1] R(c1) A". A failed assistant message is
    "A!" and an aborted one "A~"."""
    parts = []
    for message in messages:
        if message["role"] == "user":
            parts.append("U")
        elif message["role"] == "toolResult":
            parts.append(f"R({message['tool_call_id']})")
        else:
            ids = [b["id"] for b in message["content"] if b["type"] == "toolCall"]
            mark = {"error": "!", "aborted": "~"}.get(message["stop_reason"], "")
            parts.append("A" + mark + (f"[{','.join(ids)}]" if ids else ""))
    return " ".join(parts)


def show(messages: Iterable[Message], clip: int | None = None) -> str:
    """One readable line per message, e.g. ``assistant -> "Reading it." + toolCall c1
    read({"path": "main.py"})``; strings longer than `clip` characters are cut with "..."."""

    def quote(words: str) -> str:
        if clip is not None and len(words) > clip:
            words = words[:clip] + "..."
        return json.dumps(words, ensure_ascii=False)

    lines = []
    for message in messages:
        if message["role"] == "user":
            lines.append(f"user -> {quote(content_text(message['content']))}")
        elif message["role"] == "toolResult":
            flag = " (error)" if message["is_error"] else ""
            lines.append(f"toolResult {message['tool_call_id']}{flag} -> "
                         f"{quote(content_text(message['content']))}")
        else:
            parts = []
            for block in message["content"]:
                if block["type"] == "text":
                    parts.append(quote(block["text"]))
                elif block["type"] == "thinking":
                    parts.append(f"thinking {quote(block['thinking'])}")
                else:
                    parts.append(f"toolCall {block['id']} {call_text(block, brief=False)}")
            if "error_message" in message:
                parts.append(f"[{message['stop_reason']}: {quote(message['error_message'])}]")
            lines.append("assistant -> " + (" + ".join(parts) if parts else "(empty)"))
    return "\n".join(lines)
