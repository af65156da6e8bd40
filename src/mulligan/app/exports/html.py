"""The whole session as one self-contained HTML page: every attempt, a sidebar tree in the
shape of /tree, the branch through any entry on a click, a search box, a link per entry
(#e12), and the session file itself inside, to be turned back into JSONL. The tree's rows and
the cards come as gzipped JSON (made, redacted and zipped a slice at a time, so neither the
lists nor their JSON are ever whole in memory); the page's script makes an element only of
the rows in view and of a window of the branch's cards that grows as it is scrolled (a click
at 100k entries: under 0.15 s; see bench/html_bench.py). The tree is built without
recursion (any depth of nested attempts).

In: every entry of a session, its tip, the session file's bytes, and optionally the system
prompt and the snapshot store (for the file changes of each tool call, as capped diffs).
Out: one string of HTML with its styles and script inline and nothing to fetch: a Content
Security Policy forbids any network use and lets only the page's own script run (by its hash:
no other inline script, no inline event handler). The template is filled in one pass, so
content holding a slot's name (`__DATA__`) is text, never a slot. Every piece of content is
escaped, and known key values are redacted (`redact`), in the page and in the embedded file.

Markdown (messages, summaries) is carried as escaped source and rendered in the page, only for
the cards shown, by markdown-it's JavaScript build from Debian's `libjs-markdown-it`
(MARKDOWN_IT_JS), embedded once with its own hash in the policy and configured with raw HTML
off and links limited to http(s), mailto and #anchors -- so a message holding `<script>`,
`onerror=` or a `javascript:` link is shown, never run. Rendering every card's Markdown in
Python at export time was 70% of a 100k-entry export (issue 29). Without that file (a
machine without the Debian package) the export still works: the Markdown is shown as the
escaped, pre-wrapped text it is, and the page's header says why -- never a refusal, since the
page loses only formatting, nothing of the record. Reads no file but that library.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import html
import itertools
import json
import re
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from mulligan.app.workspace.diffs import snapshot_diff
from mulligan.app.workspace.snapshots import Store
from mulligan.brief import call_text, cut, flat, message_line
from mulligan.messages import content_text, image_note, images_in
from mulligan.session.branches import all_labels, blocks_of, message_of, path_ids
from mulligan.session.entries import Entry

__all__ = ["page_parts", "to_html"]

DIFF_LINES = 200  # of one tool call's file changes
# markdown-it's browser build, as Debian's libjs-markdown-it installs it (.ci/run installs it).
MARKDOWN_IT_JS = Path("/usr/share/javascript/markdown-it/markdown-it.js")


def to_html(entries: Sequence[Entry], tip: str | None, *, title: str, session: bytes,
            file_name: str, system: str | None = None, store: Store | None = None,
            redact: Callable[[str], str] = lambda text: text,
            markdown_js: Path = MARKDOWN_IT_JS) -> str:
    """The page (see the module docstring); `markdown_js` is the markdown-it build to embed
    (a missing one: Markdown shown as text)."""
    labels = all_labels(entries)
    path = path_ids(entries, tip)  # walked once, as the parents below are found once
    on_path = set(path)
    info = next((e for e in entries if e.get("type") == "session_info"), {})
    meta = " · ".join(f"{key} {info[key]}" for key in ("name", "model", "cwd", "created")
                      if info.get(key))
    attempts = [e["id"] for e in entries if e.get("type") != "label"]
    # A label is an entry of the file but not of the page: its child hangs from its parent,
    # so the branch through a labelled entry is whole.
    parents = _shown_parents(entries)
    shown_tip = _shown_tip(entries, path)
    data = {"parents": parents, "order": attempts, "tip": shown_tip}
    if info.get("name"):
        title = f"{info['name']} · {title}"
    library = _library(markdown_js)
    if library is None:
        meta += (" · Markdown shown as text: markdown-it (Debian's libjs-markdown-it) was not"
                 " found at export time")
    parts = {
        "__TITLE__": _e(title),
        "__META__": _e(meta) + f" · {len(entries)} entries",
        # The big parts are made, redacted and zipped a slice at a time: never the whole
        # list of rows or cards, nor its JSON, in memory at once (issue 29: the export's peak
        # memory against the parse's).
        "__TREE__": _zipped(_json_list(_tree(entries, parents, on_path, labels,
                                                   shown_tip), redact)),
        "__SYSTEM__": _system(system),
        "__CARDS__": _zipped(_json_list(([e["id"], _card(e, labels, store)] for e in entries
                                         if e.get("type") != "label"), redact)),
        "__DATA__": _script_json(data),
        "__FILENAME__": _e(file_name),
        # The file once, gzipped (the page unzips it with DecompressionStream): a third of
        # its size or less, where base64 of the file alone was 1.33x.
        "__JSONL__": _zipped(redact(text) for text in _lines_of(session)),
    }
    template, script_hash = _template()
    # The scripts: never redacted (each must stay the script its hash names), never content.
    scripts = {"__SCRIPTHASHES__": f"'sha256-{script_hash}'" + (
        f" 'sha256-{library[1]}'" if library else ""),
        "__MARKDOWNIT__": f'<script id="markdown-it">{library[0]}</script>' if library else ""}
    # One pass over the template: what a slot is filled with is never searched for slots
    # again, so content holding "__DATA__" stays text. Keys are redacted in each piece of
    # content, never in the template.
    return _SLOT.sub(lambda slot: scripts[slot[0]] if slot[0] in scripts else
                     redact(parts[slot[0]]), template)


_SLOT = re.compile(r"__[A-Z]+__")


@functools.cache
def _template() -> tuple[str, str]:
    """The page's template and the CSP hash of its one inline script: the policy allows that
    script and nothing else -- no other inline script, no inline event handler (`onfocus=`)."""
    page = resources.files("mulligan.app.exports").joinpath("html_template.html").read_text("utf-8")
    (script,) = re.findall(r'<script type="module">(.*?)</script>', page, flags=re.DOTALL)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    return page, digest


@functools.cache
def _library(path: Path) -> tuple[str, str] | None:
    """markdown-it's script and its CSP hash, or None when it is missing, unreadable or could
    end (or open) the <script> element it is put in."""
    try:
        script = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if re.search(r"<(/?)script", script, flags=re.IGNORECASE):
        return None
    return script, base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()


def page_parts(page: str) -> dict[str, Any]:
    """What a page made by `to_html` carries, unzipped: "rows" (the tree's rows), "cards" (id
    -> the card's HTML), "session" (the embedded session file's text), and "html" (the page
    with the zipped parts left out), for a program -- or a test -- that reads a page."""
    def part(name: str) -> str:
        found = re.search(rf'<script id="{name}" type="application/gzip"[^>]*>([^<]*)</script>',
                          page)
        return gzip.decompress(base64.b64decode(found[1])).decode() if found else ""

    return {"rows": json.loads(part("rows-data") or "[]"),
            "cards": dict(json.loads(part("cards-data") or "[]")),
            "session": part("session-jsonl"),
            "html": re.sub(r'(<script id="[a-z-]+" type="application/gzip"[^>]*>)[^<]*',
                           r"\1", page)}


def _zipped(pieces: Iterable[str]) -> str:
    """The text of `pieces` as the page carries data: base64 of its gzipped UTF-8 (the page
    unzips it with DecompressionStream), zipped piece by piece. Keys are redacted before, in
    the text: never in the zipped bytes."""
    zipper = zlib.compressobj(6, zlib.DEFLATED, 31)  # 31: with gzip's header (mtime 0)
    zipped = [zipper.compress(piece.encode()) for piece in pieces]
    zipped.append(zipper.flush())
    return base64.b64encode(b"".join(zipped)).decode()


SLICE = 2000  # rows or cards made into JSON at a time


def _json_list(items: Iterable[Any], redact: Callable[[str], str]) -> Iterator[str]:
    """A JSON list of `items`, a slice at a time, each slice redacted (a key lies inside one
    item's text, so never across two slices)."""
    left = iter(items)
    yield "["
    for at, batch in enumerate(iter(lambda: list(itertools.islice(left, SLICE)), [])):
        yield redact(("," if at else "") + json.dumps(batch, ensure_ascii=False)[1:-1])
    yield "]"


def _lines_of(session: bytes, size: int = 1 << 20) -> Iterator[str]:
    """The file's text in slices of about `size` bytes, each ending at a line's end: a key
    lies inside one line, and a newline byte is never inside a UTF-8 character."""
    start = 0
    while start < len(session):
        end = session.find(b"\n", start + size)
        end = len(session) if end < 0 else end + 1
        yield session[start:end].decode("utf-8", "replace")
        start = end


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _markdown(text: str) -> str:
    """Markdown as the page renders it when the card is shown: its source, escaped."""
    return f'<div class="md">{_e(text)}</div>'


def _script_json(value: Any) -> str:
    """JSON that cannot end the <script> element it sits in."""
    return json.dumps(value, ensure_ascii=False).replace("<", "\\u003c").replace(
        "\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _shown_tip(entries: Sequence[Entry], path: Sequence[str]) -> str | None:
    hidden = {e["id"] for e in entries if e.get("type") == "label"}
    return next((i for i in reversed(path) if i not in hidden), None)


def _shown_parents(entries: Sequence[Entry]) -> dict[str, str | None]:
    """Each shown entry's parent on the page: its nearest ancestor that is not a label (None
    for a root). A loop of walks up, each stopping at an id already placed: no recursion, and
    a circle (a damaged file) ends at None."""
    up = {e["id"]: e.get("parent_id") for e in entries}
    labels = {e["id"] for e in entries if e.get("type") == "label"}
    placed: dict[str, str | None] = {}
    for entry in entries:
        if entry["id"] in labels:
            continue
        parent, seen = up.get(entry["id"]), {entry["id"]}
        while parent in labels and parent not in seen:
            seen.add(parent)
            parent = up.get(parent)
        placed[entry["id"]] = None if parent in labels or parent not in up else parent
    return placed


def _summary_of(entry: Entry) -> str:
    kind = entry.get("type")
    if kind == "message":
        message = message_of(entry)
        return message_line(message) if message is not None else "(damaged message entry)"
    if kind == "branch":
        return f"↩ back to {entry.get('parent_id')}"
    if kind in ("branch_summary", "compaction"):
        return ("↩ summary: " if kind == "branch_summary" else "⊟ compacted: ") + flat(
            entry.get("summary", ""))
    return str(kind)


def _tree(entries: Sequence[Entry], parents: Mapping[str, str | None], on_path: set[str],
          labels: Mapping[str, str], tip: str | None) -> Iterator[list[Any]]:
    """Rows in the shape of /tree, as data the page draws (`["a", id, depth, attempt it is
    folded in or "", classes, its text as HTML]`, `["f", attempt, depth, attempt around it or
    "", fork id]`), flat (one link per entry, its depth as an indent): the
    current path down the left, each attempt off it folded behind a button at its fork point,
    its rows after it, one deeper. Walked with a stack, not recursion: 2,000 attempts nested
    in each other are 2,000 levels of indent, not a RecursionError (nor 2,000 nested elements,
    past what a browser's parser nests)."""
    by_id = {e["id"]: e for e in entries}
    children: dict[str | None, list[str]] = {}
    for entry_id, parent in parents.items():
        children.setdefault(parent, []).append(entry_id)

    def kids(of: str | None) -> list[str]:
        return children.get(of, [])

    drawn: set[str] = set()
    roots = kids(None)
    main_root = next((r for r in roots if r in on_path), roots[-1] if roots else None)
    # The stack holds what is still to draw, the next on top: (entry id, depth, the attempt
    # it is folded in or "", and for an attempt's first entry the attempt around it or "",
    # else None).
    stack: list[tuple[str, int, str, str | None]] = []
    for root in reversed([*(r for r in roots if r != main_root), *([main_root]
                                                                   if main_root else [])]):
        stack.append((root, 0, "", None))
    folds = 0
    while stack:
        current, depth, group, outer = stack.pop()
        if current in drawn:
            continue
        drawn.add(current)
        if outer is not None:  # an attempt's first entry: its fold button first
            yield ["f", group, depth - 1, outer, parents.get(current) or ""]
        label = f' <span class="label">[{_e(labels[current])}]</span>' \
            if current in labels else ""
        classes = " ".join(c for c in ("on-branch" if current in on_path else "",
                                       "tip" if current == tip else "") if c)
        yield ["a", current, depth, group, classes,
               f"{_e(current)} {_e(cut(_summary_of(by_id[current]), 90))}{label}"]
        below = kids(current)
        if not below:
            continue
        main = next((k for k in below if k in on_path), below[-1])
        stack.append((main, depth, group, None))  # drawn after every attempt off here
        for side in reversed([k for k in below if k != main]):
            folds += 1
            stack.append((side, depth + 1, f"f{folds}", group))


def _system(system: str | None) -> str:
    if not system:
        return ""
    return ('<details class="warning"><summary>The system prompt (review before sharing: it '
            "holds your AGENTS.md and working folder)</summary>"
            f"<pre>{_e(system)}</pre></details>")


def _card(entry: Entry, labels: Mapping[str, str], store: Store | None) -> str:
    entry_id = entry["id"]
    shown_id = _e(entry_id)  # escaped once: it is written four times
    kind = entry.get("type")
    label = f' · <span class="label">{_e(labels[entry_id])}</span>' \
        if entry_id in labels else ""
    head = (f'<div class="head"><a href="#{shown_id}">{shown_id}</a>'
            f"<span>{_e(entry.get('timestamp', ''))}</span>{label}")
    css, body = "card", ""
    if kind == "message":
        message = message_of(entry)
        if message is None:
            body = "<p>(a message entry without a message object)</p>"
        else:
            css, body, who = _message(message, entry, store)
            head += f"<span>{_e(who)}</span>"
    elif kind in ("branch_summary", "compaction"):
        what = "Summary of the attempt left" if kind == "branch_summary" else \
            "Compaction: summary of the conversation before it"
        head += f"<span>{what}</span>"
        body = _markdown(str(entry.get("summary", "")))
    elif kind == "branch":
        body = f"<p>↩ went back to {_e(entry.get('parent_id'))}</p>"
    elif kind == "session_info":
        facts = [f"{k}: {entry[k]}" for k in ("name", "model", "cwd", "created",
                                               "origin_file") if entry.get(k)]
        body = f"<p>session · {_e(' · '.join(facts))}</p>"
    elif kind == "workspace_restore":
        found = entry.get("workspace")
        meta: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        body = (f"<p>files restored: {_e(', '.join(meta.get('restored') or []) or 'none')}; "
                f"kept: {_e(', '.join(meta.get('kept') or []) or 'none')}</p>")
    else:
        body = f"<p>{_e(kind)}</p>"
    return (f'<article id="{shown_id}" data-id="{shown_id}" class="{css}">'
            f"{head}</div>{body}</article>")


_SHOWN_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")


def _words(content: object) -> str:
    """The text of a message's content, images left out (they are drawn by `_images`)."""
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content
                         if isinstance(b, Mapping) and b.get("type") == "text")
    return content_text(content)


def _images(content: object) -> str:
    """The content's images inline, as data: URLs (the page's policy allows only those). A
    block whose type is not one of the four image formats, or whose data is not plain
    base64, is hostile or broken: it is shown as its note, never put in the page."""
    out = []
    for block in images_in(content):
        mime, data = block.get("mime_type"), block.get("data")
        if mime in _SHOWN_TYPES and isinstance(data, str) and _BASE64.fullmatch(data):
            out.append(f'<img class="shot" alt="{_e(image_note(block))}" '
                       f'src="data:{mime};base64,{data}">')
        else:
            out.append(f"<p>{_e(image_note(block))}</p>")
    return "".join(out)


def _message(message: Mapping[str, Any], entry: Entry,
             store: Store | None) -> tuple[str, str, str]:
    """(css class, body, who) of a message card."""
    role = str(message.get("role"))
    if role == "user":
        return "user", _markdown(_words(message.get("content"))) + \
            _images(message.get("content")), "you"
    if role == "toolResult":
        content = _words(message.get("content"))
        flag = " (error)" if message.get("is_error") else ""
        first = cut(flat(content_text(message.get("content"))), 100)
        body = (f'<details class="result"><summary>{_e(message.get("tool_name"))}{flag} → '
                f"{_e(first)}</summary><pre>{_e(content)}</pre>"
                f"{_images(message.get('content'))}</details>")
        return "toolResult" + (" error" if flag else ""), body + _changes(entry, store), \
            f"{message.get('tool_name')} result"
    parts = []
    for block in blocks_of(message):
        if block.get("type") == "text":
            parts.append(_markdown(str(block.get("text", ""))))
        elif block.get("type") == "thinking" and block.get("thinking"):
            parts.append(f"<details><summary>thinking</summary>"
                         f"<pre>{_e(block['thinking'])}</pre></details>")
        elif block.get("type") == "toolCall":
            arguments = json.dumps(block.get("arguments"), indent=2, ensure_ascii=False)
            parts.append(f'<details class="call"><summary>{_e(call_text(block, room=100))}'
                         f"</summary><pre>{_e(arguments)}</pre></details>")
    failed = message.get("stop_reason") in ("error", "aborted")
    if failed:
        parts.append(f'<p class="err">{_e(message.get("stop_reason"))}: '
                     f"{_e(message.get('error_message', ''))}</p>")
    return "assistant" + (" error" if failed else ""), "".join(parts), "assistant"


def _changes(entry: Entry, store: Store | None) -> str:
    """The file changes a tool call made, from its checkpoints, as a capped diff."""
    meta = entry.get("workspace")
    if store is None or not isinstance(meta, Mapping) or not meta.get("changed"):
        return ""
    try:
        lines = snapshot_diff(store, str(meta["before"]), str(meta["after"]), cap=DIFF_LINES)
    except (OSError, KeyError, ValueError):  # ValueError: not a snapshot id (hand-made)
        return f"<p>changed: {_e(', '.join(meta['changed']))} (snapshots not in the store)</p>"
    shown = []
    for line in lines:
        css = "add" if line.startswith("+") else "del" if line.startswith("-") else \
            "hunk" if line.startswith("@@") else ""
        shown.append(f'<span class="{css}">{_e(line)}</span>')
    return (f'<details class="diff" open><summary>changed {_e(", ".join(meta["changed"]))}'
            f"</summary><pre>{chr(10).join(shown)}</pre></details>")
