"""The file tools: `read`, `write` and `edit`, over a workspace folder.

Each factory takes the workspace root and returns a `Tool`. The tools raise ToolError with a
message written for the model when they cannot do their job; `run_tool` turns that into the
result. `read` holds its output to the line and byte budget and ends with the offset to continue
from; `write` and `edit` only ever write UTF-8 text.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from mulligan.messages import Content
from mulligan.tools.base import Tool, ToolError
from mulligan.tools.budget import MAX_BYTES, MAX_LINES, cut_utf8_head, split_lines, truncate_head
from mulligan.tools.images import NotAnImage, image_from_bytes, sniff
from mulligan.tools.workspace import Root, Workspace, is_binary

__all__ = ["edit_tool", "read_tool", "write_tool"]

_SNIFF = 8192  # bytes looked at to tell binary from text
_BLOCK = 1 << 18  # bytes read at a time past the window: memory stays a few budgets


def read_tool(
    root: Root, *, max_lines: int = MAX_LINES, max_bytes: int = MAX_BYTES
) -> Tool:
    """The `read` tool: a text file's lines from `offset` (1-based), at most `limit` of them and
    never more than the budget, with a last line naming the offset to continue from. Binary
    files are refused; text that is not UTF-8 is decoded with replacement characters, and the
    result says so on its first line. A PNG, JPEG, GIF or WebP file is returned as the image
    itself (a line saying what it is, then the image block, scaled down to fit)."""
    ws = Workspace.of(root)

    def execute(arguments: dict[str, Any]) -> Content:
        path = arguments["path"]
        offset = int(arguments.get("offset", 1))
        limit = arguments.get("limit")
        file = _existing_file(ws, path, reading=True)
        with file.open("rb") as handle:
            head = handle.read(_SNIFF)
            if sniff(head[:16]) is not None:
                try:
                    block, description = image_from_bytes(head + handle.read(), path)
                except NotAnImage as exc:
                    raise ToolError(str(exc)) from None
                return [{"type": "text", "text": f"[{description}]"}, block]
            if is_binary(head):
                raise ToolError(f"{path} is a binary file ({file.stat().st_size} bytes); read "
                                "shows text only. Use bash (e.g. `file`, `xxd | head`) to "
                                "inspect it.")
            handle.seek(0)
            want = max_lines + 1 if limit is None else min(int(limit), max_lines + 1)
            window, total, first_length = _window(handle, offset, want, max_bytes)
        if not total:
            return f"[{path} is empty.]"
        if offset > total:
            raise ToolError(f"offset {offset} is past the end of {path}, which has "
                            f"{total} lines.")
        text, lossy = _decode(b"".join(window))
        note = (f"[{path} is not valid UTF-8: bytes that could not be decoded are shown as "
                "\ufffd.]\n") if lossy else ""
        kept = truncate_head(text, max_lines, max_bytes)
        if kept.shown == 0:  # one line bigger than the whole budget: show its start, say so
            line = split_lines(text)[0]
            start = cut_utf8_head(line, max_bytes)
            onward = f" Use offset={offset + 1} to continue after it." if offset < total else ""
            return (f"{note}{start}\n[Line {offset} of {path} is {first_length} bytes, "
                    f"over the {max_bytes}-byte budget; only its first "
                    f"{len(start.encode())} bytes are shown. Use bash (e.g. cut -c or "
                    f"head -c) to see the rest of that line.{onward}]")
        body = kept.text
        last = offset + kept.shown - 1
        if last < total:
            if not body.endswith("\n"):
                body += "\n"
            body += (f"[Showing lines {offset}-{last} of {total}. "
                     f"Use offset={last + 1} to continue.]")
        return note + body

    return {
        "name": "read",
        "description": (
            "Read a text file in the workspace. Returns its lines as they are (no line numbers). "
            f"One call returns at most {max_lines} lines or {max_bytes} bytes; when there is "
            "more, the last line says so and gives the offset to continue from. Use offset "
            "(first line, from 1) and limit (number of lines) to read part of a large file. "
            "PNG, JPEG, GIF and WebP images are shown to you as images; other binary files "
            "are refused."),
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace."},
                "offset": {"type": "integer", "minimum": 1,
                           "description": "First line to show, counting from 1. Default 1."},
                "limit": {"type": "integer", "minimum": 1,
                          "description": "How many lines to show at most."},
            },
            "required": ["path"],
            "additionalProperties": False,
        },
        "execute": execute,
    }


def write_tool(root: Root) -> Tool:
    """The `write` tool: create a file, or replace all of it, as UTF-8; parent folders are
    created. Reports the bytes written and whether the file was created or replaced."""
    ws = Workspace.of(root)

    def execute(arguments: dict[str, Any]) -> str:
        path, content = arguments["path"], arguments["content"]
        file = ws.resolve(path)
        if file.is_dir():
            raise ToolError(f"{path} is a folder; write needs a file path.")
        existed = file.exists()
        if existed and not file.is_file():  # writing to a pipe would wait for a reader forever
            raise ToolError(_not_a_file(path))
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise ToolError(f"Cannot create the folders for {path}: part of that path is an "
                            "existing file.") from None
        data = content.encode("utf-8")
        file.write_bytes(data)
        how = "replaced" if existed else "created"
        return f"Wrote {len(data)} bytes to {ws.show(file)} ({how})."

    return {
        "name": "write",
        "description": (
            "Write a text file in the workspace: creates it (and any missing parent folders) or "
            "replaces its whole contents. For a small change to an existing file, use edit."),
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace."},
                "content": {"type": "string", "description": "The complete new contents."},
            },
            "required": ["path", "content"],
            "additionalProperties": False,
        },
        "execute": execute,
    }


def edit_tool(root: Root) -> Tool:
    """The `edit` tool: replace one exact, unique occurrence of old_text with new_text. Zero
    matches and several matches are refused, the latter with the count and line numbers; the
    file is unchanged by a refusal."""
    ws = Workspace.of(root)

    def execute(arguments: dict[str, Any]) -> str:
        path, old, new = arguments["path"], arguments["old_text"], arguments["new_text"]
        if old == new:
            raise ToolError("old_text and new_text are the same; there is nothing to change.")
        file = _existing_file(ws, path)
        data = file.read_bytes()
        if is_binary(data[:_SNIFF]):
            raise ToolError(f"{path} is a binary file; edit changes text files only.")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"{path} is not valid UTF-8, so edit cannot change it without "
                            "damaging it. Use write to replace it whole, or bash.") from None
        found = _occurrences(text, old)
        if not found and "\r\n" in text and "\n" in old and "\r\n" not in old:
            # The model saw the lines, not the CRLF endings; match (and write) as the file does.
            old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
            found = _occurrences(text, old)
        if not found:
            raise ToolError(f"old_text was not found in {path}. It must match the file exactly, "
                            "including whitespace, indentation and line breaks; read the file "
                            "again and copy the text from it.")
        if len(found) > 1:
            lines = [text.count("\n", 0, at) + 1 for at in found]
            shown = ", ".join(map(str, lines[:20])) + (", ..." if len(lines) > 20 else "")
            raise ToolError(f"old_text occurs {len(found)} times in {path} (at lines {shown}); "
                            "it must match exactly one place. Include more surrounding lines "
                            "to make it unique.")
        at = found[0]
        file.write_bytes((text[:at] + new + text[at + len(old):]).encode("utf-8"))
        first = text.count("\n", 0, at) + 1
        return (f"Edited {path}: replaced {_line_count(old)} line(s) at line {first} "
                f"with {_line_count(new)} line(s).")

    return {
        "name": "edit",
        "description": (
            "Edit a text file in the workspace: replace old_text with new_text. old_text must "
            "match exactly one place in the file, character for character (whitespace and "
            "indentation included); include enough surrounding lines to make it unique. To "
            "delete text, use an empty new_text. To rewrite a whole file, use write."),
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace."},
                "old_text": {"type": "string", "minLength": 1,
                             "description": "The exact text to replace; must occur once."},
                "new_text": {"type": "string", "description": "The text to put in its place."},
            },
            "required": ["path", "old_text", "new_text"],
            "additionalProperties": False,
        },
        "execute": execute,
    }


def _existing_file(ws: Workspace, path: str, *, reading: bool = False) -> Path:
    """The real path of an existing file in the workspace (`reading`: or in one of its read
    roots), or a ToolError saying what is wrong."""
    file = ws.resolve(path, reading=reading)
    if not file.exists():
        raise ToolError(f"File not found: {path}. Use ls or find to see what is there.")
    if file.is_dir():
        raise ToolError(f"{path} is a folder, not a file. Use ls to list it.")
    if not file.is_file():  # opening a named pipe would wait for a writer forever
        raise ToolError(_not_a_file(path))
    return file


def _not_a_file(path: str) -> str:
    return (f"{path} is not a regular file (a named pipe, socket or device); the file tools "
            "work on regular files only.")


def _window(
    handle: BinaryIO, offset: int, want: int, max_bytes: int
) -> tuple[list[bytes], int, int]:
    """(lines, total, first_length): up to `want` raw lines from line `offset` on, stopping
    after the first line that takes them over `max_bytes`; the number of lines in the whole
    file; and the full length in bytes of the first line returned. Memory stays within a few
    times the budget whatever the file: a line is never held past `max_bytes` + 1 bytes (a
    longer one is kept as its start, cut on a character boundary, and the rest counted)."""
    window: list[bytes] = []
    size, number, first_length = 0, 0, 0
    cap = max_bytes + 1
    for number, (head, length) in enumerate(_capped_lines(handle, cap), 1):
        if number >= offset:
            window.append(head)
            first_length = first_length or length
            size += len(head)
            if len(window) >= want or size > max_bytes:
                break
    else:
        return window, number, first_length
    # The rest only needs counting: in large blocks, not line by line.
    rest, unfinished = 0, False  # unfinished: the file ends in a line without its newline
    while block := handle.read(_BLOCK):
        rest += block.count(b"\n")
        unfinished = not block.endswith(b"\n")
    return window, number + rest + (1 if unfinished else 0), first_length


def _capped_lines(handle: BinaryIO, cap: int) -> Iterator[tuple[bytes, int]]:
    """(head, length) for each line: the line itself when it is at most `cap` bytes, else its
    first bytes (at most `cap`, ending on a whole UTF-8 character); and its full length in
    bytes, newline included."""
    while head := handle.readline(cap):
        length = len(head)
        if len(head) == cap and not head.endswith(b"\n"):
            while more := handle.readline(_BLOCK):  # skip the rest of a long line
                length += len(more)
                if more.endswith(b"\n"):
                    break
            head = head[:len(head) - _partial_character(head)]
        yield head, length


def _partial_character(data: bytes) -> int:
    """How many bytes at the end of `data` are the start of a UTF-8 character cut short."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # a lead byte (or ASCII): does its sequence fit?
            need = 2 if byte >> 5 == 0b110 else 3 if byte >> 4 == 0b1110 else \
                4 if byte >> 3 == 0b11110 else 1
            return back if need > back else 0
    return 0


def _decode(data: bytes) -> tuple[str, bool]:
    """(text, lossy): UTF-8 if it is, else UTF-8 with replacement characters and lossy True."""
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace"), True


def _occurrences(text: str, needle: str) -> list[int]:
    """Every index where `needle` starts in `text`, overlapping ones included ("aa" in "aaa" is
    two: an edit there would be ambiguous)."""
    found, at = [], text.find(needle)
    while at != -1:
        found.append(at)
        at = text.find(needle, at + 1)
    return found


def _line_count(text: str) -> int:
    return len(split_lines(text))
