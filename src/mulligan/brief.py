"""The one short rendering of a tool call and of a message, shared by every reader that shows
one in a line: /tree and `sessions tree`, the live view, `sessions show`, the Markdown export
and `testing.show`.

In: message and block dicts as they come from a model or a session file -- possibly damaged,
so nothing here assumes a shape beyond what it checks. Out: plain strings. Never raises on
odd content, never changes what it is given.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mulligan.messages import content_text

__all__ = ["arguments_text", "call_text", "count", "cut", "flat", "message_line"]


def count(number: int, noun: str) -> str:
    """"1 message", "2 messages"."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


def flat(text: Any, room: int | None = None) -> str:
    """`text` on one line: every run of white space (newlines included) folded to one space.
    With `room`, a long text is folded only as far as a line of `room` characters can show:
    the result is then the start of the whole folding, longer than `room` (so `cut` gives
    what it gives for the whole) -- a 100k-entry tree need not fold every long message."""
    if type(text) is not str:
        text = str(text)
    if room is not None:
        # The folding of a start of the text is a start of the whole one's: a start half
        # again as long as the room is enough for most texts (splitting it into words was
        # most of drawing a 100k-entry tree); one with more white space takes a longer one.
        for reach in (room + room // 2 + 8, 2 * room + 64):
            if len(text) <= reach:
                break
            head = " ".join(text[:reach].split())
            if len(head) > room:
                return head
    return " ".join(text.split())


def cut(text: str, room: int | None) -> str:
    """`text`, or its start and "…" when it is longer than `room` characters (None: no limit)."""
    if room is None or len(text) <= room:
        return text
    return "…" if room <= 1 else text[: room - 1] + "…"


def arguments_text(arguments: Any, *, brief: bool = True, room: int | None = None) -> str:
    """A tool call's arguments on one line. `brief`: a call with one argument shows just its
    value (``main.py``, not ``{"path": "main.py"}``); otherwise, and always without `brief`,
    the arguments as JSON. A model may send any JSON shape; it is shown as it is."""
    # `type(...) is dict` first: the ABC check alone was a tenth of a 100k-line tree.
    if brief and (type(arguments) is dict or isinstance(arguments, Mapping)) \
            and len(arguments) == 1:
        (value,) = arguments.values()
        text = value if isinstance(value, str) else _json(value)
    else:
        text = _json(arguments)
    return cut(flat(text, room) if brief else text, room)


def call_text(block: Mapping[str, Any], *, brief: bool = True, room: int | None = None) -> str:
    """A tool call block as ``name(arguments)``: ``read(main.py)``; without `brief`,
    ``read({"path": "main.py"})``."""
    return cut(f"{block.get('name')}"
               f"({arguments_text(block.get('arguments'), brief=brief, room=room)})", room)


def message_line(message: Mapping[str, Any], room: int | None = None) -> str:
    """A message in a few words: ``you: ...``, ``ai: ... read(main.py) [error: why]``,
    ``read (error) → ...``. With `room`, for a line that `cut` will bound to `room`: what
    lies past it may be left out (long texts are not folded whole)."""
    role = message.get("role")
    if role == "user" or role == "toolResult":
        content = message.get("content", "")
        text = flat(content if type(content) is str else content_text(content), room)
        if role == "user":
            return "you: " + text
        mark = " (error)" if message.get("is_error") else ""
        return f"{message.get('tool_name', 'tool')}{mark} → {text}"
    parts = []
    content = message.get("content")
    # With `room`, the blocks are looked at until the line is full: "ai: " and a part
    # each, joined by spaces (a 100k-entry tree need not render the calls after a text).
    left = None if room is None else room - 3
    for block in content if isinstance(content, list) else []:
        if left is not None and left < 0:
            break
        if type(block) is not dict and not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text" and (text := flat(block.get("text", ""), room)):
            parts.append(text)
        elif kind == "toolCall":
            parts.append(text := call_text(block, room=None if room is None else room + 1))
        else:
            continue
        if left is not None:
            left -= len(text) + 1
    if message.get("stop_reason") in ("error", "aborted"):
        reason, why = message.get("stop_reason"), flat(message.get("error_message", ""))
        parts.append(f"[{reason}: {why}]" if why and why != reason else f"[{reason}]")
    return "ai: " + (" ".join(parts) if parts else "(empty)")


# What json.dumps(value, ensure_ascii=False) builds at every call, built once: a 100k-entry
# tree shows some 40k tool calls' arguments.
_ENCODER = json.JSONEncoder(ensure_ascii=False)


def _json(value: Any) -> str:
    try:
        return _ENCODER.encode(value)
    except (TypeError, ValueError):  # not JSON at all (never from a model): say what it is
        return repr(value)
