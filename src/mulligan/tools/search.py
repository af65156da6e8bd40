"""The looking tools: `ls`, `grep` and `find`, over a workspace folder.

Each factory takes the workspace root and returns a `Tool`. Walks are sorted, never enter
.git (nor the other SKIPPED_DIRS) unless a path points there, never follow a symlink out of
the workspace, and pass over binary files. Output is held to the line and byte budget, and a
last line says how to narrow the search when it was cut.
"""

from __future__ import annotations

import codecs
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mulligan.tools.base import Tool, ToolError
from mulligan.tools.budget import MAX_BYTES, MAX_LINES, truncate_head
from mulligan.tools.workspace import SKIPPED_DIRS, Root, Workspace, is_binary

__all__ = ["find_tool", "glob_matcher", "grep_tool", "ls_tool"]

_SNIFF = 8192  # bytes looked at to tell binary from text
_LONG_LINE = 500  # characters of one matching line shown by grep
_SKIPPED = ", ".join(sorted(SKIPPED_DIRS))


def ls_tool(
    root: Root, *, max_lines: int = MAX_LINES, max_bytes: int = MAX_BYTES
) -> Tool:
    """The `ls` tool: the entries of one folder, sorted, folders marked with a trailing "/"."""
    ws = Workspace.of(root)

    def execute(arguments: dict[str, Any]) -> str:
        path = arguments.get("path", ".")
        folder = ws.resolve(path)
        if not folder.exists():
            raise ToolError(f"Folder not found: {path}.")
        if not folder.is_dir():
            raise ToolError(f"{path} is a file, not a folder. Use read to see it.")
        names = sorted(entry.name + ("/" if _is_dir(entry) else "")
                       for entry in os.scandir(folder))
        if not names:
            return f"({path} is empty)"
        kept = truncate_head("\n".join(names) + "\n", max_lines, max_bytes)
        return kept.text + (f"[Showing {kept.shown} of {kept.total} entries. Use find with a "
                            "pattern to narrow the list.]" if kept.truncated else "")

    return {
        "name": "ls",
        "description": (
            "List a folder in the workspace: entry names sorted, folders marked with a trailing "
            f"'/', hidden entries included. At most {max_lines} entries or {max_bytes} bytes "
            "come back; use find with a pattern for big folders."),
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string",
                         "description": "Folder, relative to the workspace. Default '.'."},
            },
            "additionalProperties": False,
        },
        "execute": execute,
    }


def grep_tool(
    root: Root, *, max_lines: int = MAX_LINES, max_bytes: int = MAX_BYTES
) -> Tool:
    """The `grep` tool: lines matching a Python regular expression, as "file:line: text"."""
    ws = Workspace.of(root)

    def execute(arguments: dict[str, Any]) -> str:
        pattern, path = arguments["pattern"], arguments.get("path", ".")
        limit = int(arguments.get("limit", 100))
        try:
            regex = re.compile(pattern, re.IGNORECASE if arguments.get("ignore_case") else 0)
        except re.error as exc:
            raise ToolError(f"Invalid regular expression {pattern!r}: {exc}.") from None
        start = ws.resolve(path)
        if not start.exists():
            raise ToolError(f"Not found: {path}.")
        glob = arguments.get("glob")
        wanted = glob_matcher(glob) if glob else None
        hits: list[str] = []
        files = [start] if start.is_file() else ws.walk(start)
        for file in files:
            if wanted and not wanted(file.relative_to(start).as_posix() if file != start
                                     else file.name):
                continue
            hits.extend(_matches(file, regex, ws.show(file), limit - len(hits)))
            if len(hits) >= limit:
                break
        if not hits:
            only = f" (files matching {glob})" if glob else ""
            return f"No matches for {pattern!r} in {_place(path)}{only}."
        kept = truncate_head("\n".join(hits) + "\n", max_lines, max_bytes)
        text = kept.text
        if kept.truncated:
            text += (f"[Showing {kept.shown} of {kept.total} matches. Narrow the pattern, path "
                     "or glob.]")
        elif len(hits) >= limit:
            text += (f"[Stopped at limit={limit} matches; there may be more. Narrow the pattern, "
                     "path or glob, or raise limit.]")
        return text

    return {
        "name": "grep",
        "description": (
            "Search file contents in the workspace for a regular expression (Python syntax). "
            "Returns matching lines as 'file:line: text'. Searches a folder recursively (or one "
            f"file), skipping binary files and the folders {_SKIPPED}. Stops after `limit` "
            f"matches (default 100); at most {max_lines} lines or {max_bytes} bytes come back. "
            "Narrow with path and glob."),
        "parameters": {
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Regular expression to search for."},
                "path": {"type": "string",
                         "description": "Folder or file to search. Default '.'."},
                "glob": {"type": "string",
                         "description": "Only files matching this glob, e.g. '*.py' or "
                                        "'src/**/*.ts'."},
                "ignore_case": {"type": "boolean", "description": "Match case-insensitively."},
                "limit": {"type": "integer", "minimum": 1,
                          "description": "Most matches to return. Default 100."},
            },
            "required": ["pattern"],
            "additionalProperties": False,
        },
        "execute": execute,
    }


