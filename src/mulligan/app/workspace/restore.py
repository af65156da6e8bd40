"""Putting the working folder back as a snapshot had it, without ever losing a byte that was
there.

`plan(store, root, here, there)` works out, against the folder as it is now, what a restore
from the end of path `here` (the branch the session is on) to the end of path `there` would
do; it changes nothing in the folder. `apply(store, root, plan)` does it.

What a path is, in a snapshot (`Manifest.state`): present (its facts), absent, ignored (by
the rules as they were at that snapshot, `.git`, or Mulligan's own files) or unknown (the
walk skipped it: over the size cap, unreadable, a socket). Only "absent" means "was not
there", so only a path the agent really created is removed. Per path whose expected state
(what the session last left) differs from the target's:

- no call on either branch changed it (it only became visible or hidden when an ignore rule
  changed), or the target does not know it (ignored or unknown there): never touched,
  listed in `not_restorable`;
- the folder already holds what the target has: nothing to do;
- the session's expected state does not know it (ignored or unknown then) and the folder
  holds something: a conflict (what is there may not be the agent's);
- the folder holds something else than the session last saw, or a change made outside the
  agent that the session saw: a conflict;
- else: a change.

Every path the plan would replace or remove is read as it is now whatever the ignore rules
and size caps say, and kept in the store: the safety snapshot (`Plan.safety`) is the walk
plus those copies, so `overwrite` keeps a copy of everything it replaces. A folder the
restore would remove or turn into a file must hold nothing the restore keeps, else it is a
conflict. Mulligan's own files (`Store.exclude`, `Store.exclude_session`) are never touched.

Applying. Each path is compared with what the plan saw just before it is replaced, by
content, in a way no write can slip between: the new content is written beside the target,
then swapped with it in one `renameat2(RENAME_EXCHANGE)`; what was swapped out is compared
with what the plan saw (content hash, kind, mode), and if it differs -- a write that raced
the restore, an mmap change no monitor saw -- it is swapped back and reported as kept.
A removal renames the path aside first and compares the same way. Where nothing was seen,
the new one is renamed in with RENAME_NOREPLACE: a file created meanwhile is kept. Every
step is one rename, so a kill at any moment leaves each path as it was or as the target
has it; a second run finishes the job and removes what a killed run left beside the files.

Never: follow a link out of the folder, touch a path the target's snapshot does not know,
remove a file the store has no copy of. Not guaranteed: a process holding a file open and
writing to it after it was replaced writes into the replaced copy (as with any editor's
save); a write in the microseconds between the swap and its undo is in the copy the store
keeps only as the plan saw it.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mulligan.app.workspace.checkpoints import (
    RestoreRefused,
    SessionEntry,
    owners,
    state_at,
)
from mulligan.app.workspace.merge import Overlap, Step, merge_file, steps
from mulligan.app.workspace.store.blobs import readable
from mulligan.app.workspace.store.snapshots import (
    TEMP_MARK,
    FileFacts,
    Manifest,
    Store,
    Unsafe,
    changed_paths,
)

__all__ = ["Plan", "RestoreRefused", "Restored", "apply", "plan"]

_OTHER: FileFacts = ("other", 0, 0, 0, "")  # a pipe, socket or device: never replaced


@dataclass
class Plan:
    """What a restore to `target` would do, worked out against the folder as it is now."""

    target: Manifest
    expected: Manifest  # the folder as the session last saw it
    safety: Manifest  # `expected` with a copy of every path the restore may replace
    changes: list[str] = field(default_factory=list)  # paths to put back
    conflicts: list[tuple[str, str]] = field(default_factory=list)
    not_restorable: list[tuple[str, str]] = field(default_factory=list)
    target_owners: dict[str, str] = field(default_factory=dict)
    seen: dict[str, FileFacts | None] = field(default_factory=dict)  # what each held
    forward: bool = False  # the entry gone to is not on the branch left (an attempt's end)
    leaving: dict[str, list[Step]] = field(default_factory=dict)  # the agent's changes in
    arriving: dict[str, list[Step]] = field(default_factory=dict)  # the parts left / gone to
    left: list[tuple[str, str]] = field(default_factory=list)  # differ, not the agent's doing
    merges: dict[str, FileFacts] = field(default_factory=dict)  # conflicts merged cleanly
    temps: list[str] = field(default_factory=list)  # left beside its paths by a killed restore
    fresh: bool = False  # copies were added to the store (synced before the safety manifest)
    overlaps: dict[str, str] = field(default_factory=dict)  # conflicts that cannot merge

    @property
    def files(self) -> list[str]:
        """Every path the restore would change or ask about: exactly what the agent changed
        in the part left and in the part gone to, where the folder differs."""
        return sorted({*self.changes, *(rel for rel, _ in self.conflicts)})


@dataclass
class Restored:
    restored: list[str]
    kept: list[str]  # conflicting files left as the user has them, and writes that raced
    safety: str  # the snapshot taken before anything changed
    after: Manifest  # the folder once done
    raced: list[str] = field(default_factory=list)  # changed while restoring: kept
    merged: list[str] = field(default_factory=list)  # the agent's change taken out, yours kept


def plan(store: Store, root: Path, here: Sequence[SessionEntry],
         there: Sequence[SessionEntry], session: Iterable[SessionEntry] = ()) -> Plan | None:
    """The restore from the end of path `here` to the end of path `there` (see the module
    docstring); `session`: every entry in file order, read only when a path has no
    snapshot of its own (`state_at`). None when either has no checkpoint. Reads the
    folder, changes nothing in it (it adds the safety snapshot to the store)."""
    fork = 0  # the parts that differ: here[fork:] is left, there[fork:] is gone to
    while fork < min(len(here), len(there)) and here[fork].get("id") == there[fork].get("id"):
        fork += 1
    expected_id = state_at(here, session)
    target_id = state_at(there, session)
    if expected_id is None or target_id is None:
        return None
    expected, target = store.load(expected_id), store.load(target_id)
    root = Path(root).resolve()
    # No walk of the folder: every path the restore may touch is read itself (`_probe`).
    result = Plan(target, expected, expected, target_owners=owners(there))
    mine = owners(here)
    recorded = mine.keys() | result.target_owners.keys()
    result.forward = fork < len(there)
    result.leaving, result.arriving = steps(here[fork:]), steps(there[fork:])
    candidates = changed_paths(expected.files, target.files)
    for rel in candidates:
        if store.excluded(root, rel):
            continue  # Mulligan's own files (a manifest made before they were excluded)
        if rel not in recorded:  # no call changed it: it became visible or hidden
            result.not_restorable.append(
                (rel, "shown or hidden by an ignore rule's change, never changed by the "
                      "agent; left as it is"))
            continue
        if rel not in result.leaving and rel not in result.arriving:
            result.left.append((rel, "changed outside the agent, or kept when you went back "
                                     "before; not changed by the agent in the part left"))
            continue
        there_state = target.state(rel)
        if there_state not in ("present", "absent"):
            result.not_restorable.append(
                (rel, f"{there_state} at the entry gone to, so what it held there is not "
                      "known; left as it is"))
            continue
        want = target.files.get(rel)
        now = _probe(store, root / rel, result)
        if now is not _OTHER and _same(now, want):
            continue  # already as wanted
        result.seen[rel] = now
        known = expected.state(rel)
        why = ""
        if now is _OTHER:
            why = "a pipe, socket or device now: never replaced"
        elif known not in ("present", "absent"):
            if now is not None:
                why = (f"{known} when the session last saw it "
                       f"({expected.skipped.get(rel, 'not recorded')}), so it may hold "
                       "changes the agent did not make")
        elif not _same(now, expected.files.get(rel)):
            why = f"{'deleted' if now is None else 'changed'} outside the agent since the " \
                  "session last saw it"
        elif mine.get(rel) == "outside":
            why = "holds a change made outside the agent, which going back would undo"
        if why:
            result.conflicts.append((rel, why))
        else:
            result.changes.append(rel)
    _folders_hold_only_what_goes(root, result)
    for rel, why in {**target.skipped, **expected.skipped}.items():
        if not any(rel == p for p, _ in result.conflicts):
            result.not_restorable.append((rel, why))
    _merge_conflicts(store, root, result)
    result.temps = _temps_beside(root, candidates)
    files = dict(expected.files)
    for rel, facts in result.seen.items():
        if facts is None or facts is _OTHER:
            files.pop(rel, None)
        else:
            files[rel] = facts
    if files != expected.files:  # the safety snapshot holds everything it may replace
        if result.fresh:
            os.sync()  # the copies are on disk before a manifest names them
        skipped = {p: w for p, w in expected.skipped.items() if p not in files}
        # Often the same id as `expected` (only mtimes differ): found without hashing it.
        result.safety = store.record(root, files, skipped, expected.ignored, like=expected)
    return result


def _temps_beside(root: Path, paths: list[str]) -> list[str]:
    """What a killed restore left beside `paths` (temporary names in their folders)."""
    found: list[str] = []
    for folder in sorted({rel.rpartition("/")[0] for rel in paths}):
        try:
            names = os.listdir(root / folder if folder else root)
        except OSError:
            continue
        found += [f"{folder}/{n}" if folder else n for n in names if TEMP_MARK in n]
    return found


def _merge_conflicts(store: Store, root: Path, result: Plan) -> None:
    """For each file the user edited that the agent also changed: the three-way merge that
    takes the agent's changes in the part left out (and puts the part gone to's in), or why
    it cannot be done."""
    for rel, _ in result.conflicts:
        seen = result.seen.get(rel)
        if seen is None or seen is _OTHER or seen[0] != "file" or \
                (result.target.files.get(rel) or ("file",))[0] != "file":
            result.overlaps[rel] = f"{rel}: not a file on both sides; cannot merge"
            continue
        try:
            merged = merge_file(store, rel, store.read_blob(seen[4]),
                                result.leaving.get(rel, []), result.arriving.get(rel, []))
        except Overlap as exc:
            result.overlaps[rel] = str(exc)
            continue
        result.merges[rel] = ("file", seen[1], len(merged), 0, store.keep(merged))


def _folders_hold_only_what_goes(root: Path, result: Plan) -> None:
    """A folder the restore removes or replaces by a file must hold only paths it removes;
    else it becomes a conflict naming what it holds (ignored files, files not recorded)."""
    wanted = result.target.files
    going = {rel for rel in result.changes + [p for p, _ in result.conflicts]
             if wanted.get(rel) is None or wanted[rel][0] != "dir"}
    for rel in list(result.changes):
        seen = result.seen.get(rel)
        if seen is None or seen[0] != "dir" or rel not in going:
            continue
        try:
            names = os.listdir(root / rel)
        except OSError:
            continue
        staying = sorted(n for n in names if f"{rel}/{n}" not in going and TEMP_MARK not in n)
        if staying:
            result.changes.remove(rel)
            result.conflicts.append((rel, f"a folder holding {staying[0]}"
                                          f"{' and more' if len(staying) > 1 else ''}, which "
                                          "the restore would not remove"))


def _probe(store: Store | None, path: Path, plan: Plan | None = None) -> FileFacts | None:
    """What `path` holds now, read whatever ignore rules and size caps say; a file's
    content is kept in the store (the safety copy). None when nothing is there."""
    try:
        info = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    mode = info.st_mode
    if stat.S_ISLNK(mode):
        return ("link", 0, 0, 0, os.readlink(path))
    if stat.S_ISDIR(mode):
        return ("dir", stat.S_IMODE(mode), 0, 0, "")
    if not stat.S_ISREG(mode):
        return _OTHER
    with open(path, "rb") as handle:
        data = handle.read()
    digest = hashlib.blake2b(data, digest_size=20).hexdigest()
    if store is not None and not store.has_blob(digest):
        store.keep(data, durable=False)
        if plan is not None:
            plan.fresh = True
    return ("file", stat.S_IMODE(mode), len(data), info.st_mtime_ns, digest)


def _same(a: FileFacts | None, b: FileFacts | None) -> bool:
    if a is None or b is None:
        return a is b
    return (a[0], a[1], a[4]) == (b[0], b[1], b[4])


def apply(store: Store, root: Path, chosen: Plan, *, keep_mine: bool = False,
          overwrite: bool = False, merge: bool = False) -> Restored:
    """Do `chosen`: RestoreRefused (nothing changed) if it has conflicts and neither
    `keep_mine` nor `overwrite` says what to do with them; `merge` puts the clean merges in
    their place (`Plan.merges`) and refuses, naming each, the conflicts that cannot merge.
    Removals (and folders turned into files) go deepest first, then the rest shallowest
    first; each path is compared with what the plan saw as it is replaced (see the module
    docstring)."""
    if merge:
        unmerged = [(rel, chosen.overlaps.get(rel, why)) for rel, why in chosen.conflicts
                    if rel not in chosen.merges]
        if unmerged:
            raise RestoreRefused(unmerged)
    elif chosen.conflicts and not (keep_mine or overwrite):
        raise RestoreRefused(chosen.conflicts)
    root = Path(root).resolve()
    _sweep(root, chosen.temps)
    kept = [rel for rel, why in chosen.conflicts] + [rel for rel, _ in chosen.left]
    paths = list(chosen.changes)
    wanted = dict(chosen.target.files)
    if merge:
        paths += list(chosen.merges)
        wanted.update(chosen.merges)
        kept = [rel for rel in kept if rel not in chosen.merges]
    if overwrite:
        conflicting = {rel for rel, _ in chosen.conflicts if chosen.seen.get(rel) is not _OTHER}
        paths += sorted(conflicting)
        kept = [rel for rel in kept if rel not in conflicting]
    paths = list(dict.fromkeys(paths))  # each path once: its temporary name is its own
    readable(store, ((p, wanted.get(p)) for p in paths))  # a damaged copy: nothing done
    seen = chosen.seen
    first = [p for p in paths if wanted.get(p) is None
             or ((seen.get(p) or ("",))[0] == "dir" and wanted[p][0] != "dir")]
    firsts = set(first)
    then = [p for p in paths if p not in firsts]
    raced: list[str] = []
    with _Discards() as gone:
        for rel in sorted(first, key=lambda p: -p.count("/")):
            want = wanted.get(rel)
            done = _remove(store, root, rel, seen.get(rel), gone) if want is None else \
                _put(store, root, rel, want, seen.get(rel), gone)
            if not done:
                raced.append(rel)
        for rel in sorted(then, key=lambda p: (p.count("/"), p)):
            if not _put(store, root, rel, wanted[rel], seen.get(rel), gone):
                raced.append(rel)
    after = _after(store, root, chosen, wanted, [p for p in paths if p not in raced], raced)
    restored = sorted(p for p in paths if p not in raced and p not in chosen.merges)
    merged = sorted(p for p in chosen.merges if merge and p not in raced)
    return Restored(restored, sorted(kept + raced), chosen.safety.id, after, sorted(raced),
                    merged)


def _after(store: Store, root: Path, chosen: Plan, wanted: dict[str, FileFacts],
           done: list[str], raced: list[str]) -> Manifest:
    """The folder once restored, without walking it: the safety snapshot with what was put
    back (and what raced, read again). Anything else someone changed meanwhile differs from
    it, so the session's next snapshot finds it changed outside the agent, as it should."""
    files = dict(chosen.safety.files)
    for rel in done:
        if wanted.get(rel) is None:
            files.pop(rel, None)
        else:
            files[rel] = wanted[rel]
    for rel in raced:
        now = _probe(store, root / rel)
        if now is None or now is _OTHER:
            files.pop(rel, None)
        else:
            files[rel] = now
    skipped = {p: w for p, w in chosen.safety.skipped.items() if p not in files}
    # Most often just the target (everything put back, nothing else changed): then it is
    # the target's manifest, and 10k paths are not hashed again for its id.
    return store.record(root, files, skipped, chosen.safety.ignored, like=chosen.target)


