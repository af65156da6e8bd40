"""What the REPL prints before its first prompt -- the banner, a folder's extension problems,
and at the end the "session saved" line -- printed without rich: rich's import was a tenth of
the time to the first prompt (issue 29), and everything after the prompt is rich's.

In: the Controller (`banner`); lines and a style, "dim" or "yellow" (`print_lines`). Out:
text on stdout, as rich prints these plain lines: each wrapped at spaces to the terminal's
width the way rich wraps (`_wrapped`: a word longer than a line starts a line and is folded),
escape sequences and control characters taken out (a folder's name is data,
`terminal.running.printable`), styled only on a terminal that takes styles (not under
TERM=dumb; no colour under NO_COLOR). A closed terminal's OSError is the caller's.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Iterable
from typing import TextIO

from mulligan import __version__
from mulligan.app import Controller, model_label
from mulligan.brief import count
from mulligan.frontends.terminal.running import printable

__all__ = ["banner", "print_lines"]

_STYLES = {"dim": "\x1b[2m", "yellow": "\x1b[33m"}
_COLOURS = {"yellow"}  # what NO_COLOR turns off (dim is not a colour)
_WORD = re.compile(r"\s*\S+\s*")
# Printable characters below the combining marks (U+0300) take one cell each, as wcwidth
# counts them: ASCII, Latin, the banner's "·". (A regular expression of that range took 2 ms
# to compile.)
_ONE_CELL_BELOW = "\u0300"


def banner(controller: Controller) -> list[str]:
    """The lines printed when the REPL starts: version, model, folder, session."""
    if controller.where is None:
        where = "not saved (--no-session)"
    elif controller.started:
        where = f"{controller.where} ({count(len(controller.harness.messages), 'message')})"
    else:
        where = "new (written at the first message)"
    lines = [f"mulligan {__version__} · model {model_label(controller.model)} · "
             f"{controller.cwd}", f"session: {where}"]
    if controller.model_notice:
        lines.append(controller.model_notice)
    if controller.notice:
        lines.append(controller.notice)
    if controller.permissions is not None:
        lines.append(controller.permissions.describe() + " (/permissions to change)")
    lines.append("/help for commands · Enter sends · Alt-Enter new line · Ctrl-D quits")
    return lines


def print_lines(lines: Iterable[str], style: str, out: TextIO | None = None) -> None:
    """`lines` on `out` (default stdout) in `style`: see the module docstring."""
    out = sys.stdout if out is None else out
    terminal = out.isatty() and os.environ.get("TERM", "") not in ("dumb", "unknown")
    if style in _COLOURS and "NO_COLOR" in os.environ:
        terminal = False
    start, end = (_STYLES[style], "\x1b[0m") if terminal else ("", "")
    width = shutil.get_terminal_size().columns  # COLUMNS, else the terminal's, else 80
    shown: list[str] = []
    for line in lines:
        for part in printable(line).split("\n"):
            shown.extend(f"{start}{piece}{end}\n" if piece else "\n"
                         for piece in _wrapped(part, max(width, 1)))
    out.write("".join(shown))
    out.flush()


def _wrapped(text: str, width: int) -> list[str]:
    """`text` (one line) cut into lines of at most `width` cells where rich cuts it (its
    `divide_line` and `Text.rstrip_end`): at the start of a word that does not fit; a word
    longer than a whole line starts a line and is folded across as many as it needs; the
    spaces that would end a line past the width left out."""
    breaks: list[int] = []
    used = 0  # cells on the line being filled
    for match in _WORD.finditer(text):
        start, word = match.start(), match.group()
        length = _cells(word.rstrip())
        if width - used >= length:
            used += _cells(word)
        elif length > width:
            pieces = _chopped(word, width)
            for piece in pieces[:-1]:
                if start:
                    breaks.append(start)
                start += len(piece)
            if start:
                breaks.append(start)
            used = _cells(pieces[-1])
        elif used and start:
            breaks.append(start)
            used = _cells(word)
    lines = [text[a:b] for a, b in zip([0, *breaks], [*breaks, len(text)], strict=True)]
    return [_fitted(line, width) for line in lines]


def _fitted(line: str, width: int) -> str:
    """`line` without the spaces at its end that would take it past `width` cells."""
    while line[-1:].isspace() and _cells(line) > width:
        line = line[:-1]
    return line


def _cells(text: str) -> int:
    if not text or text.isprintable() and max(text) < _ONE_CELL_BELOW:
        return len(text)  # wcwidth's import is for the other characters
    return sum(_cwidth(c) for c in text)


def _cwidth(char: str) -> int:
    """The cells `char` takes, as prompt_toolkit's `get_cwidth` counts them (imported here,
    that was prompt_toolkit's whole import before the instant prompt)."""
    if char.isprintable() and char < _ONE_CELL_BELOW:
        return 1
    from wcwidth import wcwidth

    return max(0, wcwidth(char))


def _chopped(word: str, width: int) -> list[str]:
    """`word` in pieces of at most `width` cells (a character wider than that alone)."""
    pieces, piece, used = [], "", 0
    for char in word:
        cells = _cwidth(char)
        if piece and used + cells > width:
            pieces.append(piece)
            piece, used = "", 0
        piece += char
        used += cells
    return [*pieces, piece]
