"""The `Model` protocol: what the loop asks of a provider, and the stream deltas it may yield.

Contract for every provider (the provider boundary):
- ``complete(system, messages, tools)`` returns exactly one assistant message and never raises;
  a failure is an assistant message with stop_reason "error" and the reason in `error_message`.
- ``stream(system, messages, tools, abort=None)``, when offered, yields `StreamDelta` dicts and
  ends with exactly one ``{"type": "done", "message": AssistantMessage}``; it never raises.
  When `abort` (a ``threading.Event``) is set it stops reading, and the done message has
  stop_reason "aborted" and keeps whatever partial content had arrived.
- `tools` are tool *specs*: dicts with "name", "description", "parameters" (no "execute").
Providers convert to their wire format here, at the boundary, and nowhere else.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any, Literal, Protocol, TypedDict, runtime_checkable

from mulligan.messages import AssistantMessage, Message


class ToolSpec(TypedDict):
    name: str
    description: str
    parameters: dict[str, Any]


class TextDelta(TypedDict):
    type: Literal["text"]
    delta: str


class ThinkingDelta(TypedDict):
    type: Literal["thinking"]
    delta: str


class ToolCallDelta(TypedDict):
    """A fragment of a tool call's JSON arguments; `id` and `name` repeat on every fragment."""

    type: Literal["toolcall"]
    id: str
    name: str
    delta: str


class Done(TypedDict):
    type: Literal["done"]
    message: AssistantMessage


StreamDelta = TextDelta | ThinkingDelta | ToolCallDelta | Done


@runtime_checkable
class Model(Protocol):
    def complete(
        self, system: str, messages: list[Message], tools: list[ToolSpec]
    ) -> AssistantMessage: ...


@runtime_checkable
class StreamingModel(Model, Protocol):
    def stream(
        self, system: str, messages: list[Message], tools: list[ToolSpec],
        abort: threading.Event | None = None,
    ) -> Iterator[StreamDelta]: ...
