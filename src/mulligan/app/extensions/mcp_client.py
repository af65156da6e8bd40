"""MCP servers, connected with the official `mcp` SDK on a thread of their own, and their tools
as Mulligan tool dicts (`mcp__SERVER__TOOL`).

`McpServers(servers).start()` returns at once: one asyncio loop on a daemon thread connects
every server side by side (stdio: a process; streamable HTTP: a URL), lists its tools and
keeps the connection open until `close()`. `tools(wait)` gives the tools of the servers that
are ready (waiting up to `wait` seconds for those still starting); `states()` says how each
server is. A tool's `execute` sends one `tools/call` and waits at most the server's timeout.

Never: an exception out of a tool other than `ToolError` naming the server (a server that
cannot start, has stopped, or does not answer in time); the `mcp` SDK imported when no server
is configured (this module is imported only then). What a server sends -- tool names,
descriptions, schemas, results -- is data: names are checked, text is capped, an image is
an image block and nothing is ever run or opened because a server said so.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import json
import re
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any

from mulligan.app.extensions.mcp_config import Server
from mulligan.tools import Tool, ToolError
from mulligan.tools.budget import cut_utf8_head, truncate_head

__all__ = ["McpServers", "State", "tool_name"]

DESCRIPTION_CHARS = 2000
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_SAFE = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, tool: str) -> str:
    """`mcp__SERVER__TOOL`, with characters a provider refuses in a name made `_`, at most 64."""
    return _SAFE.sub("_", f"mcp__{server}__{tool}")[:64]


@dataclass
class State:
    """How one server is: "starting", "ready", "failed" (never came up) or "stopped" (came up,
    then went away); `error` says why; `tools` are the server's own tool names."""

    server: Server
    state: str = "starting"
    error: str = ""
    tools: list[dict[str, Any]] = field(default_factory=list)
    client: Any = None
    gone: asyncio.Event | None = None
    errlog: IO[str] | None = None

    def stderr_tail(self, lines: int = 5) -> str:
        """The last lines the server wrote to stderr (a stdio server), for an error message."""
        if self.errlog is None:
            return ""
        with contextlib.suppress(OSError, ValueError):
            self.errlog.flush()
            self.errlog.seek(0)
            tail = self.errlog.read()[-4000:].strip().splitlines()[-lines:]
            return " ".join(" ".join(tail).split())[-400:]
        return ""