def find_tool(
    root: Root, *, max_lines: int = MAX_LINES, max_bytes: int = MAX_BYTES
) -> Tool:
    """The `find` tool: paths matching a glob, sorted, folders marked with a trailing "/"."""
    ws = Workspace.of(root)

    def execute(arguments: dict[str, Any]) -> str:
        pattern, path = arguments["pattern"], arguments.get("path", ".")
        start = ws.resolve(path)
        if not start.is_dir():
            raise ToolError(f"Folder not found: {path}." if not start.exists()
                            else f"{path} is a file, not a folder.")
        wanted = glob_matcher(pattern)
        found = sorted(ws.show(p) + ("/" if p.is_dir() else "")
                       for p in ws.walk(start, dirs=True)
                       if wanted(p.relative_to(start).as_posix()))
        if not found:
            return f"No paths match {pattern!r} in {_place(path)}."
        kept = truncate_head("\n".join(found) + "\n", max_lines, max_bytes)
        return kept.text + (f"[Showing {kept.shown} of {kept.total} paths. Use a narrower "
                            "pattern or path.]" if kept.truncated else "")

    return {
        "name": "find",
        "description": (
            "Find files and folders in the workspace by glob pattern, e.g. '**/*.py' or "
            "'src/*/test_*.py'. '**' spans folders, '*' stays within one; a pattern without '/' "
            "matches names at any depth. Braces work: '*.{ts,tsx}'. Paths come back sorted, "
            f"relative to the workspace, folders ending in '/'; {_SKIPPED} are skipped. At "
            f"most {max_lines} paths or {max_bytes} bytes come back."),
        "parameters": {
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Glob pattern to match."},
                "path": {"type": "string",
                         "description": "Folder to search in. Default '.'."},
            },
            "required": ["pattern"],
            "additionalProperties": False,
        },
        "execute": execute,
    }


def glob_matcher(pattern: str) -> Callable[[str], bool]:
    """A test for "/"-separated relative paths against a glob: '**' spans folders, '*' and '?'
    stay within one name, [abc] is a class, {a,b} alternatives. A pattern without "/" is
    tried against the last name only, so '*.py' finds Python files at any depth."""
    pattern = pattern.removeprefix("./")
    regexes = [re.compile(_glob_regex(p)) for p in _expand_braces(pattern)]
    if "/" not in pattern:
        return lambda path: any(r.fullmatch(path.rsplit("/", 1)[-1]) for r in regexes)
    return lambda path: any(r.fullmatch(path) for r in regexes)


