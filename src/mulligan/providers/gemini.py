"""Google's Gemini API, streaming (``streamGenerateContent``), through the official
`google-genai` SDK. The SDK is imported only when a ``google/<id>`` model is built.

In: our system prompt, transcript and tool specs. Out: our stream deltas and one assistant
message (with "usage" and "model"). Never raises: every failure ends as an assistant message
with stop_reason "error" (or "aborted") keeping the partial content.

Shapes, ours <-> Gemini's ``contents``:
- system prompt -> ``system_instruction``; a user message -> a ``user`` content of ``text``
  and ``inline_data`` parts; toolResults -> ``function_response`` parts in a ``user`` content
  (a result's images follow as ``inline_data`` parts);
- toolCall block <-> ``function_call`` part (Gemini sends each call whole; when it gives no
  id one is made, and not sent back);
- thought parts (``thought: true``) stream as thinking; a ``thought_signature`` (Gemini's
  proof of its own reasoning, which it wants back on the part it came with) is kept in a
  thinking block with ``provider`` "google" just before that part, as base64 in
  ``encrypted_content``, and sent back on the part that follows it. Thought words are not
  sent back; another provider's thinking is not sent;
- a failed assistant message sends only its text.
Usage: "input" counts prompt tokens not read from the cache, "cache_read" those that were,
"output" the reply's tokens and the thinking's, "reasoning" the thinking's.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from typing import Any

import httpx2
from google import genai
from google.genai import errors, types

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
from mulligan.providers.retry import Backoff, parse_retry_after
from mulligan.providers.streaming import DEADLINE, IDLE_TIMEOUT, SdkModel, merge_turn
from mulligan.wire import StreamDelta, ToolSpec

_MADE_UP = "gemini_"  # the prefix of a call id we made (Gemini gave none): never sent back
_STOP: dict[str, StopReason] = {"STOP": "stop", "MAX_TOKENS": "length"}
# Finish reasons that mean the reply was withheld, not finished.
_BLOCKED = {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
            "IMAGE_SAFETY", "LANGUAGE", "OTHER"}


class GeminiModel(SdkModel):
    """A Gemini model. `name` is "google/<model_id>".

    `thinking_budget` (tokens; 0 turns thinking off where the model allows it, -1 lets the
    model decide) is sent in ``thinking_config`` with ``include_thoughts``; None leaves the
    model's default. `base_url` points the SDK elsewhere (a test server). `timeout` seconds.
    """

    provider = "google"

    def __init__(
        self, model_id: str, *, api_key: str, base_url: str | None = None,
        max_tokens: int | None = None, thinking_budget: int | None = None,
        max_retries: int | None = None, backoff: Backoff | None = None,
        sleep: Callable[[float], None] | None = None, timeout: float = 600.0,
        idle_timeout: float = IDLE_TIMEOUT, deadline: float = DEADLINE,
        context_window: int | None = None,
    ) -> None:
        super().__init__(model_id, api_key=api_key, max_retries=max_retries, backoff=backoff,
                         sleep=sleep, idle_timeout=idle_timeout, deadline=deadline,
                         context_window=context_window)
        self.max_tokens = max_tokens
        self.thinking_budget = thinking_budget
        options = types.HttpOptions(base_url=base_url, timeout=int(timeout * 1000))
        self._client = genai.Client(api_key=api_key, http_options=options)

    def __repr__(self) -> str:
        return f"GeminiModel({self.model_id!r})"

    def _params(
        self, system: str, messages: list[Message], tools: list[ToolSpec]
    ) -> dict[str, Any]:
        config: dict[str, Any] = {}
        if system:
            config["system_instruction"] = system
        if tools:
            config["tools"] = [{"function_declarations": [
                {"name": t["name"], "description": t["description"],
                 "parameters_json_schema": t["parameters"]} for t in tools]}]
            config["automatic_function_calling"] = {"disable": True}
        if self.thinking_budget is not None:
            config["thinking_config"] = {"thinking_budget": self.thinking_budget,
                                         "include_thoughts": self.thinking_budget != 0}
        if self.max_tokens is not None:
            config["max_output_tokens"] = self.max_tokens
        # As the SDK's own types, so that it writes every field as the API spells it.
        return {"model": self.model_id,
                "contents": [types.Content.model_validate(c) for c in request_contents(messages)],
                "config": types.GenerateContentConfig.model_validate(config)}

    def _open(self, params: dict[str, Any]) -> Any:
        return _Stream(self._client.models.generate_content_stream(**params))

    def _fold(self) -> _Fold:
        return _Fold()

    def _describe_error(self, exc: BaseException) -> Failure:
        return describe_error(exc)


class _Stream:
    """The SDK's stream (a generator) with the `close` the driver calls."""

    def __init__(self, chunks: Any) -> None:
        self._chunks = chunks

    def __iter__(self) -> Any:
        return iter(self._chunks)

    def close(self) -> None:
        self._chunks.close()


