"""Attempts read back from the session file: the comparison table, and two branches side by
side.

In: a session's entries (and the snapshot store, for the files). Out: one `Row` per attempt
(model, turns, tokens, cost, time, check, files changed with lines added and removed), the
table as text lines, and `compare`: the diff between two entries' final trees and each one's
transcript from where they fork. Everything is worked out from the file; nothing is kept
anywhere else. Never changes anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mulligan.app.usage import cost_of, price_of
from mulligan.app.workspace.checkpoints import expected_tree, workspace_of
from mulligan.app.workspace.diffs import snapshot_diff
from mulligan.app.workspace.store.snapshots import Store, changed_paths
from mulligan.brief import message_line
from mulligan.session import SessionLog
from mulligan.session.branches import children_of, message_of, path_ids
from mulligan.session.entries import Entry

__all__ = ["Row", "compare", "pick_adopted", "resolve_entry", "rows_of", "table_lines"]



@dataclass
class Row:
    """One attempt as the file has it."""

    group: str
    index: int
    of: int
    model: str
    first_id: str
    last_id: str  # its last entry: its check, if any
    fork: str | None
    turns: int = 0
    tokens: int = 0
    cost: float | None = None
    seconds: float = 0.0
    error: str | None = None
    check: int | None = None  # the check's exit code
    base: str | None = None
    final: str | None = None
    files: int = 0
    added: int = 0
    removed: int = 0

    @property
    def passed(self) -> bool:
        return self.error is None and self.turns > 0 and self.check in (None, 0)


def rows_of(entries: Sequence[Entry], store: Store | None = None,
            group: str | None = None) -> list[Row]:
    """The attempts of `group` (default: the newest group in the file), by index."""
    firsts = [e for e in entries if e.get("type") == "message"
              and isinstance(e.get("attempt"), Mapping)]
    if not firsts:
        return []
    wanted = group if group is not None else str(firsts[-1]["attempt"].get("group"))
    firsts = [e for e in firsts if str(e["attempt"].get("group")) == wanted]
    position = {e["id"]: at for at, e in enumerate(entries)}
    children = children_of(entries)
    fork = firsts[0].get("parent_id")
    start = position[firsts[0]["id"]]
    closing = next((at for at, e in enumerate(entries) if at > start and
                    e.get("type") == "branch" and e.get("parent_id") == fork), len(entries))
    rows = []
    for first in sorted(firsts, key=lambda e: _int(e["attempt"].get("index"))):
        own = _own(first["id"], children, position, closing)
        rows.append(_row(first, [entries[at] for at in own], entries, store))
    return rows


def _own(first: str, children: Mapping[str | None, list[str]], position: Mapping[str, int],
         closing: int) -> list[int]:
    """The positions of an attempt's entries: `first` and what hangs under it, written before
    the line that closed the group (after it, the session went on from an adopted one)."""
    found, stack = [], [first]
    while stack:
        current = stack.pop()
        at = position[current]
        if at >= closing and current != first:
            continue
        found.append(at)
        stack.extend(children.get(current, []))
    return sorted(found)


def _row(first: Entry, own: list[Entry], entries: Sequence[Entry], store: Store | None) -> Row:
    meta = first["attempt"]
    model = str(meta.get("model", ""))
    row = Row(str(meta.get("group")), _int(meta.get("index")), _int(meta.get("of")), model,
              str(first["id"]), str(own[-1]["id"]), first.get("parent_id"))
    priced = price_of(model) is not None
    cost = 0.0
    last_message: Mapping[str, Any] | None = None
    for entry in own:
        message = message_of(entry)
        if entry.get("type") == "check":
            code = entry.get("exit_code")
            row.check = code if isinstance(code, int) else -1
        if message is None:
            continue
        last_message = message
        usage = message.get("usage")
        if message.get("role") == "assistant":
            row.turns += 1
            if isinstance(usage, Mapping):
                tokens_in, out, read, write = (int(usage.get(k) or 0) for k in (
                    "input", "output", "cache_read", "cache_write"))
                row.tokens += tokens_in + out + read + write
                cost += cost_of(model, (tokens_in, out, read, write)) or 0.0
    row.cost = cost if priced else None
    if last_message is None or last_message.get("role") != "assistant":
        row.error = "did not finish"
    elif last_message.get("stop_reason") == "aborted":
        row.error = "stopped"
    elif last_message.get("stop_reason") == "error":
        row.error = str(last_message.get("error_message") or last_message.get("stop_reason"))
    row.seconds = _seconds(own[0].get("timestamp"), own[-1].get("timestamp"))
    after = workspace_of(first).get("after")
    row.base = after if isinstance(after, str) else None
    by_id = {e["id"]: e for e in entries}
    row.final = expected_tree([by_id[i] for i in path_ids(entries, row.last_id)])
    if store is not None and row.base and row.final and row.base != row.final:
        try:
            before, after_files = store.load(row.base).files, store.load(row.final).files
            row.files = len(changed_paths(before, after_files))
            lines = snapshot_diff(store, row.base, row.final, cap=1 << 30)
        except FileNotFoundError:  # freed by gc: the counts are unknown, not zero
            lines = []
        row.added = sum(1 for x in lines if x.startswith("+") and not x.startswith("+++"))
        row.removed = sum(1 for x in lines if x.startswith("-") and not x.startswith("---"))
    return row


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


def _seconds(start: Any, end: Any) -> float:
    try:
        return (datetime.fromisoformat(str(end).replace("Z", "+00:00")) -
                datetime.fromisoformat(str(start).replace("Z", "+00:00"))).total_seconds()
    except ValueError:
        return 0.0


def table_lines(rows: Sequence[Row]) -> list[str]:
    """The comparison table, one line per attempt under a header."""
    lines = [f"{'#':>2}  {'model':<24} {'turns':>5} {'tokens':>7} {'cost':>7} {'time':>6}  "
             f"{'check':<16} {'files':>5}  {'+/-':<12} {'last':<6}"]
    for row in rows:
        check = "-" if row.check is None else ("passed" if row.check == 0 else
                                               f"failed (exit {row.check})")
        if row.error:
            check = row.error if row.error == "stopped" else f"error: {row.error}"[:16]
        cost = "-" if row.cost is None else f"${row.cost:.3f}"
        lines.append(f"{row.index:>2}  {row.model[:24]:<24} {row.turns:>5} "
                     f"{_count(row.tokens):>7} {cost:>7} {row.seconds:>5.1f}s  {check:<16} "
                     f"{row.files:>5}  {f'+{row.added} -{row.removed}':<12} {row.last_id:<6}")
    return [line.rstrip() for line in lines]


def _count(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def pick_adopted(rows: Sequence[Row]) -> Row | None:
    """What --adopt takes: the passing attempt with the fewest changed lines, ties to the
    lower index; None when none passed."""
    passing = [r for r in rows if r.passed]
    return min(passing, key=lambda r: (r.added + r.removed, r.index)) if passing else None


def resolve_entry(entries: Sequence[Entry], name: str) -> str:
    """An entry id, or a bare number K: the last entry of attempt K of the newest group.
    ValueError naming it when there is no such attempt."""
    if name.isdigit():
        for row in rows_of(entries):
            if row.index == int(name):
                return row.last_id
        raise ValueError(f"no attempt {name} in this session's newest attempts")
    return name


def compare(log: SessionLog, store: Store | None, a: str, b: str) -> list[str]:
    """Two entries' branches side by side: their files as one diff between their final trees
    (a's tree to b's), then each one's transcript from where they fork. `a` and `b` are entry
    ids or attempt numbers (`resolve_entry`); UnknownEntry names one that is absent."""
    entries = log.entries()
    a, b = resolve_entry(entries, a), resolve_entry(entries, b)
    branch_a, branch_b = log.branch(a), log.branch(b)
    ids_b = {e["id"] for e in branch_b}
    shared = [e for e in branch_a if e["id"] in ids_b]
    fork = shared[-1]["id"] if shared else None
    lines = [f"{a} and {b}: they fork after {fork or '(the start)'}", ""]
    tree_a, tree_b = expected_tree(branch_a), expected_tree(branch_b)
    if store is None or tree_a is None or tree_b is None:
        lines.append("files: (no file checkpoints on one of them)")
    else:
        try:
            diff = snapshot_diff(store, tree_a, tree_b)
        except FileNotFoundError as exc:
            diff = [f"(a snapshot is gone: {exc.strerror})"]
        lines += [f"files, {a} -> {b}:"] + (diff or ["(the same files)"])
    for name, branch in ((a, branch_a), (b, branch_b)):
        lines += ["", f"transcript of {name} from the fork:"]
        after = branch[len(shared):]
        shown = [message_line(m) for m in map(message_of, after) if m is not None]
        checks = [f"check: {e.get('command')} -> exit {e.get('exit_code')}" for e in after
                  if e.get("type") == "check"]
        lines += [f"  {line[:160]}" for line in shown + checks] or ["  (nothing)"]
    return lines
