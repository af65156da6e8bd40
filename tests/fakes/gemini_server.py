"""The Gemini API's streaming wire format (``POST /v1/models/{model}:streamGenerateContent
?alt=sse``), for the scripted server.

Each ``data:`` line is a ``GenerateContentResponse`` in the shape of Google's API reference:
``candidates[0].content.parts`` (``text``, ``thought: true`` parts, ``functionCall`` parts
sent whole, a ``thoughtSignature`` on the part it belongs to), ``finishReason`` on the last
chunk, ``usageMetadata`` (with ``cachedContentTokenCount`` and ``thoughtsTokenCount``) and
``modelVersion``; and the JSON error responses (``{"error": {"code", "message", "status",
"details"}}``, a 429 carrying a ``google.rpc.RetryInfo`` detail).
"""

from __future__ import annotations

from typing import Any

from fakes.http_server import Event, Sse, Status

MODEL = "gemini-2.5-pro"


def chunk(*parts: dict[str, Any], finish: str | None = None,
          usage: dict[str, Any] | None = None) -> Event:
    candidate: dict[str, Any] = {"content": {"parts": list(parts), "role": "model"},
                                 "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    data: dict[str, Any] = {"candidates": [candidate], "modelVersion": MODEL,
                            "responseId": "mTKuaOSiMJ2Xz7IPzvqLyAk"}
    if usage is not None:
        data["usageMetadata"] = usage
    return (None, data)


def text(words: str, signature: str | None = None) -> dict[str, Any]:
    part: dict[str, Any] = {"text": words}
    if signature is not None:
        part["thoughtSignature"] = signature
    return part


def thought(words: str) -> dict[str, Any]:
    return {"text": words, "thought": True}


def function_call(name: str, args: dict[str, Any], id: str | None = None,
                  signature: str | None = None) -> dict[str, Any]:
    call: dict[str, Any] = {"name": name, "args": args}
    if id is not None:
        call["id"] = id
    part: dict[str, Any] = {"functionCall": call}
    if signature is not None:
        part["thoughtSignature"] = signature
    return part


def usage(prompt: int = 40, output: int = 8, cached: int = 0, thoughts: int = 0
          ) -> dict[str, Any]:
    data = {"promptTokenCount": prompt, "candidatesTokenCount": output,
            "totalTokenCount": prompt + output + thoughts,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}]}
    if cached:
        data["cachedContentTokenCount"] = cached
    if thoughts:
        data["thoughtsTokenCount"] = thoughts
    return data


def reply(*chunks: list[dict[str, Any]], finish: str = "STOP", prompt: int = 40,
          output: int = 8, cached: int = 0, thoughts: int = 0, **sse: Any) -> Sse:
    """A streamed reply: one chunk per list of parts; the last carries the finish reason and
    the usage."""
    events = [chunk(*parts) for parts in chunks[:-1]]
    events.append(chunk(*(chunks[-1] if chunks else []), finish=finish,
                        usage=usage(prompt, output, cached, thoughts)))
    return Sse(events, **sse)


def text_reply(*pieces: str, **sse: Any) -> Sse:
    return reply(*([text(p)] for p in pieces), **sse)


def error(code: int, status: str, message: str, retry_delay: str | None = None) -> Status:
    details = [{"@type": "type.googleapis.com/google.rpc.RetryInfo",
                "retryDelay": retry_delay}] if retry_delay else []
    return Status(code, {"error": {"code": code, "message": message, "status": status,
                                   "details": details}})