class McpServers:
    """The configured MCP servers of one run (see the module docstring). Thread-safe: tools
    are called from the run's worker thread, `states()` from anywhere."""

    def __init__(self, servers: list[Server]) -> None:
        self._states = {s.name: State(s) for s in servers}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._settled = threading.Condition()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> McpServers:
        """Connect every server in the background; returns at once. Idempotent."""
        if self._thread is None and self._states:
            ready = threading.Event()
            self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True,
                                            name="mulligan-mcp")
            self._thread.start()
            ready.wait()
        return self

    def states(self) -> list[State]:
        return list(self._states.values())

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until no server is still starting (at most `timeout` seconds); True if so."""
        with self._settled:
            return self._settled.wait_for(
                lambda: all(s.state != "starting" for s in self._states.values()), timeout)

    def tools(self, wait: float = 0.0) -> list[Tool]:
        """The tools of every ready server, as tool dicts; servers still starting are waited
        for up to `wait` seconds, then left out."""
        if wait:
            self.wait(wait)
        found: list[Tool] = []
        taken: set[str] = set()
        for state in self._states.values():
            if state.state != "ready":
                continue
            for spec in state.tools:
                name = tool_name(state.server.name, str(spec["name"]))
                if name in taken:  # two names made the same by the clean-up: keep the first
                    continue
                taken.add(name)
                found.append(self._tool(state, spec, name))
        return found

    def close(self, timeout: float = 5.0) -> None:
        """Disconnect every server (stdio processes are ended); idempotent."""
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join(timeout)

    # -- the tools ------------------------------------------------------------------------

    def _tool(self, state: State, spec: dict[str, Any], name: str) -> Tool:
        server, remote = state.server.name, str(spec["name"])
        schema = spec.get("input_schema")
        if not isinstance(schema, dict) or schema.get("type", "object") != "object":
            schema = {"type": "object"}
        description = str(spec.get("description") or f"The {remote} tool of MCP server "
                          f"{server}.")[:DESCRIPTION_CHARS]

        def execute(arguments: dict[str, Any], abort: threading.Event | None = None) -> Any:
            return self.call(server, remote, arguments, abort=abort)

        return {"name": name, "description": f"(MCP server {server}) {description}",
                "parameters": schema, "execute": execute, "interruptible": True}

    def call(self, server: str, tool: str, arguments: dict[str, Any], *,
             abort: threading.Event | None = None) -> Any:
        """Call `tool` on `server`: its content (text, or text and image blocks). ToolError
        naming the server when it is not running, fails, or takes longer than its timeout."""
        state = self._states.get(server)
        if state is None or self._loop is None:
            raise ToolError(f"MCP server {server} is not configured")
        if state.state != "ready":
            raise ToolError(f"MCP server {server} is not running ({state.state}"
                            f"{': ' + state.error if state.error else ''}); {tool} was not "
                            "called")
        limit = state.server.timeout
        future = asyncio.run_coroutine_threadsafe(self._call(state, tool, arguments),
                                                  self._loop)
        deadline = time.monotonic() + limit
        while True:
            try:
                result: Any = future.result(timeout=min(0.1, max(0.0, deadline
                                                                 - time.monotonic())))
                return result
            except concurrent.futures.TimeoutError:
                if abort is not None and abort.is_set():
                    future.cancel()
                    raise ToolError(f"aborted: the call to {tool} on MCP server {server} was "
                                    "cancelled") from None
                if time.monotonic() >= deadline:
                    future.cancel()
                    raise ToolError(f"MCP server {server} did not answer {tool} within "
                                    f"{limit:g} s (its timeout); the call was cancelled") \
                        from None

    async def _call(self, state: State, tool: str, arguments: dict[str, Any]) -> Any:
        assert state.gone is not None
        call = asyncio.ensure_future(state.client.call_tool(tool, arguments))
        gone = asyncio.ensure_future(state.gone.wait())
        try:
            await asyncio.wait({call, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not call.done():
                call.cancel()
        if not call.done() or call.cancelled():
            raise ToolError(_stopped(state, f"{tool} got no answer"))
        error = call.exception()
        if error is not None:
            if _closed(error):  # the process ended, or the HTTP session went away
                self._settle(state, "stopped", _with_stderr(state, "its connection closed"))
            if state.state != "ready" or state.gone.is_set():
                raise ToolError(_stopped(state, f"{tool} got no answer"))
            raise ToolError(f"MCP server {state.server.name}: {tool} failed: "
                            f"{type(error).__name__}: {str(error)[:1000]}")
        return result_content(state.server.name, tool, call.result())

    # -- the connections ------------------------------------------------------------------

    def _run(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main(ready))
        finally:
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _main(self, ready: threading.Event) -> None:
        self._stop = asyncio.Event()
        self._tasks = [asyncio.ensure_future(self._serve(s)) for s in self._states.values()]
        ready.set()
        await self._stop.wait()
        await asyncio.wait(self._tasks, timeout=5.0)

    def _settle(self, state: State, to: str, error: str = "") -> None:
        with self._settled:
            state.state, state.error = to, error
            self._settled.notify_all()

    async def _serve(self, state: State) -> None:
        """Connect, list the tools, stay connected until close(). Whatever goes wrong is the
        server's state, never an exception out of here."""
        assert self._stop is not None
        state.gone = asyncio.Event()
        task = asyncio.current_task()
        timed_out: list[bool] = []

        def too_slow() -> None:
            if state.state == "starting" and task is not None:
                timed_out.append(True)
                task.cancel()

        watchdog = asyncio.get_running_loop().call_later(state.server.timeout, too_slow)
        try:
            async with contextlib.AsyncExitStack() as stack:
                state.client = await stack.enter_async_context(_client(state, stack))
                state.tools = await _list_tools(state.client)
                watchdog.cancel()
                self._settle(state, "ready")
                await self._stop.wait()
            self._settle(state, "stopped", "closed")
        except asyncio.CancelledError:
            if not timed_out:
                raise
            self._settle(state, "failed", _with_stderr(
                state, f"did not start within {state.server.timeout:g} s"))
        except BaseException as exc:  # any failure of a server is its state, not ours
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            was = state.state
            self._settle(state, "failed" if was == "starting" else "stopped",
                         _with_stderr(state, _reason(exc)))
        finally:
            watchdog.cancel()
            state.gone.set()


