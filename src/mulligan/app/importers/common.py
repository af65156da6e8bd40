"""What every importer shares: the nodes a source file is read into, the refusal naming the
file and line, and the reading of JSON lines.

A reader turns a source file into `Source`: its nodes in file order -- each a source id, the
source id of its parent (None: a root), and what becomes of it in Mulligan (a message, a
compaction, a branch summary, a label, a model change, or metadata) -- and the id of the
source's tip. `convert` (`app/importers/convert.py`) numbers them into Mulligan entries.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

__all__ = ["Node", "Source", "Unreadable", "first_lines", "iso", "json_lines"]


class Unreadable(ValueError):
    """A source file (or one line of it) that cannot be read as the tool's session; the
    message names the file and the line."""


@dataclass
class Node:
    """One thing a source file holds. `kind`: "message" (`fields["message"]` is a Mulligan
    message), "compaction" (`summary`, `first_kept` a source id, `tokens_before`),
    "branch_summary" (`summary`, `from_id` a source id), "label" (`target` a source id,
    `label`), "model_change" (`provider`, `model`), or any other entry type (metadata, not
    on the transcript). `source` is what the entry carries as its source metadata."""

    id: str
    parent: str | None
    kind: str
    timestamp: str
    fields: dict[str, Any]
    source: dict[str, Any] = field(default_factory=dict)


@dataclass
class Source:
    """A source file read: its tool and format, its nodes in file order, the source id of its
    tip (None: its last node), its working folder, name and model when it says them, and how
    many lines of each kind carried nothing to import (said, never dropped silently)."""

    tool: str
    format: str
    nodes: list[Node]
    tip: str | None = None
    cwd: str | None = None
    name: str | None = None
    model: str | None = None
    created: str | None = None
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, kind: str) -> None:
        self.skipped[kind] = self.skipped.get(kind, 0) + 1


def json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line of `path`; Unreadable naming the file
    and line for one that is not a JSON object (a torn last line included)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise Unreadable(f"{path}: cannot be read: {exc.strerror or exc}") from None
    yield from _objects(path, data.split(b"\n"))


def first_lines(path: Path, most: int = 5) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of the first `most` lines of `path` (blank ones skipped), read
    as far as they go, not the whole file; refused like `json_lines`."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 -- closed by the with below
    except OSError as exc:
        raise Unreadable(f"{path}: cannot be read: {exc.strerror or exc}") from None
    with handle:
        yield from _objects(path, handle, most)


def _objects(path: Path, lines: Iterable[bytes], most: int | None = None
             ) -> Iterator[tuple[int, dict[str, Any]]]:
    """The parsing both readers share: (number, object) per non-blank line, up to line
    `most`; Unreadable naming `path` and the line for one that is not a JSON object."""
    for number, raw in enumerate(lines, 1):
        if most is not None and number > most:
            return
        if not raw.strip():
            continue
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise Unreadable(f"{path}: line {number} is not JSON ({exc})") from None
        if not isinstance(value, dict):
            raise Unreadable(f"{path}: line {number} is not a JSON object")
        yield number, value


def iso(value: Any, fallback: str = "") -> str:
    """A timestamp as Mulligan writes them (ISO-8601 UTC, milliseconds, Z): from an ISO
    string (kept as it is), epoch seconds, or epoch milliseconds."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = value / 1000 if value > 1e11 else value
        moment = datetime.fromtimestamp(seconds, UTC)
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return fallback


def text_of(content: Any) -> str:
    """The text of a content that is a string or a list of blocks with `text`."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content
                         if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def marked(label: str, text: str) -> dict[str, Any]:
    """A user message standing for something the source sent the model that Mulligan has no
    entry for (a developer message, a hook's message, a shell run by the user): marked as
    imported, so it is never taken for something the user typed here."""
    return {"role": "user", "content": f"[imported {label}]\n{text}"}
