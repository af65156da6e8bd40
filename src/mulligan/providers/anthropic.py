"""Anthropic Messages API, streaming, through the official `anthropic` SDK.

In: our system prompt, transcript and tool specs. Out: our stream deltas and one assistant
message (with "usage" and "model"). Never raises: every failure -- HTTP status, a stream cut
off, an ``error`` event, a bug here -- ends as an assistant message with stop_reason "error"
(or "aborted"), keeping the partial content that had arrived.

Shapes, ours <-> Anthropic's:
- toolCall block <-> ``tool_use`` block; toolResult messages <-> ``tool_result`` blocks in a
  user turn, consecutive results (and a steering message after them) merged into one turn;
- thinking block (with "signature") <-> ``thinking``; a redacted one (``redacted`` True,
  ``data``) <-> ``redacted_thinking``; thinking without a signature is not sent back;
- image blocks in a user message or a tool result <-> ``image`` blocks with a base64 source;
- a failed assistant message sends only its text (nothing, if it has none); a tool result
  whose call was not sent is not sent either.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anthropic
import httpx2

from mulligan.messages import (
    AssistantMessage,
    Block,
    Content,
    Message,
    StopReason,
    Usage,
    assistant_message,
    error_message,
    is_failed,
)
from mulligan.providers.errors import Failure
from mulligan.providers.facts import MAX_TOKENS
from mulligan.providers.retry import Backoff, parse_retry_after
from mulligan.providers.streaming import (
    DEADLINE,
    IDLE_TIMEOUT,
    SdkModel,
    append_text,
    merge_turn,
    parse_arguments,
    settled,
)
from mulligan.wire import StreamDelta, ToolSpec

DEFAULT_MAX_TOKENS = MAX_TOKENS["anthropic"]
WEB_SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}
_CACHE = {"type": "ephemeral"}
_STOP: dict[str, StopReason] = {
    "end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop", "tool_use": "toolUse",
    "max_tokens": "length", "model_context_window_exceeded": "length",
}
# Error types (in a body or an ``error`` event) that describe a passing fault.
_TRANSIENT_TYPES = {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}


class AnthropicModel(SdkModel):
    """A Claude model over the Messages API. `name` is "anthropic/<model_id>".

    `thinking_budget` (tokens, >= 1024) turns on extended thinking; max_tokens is raised to
    leave room for it. `backoff`/`max_retries` govern our own retries (the SDK's are off);
    `sleep` is called with each wait (None: wait on the abort event). `timeout` is the SDK's
    per-request timeout in seconds.
    """

    provider = "anthropic"

    def __init__(
        self, model_id: str, *, api_key: str, base_url: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS, thinking_budget: int | None = None,
        max_retries: int | None = None, backoff: Backoff | None = None,
        sleep: Callable[[float], None] | None = None, timeout: float = 600.0,
        prompt_caching: bool = True, web_search: bool = False,
        idle_timeout: float = IDLE_TIMEOUT, deadline: float = DEADLINE,
        context_window: int | None = None,
    ) -> None:
        super().__init__(model_id, api_key=api_key, max_retries=max_retries, backoff=backoff,
                         sleep=sleep, idle_timeout=idle_timeout, deadline=deadline,
                         context_window=context_window)
        self.max_tokens = max_tokens
        self.thinking_budget = thinking_budget
        self.prompt_caching = prompt_caching
        self.web_search = web_search  # Anthropic's server-side web search tool (--web-search)
        self._client = anthropic.Anthropic(api_key=api_key, base_url=base_url, max_retries=0,
                                           timeout=timeout)

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model_id!r})"

    def _params(
        self, system: str, messages: list[Message], tools: list[ToolSpec]
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.model_id, "max_tokens": self.max_tokens,
                                  "messages": request_messages(messages)}
        if system:
            block: dict[str, Any] = {"type": "text", "text": system}
            if self.prompt_caching:
                block["cache_control"] = _CACHE
            params["system"] = [block]
        if tools:
            params["tools"] = [{"name": t["name"], "description": t["description"],
                                "input_schema": t["parameters"]} for t in tools]
        if self.web_search:
            params.setdefault("tools", []).append(WEB_SEARCH)
        if self.thinking_budget:
            params["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_budget}
            params["max_tokens"] = max(self.max_tokens, self.thinking_budget + 4096)
        turns = params["messages"]
        if self.prompt_caching and turns and turns[-1]["role"] == "user":
            # Everything up to the newest turn is reused by the next request: mark it cacheable.
            turns[-1]["content"][-1]["cache_control"] = _CACHE
        return params

    def _open(self, params: dict[str, Any]) -> Any:
        return self._client.messages.create(**params, stream=True)

    def _fold(self) -> _Fold:
        return _Fold()

    def _describe_error(self, exc: BaseException) -> Failure:
        return describe_error(exc)


# --- our transcript -> Anthropic's messages --------------------------------------------------


def request_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Our transcript as Anthropic ``messages``: alternating user/assistant turns, each a list
    of content blocks. Consecutive same-role turns are merged (tool results, then the user's
    words); failed assistant messages send only their text."""
    turns: list[dict[str, Any]] = []
    sent_calls: set[str] = set()

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        merge_turn(turns, role, blocks, "content")

    for message in messages:
        if message["role"] == "user":
            add("user", input_blocks(message["content"]))
        elif message["role"] == "toolResult":
            if message["tool_call_id"] not in sent_calls:
                continue
            result: dict[str, Any] = {"type": "tool_result",
                                      "tool_use_id": message["tool_call_id"]}
            if message["content"]:
                content = message["content"]
                result["content"] = content if isinstance(content, str) \
                    else input_blocks(content)
            if message["is_error"]:
                result["is_error"] = True
            add("user", [result])
        else:
            add("assistant", _assistant_blocks(message, sent_calls))
    return turns


def input_blocks(content: Content) -> list[dict[str, Any]]:
    """A user's or tool result's content as Anthropic content blocks: text, and images as
    base64 ``image`` sources. Empty text is left out (the API refuses it)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks: list[dict[str, Any]] = []
    for block in content:
        if block["type"] == "image":
            blocks.append({"type": "image", "source": {
                "type": "base64", "media_type": block["mime_type"], "data": block["data"]}})
        elif block["text"]:
            blocks.append({"type": "text", "text": block["text"]})
    return blocks


def _assistant_blocks(message: AssistantMessage, sent_calls: set[str]) -> list[dict[str, Any]]:
    failed = is_failed(message)
    blocks: list[dict[str, Any]] = []
    for block in message["content"]:
        if block["type"] == "text":
            if block["text"]:
                blocks.append({"type": "text", "text": block["text"]})
        elif failed:
            continue
        elif block["type"] == "thinking":
            if block.get("provider", "anthropic") != "anthropic":
                continue  # another provider's thinking: not Anthropic's to check
            if block.get("redacted"):
                blocks.append({"type": "redacted_thinking", "data": block.get("data", "")})
            elif block.get("signature"):
                blocks.append({"type": "thinking", "thinking": block["thinking"],
                               "signature": block["signature"]})
        else:
            sent_calls.add(block["id"])
            blocks.append({"type": "tool_use", "id": block["id"], "name": block["name"],
                           "input": block["arguments"]})
    return blocks


# --- Anthropic's stream events -> our deltas and message -------------------------------------


class _Fold:
    """Folds one attempt's stream events (message_start, content_block_*, message_delta,
    message_stop) into deltas and a message. Blocks are kept by the index the API gives."""

    def __init__(self) -> None:
        self._blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, list[str]] = {}
        self._closed: set[int] = set()
        self._stop_reason: str | None = None
        self._stopped = False
        self._usage: Usage = {}

    def feed(self, event: Any) -> list[StreamDelta]:
        kind = event.type
        if kind == "message_start":
            self._take_usage(event.message.usage)
        elif kind == "content_block_start":
            return self._start(event.index, event.content_block)
        elif kind == "content_block_delta":
            return self._delta(event.index, event.delta)
        elif kind == "content_block_stop":
            self._closed.add(event.index)
            block = self._blocks.get(event.index)
            if block is not None and "server" in block:  # the search's query, as words
                query = (parse_arguments("".join(self._json[event.index])) or {}).get("query")
                block["text"] = f"[{block.pop('server')}: {query}]\n" if query else ""
                return [{"type": "text", "delta": block["text"]}] if block["text"] else []
        elif kind == "message_delta":
            self._stop_reason = event.delta.stop_reason or self._stop_reason
            self._take_usage(event.usage)
        elif kind == "message_stop":
            self._stopped = True
        return []

    def _start(self, index: int, block: Any) -> list[StreamDelta]:
        if block.type == "text":
            self._blocks[index] = {"type": "text", "text": block.text or ""}
            return [{"type": "text", "delta": block.text}] if block.text else []
        if block.type == "thinking":
            self._blocks[index] = {"type": "thinking", "thinking": block.thinking or "",
                                   "signature": getattr(block, "signature", None) or ""}
            return [{"type": "thinking", "delta": block.thinking}] if block.thinking else []
        if block.type == "redacted_thinking":
            self._blocks[index] = {"type": "thinking", "thinking": "", "redacted": True,
                                   "data": block.data}
            return []
        if block.type == "tool_use":
            self._blocks[index] = {"type": "toolCall", "id": block.id, "name": block.name,
                                   "arguments": {}}
            self._json[index] = []
            return [{"type": "toolcall", "id": block.id, "name": block.name, "delta": ""}]
        if block.type == "server_tool_use":  # a server-side web search: its query streams
            self._blocks[index] = {"type": "text", "text": "", "server": block.name}
            self._json[index] = []
            return []
        if block.type == "web_search_tool_result":
            note = _results_note(block.content)
            self._blocks[index] = {"type": "text", "text": note}
            return [{"type": "text", "delta": note}]
        return []  # other server tools and their results: not ours to show or send back

    def _delta(self, index: int, delta: Any) -> list[StreamDelta]:
        block = self._blocks.get(index)
        if block is None:
            return []
        if delta.type == "text_delta" and delta.text:
            append_text(block, "text", delta.text)
            return [{"type": "text", "delta": delta.text}]
        if delta.type == "thinking_delta" and delta.thinking:
            append_text(block, "thinking", delta.thinking)
            return [{"type": "thinking", "delta": delta.thinking}]
        if delta.type == "signature_delta":
            block["signature"] = block.get("signature", "") + delta.signature
        elif delta.type == "input_json_delta" and delta.partial_json:
            self._json[index].append(delta.partial_json)
            if "server" in block:
                return []
            return [{"type": "toolcall", "id": block["id"], "name": block["name"],
                     "delta": delta.partial_json}]
        return []

    def _take_usage(self, usage: Any) -> None:
        if usage is None:
            return
        for ours, theirs in (("input", "input_tokens"), ("output", "output_tokens"),
                             ("cache_read", "cache_read_input_tokens"),
                             ("cache_write", "cache_creation_input_tokens")):
            value = getattr(usage, theirs, None)
            if value is not None:
                self._usage[ours] = value  # type: ignore[literal-required]

    def finished(self) -> bool:
        return self._stopped

    def usage(self) -> Usage | None:
        return dict(self._usage) if self._usage else None  # type: ignore[return-value]

    def partial(self) -> list[Block]:
        return self._content(complete_calls_only=True)

    def message(self) -> AssistantMessage:
        reason = self._stop_reason or "end_turn"
        if reason == "refusal":
            return error_message("anthropic: the model declined to answer (stop_reason "
                                 "refusal)", content=self._content(complete_calls_only=True))
        stop = _STOP.get(reason, "stop")
        content = self._content(complete_calls_only=stop == "length")
        if stop == "toolUse" and not any(b["type"] == "toolCall" for b in content):
            stop = "stop"
        elif stop == "stop" and any(b["type"] == "toolCall" for b in content):
            stop = "toolUse"
        return assistant_message(content, stop)

    def _content(self, *, complete_calls_only: bool) -> list[Block]:
        content: list[Block] = []
        for index in sorted(self._blocks):
            block = settled(self._blocks[index])
            if block["type"] == "text" and not block["text"]:
                continue
            if block["type"] == "thinking" and not block.get("signature"):
                block.pop("signature", None)
                if not block["thinking"] and not block.get("redacted"):
                    continue
            if block["type"] == "toolCall":
                raw = "".join(self._json[index])
                arguments = parse_arguments(raw)
                if index not in self._closed or (arguments is None and complete_calls_only):
                    continue
                block["arguments"] = arguments or {}
                if arguments is None:
                    block["invalid_arguments"] = raw
            content.append(block)  # type: ignore[arg-type]
        return content


def _results_note(content: Any) -> str:
    """A web search's results as words for the record: each page's title and URL (or the
    error the search ended in)."""
    if not isinstance(content, list):
        code = getattr(content, "error_code", None) or "error"
        return f"[web search failed: {code}]\n"
    lines = [f"- {getattr(r, 'title', '') or ''} <{getattr(r, 'url', '')}>" for r in content]
    return "[web search results]\n" + "\n".join(lines) + "\n"


# --- SDK exceptions -> Failure ---------------------------------------------------------------


def describe_error(exc: BaseException) -> Failure:
    """An SDK (or transport) exception as a readable, classified `Failure`."""
    if isinstance(exc, anthropic.APIStatusError):
        error_type, text = _error_body(exc.body)
        if exc.status_code == 200:  # an ``error`` event in the middle of a stream
            return Failure(f"{error_type or 'error'}: {text}",
                           retryable=error_type in _TRANSIENT_TYPES)
        headers = exc.response.headers
        retryable = exc.status_code in (408, 429) or exc.status_code >= 500
        verdict = headers.get("x-should-retry")
        if verdict in ("true", "false"):
            retryable = verdict == "true"
        label = f"{exc.status_code} {error_type}" if error_type else str(exc.status_code)
        return Failure(f"{label}: {text}", retryable, parse_retry_after(headers))
    if isinstance(exc, (anthropic.APITimeoutError, httpx2.TimeoutException)):
        return Failure("timed out waiting for the server", retryable=True, stall=True)
    if isinstance(exc, anthropic.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        return Failure(f"connection failed: {cause or exc}", retryable=True)
    if isinstance(exc, httpx2.TransportError):
        return Failure(f"connection lost: {exc}", retryable=True)
    if isinstance(exc, anthropic.APIError):
        return Failure(f"{type(exc).__name__}: {exc}", retryable=False)
    return Failure(f"unexpected {type(exc).__name__}: {exc}", retryable=False)


def _error_body(body: object) -> tuple[str | None, str]:
    """(error type, message) from an Anthropic error body {"type": "error", "error": {...}}."""
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            return error.get("type"), str(error.get("message", ""))
        return None, json.dumps(body)[:500]
    return None, str(body or "")[:500]
