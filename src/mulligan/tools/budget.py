"""Output budgets: how much of a long text one tool result may carry.

Whatever a tool returns is re-read, and paid for, on every later turn, so each result is held
to MAX_LINES lines and MAX_BYTES bytes. Sizes are UTF-8 bytes, not characters ("é" is two), and
only whole lines are kept: half a line invites the model to act on text that is not there.
`truncate_head` keeps the start (files: read on with an offset); `truncate_tail` keeps the end
(command output, where the verdict comes last). Neither adds a note; the tool that calls them
knows how the model can get the rest and says so. Nothing here raises.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["MAX_BYTES", "MAX_LINES", "Truncation", "cut_utf8_head", "cut_utf8_tail",
           "split_lines", "truncate_head", "truncate_tail"]

MAX_LINES = 2000
MAX_BYTES = 50_000


class Truncation(NamedTuple):
    """What a budget kept: `text` (whole lines, newlines included), `shown` lines of `total`."""

    text: str
    shown: int
    total: int

    @property
    def truncated(self) -> bool:
        return self.shown < self.total


def split_lines(text: str) -> list[str]:
    """`text` as lines with their "\\n" kept; a last line without one is still a line. Only
    "\\n" ends a line (as for wc -l and editors), unlike str.splitlines, which also splits at
    form feeds and Unicode separators and would make line numbers disagree with the file."""
    if not text:
        return []
    lines = text.split("\n")
    last = lines.pop()
    kept = [line + "\n" for line in lines]
    if last:
        kept.append(last)
    return kept


def truncate_head(text: str, max_lines: int = MAX_LINES, max_bytes: int = MAX_BYTES) -> Truncation:
    """The longest run of whole lines from the start of `text` within both budgets. If the first
    line alone is over `max_bytes`, nothing is kept (shown 0); the caller decides what to say."""
    lines = split_lines(text)
    kept: list[str] = []
    size = 0
    for line in lines:
        size += len(line.encode("utf-8"))
        if len(kept) == max_lines or size > max_bytes:
            break
        kept.append(line)
    return Truncation("".join(kept), len(kept), len(lines))


def truncate_tail(text: str, max_lines: int = MAX_LINES, max_bytes: int = MAX_BYTES) -> Truncation:
    """The longest run of whole lines from the end of `text` within both budgets. If the last
    line alone is over `max_bytes`, nothing is kept (shown 0); the caller decides what to say."""
    lines = split_lines(text)
    kept: list[str] = []
    size = 0
    for line in reversed(lines):
        size += len(line.encode("utf-8"))
        if len(kept) == max_lines or size > max_bytes:
            break
        kept.append(line)
    kept.reverse()
    return Truncation("".join(kept), len(kept), len(lines))


def cut_utf8_head(text: str, max_bytes: int) -> str:
    """The longest start of `text` whose UTF-8 encoding fits `max_bytes`, never half a character.
    For the one case whole lines cannot serve: a single line bigger than the whole budget."""
    return text.encode("utf-8")[:max_bytes].decode("utf-8", errors="ignore")


def cut_utf8_tail(text: str, max_bytes: int) -> str:
    """The longest end of `text` whose UTF-8 encoding fits `max_bytes`, never half a character."""
    data = text.encode("utf-8")
    return data[max(0, len(data) - max_bytes):].decode("utf-8", errors="ignore")
