"""The stat index: what the last walk of a folder saw, kept so that the next walk -- the first
one after a restart included, when no inotify monitor has watched the folder -- can tell that
nothing changed with one lstat and one compare per path. git's index, for the snapshot store.

``$MULLIGAN_HOME/checkpoints/stat/<folder>.idx`` holds, per folder the walk read (in the
walk's order): the folder's own stat key, the paths it recorded there in name order with
their stat keys (mode, size, mtime, ctime, inode) and their `FileFacts` (the content hash of
a file, the target of a link), the names it found ignored, the stat key of its
``.gitignore``, and whether the folder may be taken whole next time (`Folder.clean`). The
header names the snapshot the index describes, the folder, `.git/info/exclude`'s stat key,
Mulligan's own files in the folder and the size cap, which must all be the same for any of it
to be used. The format is flat columns (one string table, one array of 64-bit integers)
loaded with a few C-level calls whatever the folder's size, and a CRC-32 of the whole: a
damaged or foreign file is no index (everything is read again), never an error.

The racy-clean rule (git's Documentation/technical/racy-git.txt). A file rewritten in the
same clock tick as the stat that recorded it keeps its size, mtime and ctime: its stat says
"unchanged" while its content is not. git treats an entry whose mtime is not older than the
index file's own mtime as "racily clean" and compares its content. Here the index's time
(`Index.racy_from`) is the moment the walk that wrote it *started*, less `MARGIN` -- earlier
than git's, so strictly more entries are racy: it also covers a file rewritten after the walk
read it but before the index was written, and a filesystem whose timestamps are coarse (FAT's
2 s, 1 s on some others) or run a tick behind the wall clock. An entry or folder whose mtime
or ctime is at or after that time is never trusted: its content is hashed again (a folder's
names are read again), and it is not `clean`. Not covered: a filesystem whose clock runs more
than `MARGIN` behind this machine's (a network share with a skewed server).

In: the bytes `dump` wrote, or a walk's `Recorded` folders (`build`). Out: an `Index`, or
None. Never: trust a file that does not check, raise for a damaged index.
"""

from __future__ import annotations

import operator
import os
import re
import struct
import zlib
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

__all__ = ["MARGIN", "Folder", "Index", "Key", "Recorded", "build", "dump", "key_of",
           "load", "parse"]

MAGIC = b"MULSTAT1"
MARGIN = 2_000_000_000  # ns before a walk's start from which a stat is "racy" (see above)
KINDS = ("file", "link", "dir")
_KIND = {kind: n for n, kind in enumerate(KINDS)}
_HEX40 = re.compile(r"[0-9a-f]{40}")
_HEAD = struct.Struct("<8sIIIII")  # magic, meta bytes, strings bytes, folders, entries, ignored

Key = tuple[int, int, int, int, int]  # (st_mode, st_size, st_mtime_ns, st_ctime_ns, st_ino)
key_of: Any = operator.attrgetter("st_mode", "st_size", "st_mtime_ns", "st_ctime_ns", "st_ino")
FileFacts = tuple[str, int, int, int, str]  # as snapshots.FileFacts (not imported: a cycle)


class Folder(NamedTuple):
    """One folder as the index has it: its entries are `Index.rels/keys/facts[start:start +
    entries]`, its ignored names `Index.ignored[ign:ign + ignored]`."""

    start: int
    entries: int
    ign: int
    ignored: int
    key: Key  # the folder's own stat key, taken before its names were read
    rules: Key | None  # its .gitignore's stat key (followed, as git reads it); None: none
    clean: bool  # nothing racy, skipped or left over in it: it may be taken whole


@dataclass
class Recorded:
    """One folder as a walk saw it, to be written: `rels` in name order with their `keys`
    and `facts` (the manifest's), the topmost `ignored` paths, and why it is not `clean`."""

    rel: str
    key: Key
    rules: Key | None
    rels: list[str]
    keys: list[Key]
    facts: list[FileFacts]
    ignored: list[str]
    clean: bool


@dataclass
class Index:
    """A loaded index. `racy_from`: a stat whose mtime or ctime is at or after this (ns) is
    racy (never trusted). `tree`: the snapshot id the index describes. `meta`: what must be
    unchanged for any of it to count (`same_rules`)."""

    racy_from: int
    tree: str
    meta: dict[str, Any]
    folders: dict[str, Folder]
    rels: list[str]
    keys: list[Key]
    facts: list[FileFacts]
    ignored: list[str]

    def racy(self, key: Key) -> bool:
        return key[2] >= self.racy_from or key[3] >= self.racy_from


