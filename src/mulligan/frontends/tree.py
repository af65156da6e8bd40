"""The session as a tree of text lines, like ``git log --graph``, for /tree and
``mulligan sessions tree``.

In: the entry dicts of a session file and its tip. Out: plain strings, each at most `width`
characters. The current path runs down the left edge; an attempt the session went back from
hangs off its fork point behind ``├─`` and, by default, is folded into one line naming its
entries. Labels are shown on the entries they name; label entries themselves are not drawn.
Never reads or writes a file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mulligan.brief import cut, flat, message_line
from mulligan.session.branches import (
    all_labels,
    links,
    message_leaves,
    path_ids,
    subtree_ids,
    visible_children,
)

TIP_MARK = " ◀ tip"


def describe(entry: Mapping[str, Any], room: int | None = None) -> str:
    """One entry in a few words: who spoke and the start of what they said. With `room`,
    for a line cut to `room` characters (what lies past it may be left out)."""
    kind = entry.get("type")
    if kind == "message":
        message = entry.get("message")  # `message_of`, a dict first (most entries)
        if type(message) is dict or isinstance(message, Mapping):
            return message_line(message, room)
        return "(damaged: a message entry without a message object)"
    if kind == "branch":
        return f"↩ back to {entry.get('parent_id')}"
    if kind == "branch_summary":
        summary = flat(entry.get("summary", ""), room)
        return f"↩ back to {entry.get('parent_id')}, summary: {summary}"
    if kind == "compaction":
        return f"⊟ compacted: {flat(entry.get('summary', ''), room)}"
    if kind == "workspace_restore":
        found = entry.get("workspace")
        meta: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        restored, kept = len(meta.get("restored") or []), len(meta.get("kept") or [])
        return f"files: {restored} restored, {kept} kept"
    if kind == "session_info":
        bits = [f"{k} {entry[k]}" for k in ("name", "model", "cwd", "origin_file") if entry.get(k)]
        return "session: " + ", ".join(bits)
    if kind == "check":
        return f"✓ check {flat(entry.get('command', ''))} → exit {entry.get('exit_code')}"
    if kind == "model_change":
        return f"model → {entry.get('provider', '')}/{entry.get('model', '')}".replace("→ /", "→ ")
    return str(kind)


def render_tree(
    entries: Sequence[Mapping[str, Any]], tip: str | None, *, fold: bool = True,
    width: int = 80,
) -> list[str]:
    """The tree as lines. `fold` collapses every attempt off the current path into one line;
    `width` (at least 20) bounds every line, cutting the words of a message with "…"."""
    width = max(width, 20)
    if not entries:
        return ["(empty session: nothing has been said yet)"]
    by_id = {entry["id"]: entry for entry in entries}
    up, children, missing = links(entries)
    damage = {entry_id: f" (parent {parent!r} is missing)" for entry_id, parent in missing}
    # the label lines (not drawn), and the few entries `all_labels` reads
    labelling = [e for e in entries if e.get("type") == "label" or e.get("attempt") is not None]
    hidden = {e["id"] for e in labelling if e.get("type") == "label"}
    tip_path = path_ids(entries, tip, up)
    on_path = set(tip_path)
    labels = all_labels(labelling)  # it reads only label entries and those of attempts
    visible = _visible(children, hidden)
    pad = max(map(len, by_id)) + 2  # the id column, padded, and a space
    drawn: set[str] = set()
    # The tip may be a label line (not drawn): then the entry it hangs under is marked.
    shown_tip = next((i for i in reversed(tip_path) if i not in hidden), None)
    # the entries whose line carries a mark other than ✎ (a circle's are added as found)
    marked = {*labels, *damage, shown_tip}
    lines: list[str] = []

    def tag_of(entry_id: str, entry: Mapping[str, Any]) -> str:
        tag = f" [{labels[entry_id]}]" if entry_id in labels else ""
        if entry_id in damage:
            tag += damage[entry_id]
        changed = entry.get("workspace")
        if changed and isinstance(changed, Mapping) and changed.get("changed"):
            tag += f" ✎{len(changed['changed'])}"  # this entry changed files
        if entry_id == shown_tip:
            tag += TIP_MARK
        return tag

    def chain(current: str, prefix: str, rest: str) -> Sequence[str]:
        # `current` and the chain of single children below it not drawn yet (most entries),
        # the first line behind `prefix`, the others behind `rest`: each line is
        # `prefix`, the id padded, the entry's words cut to the room left, its marks. This
        # is the loop every drawn entry goes through: its work per entry is kept to what the
        # line needs. Returns the visible children of the chain's last entry.
        append, add, kids_of = lines.append, drawn.add, visible.get
        room_left = width - len(prefix) - pad
        while True:
            add(current)
            entry = by_id[current]
            if current in marked or entry.get("workspace"):
                tag = tag_of(current, entry)
                room = room_left - len(tag)
            else:
                tag, room = "", room_left
            append(prefix + current.ljust(pad) + cut(describe(entry, room if room > 1 else 1),
                                                     room) + tag)
            kids = kids_of(current, ())
            if len(kids) != 1 or kids[0] in drawn:
                return kids
            current = kids[0]
            if prefix is not rest:
                prefix, room_left = rest, width - len(rest) - pad

    def folded(prefix: str, root: str) -> str:
        ids = [i for i in subtree_ids(children, root) if i not in hidden]
        drawn.update(ids)
        span = f"{ids[0]}..{ids[-1]}" if len(ids) > 1 else ids[0]
        names = [labels[i] for i in ids if i in labels]
        noun = "entry" if len(ids) == 1 else "entries"
        # The attempt's own entries only: filtering the whole session for each folded attempt
        # made a 100k-entry tree with 3,000 of them take a minute.
        attempts = len(message_leaves([by_id[i] for i in subtree_ids(children, root)])) or 1
        where = "an abandoned attempt" if attempts == 1 else f"{attempts} abandoned attempts"
        text = f"… {len(ids)} {noun} on {where} ({span})"
        if names:
            text += " [" + ", ".join(names) + "]"
        return prefix + cut(text, width - len(prefix))

    def walk(start: str, first_prefix: str, rest_prefix: str) -> None:
        # Depth first with a stack of its own, not recursion: a session may nest attempts
        # thousands deep (each frame: the chain being drawn, its prefixes, the side
        # branches of its current entry still to draw, and the entry to go on with).
        frames: list[_Frame] = [_Frame(start, first_prefix, rest_prefix)]
        while frames:
            frame = frames[-1]
            if frame.sides is None:
                current = frame.current
                if current is None or current in drawn:
                    frames.pop()
                    continue
                kids = chain(current, frame.prefix, frame.rest)
                frame.prefix = frame.rest
                if not kids:
                    frames.pop()
                    continue
                if len(kids) == 1:  # drawn already (a circle): the chain ends there
                    frame.main, frame.sides = kids[0], []
                else:
                    frame.main = next((k for k in kids if k in on_path), kids[-1])
                    frame.sides = [k for k in kids if k != frame.main][::-1]
            if not frame.sides:
                frame.current, frame.sides = frame.main, None
                continue
            side = frame.sides.pop()
            if fold and side not in on_path:
                lines.append(folded(frame.rest + "├─ ", side))
            else:
                frames.append(_Frame(side, frame.rest + "├─ ", frame.rest + "│  "))

    roots = visible.get(None, ())
    main_root = next((r for r in roots if r in on_path), roots[-1] if roots else None)
    for root in roots:
        if root == main_root:
            continue
        if fold:
            lines.append(folded("├─ ", root))
        else:
            walk(root, "├─ ", "│  ")
    if main_root is not None:
        walk(main_root, "", "")
    # What no root leads to is in a circle of parents: drawn too, each part from its first
    # line, so that the diagnostic shows every entry (`sessions tree` then exits 1).
    if len(drawn) + len(hidden) < len(by_id):
        for entry in entries:
            if entry["id"] not in drawn and entry["id"] not in hidden:
                damage[entry["id"]] = " (in a circle of parents)"
                marked.add(entry["id"])
                walk(entry["id"], "⟳ ", "│  ")
    return lines


def _visible(children: dict[str | None, list[str]], hidden: set[str]
             ) -> dict[str | None, list[str]]:
    """Each entry's children as drawn (`visible_children`): only the lists holding a hidden
    entry (a label line) differ from `children`, worked out once each."""
    if not hidden:
        return children
    visible = dict(children)
    for parent, kids in children.items():
        if not hidden.isdisjoint(kids):
            visible[parent] = visible_children(children, hidden, parent)
    return visible


class _Frame:
    """One chain `render_tree` is drawing: where it is, its prefixes, what is left of the
    side branches of its current entry, and the entry the chain goes on with."""

    __slots__ = ("current", "main", "prefix", "rest", "sides")

    def __init__(self, current: str, prefix: str, rest: str) -> None:
        self.current: str | None = current
        self.prefix, self.rest = prefix, rest
        self.sides: list[str] | None = None
        self.main: str | None = None