# ---- one path, crash-safely --------------------------------------------------------------

_NOREPLACE, _EXCHANGE = 1, 2
_libc = ctypes.CDLL(None, use_errno=True)


def _rename2(source: Path, target: Path, flags: int) -> None:
    """renameat2(2): one atomic rename that refuses to replace (NOREPLACE) or swaps the two
    paths (EXCHANGE). OSError as the system says; EINVAL where the filesystem has neither."""
    if _libc.renameat2(-100, os.fsencode(source), -100, os.fsencode(target), flags) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(target))


def _inside(root: Path, rel: str) -> Path:
    """`root / rel`, refusing a path whose folders are not real folders inside `root` (a
    link would carry the write outside)."""
    target = root / rel
    parent = target.parent
    if os.path.realpath(parent) != str(parent) or not parent.is_relative_to(root):
        raise Unsafe(f"{rel}: its folder is a link or lies outside {root}; not restored")
    return target


def _temp(target: Path) -> Path:
    temp = target.with_name(f".{target.name}{TEMP_MARK}{os.getpid()}")
    _discard(temp)
    return temp


def _discard(path: Path) -> None:
    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            os.rmdir(path)
        else:
            os.unlink(path)
    except FileNotFoundError:
        pass


def _sweep(root: Path, temps: list[str]) -> None:
    """Remove what a killed restore left beside the files (its process is gone)."""
    for rel in temps:
        pid = rel.rpartition(TEMP_MARK)[2]
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                os.kill(int(pid), 0)
                continue  # a live restore's
            except ProcessLookupError:
                pass
            except PermissionError:
                continue
        with contextlib.suppress(OSError):  # a folder with something in it stays
            _discard(root / rel)


