"""The shape of a session tree, worked out from its entries: children, the current path,
labels, and which attempts end where.

Everything here is a pure function of the entry dicts `SessionLog.entries()` returns (file
order, each with `id`, `type`, `parent_id`). Nothing is read from or written to disk, and nothing
about the tree is stored anywhere: it is recomputed from the file every time.
"""

from __future__ import annotations

from collections.abc import Collection, Container, Iterable, Mapping, Sequence
from typing import Any

from mulligan.session.entries import Entry
from mulligan.session.index import ancestors


def links(entries: Sequence[Entry]) -> tuple[
        dict[str, str | None], dict[str | None, list[str]], list[tuple[Any, Any]]]:
    """The tree's links, in one pass over the entries (file order): (up, children, missing).

    - `up`: each string id -> its parent, where the parent is the id of an entry of the file,
      else None (a root, or an orphan: its parent is missing or not a string). A duplicate id
      (a crafted file: `entries()` refuses one) keeps its first entry's parent.
    - `children`: each parent id -> the ids of the entries under it, in file order; under None
      the roots, the orphans and the entries whose id is not a string, in file order too. An
      entry is listed once for each line it is on: a duplicate hangs where the first one does.
    - `missing`: (id, parent) of each entry naming a parent (not None) that is not taken as its
      parent -- no entry has that id, or it is not a string -- in file order, the parent as
      the file has it (drawing code marks these).

    Never raises on a hostile id or `parent_id`, nor loops; an entry without an id counts as id
    None. The pass takes a parent only from the entries before it, as an append-only file
    always has it; a file naming a later entry as a parent (crafted, or a circle) is
    recognised at the end and gone over once more, with every id known first.
    """
    found = _links(entries, None)
    if found is None:
        found = _links(entries, {e["id"] for e in entries if isinstance(e.get("id"), str)})
        assert found is not None
    return found


def _links(entries: Sequence[Entry], ids: Container[str] | None) -> tuple[
        dict[str, str | None], dict[str | None, list[str]], list[tuple[Any, Any]]] | None:
    """`links` with the parents taken from `ids`, or (None) from the entries seen so far:
    then None when a parent named was only seen after its child."""
    up: dict[str, str | None] = {}
    children: dict[str | None, list[str]] = {}
    missing: list[tuple[Any, Any]] = []
    known: Container[str] = up if ids is None else ids
    # At 100k entries each pass over them is memory-bound (their dicts are spread over some
    # 600 MB), so this is one pass, its work per entry kept small (issue 29).
    for entry in entries:
        entry_id: Any = entry.get("id")  # a string, unless the file is damaged
        parent = entry.get("parent_id")
        taken = isinstance(parent, str) and parent in known
        if not isinstance(entry_id, str):
            above = None
        elif entry_id in up:  # a duplicate id: it hangs where the first one does
            above = up[entry_id]
        else:
            above = up[entry_id] = parent if taken else None
        kids = children.get(above)
        if kids is None:
            children[above] = [entry_id]
        else:
            kids.append(entry_id)
        if parent is not None and not taken:
            missing.append((entry_id, parent))
    if ids is None and any(isinstance(parent, str) and parent in up for _, parent in missing):
        return None  # a parent after its child
    return up, children, missing


def children_of(entries: Sequence[Entry]) -> dict[str | None, list[str]]:
    """Each id's children in file order; the roots are under the key None, and so is an
    entry whose parent is not in the file (an orphan: drawing code shows it, marked). The
    `children` of `links`, for callers that need only them."""
    return links(entries)[1]


def path_ids(entries: Sequence[Entry], leaf_id: str | None,
             up: Mapping[str, str | None] | None = None) -> list[str]:
    """The ids from the first entry down to `leaf_id`, oldest first ([] for None). Stops, rather
    than loops, at a missing parent or a circle: this is for drawing, and `session.path` is the
    walk that refuses a broken file. `up`: the `up` of `links(entries)`, when the caller has
    it."""
    if leaf_id is None:
        return []
    up = links(entries)[0] if up is None else up
    if leaf_id not in up:
        return []
    ids = list(ancestors(leaf_id, up.get))
    ids.reverse()
    return ids


def subtree_ids(children: Mapping[str | None, list[str]], root: str) -> list[str]:
    """`root` and every entry under it, in id order (each once, even in a circle)."""
    found, stack, seen = [], [root], {root}
    while stack:
        current = stack.pop()
        found.append(current)
        below = [child for child in children.get(current, []) if child not in seen]
        seen.update(below)
        stack.extend(below)
    return sorted(found, key=id_number)


def visible_children(children: Mapping[str | None, list[str]], hidden: Collection[str],
                     entry_id: str | None) -> list[str]:
    """`entry_id`'s children as a drawing shows them when the entries in `hidden` (label
    lines) are not drawn: a hidden child passes its own children up, in file order; each
    once, even in a circle of hidden entries."""
    found: list[str] = []
    stack, seen = list(reversed(children.get(entry_id, []))), set()
    while stack:
        child = stack.pop()
        if child in seen:
            continue
        seen.add(child)
        if child in hidden:
            stack.extend(reversed(children.get(child, [])))
        else:
            found.append(child)
    return found


