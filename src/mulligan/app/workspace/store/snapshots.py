"""The snapshot store: what the working folder held, kept outside it, content-addressed.

``$MULLIGAN_HOME/checkpoints/`` holds ``blobs/ab/cdef...`` (a file's bytes, named by their
BLAKE2b-160 hash), ``trees/<id>.json`` (a manifest: every path with its kind, mode, size,
mtime and hash or link target, and what was skipped and why) and ``stat/<folder>.idx`` (the
stat index, `mulligan.app.workspace.store.statindex`: a path whose stat is what it was, and not
racy, is not read again; a folder whose every stat is is not even listed).
Blobs and manifests are kept compressed, or as a delta against the previous version at the
same path (the previous snapshot of the folder, for a manifest), and verified when read
(`mulligan.app.workspace.store.blobs`); a store written before that still reads.
Everything is created 0600 in 0700 folders, written to a temporary name and renamed into
place, so a crash leaves a whole object or none; a manifest is written only after its blobs.
A small snapshot's new objects (a turn's) are instead one record of the journal (`journal`:
one fdatasync, nothing created), durable before `snapshot` returns; reads look there first
(and in the journal's sealed packs: `packs`).
Sessions share the store; `gc` frees what no session refers to.

The walk honours every ``.gitignore`` (nested ones too) and ``.git/info/exclude``, read with
`pathspec` (git's own matching rules), skips ``.git`` folders, never follows a symlink (a link
is recorded as a link), and caps the size of one file and of one snapshot; what it leaves out
is listed in the manifest as not restorable. What it does not descend into is listed too: a
manifest says of every path whether it was present (its `FileFacts`), ignored (by a rule read
as it was at that snapshot, or `.git`, or Mulligan's own files), unknown (skipped: too big,
unreadable, a socket) or absent (`Manifest.state`), so a restore can tell "the agent created
it" from "it became visible". Mulligan's own files -- `$MULLIGAN_HOME` and the session files a
recorder `exclude`s -- are never recorded, even inside the folder. Snapshot ids and blob
hashes are checked (40 hex digits) before they become a path: a session file is data.
Never: write into the working folder, touch a ``.git`` folder, or checkpoint ``$HOME`` or
``/`` themselves (`Unsafe`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mulligan.app.workspace.monitor import Monitor, still
from mulligan.app.workspace.store import looks, manifests, statindex
from mulligan.app.workspace.store.blobs import MIN_MANIFEST_DELTA, Objects, write_atomic
from mulligan.app.workspace.store.collect import collect
from mulligan.app.workspace.store.journal import Journal
from mulligan.app.workspace.store.manifests import (
    Manifest,
    changed_paths,
    manifest_id,
    same_content,
)
from mulligan.app.workspace.store.packs import Key
from mulligan.app.workspace.store.reading import read_all
from mulligan.app.workspace.store.walk import TEMP_MARK, Walk, made_for
from mulligan.home import folder_slug, private_dirs

__all__ = ["TEMP_MARK", "FileFacts", "Manifest", "Store", "Unsafe", "changed_paths",
           "check_id", "manifest_id"]

# What a manifest records of one path: ("file", mode, size, mtime_ns, hash),
# ("link", 0, 0, 0, target) or ("dir", mode, 0, 0, ""). (Not a session entry.)
FileFacts = tuple[str, int, int, int, str]
_HEX40 = re.compile(r"[0-9a-f]{40}")
MAX_FILE = 20 << 20  # bytes: a larger file is not kept (listed as not restorable)
MAX_SNAPSHOT = 1 << 30  # bytes of new content one snapshot may add to the store
SAVE_EVERY = 30.0  # seconds: how stale a monitored folder's index on disk may get
SAVE_NOW = 64  # files: a watched walk that hashed more writes its index to disk at once
# A restore writes ".<name>.mulligan-restore-<pid>" and renames it into place: never recorded.


class Unsafe(ValueError):
    """A folder that must not be checkpointed ($HOME, /), or a store that cannot be used."""


def check_id(value: object, what: str = "snapshot id") -> str:
    """`value` if it is a snapshot id or blob hash (40 lowercase hex digits), else ValueError
    naming it: ids come from session files, which may be hand-made, and become paths."""
    if not isinstance(value, str) or not _HEX40.fullmatch(value):
        raise ValueError(f"{what} {str(value)[:80]!r} is not 40 hex digits: refused (a "
                         "session file names only snapshots the store made)")
    return value


class Store:
    """The checkpoints under `home`; `max_file` and `max_snapshot` cap what one file and one
    snapshot may add (bytes)."""

    def __init__(self, home: Path, *, max_file: int = MAX_FILE,
                 max_snapshot: int = MAX_SNAPSHOT) -> None:
        self.root = Path(home) / "checkpoints"
        self.max_file, self.max_snapshot = max_file, max_snapshot
        # Absolute paths never recorded nor restored: Mulligan's own files (the home, and
        # session files with their sidecars: the same name, or it plus a "." suffix).
        self.exclude: set[str] = {os.path.abspath(home)}
        self.sessions: set[str] = set()
        # The database copy (`mulligan.app.workspace.shared.Shared`), with a database store:
        # told of each manifest written, asked for what is not here.
        self.shared: Any = None
        self.blobs = Objects(self.blob_path, by_content=True, what="blob")
        self.manifests = Objects(self._tree_path, by_content=False, what="snapshot",
                                 min_delta=MIN_MANIFEST_DELTA)
        # A small snapshot's new objects are made durable by one record here, not by fsyncs.
        self.journal = Journal(self.root, {b"b": self.blobs, b"t": self.manifests})
        self.blobs.journal = self.manifests.journal = self.journal
        self.blobs.letter, self.manifests.letter = b"b", b"t"
        # The manifest last written or loaded for each folder: its files are the delta bases
        # of the next snapshot's changed files, and it the base of the next manifest.
        self._last: dict[str, Manifest] = {}
        self._decoded: manifests.Decoded | None = None  # the manifest last loaded, decoded
        # The stat index of each folder's last walk here (`statindex`), and when it was last
        # written to disk: with a monitor, walks follow changes closely, and the disk copy
        # (for the next process) is written at most every SAVE_EVERY seconds and at `flush`.
        self._indexes: dict[str, statindex.Index] = {}
        self._saved: dict[str, float] = {}
        self._unsaved: set[str] = set()
        # How each watched snapshot was taken: "kept" (nothing changed), "looked" at the
        # names the monitor gave, or "walked" whole (for the tests and the bench).
        self.ways = dict.fromkeys(("kept", "looked", "walked"), 0)

    def exclude_session(self, session_file: Path) -> None:
        """Never record `session_file` nor its sidecars (same name plus a suffix), and
        remember it, so `gc` keeps the snapshots it names wherever it lives."""
        file = os.path.abspath(session_file)
        self.sessions.add(file)
        home = os.path.abspath(self.root.parent)
        if not file.startswith(home + os.sep):
            known = self.remembered()
            if Path(file) not in known:
                private_dirs(self.root)
                fd = os.open(self.root / "sessions.list",
                             os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
                with os.fdopen(fd, "ab") as out:  # one short write: whole or not at all
                    out.write(os.fsencode(file) + b"\n")

    def remembered(self) -> list[Path]:
        """The session files outside the home that recorded into this store."""
        try:
            data = (self.root / "sessions.list").read_bytes()
        except FileNotFoundError:
            return []
        return [Path(os.fsdecode(line)) for line in data.splitlines() if line]

    def _excluded(self, root: str) -> tuple[set[str], list[tuple[str, str]]]:
        """The excluded paths under `root`: whole paths, and (folder, session file name) pairs
        whose sidecars go with them."""
        whole: set[str] = set()
        prefixes: list[tuple[str, str]] = []
        for path in self.exclude | self.sessions:
            if path == root or not path.startswith(root + os.sep):
                continue
            rel = path[len(root) + 1:]
            whole.add(rel)
            if path in self.sessions:
                folder, _, name = rel.rpartition("/")
                prefixes.append((folder, name + "."))
        return whole, prefixes

    def excluded(self, root: Path, rel: str) -> bool:
        """Whether `rel` under `root` is (inside) one of Mulligan's own files."""
        whole, prefixes = self._excluded(str(root))
        parts = rel.split("/")
        if any("/".join(parts[:n]) in whole for n in range(1, len(parts) + 1)):
            return True
        folder, _, name = rel.rpartition("/")
        return any(folder == f and name.startswith(start) for f, start in prefixes)

    # ---- objects -------------------------------------------------------------------------

    def blob_path(self, digest: str) -> Path:
        check_id(digest, "blob hash")
        return Path(self._loose(b"b", digest))

    def _tree_path(self, tree_id: str) -> Path:
        check_id(tree_id)
        return Path(self._loose(b"t", tree_id))

    def _loose(self, letter: bytes, name: str) -> str:
        """Where object `name` (checked by the caller) of folder `letter` (b"b" a blob, b"t" a
        manifest) has its own file: one string (pathlib's joins cost 10 us a lookup)."""
        return f"{self.root}/blobs/{name[:2]}/{name[2:]}" if letter == b"b" else \
            f"{self.root}/trees/{name}.json"

    def keep(self, data: bytes, *, durable: bool = True) -> str:
        """Store `data` whatever its size (a restore's copy of what it replaces); its hash.
        Not `durable`: the caller syncs before a manifest names it."""
        digest = hashlib.blake2b(data, digest_size=20).hexdigest()
        if not self.has_blob(digest):
            self.blobs.put(digest, data, durable=durable)
        return digest

    def read_blob(self, digest: str) -> bytes:
        """The bytes of blob `digest`, checked against it (`blobs.Damaged`, a ValueError
        naming it, when they are not); FileNotFoundError when the store has no such blob."""
        if self.shared is not None and not self.has_blob(digest):
            self.shared.fetch_blob(digest)
        return self.blobs.read(digest)

    def has_blob(self, digest: str) -> bool:
        return self.blobs.exists(digest)

    def _held(self, counted: Mapping[Key, object], letter: bytes, name: str) -> bool:
        """Whether a snapshot need not keep object `name` (b"b" a blob, b"t" a manifest): in
        `counted` (`Journal.counted`, taken once for the snapshot: its lookups read no
        header each), else its loose file -- one os.access of a string (a lookup that finds
        nothing costs no exception, no pathlib: ~10 us, against ~75 for `exists`)."""
        if (letter, name) in counted:
            return True
        if not _HEX40.fullmatch(name):  # (an index file's tree is data)
            return False
        return os.access(self._loose(letter, name), os.F_OK)

    def _write_manifest(self, tree_id: str, root: Path, files: dict[str, FileFacts],
                        skipped: dict[str, str], ignored: list[str],
                        base: str | None = None, along: Sequence[Path] = (),
                        into: list[tuple[str, bytes]] | None = None,
                        texts: dict[str, bytes | None] | None = None) -> None:
        """Write manifest `tree_id` (after its blobs: `along` are synced with it, before it
        is renamed into place), as a delta against `base` (the folder's previous manifest)
        when that is small (`into`: not written, its stored form appended there, see
        `Objects.put`). One path a line, so a delta by lines copies every path that did not
        change. `texts`: each folder's lines, made already (a look's: the same bytes)."""
        body = None if texts is None else \
            manifests.encode_texts(root, texts.values(), len(files), skipped, ignored)
        if body is None:
            body = manifests.encode(root, files, skipped, ignored)
        self.manifests.put(tree_id, body, base=base, along=along, into=into)

    def _bases(self, root: Path, tree_id: object) -> _Bases:
        """What the next snapshot of `root` may store its changes as deltas against: the
        manifest last written for it here, else the one the stat index names (`tree_id`)."""
        return _Bases(self, str(root), tree_id)

    def load(self, tree_id: str) -> Manifest:
        """The manifest `tree_id`; FileNotFoundError naming it when the store has none,
        ValueError when it is not an id at all."""
        check_id(tree_id)
        try:
            data = self.manifests.read(tree_id)
        except FileNotFoundError:
            if self.shared is not None and self.shared.fetch(tree_id):
                return self.load(tree_id)
            raise FileNotFoundError(2, f"no snapshot {tree_id} in the store (was it freed by "
                                       "mulligan gc?)", str(self.root)) from None
        # The lines the manifest read before has too are not decoded again (`manifests`).
        decoded = manifests.decode(data, self._decoded)
        self._decoded = decoded
        return Manifest(tree_id, decoded.files, decoded.skipped, decoded.ignored)

    def tree_ids(self) -> list[str]:
        folder = self.root / "trees"
        found = {f.stem for f in folder.glob("*.json") if _HEX40.fullmatch(f.stem)}
        return sorted(found.union(self.journal.names(b"t")))

    def record(self, root: Path, files: dict[str, FileFacts], skipped: dict[str, str],
               ignored: list[str], *, like: Manifest | None = None) -> Manifest:
        """Write a manifest made elsewhere (a restore's safety snapshot: the walk plus the
        copies of what it replaces); its blobs must be in the store already. `like`: a
        manifest this one may have the id of (a restore's target, or the snapshot it
        started from), found without hashing every path again: when every path's facts
        are the same (in any order: it is `like`), or the same paths in the same order with
        the same kind, mode and content (the id is made of those)."""
        if like is not None and skipped == like.skipped and ignored == like.ignored and \
                files == like.files:
            tree_id, files = like.id, like.files
        elif like is not None and skipped == like.skipped and ignored == like.ignored and \
                same_content(files, like.files):
            tree_id = like.id
        else:
            tree_id = manifest_id(files, skipped, ignored)
        if not self.manifests.exists(tree_id):
            last = self._last.get(str(Path(root).resolve())) if str(root) != "." else None
            self._write_manifest(tree_id, root, files, skipped, ignored,
                                 last.id if last is not None else None)
        if self.shared is not None:
            self.shared.queued(tree_id)
        manifest = Manifest(tree_id, files, skipped, ignored)
        if str(root) != ".":  # the folder as a restore left it: the next snapshot's bases
            self._last[str(Path(root).resolve())] = manifest
        return manifest

    # ---- taking a snapshot --------------------------------------------------------------

    def snapshot(self, folder: Path, *, reread: Iterable[str] = (),
                 monitor: Monitor | None = None) -> Manifest:
        """Record `folder` as it is now: every file not ignored is hashed (or found unchanged
        in the stat index), new content goes to the store, and the manifest is written.
        `reread`: paths whose content is read whatever the cache says (a write's target: the
        pre-image must be exact). `monitor` (`mulligan.app.workspace.monitor`): when its
        events named nothing since the walk (or look) it watched ended, that manifest is the
        answer and nothing is walked (a `reread` path is read and hashed, and must be as
        recorded); when they named places it can describe, only those are looked at
        (`looks.Look`: the same manifest a walk gives); else the walk watches every folder
        before reading it. Unsafe for $HOME and /."""
        if monitor is not None and monitor.last is not None and \
                os.fspath(folder) == monitor.top:  # (a str compare: not two Paths')
            root = monitor.root  # resolved, and checked by the walk it watched
        else:
            root = Path(folder).resolve()
            if root == Path("/") or root == Path.home().resolve():
                raise Unsafe(f"{root} is {'/' if root == Path('/') else 'your home folder'}: "
                             "checkpoints are taken of a project folder only")
        forced = set(reread)
        if monitor is not None and monitor.top != os.fspath(root):
            monitor = None  # it watches another folder
        look, counted = None, None
        if monitor is not None:
            started = time.time_ns()  # before the events are read (`looks`: the racy rule)
            named = monitor.begin()
            last, index = monitor.last, monitor.index
            if named is not None and monitor.plain and isinstance(last, Manifest) and \
                    isinstance(index, statindex.Index):
                top = monitor.top
                names = looks.plan(top, index, last, named)
                if names is not None and not names and still(root, last, forced):
                    self.ways["kept"] += 1
                    return last  # nothing changed: no walk, no look
                if names is not None:
                    counted = self.journal.counted()  # (the lookups of this snapshot's)
                    if self._held(counted, b"t", index.tree):
                        look = looks.Look(top, index, last, names, started,
                                          excluded=self._excluded(top), forced=forced,
                                          visit=monitor.watch, max_file=self.max_file)
                        if not made_for(index, look.meta):  # (other Mulligan files, or cap)
                            look = None
        if counted is None:  # (a walk: nothing looked it up yet)
            counted = self.journal.counted()
        manifest, walk, index = self._walk_and_record(root, forced, monitor, look, counted)
        if monitor is not None:
            self.ways["walked" if look is None else "looked"] += 1
        if self.shared is not None:
            self.shared.queued(manifest.id)
        if monitor is not None:  # (what changed while it read is queued: the next one's)
            monitor.last, monitor.index, monitor.plain = manifest, index, not walk.linked
        return manifest

    def _walk_and_record(self, root: Path, forced: set[str], monitor: Monitor | None,
                         look: looks.Look | None, counted: Mapping[Key, object]
                         ) -> tuple[Manifest, Walk, statindex.Index]:
        """The walk (or `look`), its new content stored, its manifest written: (the
        manifest, the walk, the stat index that describes the manifest). `counted`: the
        journal as the snapshot found it (`Journal.counted`), for its lookups."""
        walk: Walk
        index: statindex.Index | None
        if look is not None:
            walk, index = look, look.index
        else:
            index = self._indexes.get(str(root)) or \
                statindex.load(self._index_file(str(root)))
            if index is not None and not self.manifests.exists(index.tree):
                index = None  # its snapshot was freed (gc, elsewhere) or the store is new:
                # so may the blobs it vouches for be, and nothing it says is trusted
            walk = Walk(str(root), index, excluded=self._excluded(str(root)),
                        forced=forced, visit=monitor.watch if monitor is not None else None,
                        max_file=self.max_file)
        files, skipped = walk.files, walk.skipped
        added = read = 0
        wrote: list[str] = []  # the new blobs' names
        bases = self._bases(root, index.tree if index is not None else None)
        # Only the files the index cannot vouch for come here (new, changed, racy, forced).
        for rel, info, previous in walk:
            read += 1
            size = info.st_size
            if size > self.max_file:
                skipped[rel] = f"over the {self.max_file >> 20} MB limit for one file"
                continue
            if added + size > self.max_snapshot:
                skipped[rel] = f"the snapshot reached its {self.max_snapshot >> 20} MB limit"
                continue
            try:
                data = read_all(os.path.join(root, rel), size)
            except OSError as exc:  # vanished, or unreadable: not restorable
                skipped[rel] = f"could not be read ({exc.strerror})"
                continue
            digest = hashlib.blake2b(data, digest_size=20).hexdigest()
            if not self._held(counted, b"b", digest):
                self.blobs.put_soon(digest, data,
                                    base=previous if previous is not None else bases.of(rel))
                added += len(data)
                wrote.append(digest)
            files[rel] = ("file", stat.S_IMODE(info.st_mode), size, info.st_mtime_ns, digest)
        # Just what the index describes: its tree. Else the id depends on content only
        # (kind, mode, hash) in the walk's fixed order.
        same = walk.unchanged()
        tree_id = same or manifest_id(files, skipped, walk.ignored, walk.listed())
        # Every new blob and the manifest are durable before anyone can name the snapshot. A
        # small one (a turn's) is kept in the journal: one record, one fdatasync of a file
        # that never grows, no file each (`journal`). Else: files, a few blobs synced with
        # the manifest, together (one wait for the disk); many, by one sync first.
        staged = self.blobs.settle()  # the new blobs, written on worker threads or kept back
        kept: list[tuple[str, bytes]] = []
        if not self._held(counted, b"t", tree_id):
            self._write_manifest(tree_id, root, files, skipped, walk.ignored, bases.tree(),
                                 into=kept, texts=walk.folder_texts())
        # What needs no disk is done before the wait for it, while this thread's caches are
        # warm (after a wait, the same Python runs 3-5x slower on this machine): the next
        # walk's index (kept only once the snapshot is durable) and the manifest.
        built = None if same is not None else statindex.build(
            walk.started, tree_id, walk.meta, walk.recorded(), walk.shared, walk.parts,
            walk.texts)
        manifest = Manifest(tree_id, files, skipped, walk.ignored, walk.temps)
        objects = [(b"b", n, f) for n, f in staged] + [(b"t", n, f) for n, f in kept]
        if (objects or wrote) and not (objects and len(staged) == len(wrote)
                                       and self.journal.put(objects)):
            self.blobs.write_staged(staged)
            if wrote and (len(wrote) > 16 or not kept):
                os.sync()
                wrote = []
            if kept:
                write_atomic(self.manifests.path_of(tree_id), kept[0][1],
                             along=[self.blob_path(name) for name in wrote])
        if built is not None:  # the next walk's index
            self._indexes[str(root)] = built
            # Watched, on disk at most every SAVE_EVERY s and at `flush`; at once when it
            # spares the next process real work (a walk that hashed many files).
            now = time.monotonic()
            if monitor is None or read > SAVE_NOW or \
                    now - self._saved.setdefault(str(root), now) >= SAVE_EVERY:
                self._save_index(str(root))
            else:
                self._unsaved.add(str(root))
        self._last[str(root)] = manifest
        described = built if built is not None else index  # (an unchanged walk had one)
        assert described is not None
        return manifest, walk, described

    def flush(self) -> None:
        """Write to disk the stat indexes kept only in memory (a session's recorder, as it
        stops). A process killed first leaves an older index: the next one reads more."""
        for root in list(self._unsaved):
            self._save_index(root)

    def _index_file(self, root: str) -> Path:
        return self.root / "stat" / f"{folder_slug(Path(root))}.idx"

    def _save_index(self, root: str) -> None:
        self._unsaved.discard(root)
        self._saved[root] = time.monotonic()
        write_atomic(self._index_file(root), statindex.dump(self._indexes[root]), durable=False)

    # ---- freeing --------------------------------------------------------------------------

    def gc(self, keep: Iterable[str], *, grace: float = 3600.0) -> tuple[int, int, int]:
        """Delete every manifest not in `keep` and every blob no kept manifest names; returns
        (trees freed, blobs freed, bytes freed). Anything written in the last `grace`
        seconds is kept (a running session may not have recorded its newest snapshot yet),
        and so is what a kept object is a delta of (`collect`). The stat index is
        dropped (the next snapshot re-reads what it needs)."""
        freed = collect(self, keep, grace)
        for cache in (self.root / "stat").glob("*.*"):  # the index (and older .json caches)
            cache.unlink()
        self._last.clear()
        self._indexes.clear()
        self._unsaved.clear()
        return freed

    def size(self) -> int:
        """Bytes the store takes on disk."""
        return sum(f.stat().st_size for f in self.root.rglob("*") if f.is_file()) \
            if self.root.is_dir() else 0


class _Bases:
    """The delta bases of one snapshot of `root`: the previous manifest of the folder, read
    once and only when a changed file or the new manifest needs it (never fetched from the
    database: a snapshot does not wait on the network)."""

    def __init__(self, store: Store, root: str, cached_tree: object) -> None:
        self.store, self.root, self.cached_tree = store, root, cached_tree
        self._files: dict[str, FileFacts] | None = None
        self._tree: str | None = None

    def _load(self) -> dict[str, FileFacts]:
        if self._files is None:
            last = self.store._last.get(self.root)
            tree = self.cached_tree
            if last is None and isinstance(tree, str) and _HEX40.fullmatch(tree) and \
                    self.store.manifests.exists(tree):
                with contextlib.suppress(OSError, ValueError):
                    last = self.store.load(tree)
            self._files = last.files if last is not None else {}
            self._tree = last.id if last is not None else None
        return self._files

    def of(self, rel: str) -> str | None:
        """The blob `rel` had in the previous snapshot, if it was a file."""
        facts = self._load().get(rel)
        return facts[4] if facts is not None and facts[0] == "file" else None

    def tree(self) -> str | None:
        """The previous manifest's id."""
        self._load()
        return self._tree

