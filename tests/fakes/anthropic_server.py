"""The Anthropic Messages API's streaming wire format, for the scripted server.

Builders for the SSE events a real ``POST /v1/messages`` with ``"stream": true`` sends
(message_start, content_block_start/delta/stop, ping, message_delta, message_stop, error) and
for its JSON error responses, shaped as Anthropic documents them.
"""

from __future__ import annotations

import threading
from typing import Any

from fakes.http_server import Event, Sse, Status

MODEL = "claude-sonnet-4-6"


def message_start(input_tokens: int = 12, cache_read: int = 0, cache_write: int = 0) -> Event:
    return ("message_start", {"type": "message_start", "message": {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant",
        "content": [], "model": MODEL, "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": 1,
                  "cache_creation_input_tokens": cache_write,
                  "cache_read_input_tokens": cache_read}}})


def ping() -> Event:
    return ("ping", {"type": "ping"})


def _start(index: int, block: dict[str, Any]) -> Event:
    return ("content_block_start",
            {"type": "content_block_start", "index": index, "content_block": block})


def _delta(index: int, delta: dict[str, Any]) -> Event:
    return ("content_block_delta", {"type": "content_block_delta", "index": index,
                                    "delta": delta})


def _stop(index: int) -> Event:
    return ("content_block_stop", {"type": "content_block_stop", "index": index})


def text_block(index: int, *pieces: str) -> list[Event]:
    return [_start(index, {"type": "text", "text": ""}),
            *(_delta(index, {"type": "text_delta", "text": p}) for p in pieces),
            _stop(index)]


def thinking_block(index: int, pieces: list[str], signature: str) -> list[Event]:
    return [_start(index, {"type": "thinking", "thinking": "", "signature": ""}),
            *(_delta(index, {"type": "thinking_delta", "thinking": p}) for p in pieces),
            _delta(index, {"type": "signature_delta", "signature": signature}),
            _stop(index)]


def redacted_thinking_block(index: int, data: str) -> list[Event]:
    return [_start(index, {"type": "redacted_thinking", "data": data}), _stop(index)]


def tool_use_block(index: int, id: str, name: str, *json_pieces: str) -> list[Event]:
    return [_start(index, {"type": "tool_use", "id": id, "name": name, "input": {}}),
            *(_delta(index, {"type": "input_json_delta", "partial_json": p})
              for p in json_pieces),
            _stop(index)]


def message_end(stop_reason: str = "end_turn", output_tokens: int = 7) -> list[Event]:
    return [("message_delta", {"type": "message_delta",
                               "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                               "usage": {"output_tokens": output_tokens}}),
            ("message_stop", {"type": "message_stop"})]


def error_event(type: str, message: str) -> Event:
    return ("error", {"type": "error", "error": {"type": type, "message": message}})


def reply(*blocks: list[Event], stop_reason: str = "end_turn", output_tokens: int = 7,
          input_tokens: int = 12, cache_read: int = 0, cache_write: int = 0,
          **sse: Any) -> Sse:
    """A whole streamed message: message_start, a ping, the blocks, message_delta/stop."""
    events = [message_start(input_tokens, cache_read, cache_write), ping()]
    for block in blocks:
        events.extend(block)
    events.extend(message_end(stop_reason, output_tokens))
    return Sse(events, headers={"request-id": "req_011CSHoEeqs5C35K2UUqR7Fy"}, **sse)


def text_reply(*pieces: str, **sse: Any) -> Sse:
    return reply(text_block(0, *pieces), **sse)


def error(status: int, type: str, message: str, headers: dict[str, str] | None = None,
          hold: threading.Event | None = None) -> Status:
    """`hold`: answered only once it is set (see `Status`)."""
    return Status(status, {"type": "error", "error": {"type": type, "message": message},
                           "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"},
                  {"request-id": "req_011CSHoEeqs5C35K2UUqR7Fy", **(headers or {})}, hold)


def web_search_block(index: int, id: str, query: str) -> list[Event]:
    """Anthropic's server-side web search call (``server_tool_use``), its query streamed."""
    return [_start(index, {"type": "server_tool_use", "id": id, "name": "web_search",
                           "input": {}}),
            _delta(index, {"type": "input_json_delta", "partial_json": '{"query": '}),
            _delta(index, {"type": "input_json_delta", "partial_json": f'"{query}"}}'}),
            _stop(index)]


def web_search_results_block(index: int, tool_use_id: str,
                             pages: list[tuple[str, str]]) -> list[Event]:
    """The search's results (``web_search_tool_result``): (title, url) per page."""
    return [_start(index, {"type": "web_search_tool_result", "tool_use_id": tool_use_id,
                           "content": [{"type": "web_search_result", "title": title,
                                        "url": url, "encrypted_content": "EqgfCioIARgBIiQ",
                                        "page_age": "April 30, 2026"}
                                       for title, url in pages]}),
            _stop(index)]
