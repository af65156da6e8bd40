"""The core's wire types beyond messages: tool specs, stream deltas, the model protocols and
the events of a run. Plain JSON-ready dicts with TypedDict shapes; nothing here does anything.

The contract every model keeps (the provider boundary, see `mulligan.providers`):
- ``complete(system, messages, tools)`` returns exactly one assistant message and never raises;
  a failure is an assistant message with stop_reason "error" and the reason in `error_message`.
- ``stream(system, messages, tools, abort=None)``, when offered, yields `StreamDelta` dicts and
  ends with exactly one ``{"type": "done", "message": AssistantMessage}``; it never raises.
  When `abort` (a ``threading.Event``) is set it stops reading, and the done message has
  stop_reason "aborted" and keeps whatever partial content had arrived.
- `tools` are tool *specs*: dicts with "name", "description", "parameters" (no "execute").

Events come in start/end pairs (agent, turn, message, tool execution); their order is drawn
once, in `mulligan.loop` and docs/design.md. A listener or renderer reads them as mappings.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any, Literal, Protocol, TypedDict, runtime_checkable

from mulligan.messages import AssistantMessage, Message, ToolResultMessage


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


class RetryDelta(TypedDict):
    """Not content: the provider is about to wait `delay` seconds and try again, because of
    `reason` ("429 rate_limit_error: ...", "the server sent nothing for 30 s"). `attempt` is
    the attempt about to be made (2 for the first retry), `of` the most there will be. Only
    sent while nothing of the reply has streamed."""

    type: Literal["retry"]
    reason: str
    attempt: int
    of: int
    delay: float


StreamDelta = TextDelta | ThinkingDelta | ToolCallDelta | RetryDelta | Done


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


# ---- events ----------------------------------------------------------------------------------


class AgentStart(TypedDict):
    type: Literal["agent_start"]


class AgentEnd(TypedDict):
    type: Literal["agent_end"]
    messages: list[Message]  # the messages this run appended


class TurnStart(TypedDict):
    type: Literal["turn_start"]


class TurnEnd(TypedDict):
    type: Literal["turn_end"]
    message: AssistantMessage
    tool_results: list[ToolResultMessage]


class MessageStart(TypedDict):
    type: Literal["message_start"]
    message: AssistantMessage  # empty: a streamed reply is about to arrive


class MessageUpdate(TypedDict):
    """One stream delta. `message` is the reply so far: one object for the whole stream,
    changed in place (copy what you keep; a long text is in blocks of at most 8 KB). Frontends
    that only need what is new read `delta` (the JSON renderer writes only the delta)."""

    type: Literal["message_update"]
    message: AssistantMessage
    delta: StreamDelta


class MessageEnd(TypedDict):
    type: Literal["message_end"]
    message: Message  # already in the record: mutate, then announce


class ToolExecutionStart(TypedDict):
    type: Literal["tool_execution_start"]
    tool_call_id: str
    tool_name: str
    arguments: dict[str, Any]


class ToolExecutionUpdate(TypedDict):
    """What a running tool (bash) has printed since the last update, while it runs: for a live
    view only. Never recorded: the one toolResult at the end is the record. `elapsed` is
    seconds since the call started."""

    type: Literal["tool_execution_update"]
    tool_call_id: str
    tool_name: str
    output: str
    elapsed: float


class ToolExecutionEnd(TypedDict):
    type: Literal["tool_execution_end"]
    tool_call_id: str
    tool_name: str
    result: ToolResultMessage
    is_error: bool


class Retry(TypedDict):
    """A model call is waiting to try again (see `RetryDelta`: the same keys); it comes between
    message_start and message_end and stands alone, not in a pair."""

    type: Literal["retry"]
    reason: str
    attempt: int
    of: int
    delay: float


class CompactionStart(TypedDict):
    """Compaction began: `reason` "threshold" (the context neared the window), "overflow"
    (the provider refused it as too long) or "manual" (/compact)."""

    type: Literal["compaction_start"]
    reason: str
    tokens_before: int


class CompactionEnd(TypedDict):
    """Compaction ended: the compaction entry is already in the session (mutate, then
    announce). `summary` is empty and `error` says why when nothing was compacted."""

    type: Literal["compaction_end"]
    summary: str
    tokens_before: int
    tokens_after: int
    error: str


Event = (AgentStart | AgentEnd | TurnStart | TurnEnd | MessageStart | MessageUpdate
         | MessageEnd | ToolExecutionStart | ToolExecutionUpdate | ToolExecutionEnd | Retry
         | CompactionStart | CompactionEnd)
