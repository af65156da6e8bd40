"""The OpenAI Chat Completions streaming wire format, for the scripted server.

Builders for the ``data:`` lines a real ``POST /v1/chat/completions`` with ``"stream": true``
sends (``chat.completion.chunk`` objects, the usage chunk with empty choices when
``stream_options.include_usage`` is set, and ``[DONE]``) and for its JSON error responses.
Servers on a base URL (ollama, llama.cpp, vLLM) speak the same shapes.
"""

from __future__ import annotations

from typing import Any

from fakes.http_server import Event, Sse, Status

MODEL = "gpt-4.1-2025-04-14"


def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> Event:
    return (None, {"id": "chatcmpl-AxyZ123", "object": "chat.completion.chunk",
                   "created": 1764460800, "model": MODEL, "system_fingerprint": "fp_44709d6fcb",
                   "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                "finish_reason": finish_reason}]})


def role() -> Event:
    return chunk({"role": "assistant", "content": "", "refusal": None})


def text(*pieces: str) -> list[Event]:
    return [chunk({"content": p}) for p in pieces]


def reasoning(*pieces: str) -> list[Event]:
    return [chunk({"reasoning_content": p}) for p in pieces]


def tool_call(index: int, id: str, name: str, *argument_pieces: str) -> list[Event]:
    first = chunk({"tool_calls": [{"index": index, "id": id, "type": "function",
                                   "function": {"name": name, "arguments": ""}}]})
    rest = [chunk({"tool_calls": [{"index": index, "function": {"arguments": p}}]})
            for p in argument_pieces]
    return [first, *rest]


def finish(reason: str = "stop") -> Event:
    return chunk({}, reason)


def usage(prompt: int = 20, completion: int = 5, cached: int = 0) -> Event:
    return (None, {"id": "chatcmpl-AxyZ123", "object": "chat.completion.chunk",
                   "created": 1764460800, "model": MODEL, "choices": [],
                   "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                             "total_tokens": prompt + completion,
                             "prompt_tokens_details": {"cached_tokens": cached}}})


DONE: Event = (None, "[DONE]")


def reply(*parts: list[Event], finish_reason: str = "stop", with_usage: bool = True,
          prompt: int = 20, completion: int = 5, cached: int = 0, **sse: Any) -> Sse:
    """A whole streamed reply: role chunk, the parts, the finish chunk, usage, [DONE]."""
    events = [role()]
    for part in parts:
        events.extend(part)
    events.append(finish(finish_reason))
    if with_usage:
        events.append(usage(prompt, completion, cached))
    events.append(DONE)
    return Sse(events, headers={"x-request-id": "req_7c1f0e8a9b"}, **sse)


def text_reply(*pieces: str, **sse: Any) -> Sse:
    return reply(text(*pieces), **sse)


def error(status: int, message: str, type: str, code: str | None = None,
          headers: dict[str, str] | None = None) -> Status:
    return Status(status, {"error": {"message": message, "type": type, "param": None,
                                     "code": code}},
                  {"x-request-id": "req_7c1f0e8a9b", **(headers or {})})
