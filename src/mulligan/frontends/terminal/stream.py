"""A reply's Markdown as it streams: finished blocks rendered and printed once, the block
still being written kept apart for the live area under the prompt.

In: text deltas (`add`), then `end()`. Out: rendered lines to print (rich `Text`, each
printed exactly once, in order) and `tail()`, the raw text of the unfinished block. A block is
finished at a blank line outside a code fence, or at a fence's closing line. Each time, the
whole finished part is rendered and only the lines past those already printed are returned:
a later block never reprints an earlier one, and the text is never shown twice.
Never prints by itself; never raises on odd Markdown (it is just text to markdown-it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: `wrap_words`'s importers load before the first prompt
    from rich.console import Console
    from rich.segment import Segment
    from rich.text import Text

__all__ = ["MarkdownStream", "wrap_words"]


class MarkdownStream:
    def __init__(self, console: Console) -> None:
        self.console = console
        self.text = ""
        self._done = 0       # characters of `text` that form finished blocks
        self._printed = 0    # rendered lines already handed out
        self._scanned = 0    # where the block scan stopped (the start of an unended line)
        self._fenced = False

    def add(self, delta: str) -> list[Text]:
        """Take a delta; the newly finished lines to print (often none)."""
        self.text += delta
        finished = self._scan()
        if finished <= self._done:
            return []
        self._done = finished
        return self._new_lines(self.text[:finished])

    def end(self) -> list[Text]:
        """The reply is complete: the lines not printed yet. The stream is then empty."""
        lines = self._new_lines(self.text) if self.text.strip() else []
        self.__init__(self.console)  # type: ignore[misc]
        return lines

    def tail(self) -> str:
        """The unfinished block, raw: what the live area shows."""
        return self.text[self._done:].strip("\n")

    def _scan(self) -> int:
        """The end of the last finished block in `text`, scanning only whole new lines."""
        finished = self._done
        while True:
            end = self.text.find("\n", self._scanned)
            if end < 0:
                return finished
            line = self.text[self._scanned:end].strip()
            self._scanned = end + 1
            if line.startswith(("```", "~~~")):
                self._fenced = not self._fenced
                if not self._fenced:
                    finished = self._scanned
            elif not line and not self._fenced and self.text[self._done:end].strip():
                finished = self._scanned

    def _new_lines(self, text: str) -> list[Text]:
        # At the first reply, not at start: markdown-it is paid once the prompt is up.
        from rich.markdown import Markdown

        rendered = self.console.render_lines(Markdown(text, code_theme="monokai"),
                                             self.console.options, pad=False, new_lines=False)
        lines = [_trimmed(line) for line in rendered]
        while lines and not lines[-1].plain:
            lines.pop()
        fresh = lines[self._printed:]
        self._printed = len(lines)
        return fresh


def _trimmed(segments: list[Segment]) -> Text:
    """A rendered line as Text without the padding rich adds to fill the width (kept where
    it has a background, as a code block's)."""
    from rich.text import Text

    text = Text()
    for segment in segments:
        if segment.control is None:
            text.append(segment.text, segment.style)
    style = segments[-1].style if segments else None
    if style is None or style.bgcolor is None:
        text.rstrip()
    return text


def wrap_words(text: str, width: int) -> list[str]:
    """`text` wrapped at `width` columns at spaces (a word longer than the width alone is
    cut), blank lines kept: for the live area, which the terminal does not wrap."""
    from rich.console import Console
    from rich.text import Text

    width = max(width, 10)
    lines: list[str] = []
    measure = Console(width=width)
    for paragraph in text.split("\n"):
        if not paragraph:
            lines.append("")
            continue
        for wrapped in Text(paragraph).wrap(measure, width):
            lines.append(wrapped.plain.rstrip())
    return lines
