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

import os
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
from mulligan.app.workspace.store.snapshots import (
    TEMP_MARK,
    FileFacts,
    Manifest,
    Store,
    changed_paths,
)
from mulligan.app.workspace.swap import OTHER, Discards, probe, put, readable, remove, same, sweep

__all__ = ["Plan", "RestoreRefused", "Restored", "apply", "plan"]


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
    added: list[str] = []  # copies the store did not have
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
        now = probe(store, os.path.join(root, rel), added)
        if now is not OTHER and same(now, want):
            continue  # already as wanted
        result.seen[rel] = now
        known = expected.state(rel)
        why = ""
        if now is OTHER:
            why = "a pipe, socket or device now: never replaced"
        elif known not in ("present", "absent"):
            if now is not None:
                why = (f"{known} when the session last saw it "
                       f"({expected.skipped.get(rel, 'not recorded')}), so it may hold "
                       "changes the agent did not make")
        elif not same(now, expected.files.get(rel)):
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
        if facts is None or facts is OTHER:
            files.pop(rel, None)
        else:
            files[rel] = facts
    if files != expected.files:  # the safety snapshot holds everything it may replace
        result.fresh = bool(added)
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
        if seen is None or seen is OTHER or seen[0] != "file" or \
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
    sweep(root, chosen.temps)
    kept = [rel for rel, why in chosen.conflicts] + [rel for rel, _ in chosen.left]
    paths = list(chosen.changes)
    wanted = dict(chosen.target.files)
    if merge:
        paths += list(chosen.merges)
        wanted.update(chosen.merges)
        kept = [rel for rel in kept if rel not in chosen.merges]
    if overwrite:
        conflicting = {rel for rel, _ in chosen.conflicts if chosen.seen.get(rel) is not OTHER}
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
    with Discards() as gone:
        for rel in sorted(first, key=lambda p: -p.count("/")):
            want = wanted.get(rel)
            done = remove(store, root, rel, seen.get(rel), gone) if want is None else \
                put(store, root, rel, want, seen.get(rel), gone)
            if not done:
                raced.append(rel)
        for rel in sorted(then, key=lambda p: (p.count("/"), p)):
            if not put(store, root, rel, wanted[rel], seen.get(rel), gone):
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
        now = probe(store, root / rel)
        if now is None or now is OTHER:
            files.pop(rel, None)
        else:
            files[rel] = now
    skipped = {p: w for p, w in chosen.safety.skipped.items() if p not in files}
    # Most often just the target (everything put back, nothing else changed): then it is
    # the target's manifest, and 10k paths are not hashed again for its id.
    return store.record(root, files, skipped, chosen.safety.ignored, like=chosen.target)
