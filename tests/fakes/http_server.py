"""A scripted HTTP server on 127.0.0.1 for provider tests (http.server, ThreadingHTTPServer).

Each POST takes the next item of the script and answers with it:

- `Sse(events)`: 200, ``text/event-stream``, chunked, one chunk per event; `cut_after=n` sends
  n events and then drops the connection mid-body (no terminating chunk); `stall_after=n`
  sends n events and then goes silent until the server is closed; `delay=s` waits s seconds
  before sending the status line and headers (a server slow to start its answer);
  `holds={n: event}` sends event n only once `event` is set (a test keeps the stream at a
  point until it has seen what the client shows there, whatever the speed).
- `Status(status, body, headers)`: an error response with a JSON body; `hold=event` answers
  only once the event is set (a test keeps the answer back until it has seen what the client
  shows while it waits: a screen that lasts as long as the test needs, whatever the speed).
- `Drop()`: closes the connection without answering (a connection reset).

Every request is recorded (`requests`: path, lower-cased headers, parsed JSON body) before it
is answered. Past the end of the script the server answers 500 with "script exhausted".
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# An event is (event name or None, data): data is a dict (sent as JSON) or a raw string.
Event = tuple[str | None, "dict[str, Any] | str"]


@dataclass
class Sse:
    events: list[Event]
    cut_after: int | None = None
    stall_after: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    pace: float = 0.0  # seconds between events: a slow stream
    holds: dict[int, threading.Event] = field(default_factory=dict)


@dataclass
class Status:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    hold: threading.Event | None = None


@dataclass
class Drop:
    pass


Answer = Sse | Status | Drop


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


def sse_bytes(event: Event) -> bytes:
    name, data = event
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {name}\n" if name is not None else ""
    return (head + f"data: {payload}\n\n").encode()


class _Quiet(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up (an abort, a timeout) is part of the script, not a failure.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class ScriptedServer:
    """Start with `with ScriptedServer(script) as server:`; `server.url` is its base URL."""

    def __init__(self, script: list[Answer], *, base_path: str = "") -> None:
        self.script = list(script)
        self.requests: list[Received] = []
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._httpd = _Quiet(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,),
                                        daemon=True)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}{base_path}"

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def next_answer(self, received: Received) -> Answer:
        with self._lock:
            self.requests.append(received)
            index = len(self.requests) - 1
        if index < len(self.script):
            return self.script[index]
        return Status(500, {"error": {"type": "api_error", "message": "script exhausted"}})


def _handler_for(server: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet tests

        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            length = int(self.headers.get("content-length", "0"))
            raw = self.rfile.read(length)
            try:
                body: Any = json.loads(raw)
            except ValueError:
                body = raw.decode(errors="replace")
            received = Received("POST", self.path, {k.lower(): v for k, v in self.headers.items()},
                                body)
            answer = server.next_answer(received)
            if isinstance(answer, Drop):
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)
            elif isinstance(answer, Status):
                self._status(answer)
            else:
                self._sse(answer)

        def _held(self, hold: threading.Event) -> bool:
            # Until the test sets it; False: the server closed first.
            while not hold.wait(0.02):
                if server.stopping.is_set():
                    return False
            return True

        def _status(self, answer: Status) -> None:
            if answer.hold is not None and not self._held(answer.hold):
                return
            data = json.dumps(answer.body).encode()
            self.send_response(answer.status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for name, value in answer.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _sse(self, answer: Sse) -> None:
            if answer.delay and server.stopping.wait(answer.delay):
                return
            self.send_response(200)
            self.send_header("content-type", "text/event-stream; charset=utf-8")
            self.send_header("cache-control", "no-cache")
            self.send_header("transfer-encoding", "chunked")
            for name, value in answer.headers.items():
                self.send_header(name, value)
            self.end_headers()
            for sent, event in enumerate(answer.events):
                if sent == answer.cut_after:
                    self._drop()
                    return
                if sent == answer.stall_after:
                    self._stall()
                    return
                if answer.pace and sent and server.stopping.wait(answer.pace):
                    return
                if sent in answer.holds and not self._held(answer.holds[sent]):
                    return
                self._chunk(sse_bytes(event))
            if answer.stall_after is not None and answer.stall_after >= len(answer.events):
                self._stall()
                return
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _drop(self) -> None:
            # Half a chunk, then gone: the client sees the body end mid-message.
            self.wfile.write(b"40\r\ndata: {\"type\": \"cont")
            self.wfile.flush()
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)

        def _stall(self) -> None:
            while not server.stopping.wait(0.02):
                pass
            self.close_connection = True

    return Handler


@contextlib.contextmanager
def server_factory(base_path: str = "") -> Any:
    """For a provider test's `serve` fixture: yields start(*script) -> a running
    ScriptedServer, and closes every server it started on the way out."""
    started: list[ScriptedServer] = []

    def start(*script: Any) -> ScriptedServer:
        server = ScriptedServer(list(script), base_path=base_path).__enter__()
        started.append(server)
        return server

    try:
        yield start
    finally:
        for server in started:
            server.close()


def stream_all(model: Any, messages: list[Any], tools: list[Any] | None = None,
               abort: threading.Event | None = None) -> tuple[list[Any], Any]:
    """Every delta of one `model.stream` call, checked to end with exactly one done:
    (the deltas before it, the final message)."""
    deltas = list(model.stream("You are terse.", messages, tools or [], abort=abort))
    assert [d["type"] for d in deltas].count("done") == 1 and deltas[-1]["type"] == "done"
    return deltas[:-1], deltas[-1]["message"]