def _client(state: State, stack: contextlib.AsyncExitStack) -> Any:
    """The SDK's Client for one server (stdio: its stderr kept in a temporary file). Its own
    read timeout is a little longer than the server's: `McpServers.call` says it first."""
    from mcp import Client, StdioServerParameters

    server = state.server
    if server.url is not None:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        http = create_mcp_http_client(headers=dict(server.headers))
        return Client(streamable_http_client(server.url, http_client=http),
                      read_timeout_seconds=server.timeout + 5, cache=None)
    state.errlog = stack.enter_context(tempfile.TemporaryFile(  # noqa: SIM115 (closed by stack)
        "w+", encoding="utf-8", errors="replace"))
    params = StdioServerParameters(command=str(server.command), args=list(server.args),
                                   env=dict(server.env) or None, cwd=server.cwd)
    from mcp.client.stdio import stdio_client

    return Client(stdio_client(params, errlog=state.errlog),
                  read_timeout_seconds=server.timeout + 5, cache=None)


async def _list_tools(client: Any) -> list[dict[str, Any]]:
    """Every page of the server's tools, as plain dicts (name, description, input_schema)."""
    tools: list[dict[str, Any]] = []
    cursor = None
    for _ in range(100):  # a server whose pages never end cannot hold the start forever
        page = await client.list_tools(cursor=cursor)
        for tool in page.tools:
            tools.append({"name": tool.name, "description": tool.description,
                          "input_schema": tool.input_schema})
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def result_content(server: str, tool: str, result: Any) -> Any:
    """A `CallToolResult` as a tool result's content: text, or a list of text and image
    blocks when there is an image. An error result raises ToolError with its text."""
    texts: list[str] = []
    blocks: list[dict[str, Any]] = []
    for item in result.content or []:
        kind = getattr(item, "type", "")
        if kind == "text":
            texts.append(str(item.text))
        elif kind == "image" and item.mime_type in IMAGE_TYPES and _base64(item.data):
            blocks.append({"type": "image", "mime_type": item.mime_type, "data": item.data})
        elif kind == "image":
            texts.append(f"[an image of type {item.mime_type!r} the server sent; not shown]")
        elif kind == "resource":
            texts.append(_resource(item.resource, blocks))
        elif kind == "resource_link":
            texts.append(f"[resource link: {item.uri} ({item.name})]")
        else:
            texts.append(f"[{kind or 'unknown'} content from the server; not shown]")
    if not texts and not blocks and result.structured_content is not None:
        texts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = _capped("\n".join(texts))
    if result.is_error:
        raise ToolError(f"MCP server {server}: {tool} failed: {text or '(no message)'}")
    if not blocks:
        return text
    return ([{"type": "text", "text": text}] if text else []) + blocks


def _resource(resource: Any, blocks: list[dict[str, Any]]) -> str:
    uri, mime = str(resource.uri), getattr(resource, "mime_type", None)
    if getattr(resource, "text", None) is not None:
        return f"[resource {uri}]\n{resource.text}"
    blob = getattr(resource, "blob", "")
    if mime in IMAGE_TYPES and _base64(blob):
        blocks.append({"type": "image", "mime_type": mime, "data": blob})
        return f"[resource {uri}: an image, {mime}]"
    return f"[resource {uri}: {mime or 'binary'}, {len(blob) * 3 // 4} bytes; not shown]"


def _base64(data: Any) -> bool:
    try:
        base64.b64decode(str(data), validate=True)
    except ValueError:
        return False
    return bool(data)


def _capped(text: str) -> str:
    kept = truncate_head(text)
    if not kept.truncated:
        return text
    shown = kept.text or cut_utf8_head(text, 50_000)
    return f"{shown}\n[the server's answer was cut here: {len(text)} characters in all]"


def _reason(exc: BaseException) -> str:
    """What went wrong, from an exception the SDK raised (task groups wrap them)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}"[:500] if text else type(exc).__name__


def _closed(error: BaseException) -> bool:
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED

    return isinstance(error, MCPError) and getattr(error, "code", None) == CONNECTION_CLOSED


def _with_stderr(state: State, reason: str) -> str:
    tail = state.stderr_tail()
    return f"{reason}; its stderr ends: {tail}" if tail else reason


def _stopped(state: State, what: str) -> str:
    reason = state.error or "its connection closed"
    return f"MCP server {state.server.name} stopped ({reason}); {what}"


