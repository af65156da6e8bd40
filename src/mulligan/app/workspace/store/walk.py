"""The walk a snapshot takes: every folder, file and link under a root that git would not
ignore (the `.gitignore` files as they are now, read with pathspec), in name order, never
into `.git` nor through a link; what it skipped or found ignored is listed, not dropped.

With the stat index of the last walk (`mulligan.app.workspace.store.statindex`), a folder whose own
stat, ignore rules and every entry's stat are what the index recorded (and none of them racy)
is taken whole from it: one lstat per path and one compare per folder, no readdir, no ignore
matching, no hashing. Without a monitor (the first walk after a restart) every path's lstat
is compared with the index ahead of the walk, in C on two threads (`_lstats.c`, built by
setup.py; in Python where it could not be built), and a tree found all as recorded is taken
whole at once. Otherwise the folder is read; a name the index knows (same kind, the
rules unchanged) keeps its ignore verdict, and a file whose stat is the recorded one, not
racy, keeps its hash. Ignore rules are compiled once per file version (`_compiled`), and only
when a path the index does not know needs them.

In: a root, the index (or None), Mulligan's own files, the paths to read whatever the index
says. Out: `Walk` -- iterate it for the files whose content must be read, filling `files`
(the manifest's, in the walk's fixed order), `skipped`, `ignored`, `temps`; then
`unchanged()` is the index's snapshot id when the walk found just what it describes, and
`recorded()` what the next index holds. Never follows a link, never reads a file's
content, never raises for one unreadable folder (it is listed in `skipped`), never puts a
name or link target that is not valid UTF-8 in `files` or `ignored` (a manifest is JSON:
it is listed in `skipped`, escaped as \\xNN)."""

from __future__ import annotations

import os
import stat
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mulligan.app.workspace.store.statindex import (
    MARGIN,
    Folder,
    Index,
    Key,
    Recorded,
    key_of,
    stat_ahead,
)

try:  # the compare in C (setup.py builds it); without it, the same answers in Python
    from mulligan.app.workspace.store import _lstats
except ImportError:  # pragma: no cover - a platform where it could not be compiled
    _lstats = None  # type: ignore[assignment]

if TYPE_CHECKING:
    import pathspec

__all__ = ["TEMP_MARK", "Walk", "made_for", "meta_of"]

TEMP_MARK = ".mulligan-restore-"
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FileFacts = tuple[str, int, int, int, str]
Rules = tuple[tuple[str, str, Key], ...]  # (base folder, .gitignore path, its key), outer first
_SPECS: dict[tuple[str, Key], pathspec.GitIgnoreSpec | None] = {}  # compiled ignore files


