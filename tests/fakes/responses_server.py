"""The OpenAI Responses API streaming wire format, for the scripted server.

Builders for the events a real ``POST /v1/responses`` with ``"stream": true`` sends, in the
shapes of OpenAI's API reference ("Streaming events"): ``event: response.created`` ...
``response.output_item.added``, ``response.output_text.delta``,
``response.function_call_arguments.delta``, ``response.reasoning_summary_text.delta``,
``response.output_item.done`` ... ``response.completed`` (with usage), each data object carrying
its ``type`` and a ``sequence_number``; and the JSON error responses.
"""

from __future__ import annotations

import itertools
from typing import Any

from fakes.http_server import Event, Sse, Status

MODEL = "gpt-5.5-2026-03-05"
RESPONSE_ID = "resp_68af4030592c81938ec0a5fbab4a3e9f05438e46b5f69a3b"


def _response(status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None = None,
              **extra: Any) -> dict[str, Any]:
    return {"id": RESPONSE_ID, "object": "response", "created_at": 1764460800,
            "status": status, "model": MODEL, "output": output, "parallel_tool_calls": True,
            "tool_choice": "auto", "tools": [], "usage": usage, "error": None,
            "incomplete_details": None, "instructions": None, "metadata": {},
            "temperature": 1.0, "top_p": 1.0, **extra}


class Reply:
    """Output items for one response; `sse()` puts the whole stream together."""

    def __init__(self) -> None:
        self.items: list[list[Event]] = []
        self.done: list[dict[str, Any]] = []

    def text(self, *pieces: str,
             item_id: str = "msg_67ccd3acc8d48190a77525dc6de64b4104becb25c45c1d41") -> Reply:
        index = len(self.done)
        whole = "".join(pieces)
        item = {"id": item_id, "type": "message", "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": whole, "annotations": []}]}
        events: list[Event] = [
            _ev("response.output_item.added", output_index=index, item={
                **item, "status": "in_progress", "content": []}),
            _ev("response.content_part.added", item_id=item_id, output_index=index,
                content_index=0, part={"type": "output_text", "text": "", "annotations": []}),
            *(_ev("response.output_text.delta", item_id=item_id, output_index=index,
                  content_index=0, delta=p, logprobs=[]) for p in pieces),
            _ev("response.output_text.done", item_id=item_id, output_index=index,
                content_index=0, text=whole, logprobs=[]),
            _ev("response.content_part.done", item_id=item_id, output_index=index,
                content_index=0, part={"type": "output_text", "text": whole,
                                       "annotations": []}),
            _ev("response.output_item.done", output_index=index, item=item)]
        self.items.append(events)
        self.done.append(item)
        return self

    def call(self, call_id: str, name: str, *pieces: str) -> Reply:
        index = len(self.done)
        item_id = f"fc_{call_id}"
        whole = "".join(pieces)
        item = {"id": item_id, "type": "function_call", "status": "completed",
                "call_id": call_id, "name": name, "arguments": whole}
        self.items.append([
            _ev("response.output_item.added", output_index=index,
                item={**item, "status": "in_progress", "arguments": ""}),
            *(_ev("response.function_call_arguments.delta", item_id=item_id,
                  output_index=index, delta=p) for p in pieces),
            _ev("response.function_call_arguments.done", item_id=item_id, output_index=index,
                name=name, arguments=whole),
            _ev("response.output_item.done", output_index=index, item=item)])
        self.done.append(item)
        return self

    def reasoning(self, summary: list[str], encrypted: str,
                  item_id: str = "rs_6820f383d7c08191846711c5df8233bc0ac5ba57aafcbac7") -> Reply:
        index = len(self.done)
        item = {"id": item_id, "type": "reasoning", "encrypted_content": encrypted,
                "summary": [{"type": "summary_text", "text": s} for s in summary]}
        events: list[Event] = [_ev("response.output_item.added", output_index=index,
                                   item={**item, "summary": [], "encrypted_content": None})]
        for at, words in enumerate(summary):
            events += [
                _ev("response.reasoning_summary_part.added", item_id=item_id,
                    output_index=index, summary_index=at,
                    part={"type": "summary_text", "text": ""}),
                _ev("response.reasoning_summary_text.delta", item_id=item_id,
                    output_index=index, summary_index=at, delta=words),
                _ev("response.reasoning_summary_text.done", item_id=item_id,
                    output_index=index, summary_index=at, text=words),
                _ev("response.reasoning_summary_part.done", item_id=item_id,
                    output_index=index, summary_index=at,
                    part={"type": "summary_text", "text": words})]
        events.append(_ev("response.output_item.done", output_index=index, item=item))
        self.items.append(events)
        self.done.append(item)
        return self

    def search(self, query: str, urls: list[str]) -> Reply:
        """A server-side ``web_search_call`` item (with --web-search)."""
        index = len(self.done)
        item_id = f"ws_{index}67c9fa0c8a8c8190a1"
        item = {"id": item_id, "type": "web_search_call", "status": "completed",
                "action": {"type": "search", "query": query,
                           "sources": [{"type": "url", "url": u} for u in urls]}}
        self.items.append([
            _ev("response.output_item.added", output_index=index,
                item={"id": item_id, "type": "web_search_call", "status": "in_progress"}),
            _ev("response.web_search_call.in_progress", item_id=item_id, output_index=index),
            _ev("response.web_search_call.searching", item_id=item_id, output_index=index),
            _ev("response.web_search_call.completed", item_id=item_id, output_index=index),
            _ev("response.output_item.done", output_index=index, item=item)])
        self.done.append(item)
        return self

    def sse(self, *, input_tokens: int = 30, cached: int = 10, output_tokens: int = 9,
            reasoning_tokens: int = 4, status: str = "completed",
            incomplete: str | None = None, **sse: Any) -> Sse:
        usage = {"input_tokens": input_tokens,
                 "input_tokens_details": {"cached_tokens": cached},
                 "output_tokens": output_tokens,
                 "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
                 "total_tokens": input_tokens + output_tokens}
        events = [_ev("response.created", response=_response("in_progress", [])),
                  _ev("response.in_progress", response=_response("in_progress", []))]
        for item in self.items:
            events.extend(item)
        if incomplete is not None:
            events.append(_ev("response.incomplete", response=_response(
                "incomplete", self.done, usage, incomplete_details={"reason": incomplete})))
        else:
            events.append(_ev(f"response.{status}", response=_response(status, self.done,
                                                                         usage)))
        return Sse(_numbered(events), headers={"x-request-id": "req_8d2a1f"}, **sse)


def failed(code: str, message: str) -> Sse:
    """A stream that starts and then fails (``response.failed`` with the response's error)."""
    events = [_ev("response.created", response=_response("in_progress", [])),
              _ev("response.failed", response=_response(
                  "failed", [], error={"code": code, "message": message}))]
    return Sse(_numbered(events))


def text_reply(*pieces: str, **sse: Any) -> Sse:
    return Reply().text(*pieces).sse(**sse)


def error(status: int, message: str, type: str, code: str | None = None,
          headers: dict[str, str] | None = None) -> Status:
    return Status(status, {"error": {"message": message, "type": type, "param": None,
                                     "code": code}},
                  {"x-request-id": "req_8d2a1f", **(headers or {})})


def _ev(kind: str, **data: Any) -> Event:
    return (kind, {"type": kind, **data})


def _numbered(events: list[Event]) -> list[Event]:
    counter = itertools.count()
    out: list[Event] = []
    for name, data in events:
        assert isinstance(data, dict)
        out.append((name, {**data, "sequence_number": next(counter)}))
    return out
