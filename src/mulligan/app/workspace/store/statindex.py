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
import threading
import zlib
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

import orjson

from mulligan.app.workspace.store.manifests import listed
from mulligan.app.workspace.store.manifests import text as folder_text

__all__ = ["MARGIN", "Folder", "Index", "Key", "Recorded", "build", "dump", "key_of",
           "load", "parse", "stat_ahead"]

MAGIC = b"MULSTAT1"
MARGIN = 2_000_000_000  # ns before a walk's start from which a stat is "racy" (see above)
KINDS = ("file", "link", "dir")
_KIND = {kind: n for n, kind in enumerate(KINDS)}
_HEX40 = re.compile(r"[0-9a-f]{40}")
_HEAD = struct.Struct("<8sIIIII")  # magic, meta bytes, strings bytes, folders, entries, ignored

Key = tuple[int, int, int, int, int]  # (st_mode, st_size, st_mtime_ns, st_ctime_ns, st_ino)
key_of: Any = operator.attrgetter("st_mode", "st_size", "st_mtime_ns", "st_ctime_ns", "st_ino")
_T = TypeVar("_T")
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
    unchanged for any of it to count (`same_rules`). The entries' stat keys stay in
    `columns` (st_mode x count, st_size x count, ... as the file has them): a walk that finds
    them unchanged compares them natively and never makes a tuple of them (`keys_of`)."""

    racy_from: int
    tree: str
    meta: dict[str, Any]
    folders: dict[str, Folder]
    rels: list[str]
    facts: list[FileFacts]
    ignored: list[str]
    # The stat keys: columns (read from a file) or tuples (built from a walk), the other made
    # only when asked for -- a watched walk's index in memory never needs its columns.
    _columns: array[int] | None = None
    _keys: list[Key] | None = None
    # `rels` as the file holds them: NUL-separated bytes, after `_skip` other names.
    _names: bytes | memoryview | None = None
    _skip: int = 0
    _children: dict[str, list[str]] | None = None
    _inodes: list[int] | None = None
    _shared: set[int] | None = None  # the inodes more than one entry has (hard links)
    _parts: dict[str, bytes] | None = None  # per folder, its entries as `listed` has them
    _texts: dict[str, bytes | None] | None = None  # per folder, as `manifests.text` has them

    def racy(self, key: Key) -> bool:
        return key[2] >= self.racy_from or key[3] >= self.racy_from

    @property
    def columns(self) -> array[int]:
        """Every entry's st_mode, then every st_size, st_mtime_ns, st_ctime_ns, st_ino."""
        if self._columns is None:
            keys = self._keys or []
            self._columns = array("q")
            for column in range(5):
                self._columns.extend([k[column] for k in keys])
        return self._columns

    def keys_of(self, start: int, end: int) -> list[Key]:
        """The stat keys of entries `start` to `end`."""
        if self._keys is not None:
            return self._keys[start:end]
        c, n = self.columns, len(self.rels)
        return list(zip(c[start:end], c[n + start:n + end], c[2 * n + start:2 * n + end],
                        c[3 * n + start:3 * n + end], c[4 * n + start:4 * n + end],
                        strict=True))

    def key(self, at: int) -> Key:
        if self._keys is not None:
            return self._keys[at]
        c, n = self.columns, len(self.rels)
        return c[at], c[n + at], c[2 * n + at], c[3 * n + at], c[4 * n + at]

    def children(self) -> dict[str, list[str]]:
        """Each folder's subfolders the walk read, in its order (made once)."""
        if self._children is None:
            found: dict[str, list[str]] = {}
            for rel in self.folders:
                if rel:
                    found.setdefault(rel.rpartition("/")[0], []).append(rel)
            self._children = found
        return self._children

    def inodes(self) -> list[int]:
        """Every entry's inode, in order (made once)."""
        if self._inodes is None:
            if self._keys is not None:
                self._inodes = [k[4] for k in self._keys]
            else:
                count = len(self.rels)
                self._inodes = self.columns[4 * count:5 * count].tolist()
        return self._inodes

    def shared(self) -> set[int]:
        """The inodes more than one entry has: hard links (made once, unless given)."""
        if self._shared is None:
            inodes = self.inodes()
            if len(set(inodes)) == len(inodes):
                self._shared = set()
            else:
                seen: set[int] = set()
                self._shared = set()
                for inode in inodes:
                    (self._shared if inode in seen else seen).add(inode)
        return self._shared

    def part(self, rel: str) -> bytes:
        """Folder `rel`'s entries as a manifest's id lists them (`manifests.listed`), made
        once."""
        if self._parts is None:
            self._parts = {}
        return _made(self._parts, rel, self, listed)

    def text(self, rel: str) -> bytes | None:
        """Folder `rel`'s entries as a manifest writes them (`manifests.text`), made once."""
        if self._texts is None:
            self._texts = {}
        return _made(self._texts, rel, self, folder_text)

    def names(self) -> tuple[bytes | memoryview, int]:
        """(`rels` as bytes, NUL-separated, as the file system has them; how many names come
        before them there) -- what `_lstats.differ` reads."""
        if self._names is None:
            self._names = "\0".join(self.rels).encode("utf-8", "surrogateescape")
            self._skip = 0
        return self._names, self._skip