def id_number(entry_id: str) -> int:
    """The number in an id like "e12" (0 if it has none), for ordering."""
    digits = entry_id.lstrip("e")
    return int(digits) if digits.isdigit() else 0


def labels_of(entries: Iterable[Entry]) -> dict[str, str]:
    """The current label of each labelled entry: the newest label entry naming it wins, and an
    empty label takes the label off."""
    labels: dict[str, str] = {}
    for entry in entries:
        if entry.get("type") != "label":
            continue
        target = entry.get("target_id")
        if target is None:
            continue
        text = str(entry.get("label") or "")
        if text:
            labels[target] = text
        else:
            labels.pop(target, None)
    return labels


def message_leaves(entries: Sequence[Entry]) -> list[str]:
    """The message entries that no later message follows: one per attempt the session holds.
    An entry with only non-message entries under it (a label, a branch line nobody wrote after)
    still ends its attempt."""
    up = links(entries)[0]
    kinds = {entry.get("id"): entry.get("type") for entry in entries}
    followed: set[str] = set()
    for entry in entries:
        parent = up.get(entry.get("id"))  # type: ignore[arg-type]
        if entry.get("type") != "message" or parent is None:
            continue
        nearest = next((a for a in ancestors(parent, up.get) if kinds[a] == "message"), None)
        if nearest is not None:
            followed.add(nearest)
    return [e["id"] for e in entries if e.get("type") == "message" and e["id"] not in followed]


def message_of(entry: Entry) -> Mapping[str, Any] | None:
    """The message an entry carries, or None: not a message entry, or (in a hand-damaged file,
    which `mulligan session check` names) a "message" that is not an object. For code that
    draws or lists entries, which must show a damaged file rather than crash on it."""
    message = entry.get("message") if entry.get("type") == "message" else None
    return message if isinstance(message, Mapping) else None


def blocks_of(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The content blocks of an assistant message that are objects ([] when `content` is not
    a list): what drawing code may call .get on."""
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, Mapping)]


def user_messages_on_path(entries: Sequence[Entry], leaf_id: str | None) -> list[Entry]:
    """The user-message entries on the branch ending at `leaf_id`, oldest first."""
    by_id = {entry["id"]: entry for entry in entries}
    return [by_id[i] for i in path_ids(entries, leaf_id)
            if (message_of(by_id[i]) or {}).get("role") == "user"]


def attempt_labels(entries: Sequence[Entry]) -> dict[str, str]:
    """For the first entry of each parallel attempt (a user message entry carrying
    ``"attempt": {"group", "index", "of", "model"}``), its label: ``attempt 2/4 · model ·
    check passed`` (``check failed (exit 1)`` / no check part). Hostile values are text."""
    checks: dict[tuple[str, str], Any] = {}
    # One pass over the session for the few entries with an attempt (None first: isinstance
    # of an ABC is slow at 100k), then the attempts' messages.
    marked = [entry for entry in entries if entry.get("attempt") is not None]
    for entry in marked:
        meta = entry.get("attempt")
        if entry.get("type") == "check" and isinstance(meta, Mapping):
            checks[(str(meta.get("group")), str(meta.get("index")))] = entry.get("exit_code")
    labels: dict[str, str] = {}
    for entry in marked:
        meta = entry.get("attempt")
        if entry.get("type") != "message" or not isinstance(meta, Mapping):
            continue
        parts = [f"attempt {meta.get('index')}/{meta.get('of')}", str(meta.get("model", ""))]
        key = (str(meta.get("group")), str(meta.get("index")))
        if key in checks:
            code = checks[key]
            parts.append("check passed" if code == 0 else f"check failed (exit {code})")
        labels[str(entry.get("id"))] = " · ".join(p for p in parts if p)
    return labels


def all_labels(entries: Sequence[Entry]) -> dict[str, str]:
    """The labels to show: each attempt's (`attempt_labels`), then the user's (`labels_of`),
    joined by ", " where an entry has both."""
    labels = attempt_labels(entries)
    for entry_id, text in labels_of(entries).items():
        labels[entry_id] = f"{labels[entry_id]}, {text}" if entry_id in labels else text
    return labels


def with_attempts(entries: Sequence[Any], entry_of: Any) -> list[Any]:
    """A folded tree's sketch (`SessionLog.sketch`) with the entries that label attempts made
    whole: the first message of each branch off another entry's first child, and the entries
    of kinds the sketch does not name (a check is one). `entry_of(id)` reads one entry."""
    children = children_of(entries)
    wanted = {kid for kids in children.values() if len(kids) > 1 for kid in kids}
    return [entry_of(e["id"]) if set(e) == {"id", "parent_id", "type"} and (
        e["type"] == "other" or (e["type"] == "message" and e["id"] in wanted)) else e
        for e in entries]
