"""A web page's HTML as Markdown, for the `fetch` tool (`mulligan.tools.fetch`).

In: the page's HTML (hostile data) and its URL, for resolving links. Out: (title, Markdown):
headings, paragraphs, lists, links, code; scripts, styles and the page's chrome left out.
Never fetches, runs or renders anything. Its own module so that html.parser is imported at
a page's first fetch, not on the way to the REPL's first prompt.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit


def html_to_markdown(page: str, base: str = "") -> tuple[str, str]:
    """(title, Markdown) of an HTML page: headings, paragraphs, lists, links, code; scripts,
    styles and the page's chrome (nav, header, footer, forms) left out."""
    parser = _Markdown(base)
    parser.feed(page)
    parser.close()
    text = re.sub(r"\n{3,}", "\n\n", "".join(parser.out)).strip()
    return " ".join(parser.title.split()), text


class _Markdown(HTMLParser):
    _SKIP = {"script", "style", "noscript", "nav", "header", "footer", "form", "svg",
             "template", "iframe", "button", "select"}
    _BLOCK = {"p", "div", "section", "article", "main", "table", "tr", "blockquote", "ul",
              "ol", "dl", "figure"}

    def __init__(self, base: str) -> None:
        super().__init__(convert_charrefs=True)
        self.base = base
        self.out: list[str] = []
        self.title = ""
        self._skip = 0
        self._in_title = False
        self._pre = 0
        self._href: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._SKIP:
            self._skip += 1
            return
        if self._skip:
            return
        if tag == "title":
            self._in_title = True
        elif tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            self.out.append("\n\n" + "#" * int(tag[1]) + " ")
        elif tag in self._BLOCK:
            self.out.append("\n\n")
        elif tag == "br":
            self.out.append("\n")
        elif tag == "li":
            self.out.append("\n- ")
        elif tag == "pre":
            self._pre += 1
            self.out.append("\n\n```\n")
        elif tag == "code" and not self._pre:
            self.out.append("`")
        elif tag in ("td", "th"):
            self.out.append(" | ")
        elif tag == "a":
            href = dict(attrs).get("href")
            self._href.append(urljoin(self.base, href) if href else None)
            self.out.append("[")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP:
            self._skip = max(0, self._skip - 1)
            return
        if self._skip:
            return
        if tag == "title":
            self._in_title = False
        elif tag in ("h1", "h2", "h3", "h4", "h5", "h6") or tag in self._BLOCK:
            self.out.append("\n\n")
        elif tag == "pre":
            self._pre = max(0, self._pre - 1)
            self.out.append("\n```\n\n")
        elif tag == "code" and not self._pre:
            self.out.append("`")
        elif tag == "a":
            href = self._href.pop() if self._href else None
            scheme = urlsplit(href).scheme if href else ""
            self.out.append(f"]({href})" if href and scheme in ("http", "https") else "]")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif not self._skip:
            self.out.append(data if self._pre else re.sub(r"\s+", " ", data))
