"""One tool call run so that what it prints can be shown while it runs: `ToolRun`.

A tool that streams (bash: ``"streams": True``, see `tools.base.Tool`) runs on a worker thread
of its own; the caller's thread drains what it printed and hands it out as
`tool_execution_update` events, coalesced, at most one per `UPDATE_INTERVAL`, then takes the
result. Any other tool runs on the caller's thread, as `run_tool` always ran it, and gives
no update. The result is `run_tool`'s, exactly: updates are a view of the output, never part
of the record.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

from mulligan.messages import ToolCallBlock, ToolResultMessage
from mulligan.tools.base import Tool, run_tool
from mulligan.wire import ToolExecutionUpdate

__all__ = ["PENDING_CHARS", "UPDATE_INTERVAL", "ToolRun"]

UPDATE_INTERVAL = 0.1  # seconds: at most ten updates a second, whatever the tool prints
# Of output printed between two updates, the most an update carries (its end): a view of the
# command's last lines needs no more, and memory stays bounded while a consumer is slow.
PENDING_CHARS = 64 * 1024


class _Pending:
    """Output handed over by the tool's thread, waiting for the next update. `put` never
    blocks for longer than a lock held for a list append."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pieces: list[str] = []
        self._size = 0

    def put(self, text: str) -> None:
        with self._lock:
            self._pieces.append(text)
            self._size += len(text)
            if self._size > 2 * PENDING_CHARS:  # keep the end only
                joined = "".join(self._pieces)[-PENDING_CHARS:]
                self._pieces, self._size = [joined], len(joined)

    def take(self) -> str:
        with self._lock:
            pieces, self._pieces, self._size = self._pieces, [], 0
        return "".join(pieces)[-PENDING_CHARS:]


class ToolRun:
    """One tool call: ``for update in run.updates(): ...`` then ``run.result()``.

    In: the tools, the call, the run's `abort` (None: the call gets an event of its own, set
    only by ``result(stop=True)``). Out: `updates()` yields `tool_execution_update` events
    (`tool_call_id`, `tool_name`, `output`: the text printed since the last one, at most
    `PENDING_CHARS` of its end; `elapsed`: seconds since the call started) while a streaming
    tool runs, the last one with whatever it printed just before it ended; `result()` is
    the call's one toolResult, as `run_tool` makes it.

    Stopping: a streaming tool stops when `abort` is set, as run_tool's would (bash within
    `tools.shell._POLL` of it). `result(stop=True)` sets the abort first: for a caller
    leaving early (a closed generator, an exception), which still gets the result the tool
    produced rather than none. Never raises what the tool raises (run_tool's catch-all).
    """

    def __init__(self, tools: list[Tool], call: ToolCallBlock, *,
                 abort: threading.Event | None = None,
                 interval: float = UPDATE_INTERVAL) -> None:
        self._tools, self._call, self._interval = tools, call, interval
        name = call.get("name") if isinstance(call, dict) else None
        tool = next((t for t in tools if t["name"] == name), None)
        self.streams = tool is not None and bool(tool.get("streams"))
        self._abort = abort if abort is not None or not self.streams else threading.Event()
        self._result: ToolResultMessage | None = None
        self._done = threading.Event()
        self._worker: threading.Thread | None = None
        self._pending = _Pending()

    def updates(self) -> Iterator[ToolExecutionUpdate]:
        """Run the call; yield updates while it runs (none from a tool that does not
        stream, which has run by the time this ends)."""
        if not self.streams:
            self._result = run_tool(self._tools, self._call, abort=self._abort)
            self._done.set()
            return
        started = time.monotonic()
        self._worker = threading.Thread(target=self._work, daemon=True,
                                        name=f"mulligan-tool-{self._call['name']}")
        self._worker.start()
        while True:
            ended = self._done.wait(self._interval)
            output = self._pending.take()
            if output:
                yield {"type": "tool_execution_update", "tool_call_id": self._call["id"],
                       "tool_name": self._call["name"], "output": output,
                       "elapsed": round(time.monotonic() - started, 2)}
            if ended:
                return

    def result(self, *, stop: bool = False) -> ToolResultMessage:
        """The call's toolResult, once it has ended (waiting for it; with `stop`, after
        setting the abort so that it ends soon). Before `updates()` ran: runs nothing and
        raises RuntimeError."""
        if self._worker is None and not self._done.is_set():
            raise RuntimeError("ToolRun.result() before updates(): the call never ran")
        if stop and self._abort is not None:
            self._abort.set()
        if self._worker is not None:
            self._worker.join()
        assert self._result is not None
        return self._result

    def _work(self) -> None:
        try:
            self._result = run_tool(self._tools, self._call, abort=self._abort,
                                    on_output=self._pending.put)
        finally:
            self._done.set()