# --- our transcript -> Gemini contents -------------------------------------------------------


def request_contents(messages: list[Message]) -> list[dict[str, Any]]:
    """Our transcript as Gemini ``contents``: ``user`` and ``model`` turns of parts,
    consecutive same-role turns merged."""
    contents: list[dict[str, Any]] = []
    sent_calls: set[str] = set()

    def add(role: str, parts: list[dict[str, Any]]) -> None:
        merge_turn(contents, role, parts, "parts")

    for message in messages:
        if message["role"] == "user":
            add("user", input_parts(message["content"]))
        elif message["role"] == "toolResult":
            if message["tool_call_id"] not in sent_calls:
                continue
            content = message["content"]
            words = content if isinstance(content, str) else "\n".join(
                b["text"] for b in content if b["type"] == "text")
            answer: dict[str, Any] = {
                "name": message["tool_name"],
                "response": {"error": words} if message["is_error"] else {"output": words}}
            if not message["tool_call_id"].startswith(_MADE_UP):
                answer["id"] = message["tool_call_id"]
            images = [] if isinstance(content, str) else input_parts(
                [b for b in content if b["type"] == "image"])
            add("user", [{"function_response": answer}, *images])
        else:
            add("model", _model_parts(message, sent_calls))
    return contents


def input_parts(content: Content) -> list[dict[str, Any]]:
    """A user's content as ``text`` and ``inline_data`` parts (empty text left out)."""
    if isinstance(content, str):
        return [{"text": content}] if content else []
    return [{"inline_data": {"mime_type": b["mime_type"], "data": b["data"]}}
            if b["type"] == "image" else {"text": b["text"]}
            for b in content if b["type"] == "image" or b["text"]]


def _model_parts(message: AssistantMessage, sent_calls: set[str]) -> list[dict[str, Any]]:
    failed = is_failed(message)
    parts: list[dict[str, Any]] = []
    signature: str | None = None
    for block in message["content"]:
        part: dict[str, Any]
        if block["type"] == "thinking":
            if not failed and block.get("provider") == "google":
                signature = block.get("encrypted_content") or None
            continue
        if block["type"] == "text":
            if not block["text"]:
                continue
            part = {"text": block["text"]}
        elif failed:
            continue
        else:
            sent_calls.add(block["id"])
            call: dict[str, Any] = {"name": block["name"], "args": block["arguments"]}
            if not block["id"].startswith(_MADE_UP):
                call["id"] = block["id"]
            part = {"function_call": call}
        if signature is not None:
            part["thought_signature"] = base64.b64decode(signature)
            signature = None
        parts.append(part)
    return parts


# --- stream chunks -> our deltas and message -------------------------------------------------


