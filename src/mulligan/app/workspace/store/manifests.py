"""Reading a manifest's JSON fast when another snapshot of the same folder was read just before
(a restore reads two: where the session is, and where it goes back to).

In: a manifest's bytes (already checked against their hash by `blobs.Objects.read`) and the
`Decoded` form of the manifest read before, if any. Out: `Decoded` -- files (path ->
`FileFacts`), skipped, ignored -- and its table of lines for the next read.

`encode` writes one path a line: '],"' (the end of one path's facts and the start of the
next path) gets a newline. A manifest that parses at all has no other newline (a JSON string
holds no raw newline, so one put inside a string by that rule made the whole unreadable:
`encode` now writes such a manifest on one line), so each line but the first and the last
(which hold the header and the trailer too) is exactly one path and its facts. Two
snapshots of a folder share most lines byte for byte: a line already decoded is not decoded
again, and its facts are the same tuple (comparing two manifests' facts is then mostly an
identity check). Only the lines that differ, and the first and the last, go through orjson.

Also here (moved from `snapshots`, which re-exports them): `Manifest` (one snapshot),
`manifest_id` (a snapshot's id from its content), `changed_paths` (what differs between two
manifests' files) and `same_content`.

Never: a result other than decoding the whole JSON would give. A line is reused only when
its bytes equal a line that was one path of a manifest decoded before; each new line must
parse on its own as exactly one path; anything else (an older one-line manifest, a crafted
layout, many new lines) is decoded whole, as before.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import compress, islice
from operator import ne, not_
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from mulligan.app.workspace.store.snapshots import FileFacts

__all__ = ["Decoded", "Manifest", "changed_paths", "decode", "encode", "encode_texts", "listed",
           "manifest_id", "same_content", "text"]

_MOST_NEW = 1024  # lines not seen before, at most, read one by one (else the whole is read)


@dataclass
class Decoded:
    files: dict[str, FileFacts]
    skipped: dict[str, str]
    ignored: list[str]
    lines: list[bytes] | None = None  # one path a line (else None): its lines
    known: dict[str, FileFacts] | None = None  # `files` as decoded (the caller's may change)
    _table: dict[bytes, str] | None = None

    def table(self) -> dict[bytes, str] | None:
        """Each middle line -> its path; made when a second manifest is read, not before."""
        if self._table is None and self.lines is not None and self.known is not None:
            self._table = dict(zip(self.lines[1:-1], islice(self.known, 1, len(self.known) - 1),
                                   strict=True))
        return self._table


@dataclass
class Manifest:
    """One snapshot: `files` maps each path (relative, "/"-separated) to its FileFacts;
    `skipped` maps a path left out to why (its content is unknown); `ignored` lists the
    topmost paths the walk did not enter because git ignores them (as the rules were then),
    or because they are `.git` or Mulligan's own files. `temps` (not stored): leftovers of a
    restore the walk saw."""

    id: str
    files: dict[str, FileFacts]
    skipped: dict[str, str] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)
    temps: list[str] = field(default_factory=list)

    def state(self, rel: str) -> str:
        """"present", "absent", "ignored" or "unknown": what this snapshot knows of `rel`.
        Only "absent" says the path was not there; "ignored" and "unknown" say nothing of it."""
        if rel in self.files:
            return "present"
        ignored = self._ignored_set()
        at = 0
        while True:
            cut = rel.find("/", at)
            prefix = rel if cut < 0 else rel[:cut]
            if prefix in self.skipped:
                return "unknown"
            if prefix in ignored or prefix[at:] == ".git":
                return "ignored"
            if cut < 0:
                break
            at = cut + 1
        return "unknown" if "." in self.skipped else "absent"

    def _ignored_set(self) -> set[str]:
        found = self.__dict__.get("_ignored")
        if found is None:
            found = self.__dict__["_ignored"] = set(self.ignored)
        return found


def encode(root: object, files: dict[str, FileFacts], skipped: dict[str, str],
           ignored: list[str]) -> bytes:
    """A manifest's JSON, one path a line: a newline after each '],"' -- the end of one
    path's facts and the start of the next path -- so that a delta by lines copies every
    path that did not change. A path or link target that itself ends in '],' would take a
    newline inside its string (no JSON): then the manifest is one line, as an old store's."""
    body = orjson.dumps({"version": 1, "root": str(root), "files": files,
                         "skipped": skipped, "ignored": ignored})
    lines = body.replace(b'],"', b'],\n"')
    return lines if lines.count(b"\n") == max(len(files) - 1, 0) else body


def text(entries: Iterable[tuple[str, FileFacts]]) -> bytes | None:
    """(path, facts) pairs (a folder's, in the walk's order) as `encode` writes them in the
    files' object, one path a line, no braces, no newline after the last; None when a path
    or link target holds '],"' (`encode` then writes the manifest on one line)."""
    pairs = dict(entries)
    lines = orjson.dumps(pairs)[1:-1].replace(b'],"', b'],\n"')
    return lines if lines.count(b"\n") == max(len(pairs) - 1, 0) else None


def encode_texts(root: object, texts: Iterable[bytes | None], files: int,
                 skipped: dict[str, str], ignored: list[str]) -> bytes | None:
    """What `encode` makes, byte for byte, from the folders' `text`s (in the walk's order,
    `files` entries in all) -- a look's manifest: a folder nothing named keeps its text, so
    a big tree's manifest costs no encoding of every path. None when `encode` would write
    one line (a text was None, or what is skipped or ignored holds '],"')."""
    parts = []
    for part in texts:
        if part is None:
            return None
        if part:
            parts.append(part)
    head = b'{"version":1,"root":' + orjson.dumps(str(root)) + b',"files":{'
    rest = orjson.dumps({"skipped": skipped, "ignored": ignored})[1:]
    if b'],"' in head or b'],"' in rest:
        return None
    body = b"".join((head, b",\n".join(parts), b"},", rest))
    return body if body.count(b"\n") == max(files - 1, 0) else None


