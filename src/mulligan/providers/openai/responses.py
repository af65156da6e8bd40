"""OpenAI's Responses API, streaming, through the official `openai` SDK: what ``openai/<id>``
speaks against OpenAI's own endpoint (Codex and OpenAI's current models use it).

In: our system prompt, transcript and tool specs. Out: our stream deltas and one assistant
message (with "usage" and "model"). Never raises: every failure ends as an assistant message
with stop_reason "error" (or "aborted") keeping the partial content.

Shapes, ours <-> the Responses API's (stateless: ``store: false``, the whole input each time):
- system prompt -> ``instructions``; a user message -> an input message (``input_text``,
  ``input_image`` with a data: URL); a toolResult -> ``function_call_output`` (text, or
  ``input_text``/``input_image`` items);
- toolCall block <-> ``function_call`` item (our id is its ``call_id``; arguments stream as
  ``response.function_call_arguments.delta``);
- a ``reasoning`` item <-> a thinking block with ``provider`` "openai", the item's id and its
  ``encrypted_content`` (asked for with ``include``), and its summary as the words. Sent back
  as the same reasoning item before what followed it, so a reasoning model keeps its chain
  across the tool rounds of a run. Another provider's thinking is not sent;
- ``web_search_call`` items (with --web-search) are recorded as text saying what was searched;
- a failed assistant message sends only its text; a refusal is shown and ends as an error.
Usage: "input" counts input tokens not read from the cache, "cache_read" those that were,
"reasoning" the output tokens spent thinking (included in "output").
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import openai

from mulligan.messages import (
    AssistantMessage,
    Block,
    Content,
    Message,
    Usage,
    assistant_message,
    error_message,
    is_failed,
)
from mulligan.providers.errors import Failure
from mulligan.providers.openai.chat import describe_error
from mulligan.providers.retry import Backoff
from mulligan.providers.streaming import (
    DEADLINE,
    IDLE_TIMEOUT,
    SdkModel,
    append_text,
    parse_arguments,
    settled,
)
from mulligan.wire import StreamDelta, ToolSpec

EFFORTS = {"off": "none", "low": "low", "medium": "medium", "high": "high"}


class OpenAIResponsesModel(SdkModel):
    """A model over /responses. `name` is "openai/<model_id>".

    `reasoning_effort` ("none", "low", "medium", "high"; None: the model's default) is sent as
    ``reasoning.effort`` with ``summary: "auto"`` (the model's thinking, summarised, streams as
    thinking). `web_search` adds OpenAI's server-side ``web_search`` tool. `max_tokens` is
    ``max_output_tokens``. `backoff`/`max_retries`, `sleep` and `timeout` as for the others.
    """

    provider = "openai"

    def __init__(
        self, model_id: str, *, api_key: str, base_url: str | None = None,
        max_tokens: int | None = None, reasoning_effort: str | None = None,
        web_search: bool = False, max_retries: int | None = None,
        backoff: Backoff | None = None, sleep: Callable[[float], None] | None = None,
        timeout: float = 600.0, idle_timeout: float = IDLE_TIMEOUT, deadline: float = DEADLINE,
        context_window: int | None = None,
    ) -> None:
        super().__init__(model_id, api_key=api_key, max_retries=max_retries, backoff=backoff,
                         sleep=sleep, idle_timeout=idle_timeout, deadline=deadline,
                         context_window=context_window)
        self.base_url = base_url
        self.max_tokens = max_tokens
        self.reasoning_effort = reasoning_effort
        self.web_search = web_search
        self._client = openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=0,
                                     timeout=timeout)

    def __repr__(self) -> str:
        return f"OpenAIResponsesModel({self.model_id!r}, base_url={self.base_url!r})"

    def _params(
        self, system: str, messages: list[Message], tools: list[ToolSpec]
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.model_id, "input": request_input(messages),
                                  "store": False, "include": ["reasoning.encrypted_content"]}
        if system:
            params["instructions"] = system
        specs: list[dict[str, Any]] = [
            {"type": "function", "name": t["name"], "description": t["description"],
             "parameters": t["parameters"], "strict": False} for t in tools]
        if self.web_search:
            specs.append({"type": "web_search"})
            params["include"].append("web_search_call.action.sources")
        if specs:
            params["tools"] = specs
        if self.reasoning_effort is not None:
            params["reasoning"] = {"effort": self.reasoning_effort, "summary": "auto"}
        if self.max_tokens is not None:
            params["max_output_tokens"] = self.max_tokens
        return params

    def _open(self, params: dict[str, Any]) -> Any:
        return self._client.responses.create(**params, stream=True)

    def _fold(self) -> _Fold:
        return _Fold()

    def _describe_error(self, exc: BaseException) -> Failure:
        return describe_error(exc)


# --- our transcript -> Responses input items -------------------------------------------------


def request_input(messages: list[Message]) -> list[dict[str, Any]]:
    """Our transcript as Responses ``input`` items."""
    items: list[dict[str, Any]] = []
    sent_calls: set[str] = set()
    for message in messages:
        if message["role"] == "user":
            items.append({"role": "user", "content": input_parts(message["content"])})
        elif message["role"] == "toolResult":
            if message["tool_call_id"] in sent_calls:
                content = message["content"]
                items.append({"type": "function_call_output",
                              "call_id": message["tool_call_id"],
                              "output": content if isinstance(content, str)
                              else input_parts(content)})
        else:
            items.extend(_assistant_items(message, sent_calls))
    return items


def input_parts(content: Content) -> list[dict[str, Any]]:
    """A user's or tool result's content as ``input_text`` / ``input_image`` parts."""
    if isinstance(content, str):
        return [{"type": "input_text", "text": content}]
    return [{"type": "input_image", "detail": "auto",
             "image_url": f"data:{b['mime_type']};base64,{b['data']}"}
            if b["type"] == "image" else {"type": "input_text", "text": b["text"]}
            for b in content]


def _assistant_items(message: AssistantMessage, sent_calls: set[str]) -> list[dict[str, Any]]:
    failed = is_failed(message)
    items: list[dict[str, Any]] = []
    for block in message["content"]:
        if block["type"] == "text":
            if block["text"]:
                items.append({"role": "assistant", "content": block["text"]})
        elif failed:
            continue
        elif block["type"] == "thinking":
            if block.get("provider") == "openai" and block.get("encrypted_content"):
                words = block["thinking"]
                items.append({"type": "reasoning", "id": block.get("item_id", ""),
                              "summary": [{"type": "summary_text", "text": words}]
                              if words else [],
                              "encrypted_content": block["encrypted_content"]})
        else:
            sent_calls.add(block["id"])
            items.append({"type": "function_call", "call_id": block["id"],
                          "name": block["name"], "arguments": json.dumps(block["arguments"])})
    return items


# --- stream events -> our deltas and message -------------------------------------------------


class _Fold:
    """Folds Responses stream events into deltas and a message; output items are kept by
    their ``output_index``."""

    def __init__(self) -> None:
        self._items: dict[int, dict[str, Any]] = {}
        self._args: dict[int, list[str]] = {}
        self._done: set[int] = set()
        self._end: str | None = None  # "completed", "incomplete", "failed"
        self._why: str = ""
        self._refused = False
        self._usage: Usage = {}

    def feed(self, event: Any) -> list[StreamDelta]:
        kind = getattr(event, "type", "")
        index = getattr(event, "output_index", None)
        if kind == "response.output_item.added":
            return self._added(event.output_index, event.item)
        if kind == "response.output_item.done":
            self._finish_item(event.output_index, event.item)
        elif kind == "response.output_text.delta" and event.delta:
            return self._words(index, "text", event.delta)
        elif kind == "response.refusal.delta" and event.delta:
            self._refused = True
            return self._words(index, "text", event.delta)
        elif kind in ("response.reasoning_summary_text.delta",
                      "response.reasoning_text.delta") and event.delta:
            return self._words(index, "thinking", event.delta)
        elif kind == "response.reasoning_summary_part.added" and event.summary_index > 0:
            return self._words(index, "thinking", "\n\n")
        elif kind == "response.function_call_arguments.delta" and event.delta:
            item = self._items.get(index)  # type: ignore[arg-type]
            if item is not None and item["type"] == "toolCall":
                self._args[index].append(event.delta)  # type: ignore[index]
                return [{"type": "toolcall", "id": item["id"], "name": item["name"],
                         "delta": event.delta}]
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            self._ended(kind.rsplit(".", 1)[1], event.response)
        elif kind == "error":
            self._end = "failed"
            self._why = f"{getattr(event, 'code', None) or 'error'}: {event.message}"
        return []

    def _added(self, index: int, item: Any) -> list[StreamDelta]:
        if item.type == "message":
            self._items[index] = {"type": "text", "text": ""}
        elif item.type == "reasoning":
            self._items[index] = {"type": "thinking", "thinking": "", "provider": "openai",
                                  "item_id": item.id}
        elif item.type == "function_call":
            self._items[index] = {"type": "toolCall", "id": item.call_id, "name": item.name,
                                  "arguments": {}}
            self._args[index] = []
            return [{"type": "toolcall", "id": item.call_id, "name": item.name, "delta": ""}]
        elif item.type == "web_search_call":
            self._items[index] = {"type": "text", "text": ""}
        return []

    def _words(self, index: int | None, kind: str, words: str) -> list[StreamDelta]:
        item = self._items.get(index) if index is not None else None
        if item is None or item["type"] != kind:
            return []
        append_text(item, kind, words)
        delta: StreamDelta = {"type": "text", "delta": words} if kind == "text" else \
            {"type": "thinking", "delta": words}
        return [delta]

    def _finish_item(self, index: int, item: Any) -> None:
        ours = self._items.get(index)
        if ours is None:
            return
        self._done.add(index)
        if item.type == "reasoning":
            ours["encrypted_content"] = getattr(item, "encrypted_content", None) or ""
            summary = "\n\n".join(part.text for part in (item.summary or []))
            ours["thinking"] = summary or ours["thinking"]
        elif item.type == "function_call":
            self._args[index] = [item.arguments or ""]  # the whole, as the server has it
        elif item.type == "web_search_call":
            ours["text"] = _search_note(item)

    def _ended(self, how: str, response: Any) -> None:
        self._end = how
        usage = getattr(response, "usage", None)
        if usage is not None:
            details = getattr(usage, "input_tokens_details", None)
            cached = getattr(details, "cached_tokens", 0) or 0
            thinking = getattr(getattr(usage, "output_tokens_details", None),
                               "reasoning_tokens", 0) or 0
            self._usage = {"input": (usage.input_tokens or 0) - cached,
                           "output": usage.output_tokens or 0, "cache_read": cached}
            if thinking:
                self._usage["reasoning"] = thinking
        if how == "failed":
            error = getattr(response, "error", None)
            self._why = (f"{getattr(error, 'code', None) or 'error'}: "
                         f"{getattr(error, 'message', None) or 'the response failed'}")
        elif how == "incomplete":
            details = getattr(response, "incomplete_details", None)
            self._why = str(getattr(details, "reason", None) or "")

    def finished(self) -> bool:
        return self._end is not None

    def usage(self) -> Usage | None:
        return dict(self._usage) if self._usage else None  # type: ignore[return-value]

    def partial(self) -> list[Block]:
        return self._content(complete_calls_only=True)

    def message(self) -> AssistantMessage:
        if self._end == "failed":
            return error_message(f"openai: {self._why}", content=self.partial())
        if self._why == "content_filter":
            return error_message("openai: the reply was stopped by the content filter",
                                 content=self.partial())
        if self._refused:
            return error_message("openai: the model declined to answer (refusal)",
                                 content=self.partial())
        length = self._end == "incomplete"
        content = self._content(complete_calls_only=length)
        return assistant_message(content, "length" if length else None)

    def _content(self, *, complete_calls_only: bool) -> list[Block]:
        content: list[Block] = []
        for index in sorted(self._items):
            block = settled(self._items[index])
            if block["type"] == "text" and not block["text"]:
                continue
            if block["type"] == "thinking" and not block.get("encrypted_content") \
                    and not block["thinking"]:
                continue
            if block["type"] == "toolCall":
                raw = "".join(self._args[index])
                arguments = parse_arguments(raw)
                if index not in self._done or (arguments is None and complete_calls_only):
                    continue
                block["arguments"] = arguments or {}
                if arguments is None:
                    block["invalid_arguments"] = raw
            content.append(block)  # type: ignore[arg-type]
        return content


def _search_note(item: Any) -> str:
    """A server-side web search, as words for the record: what was searched and the pages."""
    action = getattr(item, "action", None)
    query = getattr(action, "query", None) or ""
    sources = [getattr(s, "url", "") for s in (getattr(action, "sources", None) or [])]
    note = f"[web search: {query}]" if query else "[web search]"
    return note + "".join(f"\n- {url}" for url in sources if url)