def _made(cache: dict[str, _T], rel: str, index: Index,
          make: Callable[[Iterator[tuple[str, FileFacts]]], _T]) -> _T:
    """`cache[rel]`, made first from folder `rel`'s (path, facts) pairs if it is not there."""
    if rel not in cache:
        folder = index.folders[rel]
        end = folder.start + folder.entries
        cache[rel] = make(zip(index.rels[folder.start:end], index.facts[folder.start:end],
                              strict=True))
    return cache[rel]


def build(started: int, tree: str, meta: dict[str, Any], folders: Sequence[Recorded],
          shared: set[int] | None = None, parts: dict[str, bytes] | None = None,
          texts: dict[str, bytes | None] | None = None) -> Index:
    """The index of a walk that began at `started` (time.time_ns()), recorded `tree`, and saw
    `folders` (in its order): what the next walk in this process uses, and what `dump`
    writes. `shared`: a superset of its entries' shared inodes, if known (`Index.shared`)."""
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
                 rels, facts, ignored, _keys=keys, _shared=shared, _parts=parts,
                 _texts=texts)


def dump(index: Index) -> bytes:
    """`index` as `parse` reads it back."""
    folders = index.folders
    strings: list[str] = list(folders)
    ints = array("q")
    for f in folders.values():  # entries, ignored, key x5, has rules, rules x5, clean, 0, 0
        ints.extend((f.entries, f.ignored, *f.key, f.rules is not None,
                     *(f.rules or (0, 0, 0, 0, 0)), f.clean, 0, 0))
    facts = index.facts
    ints.extend(index.columns)
    ints.extend(_KIND[x[0]] for x in facts)
    ints.extend(x[1] for x in facts)
    ints.extend(x[2] for x in facts)
    ints.extend(x[3] for x in facts)
    strings += index.rels
    strings += [x[4] for x in facts]
    strings += index.ignored
    text = "\0".join(strings).encode("utf-8", "surrogateescape")
    head = orjson.dumps(index.meta)
    body = _HEAD.pack(MAGIC, len(head), len(text), len(folders), len(index.rels),
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
        text_at = at
        strings = data[at:at + text_len].decode("utf-8", "surrogateescape").split("\0") \
            if n + 2 * count + n_ign else []
        at += text_len
        ints = array("q")
        ints.frombytes(data[at:-4])
        if len(strings) != n + 2 * count + n_ign or len(ints) != n * 16 + count * 9 or \
                not isinstance(meta, dict):
            return None
        per = ints[:n * 16]
        col = [ints[n * 16 + c * count:n * 16 + (c + 1) * count] for c in range(5, 9)]
        rels = strings[n:n + count]
        facts: list[FileFacts] = list(zip(map(KINDS.__getitem__, col[0]), col[1], col[2],
                                          col[3], strings[n + count:n + 2 * count],
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
                     facts, strings[n + 2 * count:], _columns=ints[n * 16:n * 16 + 5 * count],
                     _names=memoryview(data)[text_at:text_at + text_len], _skip=n)
    except (ValueError, KeyError, TypeError, IndexError, struct.error):
        return None


def stat_ahead(index: Index, rootfd: int, lstat: Callable[[str], os.stat_result],
                native: Any) -> tuple[list[int], set[str] | None] | None:
    """For a walk no monitor watches (a watched folder's entries must be stated after it is
    watched): the positions of the index's entries whose lstat is not the recorded key (or
    that are gone), ascending, and the folders whose .gitignore's stat is not the recorded
    one (None: not stated ahead, `Walk._whole` states each).

    Natively (`native`: the `_lstats` module, when it was built): every path stated with the
    interpreter lock released, on two threads past 2,000 paths as git's preload-index does,
    and no Python object made but the positions that differ. Without it, in Python, and only
    past 4,096 paths: two threads, the system call releasing the lock so that one thread's
    stat overlaps the other's Python part."""
    count = len(index.rels)
    if native is not None:
        names, skip = index.names()
        differ = native.differ(rootfd, names, skip, count, index.columns, count, False,
                                2 if count > 2000 else 1)
        folders = list(index.folders.items())
        rules = array("q", bytes(40 * len(folders)))  # (0, 0, 0, 0, 0): no .gitignore
        n = len(folders)
        for at, (_, folder) in enumerate(folders):
            if folder.rules is not None:
                for column, value in enumerate(folder.rules):
                    rules[column * n + at] = value
        paths = "\0".join(f"{rel}/.gitignore" if rel else ".gitignore" for rel, _ in folders)
        changed = native.differ(rootfd, paths.encode("utf-8", "surrogateescape"), 0, n,
                                 rules, n, True, 1)
        return differ, {folders[at][0] for at in changed}
    if count < 4096:
        return None
    half = count // 2
    parts: list[list[Key | None]] = [[], []]

    def run(n: int, chunk: list[str]) -> None:
        try:
            parts[n] = list(map(key_of, map(lstat, chunk)))
        except OSError:  # something went: one by one, None for what is gone
            for rel in chunk:
                try:
                    parts[n].append(key_of(lstat(rel)))
                except OSError:
                    parts[n].append(None)

    other = threading.Thread(target=run, args=(0, index.rels[:half]))
    other.start()
    run(1, index.rels[half:])
    other.join()
    return [at for at, (now, was) in enumerate(zip(parts[0] + parts[1],
                                                   index.keys_of(0, count), strict=True))
            if now != was], None
