"""OpenAI Chat Completions, streaming, through the official `openai` SDK -- and through it every
OpenAI-compatible server (ollama, llama.cpp server, vLLM, LM Studio, OpenRouter) on a base URL.

In: our system prompt, transcript and tool specs. Out: our stream deltas and one assistant
message (with "usage" when the server reports it, and "model"). Never raises: every failure
ends as an assistant message with stop_reason "error" (or "aborted") keeping the partial text.

Shapes, ours <-> Chat Completions':
- system prompt -> a first ``system`` message; toolCall blocks <-> ``tool_calls`` on the
  assistant message (arguments as a JSON string); toolResult -> a ``tool`` message;
- tool calls stream as fragments keyed by ``index``: the first carries id and name, the rest
  pieces of the arguments string; they are put together here;
- ``reasoning_content`` / ``reasoning`` deltas (vLLM, llama.cpp, ollama, OpenRouter) become
  thinking; thinking is never sent back; ``refusal`` deltas are shown as text and end the
  message as an error that keeps them;
- a failed assistant message sends only its text; a tool result whose call was not sent is not
  sent either;
- images in a user message -> ``image_url`` parts with a data: URL; a ``tool`` message holds
  only text, so a tool result's images are sent in a user message after that reply's results
  (the tool message keeps a note of each in its place).
Usage: "input" counts prompt tokens not read from the cache, "cache_read" those that were.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx2
import openai

from mulligan.messages import (
    AssistantMessage,
    Block,
    Content,
    ImageBlock,
    Message,
    StopReason,
    ToolCallBlock,
    Usage,
    assistant_message,
    content_text,
    error_message,
    images_in,
    is_failed,
)
from mulligan.providers.config import is_openai_itself
from mulligan.providers.errors import Failure
from mulligan.providers.retry import Backoff, parse_retry_after
from mulligan.providers.streaming import (
    DEADLINE,
    IDLE_TIMEOUT,
    SdkModel,
    append_text,
    parse_arguments,
    settled,
)
from mulligan.wire import StreamDelta, ToolSpec

_STOP: dict[str, StopReason] = {"stop": "stop", "tool_calls": "toolUse",
                                "function_call": "toolUse", "length": "length"}


class OpenAIChatModel(SdkModel):
    """A chat model over /chat/completions. `name` is "openai/<model_id>".

    `base_url` points the SDK at another server ("http://localhost:11434/v1" for ollama).
    `max_tokens`, when given, is sent as ``max_completion_tokens`` to OpenAI (no base URL, or
    one on api.openai.com) and as ``max_tokens`` to any other server (omitted otherwise: the
    server decides).
    `include_usage` asks for the final usage chunk (``stream_options``).
    `backoff`/`max_retries`, `sleep` and `timeout` as for `AnthropicModel`.
    """

    provider = "openai"

    def __init__(
        self, model_id: str, *, api_key: str, base_url: str | None = None,
        max_tokens: int | None = None, max_retries: int | None = None,
        backoff: Backoff | None = None, sleep: Callable[[float], None] | None = None,
        timeout: float = 600.0, include_usage: bool = True,
        idle_timeout: float = IDLE_TIMEOUT, deadline: float = DEADLINE,
        context_window: int | None = None,
    ) -> None:
        super().__init__(model_id, api_key=api_key, max_retries=max_retries, backoff=backoff,
                         sleep=sleep, idle_timeout=idle_timeout, deadline=deadline,
                         context_window=context_window)
        self.base_url = base_url
        self.max_tokens = max_tokens
        self.include_usage = include_usage
        self.reasoning_effort: str | None = None  # "low", "medium", "high" (--thinking)
        self._client = openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=0,
                                     timeout=timeout)

    def __repr__(self) -> str:
        return f"OpenAIChatModel({self.model_id!r}, base_url={self.base_url!r})"

    def _params(
        self, system: str, messages: list[Message], tools: list[ToolSpec]
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.model_id,
                                  "messages": request_messages(system, messages)}
        if tools:
            params["tools"] = [{"type": "function", "function": {
                "name": t["name"], "description": t["description"],
                "parameters": t["parameters"]}} for t in tools]
        if self.max_tokens is not None:
            # OpenAI's own reasoning models refuse max_tokens; compatible servers know only it.
            limit = "max_completion_tokens" if is_openai_itself(self.base_url) else "max_tokens"
            params[limit] = self.max_tokens
        if self.include_usage:
            params["stream_options"] = {"include_usage": True}
        if self.reasoning_effort is not None:
            params["reasoning_effort"] = self.reasoning_effort
        return params

    def _open(self, params: dict[str, Any]) -> Any:
        return self._client.chat.completions.create(**params, stream=True)

    def _fold(self) -> _Fold:
        return _Fold()

    def _describe_error(self, exc: BaseException) -> Failure:
        return describe_error(exc)


# --- our transcript -> Chat Completions messages ---------------------------------------------


def request_messages(system: str, messages: list[Message]) -> list[dict[str, Any]]:
    """Our transcript as Chat Completions ``messages``, the system prompt first."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    sent_calls: set[str] = set()
    # Images a tool returned: a ``tool`` message holds text only, so they follow the results
    # of that reply in one user message.
    pending: list[dict[str, Any]] = []
    for message in messages:
        if pending and message["role"] != "toolResult":
            out.append({"role": "user", "content": pending})
            pending = []
        if message["role"] == "user":
            out.append({"role": "user", "content": user_content(message["content"])})
        elif message["role"] == "toolResult":
            if message["tool_call_id"] in sent_calls:
                content = message["content"]
                out.append({"role": "tool", "tool_call_id": message["tool_call_id"],
                            "content": content_text(content) if images_in(content)
                            else content})
                if images_in(content):
                    pending.append({"type": "text",
                                    "text": f"The images {message['tool_name']} returned "
                                            f"(call {message['tool_call_id']}):"})
                    pending.extend(image_part(b) for b in images_in(content))
        else:
            words = "".join(b["text"] for b in message["content"] if b["type"] == "text")
            calls = [] if is_failed(message) else [
                b for b in message["content"] if b["type"] == "toolCall"]
            if not words and not calls:
                continue
            turn: dict[str, Any] = {"role": "assistant", "content": words or None}
            if calls:
                sent_calls.update(c["id"] for c in calls)
                turn["tool_calls"] = [{"id": c["id"], "type": "function", "function": {
                    "name": c["name"], "arguments": json.dumps(c["arguments"])}} for c in calls]
            out.append(turn)
    if pending:
        out.append({"role": "user", "content": pending})
    return out