class Walk:
    """One walk of `root` (absolute). `visit(folder)` is called with each folder's absolute
    path before it is read (and with `.git/info`, whose `exclude` counts too), so a monitor
    sees any change after the read. `forced`: files whose content is read whatever the index
    says. `excluded`: Mulligan's own files (whole paths, and (folder, name prefix) pairs)."""

    def __init__(self, root: str, index: Index | None, *,
                 excluded: tuple[set[str], list[tuple[str, str]]] = (set(), []),
                 forced: Iterable[str] = (), visit: Callable[[str], None] | None = None,
                 max_file: int = 0, native: bool = True) -> None:
        self.root, self.visit = root, visit
        self._native = _lstats if native else None  # False: the Python path (tests/test_lstats)
        self.started = time.time_ns()
        self.files: dict[str, FileFacts] = {}
        self.skipped: dict[str, str] = {}
        self.ignored: list[str] = []
        self.temps: list[str] = []
        self.forced = set(forced)
        self._excluded = excluded
        self._mine = {rel.rpartition("/")[0] for rel in excluded[0]}  # folders holding them
        self.linked = False  # an ignore file read was a link (see `_rules_key`)
        self.shared: set[int] | None = None  # the inodes its entries may share, if known
        self.parts: dict[str, bytes] | None = None  # `listed`'s, per folder
        self.texts: dict[str, bytes | None] | None = None  # `folder_texts`'s, per folder
        self.meta = meta_of(root, excluded, max_file)
        self._index = index
        self._done: list[Recorded | tuple[str, Folder]] = []
        # Taken ahead (unwatched): the positions of the index's entries whose stat is not the
        # recorded one, ascending, and the folders whose .gitignore's is not (`stat_ahead`).
        self._ahead: tuple[list[int], set[str] | None] | None = None

    def __iter__(self) -> Iterator[tuple[str, os.stat_result, str | None]]:
        """(relative path, lstat, the hash the index had there or None) of each regular file
        whose content must be read; the caller puts its FileFacts in `files` (or its reason
        in `skipped`) before taking the next."""
        root, visit, index = self.root, self.visit, self._index
        info_dir = os.path.join(root, ".git", "info")
        if visit is not None and os.path.isdir(info_dir):
            visit(info_dir)
        exclude = os.path.join(info_dir, "exclude")
        exclude_key = self._rules_key(exclude)
        self.meta["exclude"] = exclude_key
        rules: Rules = (("", exclude, exclude_key),) if exclude_key is not None else ()
        same = index is not None and made_for(index, self.meta) and \
            _same_key(index, index.meta.get("exclude"), exclude_key)
        forced_dirs = {rel.rpartition("/")[0] for rel in self.forced}
        try:
            top: Key | None = key_of(os.lstat(root))
        except OSError:
            top = None
        stack: list[tuple[str, Key | None, Rules, bool]] = [("", top, rules, same)]
        try:
            rootfd = os.open(root, _OPEN_DIR)
        except OSError:  # gone or unreadable: read (and listed as skipped) like any folder
            yield from self._read("", root, top, rules, same, None, [])
            return
        try:
            lstat = partial(os.lstat, dir_fd=rootfd)
            if visit is None and same and index is not None:
                self._ahead = stat_ahead(index, rootfd, lstat, self._native)
                if top is not None and not self.forced and self._all_whole(index, top):
                    return
            while stack:
                rel_dir, key, rules, same = stack.pop()
                here = os.path.join(root, rel_dir) if rel_dir else root
                if visit is not None:  # watched, then its stat taken: a later change is seen
                    visit(here)
                    try:
                        key = key_of(os.lstat(here))
                    except OSError:
                        key = None
                old = index.folders.get(rel_dir) if index is not None else None
                if same and index is not None and old is not None and key is not None \
                        and rel_dir not in forced_dirs:
                    taken = self._whole(index, rel_dir, here, key, old, lstat)
                    if taken is not None:
                        below, rules_key = taken
                        if rules_key is not None:
                            rules = (*rules, (rel_dir, os.path.join(here, ".gitignore"),
                                              rules_key))
                        stack.extend((r, k, rules, True) for r, k in reversed(below))
                        continue
                yield from self._read(rel_dir, here, key, rules, same, old, stack)
        finally:
            os.close(rootfd)

    def _all_whole(self, index: Index, top: Key) -> bool:
        """Take the whole tree from the index at once when the stats taken ahead found every
        entry and every .gitignore as recorded, the root's own stat too, and every folder
        `clean`: what the folder-by-folder walk would do (`_whole` of each folder the index
        has -- those its walk reached, in its order), without its Python loop."""
        ahead, root = self._ahead, index.folders.get("")
        if ahead is None or ahead[0] or ahead[1] is None or ahead[1] or root is None or \
                root.key != top or index.racy(top) or \
                not all(folder.clean for folder in index.folders.values()):
            return False
        self.files.update(zip(index.rels, index.facts, strict=True))
        self.ignored += index.ignored
        self._done += index.folders.items()
        return True

    def _whole(self, index: Index, rel_dir: str, here: str, key: Key, old: Folder,
               lstat: Callable[[str], os.stat_result]
               ) -> tuple[list[tuple[str, Key]], Key | None] | None:
        """Take folder `old` from the index if its own stat, its .gitignore's and every
        entry's are the recorded ones, none racy: (its subfolders' (path, key), its
        .gitignore's key); else None, and nothing is taken."""
        if not old.clean or old.key != key or index.racy(key):
            return None
        end = old.start + old.entries
        ahead = self._ahead
        if ahead is not None and ahead[1] is not None:
            if rel_dir in ahead[1]:
                return None
            rules_key = old.rules  # stated ahead: as recorded
        else:  # stated even when there was none: a .gitignore link may have found its target
            rules_key = self._rules_key(os.path.join(here, ".gitignore"))
        if rules_key != old.rules or (rules_key is not None and index.racy(rules_key)):
            return None
        if ahead is not None:
            if bisect_left(ahead[0], old.start) != bisect_left(ahead[0], end):
                return None
        else:
            try:
                now = list(map(key_of, map(lstat, index.rels[old.start:end])))
            except OSError:
                return None
            if now != index.keys_of(old.start, end):
                return None
        facts = index.facts[old.start:end]
        self.files.update(zip(index.rels[old.start:end], facts, strict=True))
        self.ignored += index.ignored[old.ign:old.ign + old.ignored]
        self._done.append((rel_dir, old))
        return [(index.rels[at], index.key(at)) for at, f in enumerate(facts, old.start)
                if f[0] == "dir"], rules_key

    def _read(self, rel_dir: str, here: str, key: Key | None, rules: Rules, same: bool,
              old: Folder | None, stack: list[tuple[str, Key | None, Rules, bool]]
              ) -> Iterator[tuple[str, os.stat_result, str | None]]:
        """Read one folder: its names, their ignore verdicts, their stats; files whose content
        is not known from the index are yielded; its subfolders go on `stack`."""
        index = self._index
        known: dict[str, tuple[Key, FileFacts]] = {}  # rel -> (key, facts) as recorded
        if old is not None and index is not None:
            end = old.start + old.entries
            known.update(zip(index.rels[old.start:end],
                             zip(index.keys_of(old.start, end), index.facts[old.start:end],
                                 strict=True), strict=True))
        ignore_file = os.path.join(here, ".gitignore")
        rules_key = self._rules_key(ignore_file)
        # The verdicts the index holds hold while the rules are those it saw, and not racy.
        verdicts = same and old is not None and index is not None and \
            old.rules == rules_key and (rules_key is None or not index.racy(rules_key))
        reading = self._folder(rel_dir, ignore_file, key, rules, rules_key, verdicts)
        record = reading.record
        try:
            with os.scandir(here) as found:
                items = sorted(found, key=lambda e: e.name)
        except OSError as exc:
            self.skipped[rel_dir or "."] = f"folder could not be read ({exc.strerror})"
            record.clean = False
            return
        files, prefix, entry = self.files, reading.prefix, self._entry
        for item in items:
            name = item.name
            if name == ".git":
                continue  # "ignored" by Manifest.state's own rule
            rel = prefix + name
            found_file = entry(reading, rel, name, item, known.get(rel))
            if found_file is not None:
                yield found_file
                if rel not in files:  # the caller skipped it: not in the manifest
                    record.clean = False
        stack.extend(reversed(reading.below))

    def _folder(self, rel_dir: str, ignore_file: str, key: Key | None, rules: Rules,
                rules_key: Key | None, verdicts: bool) -> _Reading:
        """A folder about to be read (its names given to `_entry` in name order), recorded."""
        if rules_key is not None:
            rules = (*rules, (rel_dir, ignore_file, rules_key))
        racy_from = self.started - MARGIN
        # Taken whole next time only if nothing in it (itself included) is racy now.
        record = Recorded(rel_dir, key or (0, 0, 0, 0, 0), rules_key, [], [], [], [],
                          key is not None and key[2] < racy_from and key[3] < racy_from and
                          (rules_key is None or (rules_key[2] < racy_from and
                                                 rules_key[3] < racy_from)))
        self._done.append(record)
        return _Reading(rel_dir, rel_dir + "/" if rel_dir else "", rules, verdicts, record,
                        racy_from)

    def _entry(self, reading: _Reading, rel: str, name: str, item: Any,
               was: tuple[Key, FileFacts] | None
               ) -> tuple[str, os.stat_result, str | None] | None:
        """One name of the folder being read (`item`: its DirEntry, or anything whose
        `stat(follow_symlinks=False)` gives its lstat), as the walk records it: in `files`,
        `skipped`, `ignored` or `temps`, and in the folder's record; a subfolder goes on
        `reading.below`. `was`: its (key, facts) in the index. Returns (rel, lstat, the hash
        the index had) when its content must be read (the caller puts its facts in `files`),
        else None."""
        record = reading.record
        if not name.isascii() and not _utf8(name):
            # A manifest is JSON: such a name cannot be in it. Listed, never touched (a
            # restore keeps what it does not know, and a folder holding it is not removed).
            self.skipped[_shown(rel)] = "its name is not valid UTF-8: not recorded"
            record.clean = False
            return None
        if TEMP_MARK in name:
            self.temps.append(rel)
            record.clean = False
            return None
        rel_dir = reading.rel_dir
        whole, prefixes = self._excluded
        if rel_dir in self._mine and (rel in whole or any(
                folder == rel_dir and name.startswith(start) for folder, start in prefixes)):
            self.ignored.append(rel)
            record.ignored.append(rel)
            return None
        info = item.stat(follow_symlinks=False)
        mode = info.st_mode
        folder = stat.S_ISDIR(mode)
        # Recorded, of the same kind, under the same rules: still not ignored. (A name
        # that was ignored is matched again: "build/" ignores a folder, not a file.)
        if reading.verdicts and was is not None and (was[1][0] == "dir") == folder:
            out = False
        else:
            specs = reading.specs
            if specs is None:
                specs = [(base, _compiled(path, k)) for base, path, k in reading.rules]
                specs = reading.specs = [(b, s) for b, s in specs if s is not None]
            out = bool(specs) and _ignored(rel, folder, specs)
        if out:
            self.ignored.append(rel)
            record.ignored.append(rel)
            return None
        if not (folder or stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
            self.skipped[rel] = "not a file, folder or link (a pipe, socket, device)"
            record.clean = False
            return None
        now: Key = key_of(info)
        index, files = self._index, self.files
        trusted = was is not None and was[0] == now and index is not None and \
            not index.racy(now)
        racy_from = reading.racy_from
        if now[2] >= racy_from or now[3] >= racy_from:
            record.clean = False  # racy for the next walk too
        record.rels.append(rel)
        record.keys.append(now)
        if folder:
            files[rel] = ("dir", stat.S_IMODE(mode), 0, 0, "")
            reading.below.append((rel, now, reading.rules, reading.verdicts))
        elif stat.S_ISLNK(mode):
            if trusted and was is not None:
                files[rel] = was[1]
            elif _utf8(target := os.readlink(os.path.join(self.root, rel))):
                files[rel] = ("link", 0, 0, 0, target)
            else:
                self.skipped[rel] = "a link whose target is not valid UTF-8: not recorded"
                record.clean = False
        elif trusted and was is not None and rel not in self.forced:
            files[rel] = ("file", stat.S_IMODE(mode), now[1], now[2], was[1][4])
        else:
            return rel, info, was[1][4] if was is not None and was[1][0] == "file" else None
        return None

    def _rules_key(self, path: str) -> Key | None:
        """`_rules_key` of an ignore file the walk reads; a link among them is noted
        (`linked`): its target can change with no event in the folder."""
        try:
            info = os.lstat(path)
        except OSError:
            return None
        if stat.S_ISLNK(info.st_mode):
            self.linked = True
            return _rules_key(path)
        return key_of(info) if stat.S_ISREG(info.st_mode) else None

    def unchanged(self) -> str | None:
        """After the iteration (and the caller's hashing): the index's snapshot id if this
        walk saw exactly what the index describes -- every folder taken whole, or read and
        found as recorded, forced files included -- else None."""
        index, files = self._index, self.files
        if index is None or self.skipped:
            return None
        for done in self._done:
            if isinstance(done, tuple):
                continue
            old = index.folders.get(done.rel)
            if old is None or (done.key, done.rules, done.clean) != (old.key, old.rules,
                                                                     old.clean):
                return None
            end = old.start + old.entries
            if done.rels != index.rels[old.start:end] or \
                    done.keys != index.keys_of(old.start, end) or \
                    done.ignored != index.ignored[old.ign:old.ign + old.ignored] or \
                    [files.get(rel) for rel in done.rels] != index.facts[old.start:end]:
                return None
        return index.tree

    def listed(self) -> bytes | None:
        """What `manifests.manifest_id` lists of `files`, when made cheaper than from them
        (a look's); and `parts`, per folder, for the next index."""
        return None

    def folder_texts(self) -> dict[str, bytes | None] | None:
        """Each folder's `manifests.text`, in the walk's order, when made cheaper than
        encoding `files` whole (a look's: `texts`, for the next index); None for a walk."""
        return None

    def recorded(self) -> list[Recorded]:
        """The folders as this walk saw them, in its order, with the facts the manifest has
        (a file the caller skipped is left out), for the next index."""
        out: list[Recorded] = []
        index, files = self._index, self.files
        for done in self._done:
            if isinstance(done, Recorded):
                kept = [n for n, rel in enumerate(done.rels) if rel in files]
                out.append(Recorded(done.rel, done.key, done.rules,
                                    [done.rels[n] for n in kept],
                                    [done.keys[n] for n in kept],
                                    [files[done.rels[n]] for n in kept],
                                    done.ignored, done.clean))
            else:
                assert index is not None
                rel, old = done
                end = old.start + old.entries
                out.append(Recorded(rel, old.key, old.rules, index.rels[old.start:end],
                                    index.keys_of(old.start, end), index.facts[old.start:end],
                                    index.ignored[old.ign:old.ign + old.ignored], old.clean))
        return out


def meta_of(root: str, excluded: tuple[set[str], list[tuple[str, str]]], max_file: int
            ) -> dict[str, Any]:
    """What a walk of `root` records, and an index must have recorded, for it to count."""
    return {"root": root, "max_file": max_file,
            "excluded": [sorted(excluded[0]), sorted(map(list, excluded[1]))]}


def made_for(index: Index, meta: dict[str, Any]) -> bool:
    """Whether `index` was made by a walk like the one `meta` is of (`meta_of`: the same
    root, Mulligan files and size cap): only then do its entries count for it."""
    recorded = index.meta
    return all(recorded.get(k) == meta[k] for k in ("root", "max_file", "excluded"))


class _Reading:
    """One folder being read: where its names go (`Walk._entry`)."""

    __slots__ = ("below", "prefix", "racy_from", "record", "rel_dir", "rules", "specs",
                 "verdicts")

    def __init__(self, rel_dir: str, prefix: str, rules: Rules, verdicts: bool,
                 record: Recorded, racy_from: int) -> None:
        self.rel_dir, self.prefix, self.rules, self.verdicts = rel_dir, prefix, rules, verdicts
        self.record, self.racy_from = record, racy_from
        self.below: list[tuple[str, Key | None, Rules, bool]] = []
        self.specs: list[tuple[str, pathspec.GitIgnoreSpec | None]] | None = None


def _utf8(text: str) -> bool:
    """Whether `text` (a name as os gives it: undecodable bytes as lone surrogates) is valid
    UTF-8, as a manifest (JSON) must hold it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shown(rel: str) -> str:
    """`rel` with the bytes that are not UTF-8 written as \\xNN: how a skipped name is listed."""
    return os.fsencode(rel).decode("utf-8", "backslashreplace")


def _same_key(index: Index, recorded: Any, now: Key | None) -> bool:
    if now is None:
        return recorded is None
    return isinstance(recorded, (list, tuple)) and tuple(recorded) == now and \
        not index.racy(now)  # a list once read back from disk


def _rules_key(path: str) -> Key | None:
    """The stat key of an ignore file, following a link as git's reading does; None if it is
    not a file."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return key_of(info) if stat.S_ISREG(info.st_mode) else None


def _compiled(path: str, key: Key) -> pathspec.GitIgnoreSpec | None:
    """The compiled rules of ignore file `path` as it is at `key` (once per version: a file
    changed in the same tick is compiled again only after `MARGIN`, the racy rule's margin)."""
    found = _SPECS.get((path, key), False)
    if found is not False:
        return found  # type: ignore[return-value]
    spec = _spec(Path(path))
    settled = time.time_ns() - MARGIN
    if key[2] < settled and key[3] < settled:
        if len(_SPECS) > 1024:
            _SPECS.clear()
        _SPECS[(path, key)] = spec
    return spec


def _spec(path: Path) -> pathspec.GitIgnoreSpec | None:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    import pathspec  # here, not at the top: the REPL's first prompt does not wait for it

    return pathspec.GitIgnoreSpec.from_lines(lines) if any(
        line.strip() and not line.startswith("#") for line in lines) else None


def _ignored(rel: str, is_dir: bool,
             specs: list[tuple[str, pathspec.GitIgnoreSpec | None]]) -> bool:
    """git's answer: the deepest .gitignore that has a say decides (a later `!` re-includes)."""
    verdict = False
    for base, spec in specs:
        if spec is None:
            continue
        inner = rel[len(base) + 1:] if base else rel
        result = spec.check_file(inner + "/" if is_dir else inner)
        if result.include is not None:
            verdict = bool(result.include)
    return verdict
