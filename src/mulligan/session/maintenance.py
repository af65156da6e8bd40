"""Tools for damaged and old session files: check, repair, migrate.

`check(file)` reads the whole file and reports every problem it finds, by line number and entry
id, not just the first. `repair(file)` mends one kind of damage only -- a torn last line -- by
moving the fragment, byte for byte, to a set-aside file (`<file>.torn-<time>`) and truncating
the session to its last complete line; everything else is reported and left for a person.
`migrate(old, new)` turns a file written before entries had parents into a new file in the
current format; the old file is never changed. The CLI wires these to
`mulligan session check|repair|migrate`.

Never: delete a byte (the torn fragment is moved, not dropped), change a complete line, or
write over an existing file.
"""

from __future__ import annotations

import fcntl
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from mulligan.home import open_private
from mulligan.messages import shape_problem
from mulligan.session import sidecar
from mulligan.session.branches import message_leaves
from mulligan.session.entries import Entry, timestamp
from mulligan.session.errors import (
    NotAnObject,
    NotOldFormat,
    SessionError,
    TargetExists,
    TornLine,
)
from mulligan.session.index import _what, ancestors, entry_problem
from mulligan.session.stores.storage import fsync_folder, write_all

_SHOW = 50  # problems listed by format(); the rest are counted


@dataclass
class CheckReport:
    """What check() found. ok is True when there is no problem."""

    file: str
    problems: list[str] = field(default_factory=list)
    entries: int = 0
    branches: int = 0  # attempts: message entries no later message follows
    went_back: int = 0  # branch lines: the times the session went back
    tip: str | None = None
    index: str = ""  # the sidecar index's state, in words

    @property
    def ok(self) -> bool:
        return not self.problems

    def format(self) -> str:
        head = (f"{self.file}: {self.entries} entries, {self.branches} "
                f"branch{'es' if self.branches != 1 else ''} (went back {self.went_back} "
                f"time{'s' if self.went_back != 1 else ''}), tip {self.tip or '(none)'}")
        if self.index:
            head += f"\n{self.index}"
        if self.ok:
            return f"{head}\nok"
        lines = [head, f"{len(self.problems)} problem(s):"]
        lines += [f"  {problem}" for problem in self.problems[:_SHOW]]
        if len(self.problems) > _SHOW:
            lines.append(f"  ... and {len(self.problems) - _SHOW} more")
        return "\n".join(lines)


@dataclass
class RepairReport:
    """What repair() did: the torn fragment it set aside (if any), and what it left alone."""

    file: str
    moved_to: str | None = None  # the set-aside file holding the torn fragment
    completed: bool = False  # the last line was a whole entry missing only its newline
    fragment_bytes: int = 0
    kept_bytes: int = 0  # the size of the session after the repair
    problems: list[str] = field(default_factory=list)  # left for a person

    @property
    def ok(self) -> bool:
        """True when the session is sound after the repair."""
        return not self.problems

    def format(self) -> str:
        lines = []
        if self.completed:
            lines.append(f"{self.file}: the last line was a complete entry without its "
                         "newline (a hand edit, say); added the newline, nothing removed")
        elif self.moved_to is not None:
            lines.append(f"{self.file}: set aside a torn last line of {self.fragment_bytes} "
                         f"bytes in {self.moved_to}; the session now ends at byte "
                         f"{self.kept_bytes}, after its last complete line")
        else:
            lines.append(f"{self.file}: no torn last line; nothing changed")
        if self.problems:
            lines.append(f"left for a person ({len(self.problems)}):")
            lines += [f"  {problem}" for problem in self.problems[:_SHOW]]
            if len(self.problems) > _SHOW:
                lines.append(f"  ... and {len(self.problems) - _SHOW} more")
        else:
            lines.append("ok")
        return "\n".join(lines)


# ---- check --------------------------------------------------------------------------------


