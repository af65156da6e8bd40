"""`check(file)`: every problem of a session file, by line number and entry id, not just the
first; the file is read once and never changed (see the package docstring)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import orjson

from mulligan.messages import shape_problem
from mulligan.session import sidecar
from mulligan.session.branches import message_leaves
from mulligan.session.entries import Entry
from mulligan.session.index import _what, ancestors, entry_problem

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




def check(file: str | os.PathLike[str], *,
          entries: Sequence[Entry] | None = None,
          table: sidecar.Table | None = None, count: bool = True) -> CheckReport:
    """Read all of `file` and report every problem: lines that are not JSON objects, entries
    without a string id, duplicate ids, ids that are not "e" + their line number, entries
    without a parent_id key, missing parents, circles, message entries whose message lacks the
    wire shape, a label whose target is missing, and a torn last line. Never changes the
    file. Every line is parsed once (the index, when there is one, is checked against the
    same parse). `entries`: what a `SessionLog`'s full read of this file just gave (every
    line an entry: it refused nothing); they are used instead of parsing the lines again
    when the file still has exactly that many lines, ending with that last entry; `table`,
    with them: the line table that same read built (`SessionLog.table()`), used instead of
    building it again -- and, while the file is as that read saw it (the table's device,
    inode, size and times; its last line that last entry), instead of reading it again.
    A table is built only for a file whose every id is "e" + its line number
    (`sidecar.build` refuses any other), so with it no line can be a duplicate, a bare message
    or a misnumbered id, and the ids are not compared again. `count` False: the problems
    and the tip only, the counts (entries, branches, went_back) left at 0 -- for a caller
    that wants just the problems (`sessions tree`)."""
    name = os.fspath(file)
    report = CheckReport(name)
    seen = _as_read(name, entries, table) if entries is not None and table is not None \
        else None
    if seen is not None:  # `data` is then the last line and what follows it, not the file
        data, ends, torn, size = seen
    else:
        try:
            data = Path(name).read_bytes()
        except FileNotFoundError:
            report.problems.append(f"{name}: no such file")
            return report
        ends = _line_ends(data)
        torn = bytes(data[ends[-1] if ends else 0:])
        size = len(data)
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
    read = _as_numbered(entries, ends) if table is not None else None
    lines: Mapping[str, int] = line_of  # each id's line, for the parents' and labels' checks
    if read is not None:  # what the loop below would find, found at once
        found, lines = read
        last_id = found[-1][1]["id"] if found else None
    view, loads, start = memoryview(data), orjson.loads, 0
    for number, end in enumerate(ends if read is None else (), 1):
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
    report.tip = last_id
    if count:
        report.entries = len(found)
        # from the line table's kinds when the entries are the table's lines: one pass fewer
        # over 100k entries' dicts, which is memory-bound
        branch = sidecar.KINDS["branch"]
        report.went_back = sum(1 for mark in table.marks if mark & 0xFF == branch) \
            if read is not None and table is not None else \
            sum(1 for _, entry in found if entry.get("type") == "branch")
    # with the table, whose every parent is found on an earlier line: no parent problem
    problems.extend(_tree_problems(found, lines, parents_found=table is not None and (
        sidecar.UNRESOLVED not in table.parents)))
    problems.sort(key=_first_line)  # in file order, for a person going down the file
    # "branches" means what `mulligan sessions ls` means by it: the attempts the file holds;
    # counted by the line table the index check builds anyway, when the file is sound
    if problems:
        table = None
    else:  # every line is an entry: `found` is the file, line for line
        if table is None:
            table = _table_of(name, data, [entry for _, entry in found], ends)
        report.index, wrong = _index_state(name, size, table)
        if wrong:
            problems.append(wrong)
    if count:
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


def _as_read(name: str, entries: Sequence[Entry], table: sidecar.Table
             ) -> tuple[bytes, list[int], bytes, int] | None:
    """(the last line with what follows it, the line ends, the torn tail, the size) of the
    file `entries` and `table` were just read from, when it is still as that read saw it:
    the same file state as the table's, no torn tail, and its last line the last entry.
    None when anything differs: the caller reads the whole file again."""
    ends = list(table.ends)
    if table.count != len(entries) or not ends:
        return None
    try:
        with open(name, "rb") as handle:
            if sidecar.file_state(os.fstat(handle.fileno())) != table.state:
                return None
            start = ends[-2] if len(ends) > 1 else 0
            handle.seek(start)
            tail = handle.read()
    except OSError:
        return None
    if start + len(tail) != ends[-1]:
        return None  # a torn tail, or the file changed under us: read it whole
    try:
        if orjson.loads(tail[:-1]) != entries[-1]:
            return None
    except orjson.JSONDecodeError:
        return None
    return tail, ends, b"", ends[-1]


def _as_numbered(entries: Sequence[Entry] | None, ends: list[int]
                 ) -> tuple[list[tuple[int, dict[str, Any]]], Mapping[str, int]] | None:
    """(found, line_of) as the line-by-line loop of `check` makes them, for a full read's
    `entries` of a file with one line each whose line table that read built: every id is
    "e" + its line number (a table is built for no other file), so that loop would name
    nothing and each id's line is its number (`Numbered`, not a dict of 100k ids). None when
    the entries are not one a line."""
    if entries is None or len(entries) != len(ends):
        return None
    dicts = cast(Sequence[dict[str, Any]], entries)
    return list(zip(range(1, len(dicts) + 1), dicts, strict=True)), Numbered(len(dicts))


class Numbered(Mapping[str, int]):
    """The line of each id of a file of `count` lines whose ids are "e" + their line number,
    worked out from the id (`sidecar.number_of`) instead of held."""

    def __init__(self, count: int) -> None:
        self.count = count

    def __getitem__(self, entry_id: str) -> int:
        number = sidecar.number_of(entry_id, self.count)
        if number is None:
            raise KeyError(entry_id)
        return number

    def __contains__(self, entry_id: object) -> bool:
        return sidecar.number_of(entry_id, self.count) is not None

    def __iter__(self) -> Iterator[str]:
        return (f"e{number}" for number in range(1, self.count + 1))

    def __len__(self) -> int:
        return self.count


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
                   line_of: Mapping[str, int], *, parents_found: bool = False) -> Iterable[str]:
    """Problems with parents: each cause once (not once per entry below it). With
    `parents_found` (a line table found every entry's parent key, and each non-null parent on
    an earlier line), only the messages' shapes and the labels' targets are looked at."""
    if parents_found:  # the loop every entry goes through: a message's shape looked at inline
        for number, entry in entries:
            kind = entry.get("type")
            if kind == "message" and shape_problem(entry.get("message")) is None:
                continue
            if kind == "message" or kind == "label":
                problem = _content_problem(number, entry, line_of)
                if problem is not None:
                    yield problem
        return
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
        problem = _content_problem(number, entry, line_of)
        if problem is not None:
            yield problem
    if not backward:
        yield from _circles(parent, line_of)


def _content_problem(number: int, entry: dict[str, Any], line_of: Mapping[str, int]) -> str | None:
    """A message entry's message without the wire shape, or a label whose target is in no
    entry: the problem in words, or None."""
    kind = entry.get("type")
    if kind == "message":
        problem = shape_problem(entry.get("message"))
        if problem is not None:
            return f"line {number}: entry {entry['id']} is a message entry holding {problem}"
    elif kind == "label":
        target = entry.get("target_id")
        if type(target) is str and target not in line_of:
            return f"line {number}: label {entry['id']} names target {target!r}, which is " \
                   "in no entry"
    return None


def _circles(parent: dict[str, str], line_of: Mapping[str, int]) -> Iterable[str]:
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


def _is_object(fragment: bytes) -> bool:
    try:
        return type(orjson.loads(fragment)) is dict
    except orjson.JSONDecodeError:
        return False