class _Discards:
    """Removes, on worker threads, what `_put` and `_remove` swapped out once it was checked
    to be what the plan saw (a copy is in the store): on this kind of disk each unlink of a
    file that was on disk waits 0.2-3 ms for the filesystem's journal, one at a time, and
    the waits overlap the next paths' work and each other instead. Every removal is done
    (or has failed, raised here) when the `with` block ends; a folder is compared only once
    the removals inside it are done (`settle`). A kill meanwhile leaves temporary names,
    which the next restore removes (`_sweep`), as it did before."""

    def __init__(self) -> None:
        from concurrent.futures import Future, ThreadPoolExecutor

        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="mulligan restore")
        self._jobs: list[Future[None]] = []

    def __call__(self, path: Path) -> None:
        self._jobs.append(self._pool.submit(_discard, path))

    def settle(self) -> None:
        """Wait for every removal so far; the first that failed raises."""
        jobs, self._jobs = self._jobs, []
        for job in jobs:
            job.result()

    def __enter__(self) -> _Discards:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.settle()
        finally:
            self._pool.shutdown(wait=True)


def _matches(path: Path, seen: FileFacts | None) -> bool:
    """Whether `path` holds what the plan saw (a folder: and nothing in it)."""
    now = _probe(None, path)
    if now is None or seen is None or now[0] != "dir":
        return _same(now, seen) if now is not _OTHER else False
    return seen[0] == "dir" and not os.listdir(path)