def check(file: str | os.PathLike[str], *,
          entries: Sequence[Entry] | None = None,
          table: sidecar.Table | None = None) -> CheckReport:
    """Read all of `file` and report every problem: lines that are not JSON objects, entries
    without a string id, duplicate ids, ids that are not "e" + their line number, entries
    without a parent_id key, missing parents, circles, message entries whose message lacks the
    wire shape, a label whose target is missing, and a torn last line. Never changes the
    file. Every line is parsed once (the index, when there is one, is checked against the
    same parse). `entries`: what a `SessionLog`'s full read of this file just gave (every
    line an entry: it refused nothing); they are used instead of parsing the lines again
    when the file still has exactly that many lines, ending with that last entry; `table`,
    with them: the line table that same read built (`SessionLog.table()`), used instead of
    building it again."""
    name = os.fspath(file)
    report = CheckReport(name)
    try:
        data = Path(name).read_bytes()
    except FileNotFoundError:
        report.problems.append(f"{name}: no such file")
        return report
    ends = _line_ends(data)
    torn = bytes(data[ends[-1] if ends else 0:])
    if entries is not None and not _still(entries, data, ends, torn):
        entries = None
    if entries is None or table is None or table.count != len(entries):
        table = None
    found: list[tuple[int, dict[str, Any]]] = []  # (line number, entry), first of each id
    line_of: dict[str, int] = {}
    problems = report.problems
    last_id: str | None = None
    bare: list[int] = []
    unreadable = 0  # lines before this one that are not entries: ids after them shift
    view, loads, start = memoryview(data), orjson.loads, 0
    for number, end in enumerate(ends, 1):
        last_id = None
        if entries is not None:
            entry = entries[number - 1]
        else:
            try:
                entry = loads(view[start:end - 1])
            except orjson.JSONDecodeError as exc:
                problems.append(f"line {number}: not a JSON object ({exc}); delete or mend "
                                f"line {number}")
                unreadable += 1
                continue
            finally:
                start = end
        if type(entry) is not dict:
            problems.append(f"line {number}: not a JSON object but {type(entry).__name__}; "
                            f"delete or mend line {number}")
            unreadable += 1
            continue
        entry_id = entry.get("id")
        if type(entry_id) is not str and "role" in entry and "type" not in entry:
            bare.append(number)  # a message written before entries existed: one problem
            continue
        if type(entry_id) is not str:
            problems.append(f"line {number}: an entry whose id is {_what(entry, 'id')}, not a "
                            f"string; mend line {number}")
            unreadable += 1
            continue
        if entry_id in line_of:
            problems.append(f"line {number}: duplicate id {entry_id} (first on line "
                            f"{line_of[entry_id]}); delete or mend line {number}")
            unreadable += 1
            continue
        if entry_id.startswith("e") and entry_id[1:].isdigit() \
                and entry_id not in (f"e{number}", f"e{number - unreadable}"):
            problems.append(f"line {number}: entry {entry_id} should be e{number} (ids are "
                            "'e' + line number; the next appends could collide with it)")
        # a full read's entries passed the same check (`entry_problem`) when it read them
        typing = entry_problem(entry) if entries is None else None
        if typing is not None:
            problems.append(f"line {number}: entry {entry_id} is {typing}" if typing.startswith(
                ("an ", "a ")) else f"line {number}: entry {entry_id} {typing}")
        line_of[entry_id] = number
        found.append((number, entry))
        last_id = entry_id
    del view
    if bare:
        problems.append(f"{len(bare)} line(s), the first line {bare[0]}, are bare messages "
                        "with no id or parent: a file from before entries had parents; "
                        "`mulligan session migrate OLD NEW` converts it")
    if torn and _is_object(torn):
        problems.append(f"line {len(ends) + 1}: the last line is a whole entry without its "
                        "newline; `mulligan session repair` adds the newline")
    elif torn:
        problems.append(f"line {len(ends) + 1}: torn write: the last line has no newline "
                        f"({len(torn)} bytes); `mulligan session repair` sets it aside")
    report.entries = len(found)
    report.went_back = sum(1 for _, entry in found if entry.get("type") == "branch")
    report.tip = last_id
    problems.extend(_tree_problems(found, line_of))
    problems.sort(key=_first_line)  # in file order, for a person going down the file
    # "branches" means what `mulligan sessions ls` means by it: the attempts the file holds;
    # counted by the line table the index check builds anyway, when the file is sound
    if problems:
        table = None
    else:  # every line is an entry: `found` is the file, line for line
        if table is None:
            table = _table_of(name, data, [entry for _, entry in found], ends)
        report.index, wrong = _index_state(name, len(data), table)
        if wrong:
            problems.append(wrong)
    attempts = table.attempts() if table is not None else None
    report.branches = attempts if attempts is not None else len(
        message_leaves([entry for _, entry in found]))
    return report


