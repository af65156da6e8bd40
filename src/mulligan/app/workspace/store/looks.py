"""A snapshot's walk when the folder's inotify monitor named every place that changed since the
walk (or look) that recorded the last manifest: only those names are looked at.

In: the root, the last manifest and the stat index that describes it (`Monitor.last`,
`Monitor.index`), what the events named since ({folder: names}, `Monitor.begin`), the paths
to read whatever the index says (a write's target), Mulligan's own files. Out: `plan`, the
names to look at by folder, or None when they cannot say (then everything is walked); a
`Look`, which is a `Walk`: the same iteration (the files whose content must be read) and
the same `files`, `skipped`, `ignored`, `temps`, `unchanged()` and `recorded()` a full walk
gives, in the same order -- so the same manifest, id included.

How. The folders are taken in the walk's order from the index. A folder nothing named is
taken whole from it, without a system call: inotify watched it from before the walk read
it, so its names, their stats and contents are those recorded (what the last manifest
skipped or found left over in it is carried too). A folder with names keeps its recorded
entries and looks at the named ones again, with the walk's own code for a name
(`Walk._entry`: an lstat; a file whose stat is the recorded one and not racy keeps its hash,
else it is read; a new name is matched against the ignore rules; a name gone is dropped).
A folder whose own mode changed, or that holds what the last manifest skipped or found left
over, or where a named name cannot be stated, is read again whole (`Walk._read`). A
directory the index did not have there (created, moved in from outside the watched folders,
a file before) is walked, every folder in it watched before it is read, as the full walk
does. A changed folder's entry in its parent is looked at too, so the index keeps its stat.

Never (`plan` gives None, and the snapshot walks): when an ignore rule may have changed (a
`.gitignore` named in a folder the walk reads, `.git/info/exclude` named or its stat not the
recorded one, `.git` named in the root), when the index does not describe the last manifest,
or was made for other Mulligan files or another size cap. (An ignore file that is a link is
the monitor's to refuse: `Monitor.plain`.)

The next index (`recorded()`) is the walk's: a folder taken whole keeps its record, its
`clean` as it was (never more trusting than the walk that read it); a folder looked at is
recorded as read now, its own stat taken now, by the racy-clean rule of this look's start
(`started`), which the caller takes before it reads the events: every change until then is
in the names, so every entry not named held at that moment what it is recorded with.
"""

from __future__ import annotations

import os
import stat
from bisect import bisect_left
from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from mulligan.app.workspace.store import manifests
from mulligan.app.workspace.store.statindex import Folder, Index, Key, key_of
from mulligan.app.workspace.store.walk import Rules, Walk, _rules_key

if TYPE_CHECKING:
    from mulligan.app.workspace.store.snapshots import FileFacts, Manifest

__all__ = ["Look", "plan"]

_T = TypeVar("_T")
_WHOLE, _FRESH, _AGAIN = 0, 1, 2  # watched since read / not watched: walk it / read it again
Named = dict[str, set[str]]


def plan(root: str, index: Index, last: Manifest, named: Named) -> Named | None:
    """The names to look at in each folder the walk reads, from what the events named
    (`named`; names in folders the walk does not read -- ignored, gone -- are dropped), or
    None when a look cannot give what the walk would (see the module's docstring; whether
    the index was made for this walk is `walk.made_for`'s)."""
    recorded = index.meta
    if index.tree != last.id:
        return None
    was = recorded.get("exclude")
    now = _rules_key(os.path.join(root, ".git", "info", "exclude"))
    if (None if was is None else tuple(was)) != now:  # (.git/info was not watched if absent)
        return None
    folders = index.folders
    out: Named = {}
    for folder, names in named.items():
        if folder == ".git/info":
            if "exclude" in names:
                return None
            continue
        if folder not in folders:
            continue  # not read by the walk: ignored, in an ignored folder, or gone
        if ".gitignore" in names or (not folder and ".git" in names):
            return None
        out[folder] = names
    return out


