"""The whole session as one self-contained HTML page: every attempt, a sidebar tree in the
shape of /tree, the branch through any entry on a click, a search box, a link per entry
(#e12), and the session file itself inside, to be turned back into JSONL. The page is built
from that file, in the page: its script (html_cards.js, html_page.js) parses the embedded
file, makes the tree's rows as data, and an element only of the rows in view and of the
cards of a window of the branch that grows as it is scrolled (a click at 100k entries: under
0.15 s; see bench/html_bench.py). The export itself only reads the file once, redacts and
zips it: building 100k rows and cards in Python was 85% of a 100k-entry export (issue 29).
The tree is built without recursion (any depth of nested attempts).

In: every entry of a session, its tip, the session file's bytes, and optionally the system
prompt and the snapshot store (for the file changes of each tool call, as capped diffs: the
page cannot make those, so they come with the tip and the labels as gzipped JSON).
Out: one string of HTML with its styles and script inline and nothing to fetch: a Content
Security Policy forbids any network use and lets only the page's own script run (by its hash:
no other inline script, no inline event handler). The template is filled in one pass, so
content holding a slot's name (`__DATA__`) is text, never a slot. What the export writes as
HTML is escaped; what the page makes of an entry is text (textContent, never innerHTML); and
known key values are redacted (`redact`) in the embedded file and data.

Markdown (messages, summaries) is rendered in the page, only for the cards shown, by
markdown-it's JavaScript build from Debian's `libjs-markdown-it` (MARKDOWN_IT_JS), embedded
once with its own hash in the policy and configured with raw HTML off and links limited to
http(s), mailto and #anchors -- so a message holding `<script>`, `onerror=` or a
`javascript:` link is shown, never run. Without that file (a machine without the Debian
package) the export still works: the Markdown is shown as the pre-wrapped text it is, and the
page's header says why -- never a refusal, since the page loses only formatting, nothing of
the record. Reads no file but that library and its own template and scripts.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import html
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mulligan.session.branches import all_labels, message_of
from mulligan.session.entries import Entry

if TYPE_CHECKING:
    from mulligan.app.workspace.store.snapshots import Store

__all__ = ["to_html"]

DIFF_LINES = 200  # of one tool call's file changes
# markdown-it's browser build, as Debian's libjs-markdown-it installs it (.ci/run installs it).
MARKDOWN_IT_JS = Path("/usr/share/javascript/markdown-it/markdown-it.js")


def to_html(entries: Sequence[Entry], tip: str | None, *, title: str, session: bytes,
            file_name: str, system: str | None = None, store: Store | None = None,
            redact: Callable[[str], str] = lambda text: text,
            markdown_js: Path = MARKDOWN_IT_JS) -> str:
    """The page (see the module docstring); `markdown_js` is the markdown-it build to embed
    (a missing one: Markdown shown as text). `entries` are the file's, read once by the
    caller: here only the session's name, its labels and the tool calls' diffs come of them."""
    # One pass picks the few entries the export reads (the session's facts, labels, attempts
    # and their checks, tool calls that changed files); the rest are only the page's to read.
    few = [e for e in entries if e.get("type") in _FEW or "attempt" in e or "workspace" in e]
    info = next((e for e in few if e.get("type") == "session_info"), {})
    meta = " · ".join(f"{key} {info[key]}" for key in ("name", "model", "cwd", "created")
                      if info.get(key))
    if info.get("name"):
        title = f"{info['name']} · {title}"
    library = _library(markdown_js)
    if library is None:
        meta += (" · Markdown shown as text: markdown-it (Debian's libjs-markdown-it) was not"
                 " found at export time")
    # What the page cannot know from the file: the tip, the labels as /tree shows them, and
    # each tool call's file changes (from the snapshot store, which the page does not hold).
    data = {"tip": tip, "labels": all_labels(few), "changes": _changes(few, store)}
    parts = {
        "__TITLE__": _e(title),
        "__META__": _e(meta) + f" · {len(entries)} entries",
        "__SYSTEM__": _system(system),
        "__FILENAME__": _e(file_name),
    }
    template, script, script_hash = _template()
    # Put in as they are: the scripts (each must stay the script its hash names) and the
    # zipped parts, whose text was redacted before it was zipped.
    fixed = {
        "__SCRIPTHASHES__": f"'sha256-{script_hash}'" + (
            f" 'sha256-{library[1]}'" if library else ""), "__SCRIPT__": script,
        "__MARKDOWNIT__": f'<script id="markdown-it">{library[0]}</script>' if library else "",
        "__DATA__": _zipped([redact(json.dumps(data, ensure_ascii=False))]),
        # The file once, gzipped (the page unzips it with DecompressionStream): a quarter of
        # its size or less, where base64 of the file alone was 1.33x. Redacted a slice at a
        # time, so the file's text is never whole twice in memory.
        "__JSONL__": _zipped(redact(text) for text in _lines_of(session)),
    }
    # One pass over the template: what a slot is filled with is never searched for slots
    # again, so content holding "__DATA__" stays text. Keys are redacted in each piece of
    # content, never in the template.
    return _SLOT.sub(lambda slot: fixed[slot[0]] if slot[0] in fixed else
                     redact(parts[slot[0]]), template)


_SLOT = re.compile(r"__[A-Z]+__")
_FEW = frozenset({"session_info", "label", "check"})


@functools.cache
def _template() -> tuple[str, str, str]:
    """The page's template, its one inline script (html_cards.js, then html_page.js) and that
    script's CSP hash: the policy allows that script and nothing else -- no other inline
    script, no inline event handler (`onfocus=`)."""
    files = resources.files("mulligan.app.exports")
    page = files.joinpath("html_template.html").read_text("utf-8")
    script = "\n".join(files.joinpath(name).read_text("utf-8")
                       for name in ("html_cards.js", "html_page.js"))
    if re.search(r"</script", script, flags=re.IGNORECASE):  # would end the page's script
        raise RuntimeError("html_cards.js or html_page.js holds '</script': write '<\\/script'")
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    return page, script, digest


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


def _zipped(pieces: Iterable[str]) -> str:
    """The text of `pieces` as the page carries data: base64 of its gzipped UTF-8 (the page
    unzips it with DecompressionStream), zipped piece by piece. Keys are redacted before, in
    the text: never in the zipped bytes."""
    # ISA-L's deflate (python-isal), level 1: for a text-heavy 221 MB session 0.37 s of CPU
    # and 0.24x the file, where zlib took 1.1-1.7 s at level 1 and 5.8 s (5 times the parse)
    # at level 6, for 0.17x. 31: with gzip's header.
    from isal import isal_zlib

    zipper = isal_zlib.compressobj(1, isal_zlib.DEFLATED, 31)
    zipped = [zipper.compress(piece.encode()) for piece in pieces]
    zipped.append(zipper.flush())
    return base64.b64encode(b"".join(zipped)).decode()


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


def _system(system: str | None) -> str:
    if not system:
        return ""
    return ('<details class="warning"><summary>The system prompt (review before sharing: it '
            "holds your AGENTS.md and working folder)</summary>"
            f"<pre>{_e(system)}</pre></details>")


def _changes(entries: Sequence[Entry], store: Store | None) -> dict[str, dict[str, Any]]:
    """The file changes each tool call made, from its checkpoints, as capped diffs: id ->
    {"changed": the files, "lines": the diff's lines}, without "lines" when the snapshots are
    not in the store (or are not snapshot ids: a hand-made file)."""
    if store is None:
        return {}
    found = {}
    for entry in entries:
        meta = entry.get("workspace")
        if not meta or not isinstance(meta, Mapping) or not meta.get("changed") or \
                (message_of(entry) or {}).get("role") != "toolResult":
            continue
        # Imported only for a session with changes: the snapshot machinery (gitignore
        # matching) is a tenth of a 100k-entry export's time.
        from mulligan.app.workspace.diffs import snapshot_diff

        change: dict[str, Any] = {"changed": ", ".join(map(str, meta["changed"]))}
        # ValueError: not a snapshot id (a hand-made file): the page says so
        with contextlib.suppress(OSError, KeyError, ValueError):
            change["lines"] = snapshot_diff(store, str(meta["before"]), str(meta["after"]),
                                            cap=DIFF_LINES)
        found[str(entry["id"])] = change
    return found
