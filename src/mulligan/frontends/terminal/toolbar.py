"""The live area under the REPL's input: during a run, the reply's unfinished block as it is
written (wrapped at words, its last lines when it is long), or the last lines a running
command printed (`terminal.running`: made printable, wrapped, updating in place until its
folded result is printed above), and a spinner line saying what the wait is and for how long;
always the status line.

In: the run's LiveRenderer (or None), whether a permission question waits for the user, the
terminal's size and the status line. Out: prompt_toolkit formatted text. Reads, never draws.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from prompt_toolkit.formatted_text import StyleAndTextTuples

from mulligan.frontends.terminal.running import RUNNING_LINES
from mulligan.frontends.terminal.stream import wrap_words

if TYPE_CHECKING:  # the renderer (and rich) come with the first run, after the first prompt
    from mulligan.frontends.live import LiveRenderer

__all__ = ["SPINNER", "toolbar"]

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def toolbar(renderer: LiveRenderer | None, *, running: bool, asking: str | None,
            width: int, rows: int, status: str,
            more: list[str] | None = None) -> StyleAndTextTuples:
    """The lines under the input. `asking`: the tool a permission question is about (then
    the spinner says the run waits for the user, not that the tool runs); `more`: lines
    shown above the status line (parallel attempts' progress)."""
    parts: StyleAndTextTuples = []
    if renderer is not None and running:
        partial = renderer.partial()
        if partial:
            # The terminal does not wrap this area: wrap it here, at words, and keep it to
            # the rows there are (the finished part is printed above, rendered).
            lines = wrap_words(partial, width - 1)
            room = max(3, rows - 8)
            if len(lines) > room:
                lines = ["…", *lines[-(room - 1):]]
            parts.append(("", "\n".join(lines) + "\n"))
        command = renderer.running
        if command is not None and asking is None:
            for line in command.lines(width - 5, RUNNING_LINES):  # "  │ " and a spare column
                parts.append(("fg:ansicyan", "  │ "))
                parts.append(("fg:ansibrightblack", line + "\n"))
        frame = SPINNER[int(time.monotonic() * 8) % len(SPINNER)]
        took = time.monotonic() - renderer.since
        if asking is not None:
            line = f"{frame} waiting for your answer about {asking} · Ctrl-C refuses and aborts"
        else:
            line = (f"{frame} {renderer.phase} {took:.1f}s · ~{renderer.streamed // 4} tokens "
                    "· Esc or Ctrl-C aborts")
        parts.append(("class:spinner", line[:width - 1] + "\n"))
    for line in more or []:
        parts.append(("", line + "\n"))
    parts.append(("class:status", status))
    return parts
