"""What a running command prints, made safe and small for the screen: `printable` and
`RunningOutput`.

A command's output is data, maybe hostile: `printable` takes out every escape sequence (CSI,
OSC, DCS, their 8-bit forms) and every other control character, so nothing a command prints
can move the cursor, clear the screen, retitle the window or reorder text (bidi controls); a
carriage return keeps what a terminal would show (the progress bar's last state).
`RunningOutput` keeps the end of a running call's output (`tool_execution_update` events) and
gives its last lines, wrapped at words to a width, for the live area under the REPL's input.
Never prints; never raises on any text.
"""

from __future__ import annotations

import functools
import re
import time

from mulligan.frontends.terminal.stream import wrap_words

__all__ = ["RUNNING_LINES", "RunningOutput", "printable"]

RUNNING_LINES = 5  # the last lines of a running command shown under it
_KEEP = 8192  # characters of the output's end kept: far more than five lines need

_ESCAPES = (  # compiled at the first text that needs them (`_compiled`)
    r"\x1b\[[0-?]*[ -/]*[@-~]"            # CSI: colours, cursor moves, clears
    r"|\x1b\][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC: window title, hyperlinks, clipboard
    r"|\x1b[PX^_][^\x1b\x9c]*(?:\x1b\\|\x9c)?"  # DCS, SOS, PM, APC strings
    r"|\x1b[ -/]*[0-~]"                   # the other escapes (character sets, modes)
    r"|\x9b[0-?]*[ -/]*[@-~]"             # 8-bit CSI
    r"|[\x90\x98\x9d\x9e\x9f][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?")  # 8-bit strings
# Left after the sequences: controls other than tab and newline, DEL, C1, bidi overrides.
_CONTROLS = r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]"


def printable(text: str) -> str:
    """`text` with nothing a terminal would act on: escape sequences and control characters
    out, tabs as spaces, each line as a carriage return leaves it (its last non-empty
    part). Newlines stay."""
    if text.isprintable():  # no control (Cc), format (Cf: bidi) or separator but a space
        return text
    escapes, controls = _compiled()
    if not escapes.search(text) and not controls.search(text) and "\t" not in text:
        return text
    lines = []
    for line in escapes.sub("", text).split("\n"):
        if "\r" in line:
            line = next((part for part in reversed(line.split("\r")) if part), "")
        lines.append(controls.sub("", line.expandtabs()))
    return "\n".join(lines)


@functools.cache
def _compiled() -> tuple[re.Pattern[str], re.Pattern[str]]:
    # Not at import: the banner's lines are printable as they are, most of the time.
    return re.compile(_ESCAPES), re.compile(_CONTROLS)


class RunningOutput:
    """The output of one running tool call: `add` each update's text, `lines` to draw.
    `started` is when the call began (time.monotonic())."""

    def __init__(self, tool: str, started: float | None = None) -> None:
        self.tool = tool
        self.started = time.monotonic() if started is None else started
        self._text = ""
        self._cut = False  # the kept text starts inside a line

    def add(self, output: str) -> None:
        text = self._text + output
        if len(text) > _KEEP:
            text, self._cut = text[-_KEEP:], True
        self._text = text

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def lines(self, width: int, count: int = RUNNING_LINES) -> list[str]:
        """The last `count` lines of the output as the screen shows them: made `printable`,
        wrapped at words to `width` columns (a longer word cut). None yet: []."""
        lines = printable(self._text).split("\n")
        if self._cut:
            lines = lines[1:]  # its start is not kept: no half line
        if lines and not lines[-1]:
            lines.pop()  # the newline ending the last line
        shown: list[str] = []
        for line in lines[-count:]:
            shown.extend(wrap_words(line, width) if line else [""])
        return shown[-count:]