def _line_ends(data: bytes) -> list[int]:
    """The offset just after each newline of `data`."""
    ends: list[int] = []
    find, at = data.find, 0
    append = ends.append
    while (at := find(b"\n", at) + 1) > 0:
        append(at)
    return ends


def _still(entries: Sequence[Entry], data: bytes, ends: list[int], torn: bytes) -> bool:
    """Whether `entries` (a full read's) are still the file's lines: as many as it has, none
    torn, the last one the same entry."""
    if torn or len(entries) != len(ends):
        return False
    if not ends:
        return True
    start = ends[-2] if len(ends) > 1 else 0
    try:
        return bool(orjson.loads(data[start:ends[-1] - 1]) == entries[-1])
    except orjson.JSONDecodeError:
        return False


def _table_of(name: str, data: bytes, entries: list[dict[str, Any]],
              ends: list[int]) -> sidecar.Table | None:
    """The line table of the file just read (`entries`, one per line, each ending at `ends`),
    built as an open builds it; None when its ids are not its line numbers."""
    by_id: dict[str, int] = {}
    ups: list[int | None] = []
    for at, entry in enumerate(entries):  # each parent as a read in file order finds it
        parent = entry.get("parent_id")
        ups.append(by_id.get(parent) if type(parent) is str else None)
        by_id[entry["id"]] = at
    last = data[ends[-2] if len(ends) > 1 else 0:ends[-1]] if ends else b""
    return sidecar.build(entries, ends, ups, (0, 0, 0, 0, 0), last)


def _index_state(name: str, size: int, expected: sidecar.Table | None,
                 ) -> tuple[str, str | None]:
    """The sidecar index, checked against the table of the file just read (`size` bytes):
    (its state in words, a problem if it claims to describe the file and does not)."""
    if not os.path.exists(sidecar.sidecar_path(name)):
        return "index: none yet (it is built at the next open)", None
    fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC)
    try:
        stat = os.fstat(fd)
        table = sidecar.load(name, fd, stat) if stat.st_size == size else None
    finally:
        os.close(fd)
    if table is None:
        return "index: stale, ignored (it is rebuilt at the next open)", None
    if expected is None:
        return "", (f"{sidecar.sidecar_path(name)}: the index describes a file whose ids are "
                    "not its line numbers; delete it (it is a cache)")
    if (expected.ends, expected.parents, expected.marks) == (table.ends, table.parents,
                                                              table.marks):  # compared in C
        return f"index: up to date ({table.count} lines)", None
    for at in range(max(expected.count, table.count)):
        if at >= min(expected.count, table.count) or (
                expected.ends[at], expected.parents[at], expected.marks[at]) != (
                table.ends[at], table.parents[at], table.marks[at]):
            return "", (f"line {at + 1}: the index {sidecar.sidecar_path(name)} disagrees "
                        "with the file here; delete it (it is a cache, rebuilt at the next "
                        "open)")
    return f"index: up to date ({table.count} lines)", None


def _first_line(problem: str) -> int:
    found = re.search(r"lines? (\d+)", problem)
    return int(found.group(1)) if found else 0