def _expand_braces(pattern: str) -> list[str]:
    """'a.{py,md}' -> ['a.py', 'a.md']; nested braces work; an unclosed brace is literal."""
    open_at = pattern.find("{")
    if open_at == -1:
        return [pattern]
    depth, parts, begin = 0, [], open_at + 1
    for i in range(open_at, len(pattern)):
        char = pattern[i]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                parts.append(pattern[begin:i])
                head, tail = pattern[:open_at], pattern[i + 1:]
                return [head + choice + rest for part in parts
                        for choice in _expand_braces(part) for rest in _expand_braces(tail)]
        elif char == "," and depth == 1:
            parts.append(pattern[begin:i])
            begin = i + 1
    return [pattern]


def _glob_regex(pattern: str) -> str:
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        char = pattern[i]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and (close := pattern.find("]", i + 2)) != -1:
            inside = pattern[i + 1:close]
            if inside.startswith("!"):
                inside = "^" + inside[1:]
            out.append("[" + inside.replace("\\", "\\\\") + "]")
            i = close + 1
            continue
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def _is_dir(entry: os.DirEntry[str]) -> bool:
    """Whether an entry is a folder or a link to one; False for a link that loops."""
    try:
        return entry.is_dir()
    except OSError:
        return False


def _place(path: str) -> str:
    return "the workspace" if path in (".", "./", "") else path


def _matches(file: Path, regex: re.Pattern[str], shown: str, room: int) -> list[str]:
    """Up to `room` "file:line: text" hits in one file; [] for a binary or unreadable file, and
    for anything but a regular file (opening a named pipe would wait for a writer forever).
    Memory stays within a few pieces whatever the file: a line is read at most `_PIECE` bytes
    at a time, and a longer one is searched window by window (`_long_line_matches`)."""
    hits: list[str] = []
    if not file.is_file():
        return hits
    try:
        with file.open("rb") as handle:
            if is_binary(handle.read(_SNIFF)):
                return []
            handle.seek(0)
            number = 0
            while len(hits) < room:
                raw = handle.readline(_PIECE)
                if not raw:
                    break
                number += 1
                if len(raw) < _PIECE or raw.endswith(b"\n"):  # a whole line: the usual case
                    line = raw.decode("utf-8", errors="replace").rstrip("\n").rstrip("\r")
                    found = regex.search(line) is not None
                else:
                    found, line = _long_line_matches(handle, raw, regex)
                if found:
                    if len(line) > _LONG_LINE:
                        line = line[:_LONG_LINE] + " [...]"
                    hits.append(f"{shown}:{number}: {line}")
    except OSError:
        pass  # vanished or unreadable mid-walk: a search passes over it, keeping what it found
    return hits


_PIECE = 1 << 20  # bytes of a line read at once
_OVERLAP = 1 << 16  # characters of a long line searched again at the start of the next window


def _long_line_matches(handle: Any, first: bytes, regex: re.Pattern[str]) -> tuple[bool, str]:
    """Whether the line that starts with `first` (a piece with no newline) matches, reading the
    rest of it from `handle` a piece at a time and leaving `handle` at the next line; and the
    line's start (enough to show). Each window is the piece plus the end of the one before
    (`_OVERLAP` characters): a match spanning more than that across two pieces is missed. A
    window that is not the line's start or end is searched so that `^` and `$` match only
    there (a non-newline character on each side, outside the search)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    text, start, carry, found, raw = decoder.decode(first), None, "", False, first
    while True:
        start = text[:_LONG_LINE + 1] if start is None else start
        last = len(raw) < _PIECE or raw.endswith(b"\n")
        if last:
            text = text.rstrip("\n").rstrip("\r")
        if not found:
            window = "x" + carry + text + ("" if last else "x")
            match = regex.search(window, 1, len(window))
            found = match is not None and (last or match.end() < len(window))
            carry = window[1:len(window) - (0 if last else 1)][-_OVERLAP:]
        if last:
            return found, start
        raw = handle.readline(_PIECE)
        text = decoder.decode(raw, final=len(raw) < _PIECE or raw.endswith(b"\n"))
