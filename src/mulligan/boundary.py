"""The provider boundary: one model call, streamed or not, that never raises.

`call_model` is what the loop calls for every reply and what the summariser and compactor
call for a summary (`mulligan.app.rewind.summaries.ask_model`): a model that raises, returns
something that is not an assistant message, or streams a reply that cannot be recorded gives
an error message here, never an exception. A streamed reply's partial message is assembled by
`PartialReply` in time linear in its size.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Generator, Iterator
from typing import Any, cast

import orjson

from mulligan.messages import (
    ABORTED,
    AssistantMessage,
    Block,
    Message,
    assistant_message,
    error_message,
    shape_problem,
)
from mulligan.wire import Done, Event, Model, RetryDelta, StreamDelta, TextDelta, ToolSpec

__all__ = ["PARTIAL_BLOCK", "JsonEnd", "PartialReply", "call_model"]


def call_model(
    model: Model, system: str, context: list[Message], specs: list[ToolSpec],
    abort: threading.Event | None,
) -> Generator[Event, None, AssistantMessage]:
    """One model call -- the provider boundary, the one both the loop and the summariser and
    compactor go through. A generator: message_start, message_update and retry events if the
    model streams; it returns the assistant message the call ended in. Streams when the model
    offers `stream` (handing it `abort`), else calls `complete`. Whatever the model raises or
    returns that is not a well-formed, recordable assistant message becomes an error message
    here (the words that had streamed kept): it never raises an Exception. `abort` already set
    gives an aborted message without a call."""
    stream = getattr(model, "stream", None)
    if stream is None:
        try:
            answer = model.complete(system, context, specs)
        except Exception as exc:  # a provider that broke its contract; becomes the record
            return error_message(_failure(exc))
        return _checked(answer)
    partial = PartialReply()
    yield {"type": "message_start", "message": assistant_message([])}
    if abort is not None and abort.is_set():  # aborted while message_start was heard
        return error_message(ABORTED, stop_reason="aborted")
    deltas: Iterator[StreamDelta] | None = None
    try:
        deltas = iter(stream(system, context, specs, abort=abort))
        for delta in deltas:
            if delta["type"] == "done":
                return _checked(cast(Done, delta)["message"])
            if delta["type"] == "retry":  # not content: the wait, made visible
                wait = cast(RetryDelta, delta)
                yield {"type": "retry", "reason": wait["reason"], "attempt": wait["attempt"],
                       "of": wait["of"], "delay": wait["delay"]}
                continue
            partial.add(delta)
            yield {"type": "message_update", "message": partial.message, "delta": delta}
    except Exception as exc:  # as above; the words that had arrived are kept
        return error_message(_failure(exc), content=partial.words())
    finally:
        close = getattr(deltas, "close", None)
        if close is not None:
            close()  # let the provider hang up (an HTTP stream) when we stop reading early
    return error_message("The model's stream ended without a final message.",
                         content=partial.words())


def _failure(exc: Exception) -> str:
    return f"The model failed: {type(exc).__name__}: {exc}"


def _checked(answer: Any) -> AssistantMessage:
    """`answer` if it is an assistant message with the wire shape, else an error message saying
    what is wrong -- so that a malformed reply ends the run as a failure instead of raising
    from the loop when its blocks are read."""
    if not isinstance(answer, dict) or answer.get("role") != "assistant":
        what = f"a {answer.get('role')!r} message" if isinstance(answer, dict) \
            else type(answer).__name__
        return error_message(f"The model returned something that is not an assistant message: "
                             f"{what}")
    problem = shape_problem(answer)
    if problem is not None:
        return error_message(f"The model returned {problem}")
    return _recordable(cast(AssistantMessage, answer))


def _recordable(answer: AssistantMessage) -> AssistantMessage:
    """`answer` as the session can record it and a provider can be sent it again. A tool
    call whose arguments the session's encoder refuses (an integer beyond 64 bits, nesting
    past its depth limit) or that holds NaN or an infinity (which JSON has no word for) is
    kept as `invalid_arguments` text, with {} as its arguments, and run_tool answers it with
    an error -- as for arguments that were not JSON at all. Anything else that cannot be
    encoded (a lone surrogate in the text) makes the reply an error saying so."""
    blocks: list[Block] = []
    changed = False
    for block in answer["content"]:
        if block["type"] == "toolCall" and "invalid_arguments" not in block:
            problem = _arguments_problem(block["arguments"])
            if problem is not None:
                block = {**block, "arguments": {},
                         "invalid_arguments": _as_text(block["arguments"])}
                changed = True
        blocks.append(block)
    recorded: AssistantMessage = {**answer, "content": blocks} if changed else answer
    try:
        orjson.dumps(recorded)
    except TypeError as exc:
        return error_message(f"The model returned a reply that cannot be recorded ({exc}).")
    return recorded


def _arguments_problem(arguments: dict[str, Any]) -> str | None:
    try:
        orjson.dumps(arguments)
        json.dumps(arguments, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        return str(exc)
    return None


def _as_text(arguments: dict[str, Any]) -> str:
    """The arguments as the model sent them, in text that can be recorded."""
    try:
        text = json.dumps(arguments)  # big integers and NaN written as they are
    except (TypeError, ValueError, RecursionError):
        text = repr(arguments)
    return text[:10_000].encode("utf-8", "replace").decode("utf-8")


# Characters of one text (or thinking) block of a partial message: a longer text streams as
# consecutive blocks, so that a delta costs the same at the end of a 20 MB reply as at its start
# (a str cannot grow in place; a delta copies at most one block).
PARTIAL_BLOCK = 8192


class PartialReply:
    """The assistant message being streamed, built from deltas in time linear in its size.

    `message` is one dict for the whole stream, changed in place as deltas arrive. Text and
    thinking go into blocks of at most `PARTIAL_BLOCK` characters (consecutive blocks of a
    kind are one text: `text_of` reads it whole; the final message has one block). A tool
    call's "arguments" is replaced, never changed, by the last prefix of its JSON fragments
    that parsed ({} until one does). A fragment can complete the arguments only when it
    closes the top-level object, which `JsonEnd` sees by scanning each fragment once: the
    fragments are joined and parsed only then, not at every delta."""

    def __init__(self) -> None:
        self.message: AssistantMessage = assistant_message([])
        self.blocks = self.message["content"]
        self.raw: dict[str, tuple[list[str], JsonEnd]] = {}  # a call's fragments, its end

    def parses(self) -> int:
        """How many times the tool calls' fragments were joined and parsed (work counted)."""
        return sum(end.parses for _, end in self.raw.values())

    def add(self, delta: StreamDelta) -> None:
        last = self.blocks[-1] if self.blocks else None
        if delta["type"] in ("text", "thinking"):
            kind, words = delta["type"], cast(TextDelta, delta)["delta"]
            if last is not None and last["type"] == kind and \
                    len(cast(Any, last)[kind]) + len(words) <= PARTIAL_BLOCK:
                cast(Any, last)[kind] += words  # a copy of at most PARTIAL_BLOCK characters
            else:
                self.blocks.append(cast(Block, {"type": kind, kind: words}))
        elif delta["type"] == "toolcall":
            if last is None or last["type"] != "toolCall" or last["id"] != delta["id"]:
                last = {"type": "toolCall", "id": delta["id"], "name": delta["name"],
                        "arguments": {}}
                self.blocks.append(last)
                self.message["stop_reason"] = "toolUse"
            pieces, end = self.raw.setdefault(delta["id"], ([], JsonEnd()))
            pieces.append(delta["delta"])
            if not end.closes(delta["delta"]):
                return  # not a whole JSON object yet
            try:
                parsed = json.loads("".join(pieces))
            except ValueError:
                return
            if isinstance(parsed, dict):
                last["arguments"] = parsed

    def words(self) -> list[Block]:
        """The text and thinking so far, a block of each run of one kind: what a failed
        stream's error message keeps."""
        kept: list[tuple[str, list[str]]] = []
        for block in self.blocks:
            kind = block["type"]
            if kind == "toolCall":
                continue
            if not kept or kept[-1][0] != kind:
                kept.append((kind, []))
            kept[-1][1].append(cast(Any, block)[kind])
        return [cast(Block, {"type": kind, kind: "".join(parts)}) for kind, parts in kept]


class JsonEnd:
    """Watches a JSON text arrive in fragments, a character once each: `closes(fragment)` is
    True when the fragment brings the top-level object to its closing brace. Once the text
    cannot be one whole object (something after the brace, a stray bracket) it is never
    True again. `parses` counts the Trues: the joins and parses this allowed."""

    def __init__(self) -> None:
        self.depth = 0
        self.in_string = self.escaped = self.done = self.dead = False
        self.parses = 0

    def closes(self, fragment: str) -> bool:
        closed = False
        for char in fragment:
            if self.dead:
                return False
            if self.in_string:
                if self.escaped:
                    self.escaped = False
                elif char == "\\":
                    self.escaped = True
                elif char == '"':
                    self.in_string = False
            elif char == '"':
                self.in_string = True
                self.dead = self.done or self.depth == 0
            elif char in "{[":
                self.dead = self.done or (self.depth == 0 and char == "[")
                self.depth += 1
            elif char in "}]":
                self.depth -= 1
                self.dead = self.depth < 0
                if self.depth == 0 and not self.dead:
                    self.done = closed = True
            elif not char.isspace():
                self.dead = self.done or self.depth == 0
        if closed and not self.dead:
            self.parses += 1
            return True
        return False
