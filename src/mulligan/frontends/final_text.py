"""Only the answer, for ``mulligan -p "..." > answer.txt``."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, TextIO

from mulligan.messages import AssistantMessage, is_failed, text_of


class FinalTextRenderer:
    """``renderer(event)`` for each event of a run; nothing is written while the run goes on.
    At agent_end the text of the run's last assistant message goes to `out`, ending in a
    newline. If that message failed (stop_reason "error" or "aborted"), "Error: <its
    error_message>" goes to `err` instead and ``status`` becomes 1; otherwise ``status`` is 0.
    A run with no assistant message at all is a failure too. Each agent_start starts afresh.
    """

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        self.status = 0
        self.last: AssistantMessage | None = None  # the newest assistant message of this run

    def __call__(self, event: Mapping[str, Any]) -> None:
        kind = event["type"]
        if kind == "agent_start":
            self.last = None
        elif kind == "message_end" and event["message"]["role"] == "assistant":
            self.last = event["message"]
        elif kind == "agent_end":
            self._finish()
        elif kind == "hook" and event.get("event") == "user_prompt_submit" \
                and event.get("outcome") == "blocked":  # the prompt was never sent
            self._fail(f"a user_prompt_submit hook blocked the prompt: "
                       f"{str(event.get('stderr', '')).strip() or event.get('command')}")

    def _finish(self) -> None:
        last = self.last
        if last is None:
            self._fail("the run ended without a reply")
        elif is_failed(last):
            self._fail(last.get("error_message") or f"the reply {last['stop_reason']}")
        else:
            self.status = 0
            words = text_of(last)
            self.out.write(words if words.endswith("\n") else words + "\n")
            self.out.flush()

    def _fail(self, reason: str) -> None:
        self.status = 1
        self.err.write(f"Error: {reason}\n")
        self.err.flush()