class _Fold:
    """Folds ``GenerateContentResponse`` chunks into deltas and a message: consecutive text
    (and thought) parts are joined; each function call is a block of its own."""

    def __init__(self) -> None:
        self._blocks: list[dict[str, Any]] = []
        self._finish: str | None = None
        self._blocked: str | None = None
        self._usage: Usage = {}

    def feed(self, chunk: Any) -> list[StreamDelta]:
        if getattr(chunk, "usage_metadata", None) is not None:
            self._take_usage(chunk.usage_metadata)
        feedback = getattr(chunk, "prompt_feedback", None)
        if feedback is not None and getattr(feedback, "block_reason", None):
            self._blocked = f"the prompt was blocked ({feedback.block_reason})"
        deltas: list[StreamDelta] = []
        for candidate in (chunk.candidates or [])[:1]:
            content = candidate.content
            for part in (content.parts or []) if content is not None else []:
                deltas.extend(self._part(part))
            if candidate.finish_reason:
                self._finish = str(getattr(candidate.finish_reason, "value",
                                           candidate.finish_reason))
        return deltas

    def _part(self, part: Any) -> list[StreamDelta]:
        signature = part.thought_signature
        if signature and not part.thought:
            self._signature(signature)  # it belongs to this part: keep it just before it
        deltas: list[StreamDelta] = []
        if part.function_call is not None:
            call = part.function_call
            call_id = call.id or f"{_MADE_UP}{uuid.uuid4().hex[:24]}"
            arguments = dict(call.args or {})
            self._blocks.append({"type": "toolCall", "id": call_id, "name": call.name or "",
                                 "arguments": arguments})
            deltas.append({"type": "toolcall", "id": call_id, "name": call.name or "",
                           "delta": _json(arguments)})
        elif part.text:
            kind = "thinking" if part.thought else "text"
            last = self._blocks[-1] if self._blocks else None
            if last is not None and last["type"] == kind and not last.get("encrypted_content"):
                last[kind] += part.text
            elif kind == "thinking":
                self._blocks.append({"type": "thinking", "thinking": part.text,
                                     "provider": "google"})
            else:
                self._blocks.append({"type": "text", "text": part.text})
            deltas.append({"type": "thinking", "delta": part.text} if part.thought
                          else {"type": "text", "delta": part.text})
        if signature and part.thought:
            self._signature(signature)
        return deltas

    def _signature(self, signature: bytes) -> None:
        last = self._blocks[-1] if self._blocks else None
        encoded = base64.b64encode(signature).decode("ascii")
        if last is not None and last["type"] == "thinking" and not last.get("encrypted_content"):
            last["encrypted_content"] = encoded
        else:
            self._blocks.append({"type": "thinking", "thinking": "", "provider": "google",
                                 "encrypted_content": encoded})

    def _take_usage(self, usage: Any) -> None:
        cached = usage.cached_content_token_count or 0
        thoughts = usage.thoughts_token_count or 0
        self._usage = {"input": (usage.prompt_token_count or 0) - cached,
                       "output": (usage.candidates_token_count or 0) + thoughts,
                       "cache_read": cached}
        if thoughts:
            self._usage["reasoning"] = thoughts

    def finished(self) -> bool:
        return self._finish is not None or self._blocked is not None

    def usage(self) -> Usage | None:
        return dict(self._usage) if self._usage else None  # type: ignore[return-value]

    def partial(self) -> list[Block]:
        return [dict(b) for b in self._blocks]  # type: ignore[misc]

    def message(self) -> AssistantMessage:
        if self._blocked is not None:
            return error_message(f"google: {self._blocked}", content=self.partial())
        if self._finish in _BLOCKED or (self._finish or "STOP") not in _STOP \
                and self._finish != "FINISH_REASON_UNSPECIFIED":
            return error_message(f"google: the reply was stopped (finish reason "
                                 f"{self._finish})", content=self.partial())
        stop = _STOP.get(self._finish or "STOP", "stop")
        return assistant_message(self.partial(), "length" if stop == "length" else None)


def _retry_delay(details: Any) -> float | None:
    """The wait Gemini asks for in its error body: a ``google.rpc.RetryInfo`` detail's
    ``retryDelay`` ("3s", "0.5s"); None when there is none."""
    error = details.get("error", details) if isinstance(details, dict) else None
    for item in (error.get("details") or []) if isinstance(error, dict) else []:
        delay = item.get("retryDelay") if isinstance(item, dict) else None
        if isinstance(delay, str) and delay.endswith("s"):
            try:
                return float(delay[:-1])
            except ValueError:
                return None
    return None


def _json(value: Any) -> str:
    import json

    return json.dumps(value)


# --- SDK exceptions -> Failure ---------------------------------------------------------------


def describe_error(exc: BaseException) -> Failure:
    """An SDK (or transport) exception as a readable, classified `Failure`."""
    if isinstance(exc, errors.APIError):
        code = exc.code if isinstance(exc.code, int) else 0
        label = f"{code} {exc.status}" if exc.status else str(code)
        retryable = code in (408, 429) or code >= 500
        headers = getattr(getattr(exc, "response", None), "headers", None)
        wait = parse_retry_after(headers) if headers is not None else None
        return Failure(f"{label}: {exc.message or exc.details}", retryable,
                       wait if wait is not None else _retry_delay(exc.details))
    if isinstance(exc, httpx2.TimeoutException):
        return Failure("timed out waiting for the server", retryable=True, stall=True)
    if isinstance(exc, httpx2.TransportError):
        return Failure(f"connection failed: {exc}", retryable=True)
    return Failure(f"unexpected {type(exc).__name__}: {exc}", retryable=False)
