"""A model's reply set as Markdown inside a Markdown export: readable as the Markdown it is,
but unable to make HTML, a top-level heading, or a fence that swallows the rest.

In: the reply's text (model output: hostile data). Out: lines of Markdown. Never: an
`html_block` or `html_inline` (every `<` outside code is backslash-escaped), a heading above
level 3 (the export's own are levels 1 and 2: a reply's `#`/`##` are demoted, setext ones made
`###`), a fence or code span left open past the reply (an unclosed fence is closed).
"""

from __future__ import annotations

import re

__all__ = ["reply_markdown"]

_CODE_SPAN = re.compile(r"(`+)(?:.*?[^`])?\1(?!`)")


def reply_markdown(text: str) -> list[str]:
    """`text` as export lines (see the module docstring)."""
    # Imported here: the HTML export imports this module (through linear.py) but never
    # calls it, and markdown-it's import is a twentieth of a 100k-entry export (and the
    # REPL's slash commands import the exports before the first prompt).
    from markdown_it import MarkdownIt

    lines = text.rstrip("\n").split("\n")
    tokens = MarkdownIt("commonmark").parse("\n".join(lines))
    code: set[int] = set()  # lines inside a fence or an indented code block: left as they are
    headings: dict[int, str] = {}  # first line of a heading -> the line that replaces it
    dropped: set[int] = set()  # a setext heading's other lines
    closing: dict[int, str] = {}  # last line of an unclosed fence -> the fence that closes it
    for at, token in enumerate(tokens):
        if token.map is None:
            continue
        first, end = token.map
        if token.type in ("fence", "code_block"):
            code.update(range(first, end))
            if token.type == "fence" and not _closes(lines[end - 1], token.markup,
                                                     end - 1 > first):
                closing[end - 1] = token.markup
        elif token.type == "heading_open":
            words = tokens[at + 1].content.replace("\n", " ")
            level = max(3, int(token.tag[1:]) + 2) if token.markup.startswith("#") else 3
            headings[first] = f"{'#' * min(level, 6)} {_escape(words)}"
            dropped.update(range(first + 1, end))
    out = []
    for number, line in enumerate(lines):
        if number in headings:
            out.append(headings[number])
        elif number in dropped:
            continue
        else:
            out.append(line if number in code else _escape(line))
        if number in closing:
            out.append(closing[number])
    return out


def _closes(line: str, markup: str, has_body: bool) -> bool:
    stripped = line.strip()
    return has_body and stripped.startswith(markup) and set(stripped) == {markup[0]}


def _escape(line: str) -> str:
    """`<` backslash-escaped outside code spans (inside one it is already literal)."""
    out, at = [], 0
    for span in _CODE_SPAN.finditer(line):
        out.append(line[at:span.start()].replace("<", "\\<"))
        out.append(span.group(0))
        at = span.end()
    out.append(line[at:].replace("<", "\\<"))
    return "".join(out)