class Look(Walk):
    """The walk of `plan`'s names (`named`) from `index` and `last` (see the module's
    docstring); `started`: time.time_ns() taken before the events were read."""

    def __init__(self, root: str, index: Index, last: Manifest, named: Named, started: int,
                 **options: Any) -> None:
        super().__init__(root, index, **options)
        self.started = started
        self.meta["exclude"] = index.meta.get("exclude")
        self._index: Index = index
        self.index = index  # what it looks from
        folders = index.folders
        self._named: Named = {}
        self._stated: dict[str, os.stat_result | OSError | None] = {}  # None: gone
        for folder, names in named.items():
            for name in names:
                self._name(folder, name)
        for rel in self.forced:  # read whatever the index says, so looked at
            folder, _, name = rel.rpartition("/")
            if folder in folders:
                self._name(folder, name)
        # A file with other names, changed through one: its other names in the folder
        # changed too, with no event naming them. Its inode now (a link made since) and the
        # one the index has (a name since replaced or gone) find them in the index.
        shared = index.shared()
        linked = {info.st_ino for info in self._stated.values() if isinstance(
            info, os.stat_result) and stat.S_ISREG(info.st_mode) and info.st_nlink > 1}
        self.shared = shared | linked  # what the next index's entries may share
        if shared:
            for rel in list(self._stated):
                folder, _, name = rel.rpartition("/")
                old = folders.get(folder)
                at = bisect_left(index.rels, rel, old.start, old.start + old.entries) \
                    if old is not None else len(index.rels)
                if at < len(index.rels) and index.rels[at] == rel and \
                        index.key(at)[4] in shared:
                    linked.add(index.key(at)[4])
        if linked:
            for at in [at for at, ino in enumerate(index.inodes()) if ino in linked]:
                folder, _, name = index.rels[at].rpartition("/")
                self._name(folder, name)
        for folder in list(self._named):  # its entry in its parent: the folder's stat changed
            if folder:
                parent, _, name = folder.rpartition("/")
                self._name(parent, name)
        # What the last manifest skipped, and the leftovers it saw, by folder, in its order.
        self._carried: dict[str, tuple[list[tuple[str, str]], list[str]]] = {}
        for rel, why in last.skipped.items():
            folder = "" if rel == "." else rel if rel in folders else rel.rpartition("/")[0]
            self._carried.setdefault(folder, ([], []))[0].append((rel, why))
        for rel in last.temps:
            self._carried.setdefault(rel.rpartition("/")[0], ([], []))[1].append(rel)

    def _name(self, folder: str, name: str) -> None:
        """Look at `name` in `folder`: its lstat now (or None: gone; an OSError: it could not
        be stated, so the folder is read again whole)."""
        names = self._named.setdefault(folder, set())
        if name not in names:
            names.add(name)
            rel = f"{folder}/{name}" if folder else name
            try:
                self._stated[rel] = os.lstat(os.path.join(self.root, rel))
            except FileNotFoundError:
                self._stated[rel] = None
            except OSError as exc:
                self._stated[rel] = exc

    def __iter__(self) -> Iterator[tuple[str, os.stat_result, str | None]]:
        index, root = self._index, self.root
        exclude = self.meta["exclude"]
        rules: Rules = () if exclude is None else \
            (("", os.path.join(root, ".git", "info", "exclude"), tuple(exclude)),)
        stack: list[tuple[str, Key | None, Rules, int]] = [("", None, rules, _WHOLE)]
        children = index.children()
        while stack:
            rel_dir, _, rules, how = stack.pop()
            old = index.folders.get(rel_dir)
            if how == _WHOLE and old is None:
                how = _FRESH  # (not in the index: never read, so never watched)
            if how == _WHOLE and old is not None and rel_dir in self._named:
                how = yield from self._patch(rel_dir, old, rules, stack)
            if how == _WHOLE and old is not None:
                self._take(rel_dir, old, rules, stack, children)
            elif how != -1:
                yield from self._again(rel_dir, old, rules, how, stack)

    def listed(self) -> bytes:
        """`manifest_id`'s list of `files`, from each folder's part: a folder taken whole
        has the index's, made once (`Index.part`); only the folders looked at are listed."""
        parts = self.parts = self._per_folder(self._index.part, manifests.listed)
        return b"[" + b",".join(part for part in parts.values() if part) + b"]"

    def folder_texts(self) -> dict[str, bytes | None]:
        """Each folder's entries as the manifest writes them (`manifests.text`), in the
        walk's order: a folder taken whole has the index's, made once (`Index.text`); only
        the folders looked at are encoded (`texts`: kept for the next index)."""
        texts = self.texts = self._per_folder(self._index.text, manifests.text)
        return texts

    def _per_folder(self, whole: Callable[[str], _T],
                    made: Callable[[Iterator[tuple[str, FileFacts]]], _T]) -> dict[str, _T]:
        """By folder, in the walk's order: `whole(folder)` for one taken whole (the
        index's), `made(its (path, facts) in files)` for one looked at."""
        files, out = self.files, {}
        for done in self._done:
            if isinstance(done, tuple):
                out[done[0]] = whole(done[0])
            else:
                out[done.rel] = made(
                    (rel, facts) for rel in done.rels if (facts := files.get(rel)) is not None)
        return out

    def _take(self, rel_dir: str, old: Folder, rules: Rules,
              stack: list[tuple[str, Key | None, Rules, int]],
              children: dict[str, list[str]]) -> None:
        """Folder `old`, which nothing changed, as the index and the last manifest have it."""
        index = self._index
        end = old.start + old.entries
        self.files.update(zip(index.rels[old.start:end], index.facts[old.start:end],
                              strict=True))
        self.ignored += index.ignored[old.ign:old.ign + old.ignored]
        carried = self._carried.get(rel_dir)
        if carried is not None:
            self.skipped.update(carried[0])
            self.temps += carried[1]
        self._done.append((rel_dir, old))
        if old.rules is not None:
            rules = (*rules, (rel_dir, os.path.join(self.root, rel_dir, ".gitignore")
                              if rel_dir else os.path.join(self.root, ".gitignore"), old.rules))
        stack.extend((rel, None, rules, _WHOLE) for rel in reversed(children.get(rel_dir, ())))

    def _patch(self, rel_dir: str, old: Folder, rules: Rules,
               stack: list[tuple[str, Key | None, Rules, int]]
               ) -> Generator[tuple[str, os.stat_result, str | None], None, int]:
        """Folder `old` with its named names looked at again. Returns (the generator's
        value) -1 when done, or how to read it instead (nothing was recorded then)."""
        root, index = self.root, self._index
        here = os.path.join(root, rel_dir) if rel_dir else root
        prefix = rel_dir + "/" if rel_dir else ""
        named = {prefix + name: name for name in self._named[rel_dir]}
        stated = self._stated
        try:
            key: Key = key_of(os.lstat(here))
        except OSError:
            return _AGAIN
        if rel_dir in self._carried or not stat.S_ISDIR(key[0]) or \
                any(isinstance(stated[rel], OSError) for rel in named):
            return _AGAIN  # (before anything of it is recorded)
        end = old.start + old.entries
        rels = index.rels[old.start:end]
        known = dict(zip(rels, zip(index.keys_of(old.start, end), index.facts[old.start:end],
                                   strict=True), strict=True))
        ignored = index.ignored[old.ign:old.ign + old.ignored]
        reading = self._folder(rel_dir, os.path.join(here, ".gitignore"), key, rules,
                               old.rules, True)
        record, files, racy_from = reading.record, self.files, reading.racy_from
        for rel in sorted({*rels, *ignored, *named}):
            name = named.get(rel)
            if name is None:
                was = known.get(rel)
                if was is None:  # ignored, and not named: still ignored
                    self.ignored.append(rel)
                    record.ignored.append(rel)
                    continue
                now, facts = was
                files[rel] = facts
                record.rels.append(rel)
                record.keys.append(now)
                if now[2] >= racy_from or now[3] >= racy_from:
                    record.clean = False
                if facts[0] == "dir":
                    reading.below.append((rel, now, reading.rules, True))
                continue
            info = stated[rel]
            if not isinstance(info, os.stat_result) or name == ".git":
                continue  # gone (and ".git" is never recorded)
            read = self._entry(reading, rel, name, _Stated(info), known.get(rel))
            if read is not None:
                yield read
                if rel not in files:  # the caller skipped it: not in the manifest
                    record.clean = False
        stack.extend((rel, now, below_rules, _how(known.get(rel), now))
                     for rel, now, below_rules, _ in reversed(reading.below))
        return -1

    def _again(self, rel_dir: str, old: Folder | None, rules: Rules, how: int,
               stack: list[tuple[str, Key | None, Rules, int]]
               ) -> Iterator[tuple[str, os.stat_result, str | None]]:
        """Read a folder again whole, watched first, as the walk reads it: its subfolders
        walked too when it is new (`_FRESH`), else looked at as their names say."""
        here = os.path.join(self.root, rel_dir) if rel_dir else self.root
        if self.visit is not None:
            self.visit(here)
        try:
            key: Key | None = key_of(os.lstat(here))
        except OSError:
            key = None
        below: list[tuple[str, Key | None, Rules, bool]] = []
        yield from self._read(rel_dir, here, key, rules, True, old, below)
        known: dict[str, tuple[Key, Any]] = {}
        if how == _AGAIN and old is not None:
            index, end = self._index, old.start + old.entries
            known.update(zip(index.rels[old.start:end],
                             zip(index.keys_of(old.start, end), index.facts[old.start:end],
                                 strict=True), strict=True))
        stack.extend((rel, now, below_rules, _how(known.get(rel), now) if how == _AGAIN
                      else _FRESH) for rel, now, below_rules, _ in below)


def _how(was: tuple[Key, Any] | None, now: Key | None) -> int:
    """How a subfolder found now as `now` is read: taken as the index has it when it was
    recorded as this very folder (same inode, same mode: watched since, and as readable);
    read again when only its mode changed; walked when it is new here."""
    if was is None or now is None or was[1][0] != "dir" or was[0][4] != now[4]:
        return _FRESH
    return _WHOLE if was[0][0] == now[0] else _AGAIN


class _Stated:
    """An lstat taken already, where `Walk._entry` asks a DirEntry for it."""

    __slots__ = ("info",)

    def __init__(self, info: os.stat_result) -> None:
        self.info = info

    def stat(self, follow_symlinks: bool = False) -> os.stat_result:
        return self.info