def _tree_problems(entries: list[tuple[int, dict[str, Any]]],
                   line_of: dict[str, int]) -> Iterable[str]:
    """Problems with parents: each cause once (not once per entry below it)."""
    if entries and not any("parent_id" in entry for _, entry in entries):
        yield (f"lines 1-{entries[-1][0]}: no entry has a parent_id key: a file from before "
               "entries had parents; `mulligan session migrate OLD NEW` converts it")
        return
    parent: dict[str, str] = {}
    backward = True  # every parent on an earlier line: then no circle can be
    for number, entry in entries:
        entry_id = entry["id"]
        if "parent_id" not in entry:
            yield f"line {number}: entry {entry_id} has no parent_id key"
        elif entry["parent_id"] is not None:
            parent_id = entry["parent_id"]
            if type(parent_id) is str and parent_id in line_of:
                parent[entry_id] = parent_id
                backward = backward and line_of[parent_id] < number
            elif type(parent_id) is str:  # any other type is named above, with the entry
                yield f"line {number}: entry {entry_id} names parent {parent_id!r}, which is " \
                      "in no entry"
        problem = shape_problem(entry.get("message")) if entry.get("type") == "message" else None
        if problem is not None:
            yield f"line {number}: entry {entry_id} is a message entry holding {problem}"
        target = entry.get("target_id")
        if entry.get("type") == "label" and type(target) is str and target not in line_of:
            yield f"line {number}: label {entry_id} names target {entry.get('target_id')!r}, " \
                  "which is in no entry"
    if not backward:
        yield from _circles(parent, line_of)


def _circles(parent: dict[str, str], line_of: dict[str, int]) -> Iterable[str]:
    """Each circle of parents once, listed from the entry nearest the top of the file."""
    done: set[str] = set()
    for start in parent:
        if start in done:
            continue
        trail = list(ancestors(start, lambda at: None if at in done else parent.get(at)))
        done.update(trail)
        comes_back = parent.get(trail[-1])
        if comes_back is None or comes_back not in trail:
            continue  # reached a root, or a part of the tree already looked at
        ring = trail[trail.index(comes_back):]
        first = min(range(len(ring)), key=lambda i: line_of[ring[i]])
        ring = ring[first:] + ring[:first]
        shown = " -> ".join(f"{entry_id} (line {line_of[entry_id]})" for entry_id in ring)
        yield f"entries {shown} -> {ring[0]} form a circle: each names the next as its parent"


# ---- repair -------------------------------------------------------------------------------