def user_content(content: Content) -> str | list[dict[str, Any]]:
    """A user message's content for Chat Completions: a string as it is; blocks as ``text``
    and ``image_url`` parts (the image as a data: URL)."""
    if isinstance(content, str):
        return content
    return [image_part(b) if b["type"] == "image" else {"type": "text", "text": b["text"]}
            for b in content]


def image_part(block: ImageBlock) -> dict[str, Any]:
    """An image block as an ``image_url`` content part with a data: URL."""
    return {"type": "image_url",
            "image_url": {"url": f"data:{block['mime_type']};base64,{block['data']}"}}


# --- stream chunks -> our deltas and message -------------------------------------------------


@dataclass
class _ToolCall:
    id: str
    name: str
    pieces: list[str] = field(default_factory=list)


class _Fold:
    """Folds ``chat.completion.chunk`` objects into deltas and a message. Text and thinking
    are kept as blocks in arrival order; tool calls by their stream index."""

    def __init__(self) -> None:
        self._blocks: list[Block] = []
        self._calls: list[_ToolCall] = []
        self._by_index: dict[int, _ToolCall] = {}
        self._finish: str | None = None
        self._refused = False
        self._usage: Usage = {}

    def feed(self, chunk: Any) -> list[StreamDelta]:
        if getattr(chunk, "usage", None) is not None:
            self._take_usage(chunk.usage)
        deltas: list[StreamDelta] = []
        for choice in chunk.choices or []:
            if choice.index not in (0, None):
                continue
            delta = choice.delta
            if delta is not None:
                reasoning = (getattr(delta, "reasoning_content", None)
                             or getattr(delta, "reasoning", None))
                if isinstance(reasoning, str) and reasoning:
                    self._add("thinking", reasoning)
                    deltas.append({"type": "thinking", "delta": reasoning})
                if delta.content:
                    self._add("text", delta.content)
                    deltas.append({"type": "text", "delta": delta.content})
                refusal = getattr(delta, "refusal", None)
                if isinstance(refusal, str) and refusal:
                    # Shown and kept as text; the message then ends as an error.
                    self._refused = True
                    self._add("text", refusal)
                    deltas.append({"type": "text", "delta": refusal})
                for fragment in delta.tool_calls or []:
                    deltas.append(self._tool_fragment(fragment))
            if choice.finish_reason:
                self._finish = choice.finish_reason
        return deltas

    def _add(self, kind: str, words: str) -> None:
        last = self._blocks[-1] if self._blocks else None
        if kind == "text":
            if last is not None and last["type"] == "text":
                append_text(last, "text", words)
            else:
                self._blocks.append({"type": "text", "text": words})
        elif last is not None and last["type"] == "thinking":
            append_text(last, "thinking", words)
        else:
            self._blocks.append({"type": "thinking", "thinking": words})

    def _tool_fragment(self, fragment: Any) -> StreamDelta:
        index = fragment.index if fragment.index is not None else len(self._calls)
        call = self._by_index.get(index)
        # Some servers reuse index 0 for every call of a reply: a new id means a new call.
        if call is None or (fragment.id and call.pieces and fragment.id != call.id):
            # A server that sends no id: make one that no other reply of the session has
            # (a repeated id would pair results with the wrong call, and Anthropic refuses
            # a transcript that repeats one).
            call = _ToolCall(fragment.id or f"call_{uuid.uuid4().hex[:24]}", "")
            self._calls.append(call)
            self._by_index[index] = call
        function = fragment.function
        if function is not None and function.name and not call.name:
            call.name = function.name
        piece = (function.arguments if function is not None else None) or ""
        if piece:
            call.pieces.append(piece)
        return {"type": "toolcall", "id": call.id, "name": call.name, "delta": piece}

    def _take_usage(self, usage: Any) -> None:
        details = getattr(usage, "prompt_tokens_details", None)
        cached = (getattr(details, "cached_tokens", None) or 0) if details is not None else 0
        prompt = getattr(usage, "prompt_tokens", None) or 0
        self._usage = {"input": prompt - cached,
                       "output": getattr(usage, "completion_tokens", None) or 0,
                       "cache_read": cached}

    def finished(self) -> bool:
        return self._finish is not None

    def usage(self) -> Usage | None:
        return dict(self._usage) if self._usage else None  # type: ignore[return-value]

    def partial(self) -> list[Block]:
        # A partial reply's tool calls may stop mid-arguments: keep none of them.
        return [settled(b) for b in self._blocks]  # type: ignore[misc]

    def message(self) -> AssistantMessage:
        if self._finish == "content_filter":
            return error_message("openai: the reply was stopped by the content filter",
                                 content=self.partial())
        if self._refused:
            return error_message("openai: the model declined to answer (refusal)",
                                 content=self.partial())
        stop = _STOP.get(self._finish or "stop", "stop")
        content = self.partial()
        for call in self._calls:
            raw = "".join(call.pieces)
            arguments = parse_arguments(raw)
            if arguments is None and stop == "length":
                continue  # cut off mid-arguments by the token limit
            block: ToolCallBlock = {"type": "toolCall", "id": call.id, "name": call.name,
                                    "arguments": arguments or {}}
            if arguments is None:
                block["invalid_arguments"] = raw
            content.append(block)
        has_calls = any(b["type"] == "toolCall" for b in content)
        if stop != "length":
            stop = "toolUse" if has_calls else "stop"
        return assistant_message(content, stop)


