"""Every event as one line of JSON, for another program to read (``mulligan --json``)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from typing import Any, TextIO

import orjson

from mulligan.messages import is_failed


class JsonRenderer:
    """``renderer(event)`` writes `event` as one line of JSON to `out` and flushes it, so a
    reader at the other end of a pipe sees each event as it happens. Keys and values are the
    event's own (see mulligan.loop), but for message_update, which is written without its
    `message` (the whole partial reply again, on every delta: a 1.7 KB answer made 334 KB of
    JSON lines): its `delta` is what is new. `session(file)` writes the first line, naming
    the session file. `scrub` (the app's `EventScrubber`) turns each event into the events
    shown in its place, with the known keys redacted. Something that is not JSON
    (it should never be there) is written as its ``str``. An integer over 64 bits (a model may
    put one in a tool call's arguments) is written as the number it is.

    ``status`` folds the run into an exit code: 1 when the last assistant message of the run
    failed (stop_reason "error" or "aborted"), else 0.
    """

    def __init__(self, out: TextIO | None = None, *,
                 scrub: Callable[[Mapping[str, Any]], list[dict[str, Any]]] | None = None
                 ) -> None:
        self.out = out if out is not None else sys.stdout
        self.status = 0
        self._scrub = scrub

    def session(self, file: str | None, cwd: str) -> None:
        """The first line: which session file the run is recorded in (None: not saved)."""
        self({"type": "session", "file": file, "cwd": cwd})

    def __call__(self, event: Mapping[str, Any]) -> None:
        if self._scrub is None:
            self._write(event)
            return
        for shown in self._scrub(event):
            self._write(shown)

    def _write(self, event: Mapping[str, Any]) -> None:
        if event.get("type") == "message_update":
            event = {"type": "message_update", "delta": event.get("delta")}
        try:
            line = orjson.dumps(event, default=str).decode()
        except TypeError:  # orjson refuses integers over 64 bits; the standard library does not
            line = json.dumps(event, default=str, ensure_ascii=False, separators=(",", ":"))
        self.out.write(line + "\n")
        self.out.flush()
        if event["type"] == "message_end" and event["message"]["role"] == "assistant":
            self.status = 1 if is_failed(event["message"]) else 0
        elif event["type"] == "hook" and event.get("event") == "user_prompt_submit" \
                and event.get("outcome") == "blocked":
            self.status = 1  # the prompt was never sent
