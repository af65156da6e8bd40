"""`migrate(old, new)`: a file written before entries had parents, as a new file in the current
format; the old file is never changed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from mulligan.home import open_private
from mulligan.session.entries import timestamp
from mulligan.session.errors import (
    NotAnObject,
    NotOldFormat,
    TargetExists,
    TornLine,
)
from mulligan.session.stores.storage import fsync_folder, write_all


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