# --- SDK exceptions -> Failure ---------------------------------------------------------------


def describe_error(exc: BaseException) -> Failure:
    """An SDK (or transport) exception as a readable, classified `Failure`."""
    if isinstance(exc, openai.APIStatusError):
        code, text = _error_body(exc.body)
        retryable = exc.status_code in (408, 429) or exc.status_code >= 500
        verdict = exc.response.headers.get("x-should-retry")
        if verdict in ("true", "false"):
            retryable = verdict == "true"
        label = f"{exc.status_code} {code}" if code else str(exc.status_code)
        return Failure(f"{label}: {text}", retryable, parse_retry_after(exc.response.headers))
    if isinstance(exc, (openai.APITimeoutError, httpx2.TimeoutException)):
        return Failure("timed out waiting for the server", retryable=True, stall=True)
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        return Failure(f"connection failed: {cause or exc}", retryable=True)
    if isinstance(exc, httpx2.TransportError):
        return Failure(f"connection lost: {exc}", retryable=True)
    if isinstance(exc, openai.APIError):
        # An error object sent in place of a chunk, mid-stream (OpenRouter, vLLM): transient
        # unless its code is an HTTP status saying the request itself was wrong.
        code = exc.body.get("code") if isinstance(exc.body, dict) else None
        status = int(code) if isinstance(code, int | str) and str(code).isdigit() else None
        if status is not None and 400 <= status < 500 and status not in (408, 429):
            return Failure(f"the server sent an error: {status}: {exc.message}",
                           retryable=False)
        return Failure(f"the server sent an error: {exc.message}", retryable=True)
    return Failure(f"unexpected {type(exc).__name__}: {exc}", retryable=False)


def _error_body(body: object) -> tuple[str | None, str]:
    """(code or type, message) from an OpenAI error object {"message", "type", "code"}."""
    if isinstance(body, dict):
        code = body.get("code") or body.get("type")
        return (str(code) if code else None), str(body.get("message", json.dumps(body)[:500]))
    return None, str(body or "")[:500]