def decode(data: bytes, before: Decoded | None = None) -> Decoded:
    """The manifest in `data`, reusing what `before` decoded where lines are equal.
    ValueError (orjson's) when `data` is not a manifest's JSON."""
    lines = data.split(b"\n")
    if before is not None and before.lines is not None and len(lines) >= 3:
        found = _by_lines(lines, before)
        if found is not None:
            return found
    return _whole(data, lines)


def _whole(data: bytes, lines: list[bytes]) -> Decoded:
    parsed = orjson.loads(data)
    listed = parsed["files"]
    files = dict(zip(listed, map(tuple, listed.values()), strict=True))  # in C
    if len(lines) >= 3 and len(lines) == len(files):  # one path a line (see the docstring)
        return Decoded(files, parsed.get("skipped", {}), parsed.get("ignored", []), lines,
                       dict(files))
    return Decoded(files, parsed.get("skipped", {}), parsed.get("ignored", []))


def _by_lines(lines: list[bytes], before: Decoded) -> Decoded | None:
    """The manifest from its lines, the lines `before` had taken from it; None when the
    layout is not one path a line, or too many lines are new."""
    table, known = before.table(), before.known
    assert table is not None and known is not None
    first, last = lines[0], lines[-1]
    middle = lines[1:-1]
    if not first.endswith(b"],") or not last.startswith(b'"'):
        return None
    try:
        ends: Any = orjson.loads(first + last)  # the header, the first path, the last, the rest
    except orjson.JSONDecodeError:
        return None
    if not isinstance(ends, dict) or not isinstance(ends.get("files"), dict) or \
            len(ends["files"]) != 2:
        return None
    paths = list(map(table.get, middle))
    new = list(compress(middle, map(not_, paths)))  # in C
    if len(new) > _MOST_NEW:
        return None
    fresh: dict[bytes, tuple[str, FileFacts]] = {}
    for line in new:
        try:
            one = orjson.loads(b"{" + line[:-1] + b"}") if line.endswith(b",") else None
        except orjson.JSONDecodeError:
            return None
        if not isinstance(one, dict) or len(one) != 1:
            return None
        [(path, facts)] = one.items()
        fresh[line] = (path, tuple(facts))
    (head_path, head_facts), (tail_path, tail_facts) = ends["files"].items()
    files: dict[str, FileFacts] = {head_path: tuple(head_facts)}
    for line, path in zip(middle, paths, strict=True):
        if not path:
            path, facts = fresh[line]
            files[path] = facts
        else:
            files[path] = known[path]
    files[tail_path] = tuple(tail_facts)
    if len(files) != len(lines):  # a path twice: read whole, as orjson reads it
        return None
    return Decoded(files, ends.get("skipped", {}), ends.get("ignored", []), lines, dict(files))


def changed_paths(before: dict[str, FileFacts], after: dict[str, FileFacts]) -> list[str]:
    """The paths whose kind, mode or content differs between two manifests (mtime and size
    alone are not a change), sorted."""
    # Equal facts first (one C-level compare, most paths of two snapshots of one folder):
    # only the paths whose facts differ are compared by content.
    # (Two manifests a Store read one after the other share their unchanged facts: `is`.)
    differ = [p for p, entry in after.items()
              if (was := before.get(p)) is not entry and was != entry]
    differ.extend(before.keys() - after.keys())
    return sorted(p for p in differ if _content(before.get(p)) != _content(after.get(p)))


def same_content(files: dict[str, FileFacts], other: dict[str, FileFacts]) -> bool:
    """Whether `files` has `other`'s paths in the same order, each with the same kind, mode
    and content (mtime and size aside): then `manifest_id` gives both the same id."""
    if len(files) != len(other) or list(files) != list(other):
        return False
    mine, theirs = files.values(), other.values()
    differ = compress(zip(mine, theirs, strict=True), map(ne, mine, theirs))  # in C
    return all(_content(a) == _content(b) for a, b in differ)


def _content(entry: FileFacts | None) -> tuple[str, int, str] | None:
    return None if entry is None else (entry[0], entry[1], entry[4])


def listed(entries: Iterable[tuple[str, FileFacts]]) -> bytes:
    """(path, facts) pairs as a manifest's id lists them -- [path, kind, mode, hash], comma
    separated, no brackets: the lists of consecutive folders, joined by commas and put in
    brackets, are the bytes `manifest_id` hashes (a look's: `Index.part`)."""
    return orjson.dumps([[p, x[0], x[1], x[4]] for p, x in entries])[1:-1]


def manifest_id(files: dict[str, FileFacts], skipped: dict[str, str], ignored: list[str],
                part: bytes | None = None) -> str:
    """A snapshot's id: its content (kind, mode, hash per path, in the walk's order), what it
    skipped and what it ignored. `part`: the first part, made already from `files` (a
    look's, from the folders' parts: `listed`)."""
    body = part if part is not None else b"[" + listed(files.items()) + b"]"
    if skipped or ignored:
        body += orjson.dumps([sorted(skipped), ignored])
    return hashlib.blake2b(body, digest_size=20).hexdigest()