def _put(store: Store, root: Path, rel: str, want: FileFacts, seen: FileFacts | None,
         gone: _Discards) -> bool:
    """Put `want` at `rel` where the plan saw `seen`; False (and the path as it is) when
    something else is there now. What was there goes to `gone` once checked."""
    target = _inside(root, rel)
    kind, mode, _, _, value = want
    if kind == "dir" and seen is not None and seen[0] == "dir":
        os.chmod(target, mode)  # only its mode differs
        return True
    if kind == "dir" and seen is None:
        try:
            os.mkdir(target, mode)
        except FileExistsError:
            return stat.S_ISDIR(os.lstat(target).st_mode)
        os.chmod(target, mode)
        return True
    if seen is not None and seen[0] == "dir":
        gone.settle()  # what was removed inside it is gone before it is swapped out
    temp = _temp(target)
    if kind == "dir":
        os.mkdir(temp, 0o700)
        os.chmod(temp, mode)
    elif kind == "link":
        os.symlink(value, temp)
    else:
        data = store.read_blob(value)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as out:  # not fsynced, as git checkout: see the docstring
            out.write(data)
        os.chmod(temp, mode)
    try:
        if seen is None:
            _rename2(temp, target, _NOREPLACE)
            return True
        _rename2(temp, target, _EXCHANGE)
    except OSError as exc:
        if exc.errno == errno.EINVAL and seen is not None and _matches(target, seen):
            os.replace(temp, target)  # no atomic swap on this filesystem: checked, then put
            return True
        _discard(temp)
        if exc.errno in (errno.EEXIST, errno.ENOENT, errno.EINVAL):
            return False  # created, or removed, while restoring: theirs stays
        raise
    if _matches(temp, seen):
        gone(temp)  # what was there, as the plan saw it (the safety snapshot has it)
        return True
    _rename2(temp, target, _EXCHANGE)  # a write raced the restore: it goes back
    _discard(temp)
    return False


def _remove(store: Store, root: Path, rel: str, seen: FileFacts | None,
            gone: _Discards) -> bool:
    """Remove `rel`, which the plan saw holding `seen`; False when it holds something else.
    A file goes to `gone` once checked."""
    target = _inside(root, rel)
    if seen is None:
        return True
    if seen[0] == "dir":
        gone.settle()  # what was removed inside it is gone first
        try:
            os.rmdir(target)
        except FileNotFoundError:
            return True
        except OSError:  # something was put in it meanwhile: it stays
            return False
        return True
    aside = _temp(target)
    try:
        os.rename(target, aside)
    except FileNotFoundError:
        return True
    if _matches(aside, seen):
        gone(aside)
        return True
    try:  # a write raced the restore: it goes back
        _rename2(aside, target, _NOREPLACE)
    except OSError:
        os.rename(aside, target.with_name(f"{target.name}.kept-by-mulligan"))
    return False
