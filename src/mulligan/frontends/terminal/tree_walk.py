"""/tree go: the whole session tree, every attempt, walked with the keys (like pi's /tree).

↑/↓ move; ← folds the attempt the cursor is in (or, on a fork, the attempts hanging off it),
→ unfolds; Enter goes to the entry (the REPL then asks about the files); `l` labels it; `/`
searches the entries' words (then `n` finds the next); Esc or Ctrl-C leaves.

In: entry dicts and the tip. Out: `walk_tree(...)` -> ("go", id) | ("label", id) |
("search", id) | None (left), for the REPL to act on. `rows(...)` is the pure part (what is
shown for a fold state), tested without a terminal. Never reads or writes a file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prompt_toolkit.application import Application
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.layout import FormattedTextControl, HSplit, Layout, Window
from prompt_toolkit.output import Output

from mulligan.brief import cut
from mulligan.frontends.tree import describe
from mulligan.session.branches import labels_of, links, path_ids, visible_children

__all__ = ["Row", "rows", "walk_tree"]


@dataclass(frozen=True)
class Row:
    entry_id: str
    depth: int            # how many forks in: an attempt off the main line is one deeper
    text: str             # the entry in a few words, its label and marks
    branch_root: str      # the first entry of the attempt this row is in
    forks: int            # attempts hanging off this entry (foldable here)
    folded: int           # entries hidden under this row (0: nothing folded)


def rows(entries: Sequence[Mapping[str, Any]], tip: str | None,
         folded: set[str]) -> list[Row]:
    """The rows shown: the current path as the main line, every other attempt hanging off
    the entry it left from (indented), label entries not drawn, an attempt whose first entry
    is in `folded` shown as one row."""
    up, kids, _ = links(entries)
    by_id = {e["id"]: e for e in entries}
    hidden = {e["id"] for e in entries if e.get("type") == "label"}
    tip_path = path_ids(entries, tip, up)
    on_path = set(tip_path)
    labels = labels_of(entries)
    tip_shown = next((i for i in reversed(tip_path) if i not in hidden), None)
    out: list[Row] = []

    def visible(entry_id: str | None) -> list[str]:
        return visible_children(kids, hidden, entry_id)

    def count(root: str) -> int:
        total, stack = 0, [root]
        while stack:
            current = stack.pop()
            total += current not in hidden
            stack.extend(kids.get(current, []))
        return total

    def text(entry_id: str) -> str:
        words = describe(by_id[entry_id])
        if entry_id in labels:
            words += f" [{labels[entry_id]}]"
        changed = by_id[entry_id].get("workspace")
        if isinstance(changed, Mapping) and changed.get("changed"):
            words += f" ✎{len(changed['changed'])}"
        return words + (" ◀ tip" if entry_id == tip_shown else "")

    def walk(start: str, depth: int) -> None:
        current: str | None = start
        root = start
        if start in folded:
            out.append(Row(start, depth, text(start), root, 0, count(start)))
            return
        while current is not None:
            children = visible(current)
            main = next((k for k in children if k in on_path), children[-1] if children
                        else None)
            sides = [k for k in children if k != main]
            out.append(Row(current, depth, text(current), root, len(sides), 0))
            for side in sides:
                walk(side, depth + 1)
            current = main

    roots = visible(None)
    main_root = next((r for r in roots if r in on_path), roots[-1] if roots else None)
    for root in roots:
        if root != main_root:
            walk(root, 1)
    if main_root is not None:
        walk(main_root, 0)
    return out


async def walk_tree(entries: Sequence[Mapping[str, Any]], tip: str | None, *, input: Input,
              output: Output, start: str | None = None, query: str = "",
              folded: set[str] | None = None) -> tuple[str, str] | None:
    """Run the walker until a choice: ("go" | "label" | "search", entry id), or None."""
    fold: set[str] = folded if folded is not None else set()
    shown = rows(entries, tip, fold)
    at = next((n for n, r in enumerate(shown) if r.entry_id == (start or tip)), len(shown) - 1)
    state = _View(max(at, 0), shown)

    def current() -> Row:
        return state.rows[state.at]

    def redo(keep: str) -> None:
        state.rows = rows(entries, tip, fold)
        state.at = next((n for n, r in enumerate(state.rows) if r.entry_id == keep), 0)

    def find_next() -> None:
        for step in range(1, len(state.rows) + 1):
            n = (state.at + step) % len(state.rows)
            if query.casefold() in state.rows[n].text.casefold():
                state.at = n
                return

    kb = KeyBindings()

    @kb.add("up")
    def _up(event: KeyPressEvent) -> None:
        state.at = max(0, state.at - 1)

    @kb.add("down")
    def _down(event: KeyPressEvent) -> None:
        state.at = min(len(state.rows) - 1, state.at + 1)

    @kb.add("left")
    def _fold(event: KeyPressEvent) -> None:
        row = current()
        if row.depth == 0 and not row.forks:
            return
        if row.depth > 0 and not row.forks:
            fold.add(row.branch_root)
            redo(row.branch_root)
            return
        # A fork: fold the attempts hanging off it.
        for other in state.rows[state.at + 1:]:
            if other.depth == row.depth + 1 and other.entry_id == other.branch_root:
                fold.add(other.entry_id)
            elif other.depth <= row.depth:
                break
        redo(row.entry_id)

    @kb.add("right")
    def _unfold(event: KeyPressEvent) -> None:
        row = current()
        if row.folded:
            fold.discard(row.entry_id)
            redo(row.entry_id)

    @kb.add("enter")
    def _go(event: KeyPressEvent) -> None:
        event.app.exit(result=("go", current().entry_id))

    @kb.add("l")
    def _label(event: KeyPressEvent) -> None:
        event.app.exit(result=("label", current().entry_id))

    @kb.add("/")
    def _search(event: KeyPressEvent) -> None:
        event.app.exit(result=("search", current().entry_id))

    @kb.add("n")
    def _next(event: KeyPressEvent) -> None:
        if query:
            find_next()

    @kb.add("escape", eager=True)
    @kb.add("c-c")
    @kb.add("q")
    def _leave(event: KeyPressEvent) -> None:
        event.app.exit(result=None)

    if query:
        find_next()

    def draw() -> StyleAndTextTuples:
        size = output.get_size()
        width, room = size.columns - 1, max(5, size.rows - 4)
        listed, at = state.rows, state.at
        top = min(max(0, at - room // 2), max(0, len(listed) - room))
        parts: StyleAndTextTuples = []
        for n, row in enumerate(listed[top:top + room], top):
            mark = "▸ " if row.folded else "▾ " if row.forks else "  "
            words = f"… {row.folded} entries folded (→ unfolds)" if row.folded else row.text
            cursor = "› " if n == at else "  "
            line = cut(f"{cursor}{'│ ' * row.depth}{mark}{row.entry_id:<5} {words}", width)
            match = bool(query) and query.casefold() in row.text.casefold()
            style = "reverse" if n == at else "bold" if match else ""
            parts.append((style, line + "\n"))
        found = f" · /{query}: n next" if query else ""
        parts.append(("fg:ansicyan", cut(
            f"↑/↓ move · ←/→ fold/unfold · Enter go there · l label · / search{found} · "
            "Esc leave", width)))
        return parts

    app: Application[tuple[str, str] | None] = Application(
        layout=Layout(HSplit([Window(FormattedTextControl(draw), wrap_lines=False)])),
        key_bindings=kb, input=input, output=output, full_screen=False, erase_when_done=True)
    return await app.run_async()


@dataclass
class _View:
    at: int
    rows: list[Row]