def build(started: int, tree: str, meta: dict[str, Any], folders: Sequence[Recorded]
          ) -> Index:
    """The index of a walk that began at `started` (time.time_ns()), recorded `tree`, and saw
    `folders` (in its order): what the next walk in this process uses, and what `dump`
    writes."""
    table: dict[str, Folder] = {}
    rels: list[str] = []
    keys: list[Key] = []
    facts: list[FileFacts] = []
    ignored: list[str] = []
    for f in folders:
        table[f.rel] = Folder(len(rels), len(f.rels), len(ignored), len(f.ignored), f.key,
                              f.rules, f.clean)
        rels += f.rels
        keys += f.keys
        facts += f.facts
        ignored += f.ignored
    return Index(started - MARGIN, tree, {**meta, "started": started, "tree": tree}, table,
                 rels, keys, facts, ignored)


def dump(index: Index) -> bytes:
    """`index` as `parse` reads it back."""
    folders = index.folders
    strings: list[str] = list(folders)
    ints = array("q")
    for f in folders.values():  # entries, ignored, key x5, has rules, rules x5, clean, 0, 0
        ints.extend((f.entries, f.ignored, *f.key, f.rules is not None,
                     *(f.rules or (0, 0, 0, 0, 0)), f.clean, 0, 0))
    keys, facts = index.keys, index.facts
    for column in range(5):
        ints.extend(k[column] for k in keys)
    ints.extend(_KIND[x[0]] for x in facts)
    ints.extend(x[1] for x in facts)
    ints.extend(x[2] for x in facts)
    ints.extend(x[3] for x in facts)
    strings += index.rels
    strings += [x[4] for x in facts]
    strings += index.ignored
    text = "\0".join(strings).encode("utf-8", "surrogateescape")
    head = orjson.dumps(index.meta)
    body = _HEAD.pack(MAGIC, len(head), len(text), len(folders), len(keys),
                      len(index.ignored)) + head + text + ints.tobytes()
    return body + struct.pack("<I", zlib.crc32(body))


def load(path: str | os.PathLike[str]) -> Index | None:
    """The index in `path`; None when there is none or it does not check."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    return parse(data)


def parse(data: bytes) -> Index | None:
    """The index `dump` wrote; None for anything else (damaged, foreign, another version)."""
    try:
        if len(data) < _HEAD.size + 4 or struct.unpack("<I", data[-4:])[0] != \
                zlib.crc32(memoryview(data)[:-4]):
            return None
        magic, meta_len, text_len, n, count, n_ign = _HEAD.unpack_from(data)
        if magic != MAGIC:
            return None
        at = _HEAD.size
        meta = orjson.loads(data[at:at + meta_len])
        at += meta_len
        strings = data[at:at + text_len].decode("utf-8", "surrogateescape").split("\0") \
            if n + 2 * count + n_ign else []
        at += text_len
        ints = array("q")
        ints.frombytes(data[at:-4])
        if len(strings) != n + 2 * count + n_ign or len(ints) != n * 16 + count * 9 or \
                not isinstance(meta, dict):
            return None
        per = ints[:n * 16]
        col = [ints[n * 16 + c * count:n * 16 + (c + 1) * count] for c in range(9)]
        keys: list[Key] = list(zip(col[0], col[1], col[2], col[3], col[4], strict=True))
        rels = strings[n:n + count]
        facts: list[FileFacts] = list(zip(map(KINDS.__getitem__, col[5]), col[6], col[7],
                                          col[8], strings[n + count:n + 2 * count],
                                          strict=True))
        folders: dict[str, Folder] = {}
        start = ign = 0
        for i, rel in enumerate(strings[:n]):
            row = per[i * 16:(i + 1) * 16]
            folders[rel] = Folder(start, row[0], ign, row[1], tuple(row[2:7]),  # type: ignore[arg-type]
                                  tuple(row[8:13]) if row[7] else None,  # type: ignore[arg-type]
                                  bool(row[13]))
            start += row[0]
            ign += row[1]
        if start != count or ign != n_ign:
            return None
        if not isinstance(meta.get("tree"), str) or not _HEX40.fullmatch(meta["tree"]):
            return None  # it becomes a path: 40 hex digits or nothing
        return Index(int(meta["started"]) - MARGIN, str(meta["tree"]), meta, folders, rels,
                     keys, facts, strings[n + 2 * count:])
    except (ValueError, KeyError, TypeError, IndexError, struct.error):
        return None