def repair(file: str | os.PathLike[str]) -> RepairReport:
    """End a last line that is a whole JSON object but lacks its newline (an append: the
    entry stays in the session). Otherwise set a torn last line aside: copy the fragment,
    byte for byte, to `<file>.torn-<UTC time>` next to the session (fsynced), then truncate
    the session to its last complete line. This is the one non-append change ever made to a
    session file, and it is safe: the bytes removed are a write that never finished, no
    reader could use them, and every append would be refused until they are gone; they are
    kept in the set-aside file, never deleted. Holds the session's exclusive lock while it works, so
    no writer interleaves. Any other damage is reported in `problems` and left as it is."""
    name = os.fspath(file)
    report = RepairReport(name)
    try:
        fd = os.open(name, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        report.problems.append(f"{name}: no such file")
        return report
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        keep = _after_last_newline(fd, size)
        report.kept_bytes = size
        if keep < size:
            fragment = os.pread(fd, size - keep, keep)
            if _is_object(fragment):
                # A whole entry that lacks only its newline: ending the line is an append,
                # and keeps the entry in the session.
                os.pwrite(fd, b"\n", size)
                report.completed, report.kept_bytes = True, size + 1
            else:
                report.moved_to = _set_aside(name, fragment)
                report.fragment_bytes = len(fragment)
                os.ftruncate(fd, keep)
                report.kept_bytes = keep
            os.fsync(fd)
    finally:
        os.close(fd)
    report.problems = check(name).problems
    return report


def _is_object(fragment: bytes) -> bool:
    try:
        return type(orjson.loads(fragment)) is dict
    except orjson.JSONDecodeError:
        return False


def _after_last_newline(fd: int, size: int) -> int:
    """The offset just after the last newline in the file (0 if there is none), reading
    backwards in blocks, so a torn tail of any size is found without reading the file."""
    end = size
    block = 1 << 16
    while end > 0:
        start = max(0, end - block)
        chunk = os.pread(fd, end - start, start)
        found = chunk.rfind(b"\n")
        if found >= 0:
            return start + found + 1
        end = start
    return 0


def _set_aside(name: str, fragment: bytes) -> str:
    """Write `fragment` to a new file next to the session and make it durable; never over an
    existing file (a counter is added if the name is taken)."""
    stamp = timestamp().replace(":", "").replace("-", "")
    base = f"{name}.torn-{stamp}"
    for attempt in range(1000):
        target = base if attempt == 0 else f"{base}.{attempt}"
        try:
            fd = open_private(target)
        except FileExistsError:
            continue
        try:
            write_all(fd, fragment)
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_folder(target)
        return target
    raise FileExistsError(f"{base}: too many set-aside files already")


# ---- migrate ------------------------------------------------------------------------------


def migrate(old: str | os.PathLike[str], new: str | os.PathLike[str]) -> int:
    """Convert a session written before entries had parents -- each line a message, or an
    entry without parent_id, in order -- into `new`, where line n gets the id "e<n>" and the
    parent "e<n-1>" (the first: null): the old order becomes one branch. Returns the number
    of entries written.

    An old entry keeps its type, timestamp and extra keys; a bare message becomes a message
    entry; a label's target_id is renamed along with the ids. The old file is never changed.
    Refuses, before writing anything: `new` existing (TargetExists), a line that is not a
    JSON object or a torn last line (named by line number), and a file whose entries already
    have parents (NotOldFormat). `new` appears complete or not at all."""
    old_name, new_name = os.fspath(old), os.fspath(new)
    if os.path.lexists(new_name):
        raise TargetExists("already exists; migrate never writes over a file", file=new_name)
    data = Path(old_name).read_bytes()
    lines = data.split(b"\n")
    torn = lines.pop()
    if torn:
        raise TornLine("the last line has no newline: a torn write (repair it first)",
                       file=old_name, line=len(lines) + 1)
    renamed: dict[str, str] = {}
    converted: list[dict[str, Any]] = []
    for number, raw in enumerate(lines, 1):
        try:
            item = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise NotAnObject(f"not a JSON object ({exc})", file=old_name,
                              line=number) from None
        converted.append(_convert(item, number, old_name, renamed))
    for entry in converted:
        if entry["type"] == "label" and entry.get("target_id") in renamed:
            entry["target_id"] = renamed[entry["target_id"]]
    body = b"".join(orjson.dumps(entry) + b"\n" for entry in converted)
    _write_new(new_name, body)
    return len(converted)


def _convert(item: Any, number: int, old_name: str, renamed: dict[str, str]) -> dict[str, Any]:
    if type(item) is not dict:
        raise NotAnObject(f"not a JSON object but {type(item).__name__}", file=old_name,
                          line=number)
    if "parent_id" in item:
        raise NotOldFormat("already has a parent_id: this file is not from before entries "
                           "had parents, and flattening it would lose its branches",
                           file=old_name, line=number)
    new_id = f"e{number}"
    head = {"id": new_id, "parent_id": f"e{number - 1}" if number > 1 else None}
    if "role" in item and "type" not in item:  # a bare message
        return {"id": new_id, "type": "message", "parent_id": head["parent_id"],
                "timestamp": timestamp(), "message": item}
    if type(item.get("type")) is not str:
        raise NotOldFormat("neither a message (no role) nor an entry (no type)",
                           file=old_name, line=number)
    if type(item.get("id")) is str:
        renamed[item["id"]] = new_id
    rest = {k: v for k, v in item.items() if k not in ("id", "type", "parent_id", "timestamp")}
    return {"id": new_id, "type": item["type"], "parent_id": head["parent_id"],
            "timestamp": item.get("timestamp") or timestamp(), **rest}


def _write_new(new_name: str, body: bytes) -> None:
    """Write `body` to a temporary file beside `new_name`, fsync it, then link it into place:
    link() fails if `new_name` appeared meanwhile, so nothing is ever overwritten, and a crash
    leaves either no file or a complete one."""
    temp = f"{new_name}.migrating-{os.getpid()}"
    folder = os.path.dirname(os.path.abspath(new_name))
    if not os.path.isdir(folder):  # said of the file asked for, not of the temporary one
        raise FileNotFoundError(2, "no such folder", folder)
    fd = open_private(temp)
    try:
        try:
            write_all(fd, body)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temp, new_name)
        except FileExistsError:
            raise TargetExists("already exists; migrate never writes over a file",
                               file=new_name) from None
    finally:
        os.unlink(temp)
    fsync_folder(new_name)


__all__ = ["CheckReport", "RepairReport", "SessionError", "check", "migrate", "repair"]
