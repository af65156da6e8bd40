"""Going back: one branch line in the session, and -- when asked -- the working folder put
back as it was at the entry gone to, recorded as a workspace_restore entry.

In: a session's log, its checkpoints (or None), the entry to go to (on this branch or any
other: going forward to an abandoned attempt brings its files back), and what to do with the
files (`Files`): "restore" them (refused when the user changed one), "keep-mine" (restore,
keeping the files the user changed as they are), "overwrite" (restore everything, a copy of
what is replaced kept), "merge" (restore, and in each file the user edited that the agent
also changed take the agent's change out and keep the user's, as `git revert` does; refused
naming every file where the two touch the same lines), "keep" them all as they are, or None
(the session has no checkpoints, or the caller does not care); and, optionally, the model
that summarises the attempt left.

For a frontend's question (the REPL's): `back_plan(log, checkpoints, ID)` changes nothing and
returns a `Plan` (None: nothing to do) with `files` (exactly the paths the agent changed in
the part left, and in the part gone to, that differ now), `changes` (restored as they are),
`conflicts` ([(path, why)]: the user changed them), `merges` (the conflicts a "merge" would
merge cleanly) and `overlaps` ({path: why not}), `left` (differ, but no change of the agent:
left as they are), `not_restorable`, and `forward` (True when the entry gone to is on another
branch: word it "bring this attempt's files back"). `plan_lines(plan)` words it.
`go_back(..., files=...)` then returns a `Back`: `restored`, `merged`, `kept`;
`describe(back)` says what was restored, merged and kept.
Out: a `Back` saying what was done. Order of work, so that a kill at any moment loses
nothing and a second run finishes the job: the files first (every one as it was, or as the
target has it), then the branch line, then the workspace_restore entry.
A refused restore (`RestoreRefused`) changes neither the folder nor the session file.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from mulligan.app.rewind.summaries import Summary, summarize
from mulligan.app.workspace.checkpoints import Checkpoints, owners
from mulligan.app.workspace.restore import Plan, apply, plan
from mulligan.app.workspace.swap import sweep
from mulligan.session import SessionLog
from mulligan.wire import Model

__all__ = ["FILES", "Back", "Files", "back_plan", "describe", "go_back", "plan_lines"]

# What to do with the working folder when going back (see the module docstring).
Files = Literal["restore", "keep-mine", "overwrite", "keep", "merge"]
FILES: tuple[Files, ...] = ("restore", "keep-mine", "overwrite", "keep", "merge")


@dataclass
class Back:
    """What going back did: the new branch line, and for the files: `restored` paths, `kept`
    ones (changed outside and left as they are, or all of them when the user chose to keep
    the files), and what cannot be restored."""

    branch_id: str
    restored: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)
    not_restorable: list[tuple[str, str]] = field(default_factory=list)
    safety: str | None = None
    summary: Summary | None = None


def back_plan(log: SessionLog, checkpoints: Checkpoints | None, entry_id: str) -> Plan | None:
    """What going back to `entry_id` would do to the files; None without checkpoints (or
    when the folder holds nothing the restore would change). Changes nothing in the folder
    but what a killed restore left beside the files (`swap.sweep`)."""
    if checkpoints is None or not checkpoints.enabled:
        return None
    log.entry(entry_id)  # UnknownEntry naming it
    checkpoints.attach(log.path)
    found = plan(checkpoints.store, checkpoints.root, log.branch(log.tip()),
                 log.branch(entry_id), _Lazy(log))
    if found is None or not (found.changes or found.conflicts):
        if found is not None and found.temps:
            # A restore killed once every path was done, before it removed what it had
            # swapped out: nothing is left to apply, and what it left beside the files goes.
            sweep(checkpoints.root, found.temps)
        return None
    return found


def go_back(log: SessionLog, checkpoints: Checkpoints | None, entry_id: str, *,
            files: Files | None = None, summarize_with: Model | None = None,
            abort: threading.Event | None = None,
            on_event: Callable[[dict[str, Any]], None] | None = None) -> Back:
    """Go back to `entry_id` (see the module docstring): the one workflow the REPL and
    `mulligan sessions back` share. With `summarize_with`, that model first summarises the
    attempt left (`app.rewind.summaries`; its events go to `on_event`; `abort` set meanwhile
    leaves a plain branch line) and the going back is one branch_summary entry. An unknown
    `entry_id` is refused (UnknownEntry) before any model call; a refused restore
    (RestoreRefused) changes nothing."""
    log.entry(entry_id)
    summary = None
    if summarize_with is not None:
        summary = summarize(log, entry_id, summarize_with,
                            restored=files in ("restore", "keep-mine", "overwrite"),
                            abort=abort, on_event=on_event)
    return _go_back(log, checkpoints, entry_id, files, summary)


def _go_back(log: SessionLog, checkpoints: Checkpoints | None, entry_id: str,
             files: Files | None, summary: Summary | None) -> Back:
    old_tip = log.tip()

    def branch() -> str:
        if summary is None:
            return log.branch_to(entry_id)
        return log.branch_summary_to(entry_id, from_id=str(old_tip), summary=summary.text,
                                     details={**summary.details, "fallback": summary.fallback},
                                     usage=summary.usage)

    chosen = back_plan(log, checkpoints, entry_id) if files is not None else None
    if chosen is None or checkpoints is None:
        done = Back(branch(), summary=summary)
        if checkpoints is not None:
            checkpoints.follow(log.branch(log.tip()))
        return done
    if files == "keep":
        here = owners(log.branch(log.tip()))
        kept = sorted({*chosen.changes, *(p for p, _ in chosen.conflicts)})
        branch_id = branch()
        after = checkpoints.store.snapshot(checkpoints.root)  # the folder, kept as it is
        checkpoints.saw(after.id)
        meta: dict[str, Any] = {"workspace": {
            "after": after.id, "safety": chosen.safety.id, "restored": [], "kept": kept,
            "changed": [p for p in kept if here.get(p) != "outside"],
            "outside": [p for p in kept if here.get(p) == "outside"]}}
        log.append_entry("workspace_restore", target_entry=entry_id, chose="keep", **meta)
        return Back(branch_id, kept=kept, not_restorable=chosen.not_restorable,
                    safety=chosen.safety.id, summary=summary)
    restored = apply(checkpoints.store, checkpoints.root, chosen,
                     keep_mine=files == "keep-mine", overwrite=files == "overwrite",
                     merge=files == "merge")
    branch_id = branch()
    log.append_entry("workspace_restore", target_entry=entry_id, chose="restore",
                     **checkpoints.restored(restored, chosen.target_owners))
    return Back(branch_id, restored=restored.restored, kept=restored.kept,
                merged=restored.merged, not_restorable=chosen.not_restorable,
                safety=restored.safety, summary=summary)


def describe(done: Back, root: Path | None = None) -> list[str]:
    """What going back did, in lines for a person."""
    kind = "a branch summary" if done.summary else "a branch line"
    lines = [f"went back: the session's tip is now {done.branch_id}, {kind}"]
    if done.summary:
        made = "made from the entries (the model could not)" if done.summary.fallback else \
            "written by the model"
        lines.append(f"summary of the attempt left ({made}):")
        lines += [f"  {line}" for line in done.summary.text.splitlines()]
    if done.restored:
        lines.append(f"restored {len(done.restored)} file(s): " + ", ".join(done.restored[:12])
                     + (" ..." if len(done.restored) > 12 else ""))
    if done.merged:
        lines.append(f"merged {len(done.merged)} file(s) (the agent's change taken out, your "
                     f"edits kept): {', '.join(done.merged[:12])}"
                     + (" ..." if len(done.merged) > 12 else ""))
    if done.kept:
        lines.append(f"kept as they are: {', '.join(done.kept[:12])}"
                     + (" ..." if len(done.kept) > 12 else ""))
    if done.safety and (done.restored or done.kept or done.merged):
        lines.append(f"safety snapshot {done.safety[:12]} holds the folder as it was before")
    for rel, why in done.not_restorable[:5]:
        lines.append(f"not restorable: {rel} ({why})")
    return lines


def plan_lines(chosen: Plan, *, limit: int = 15) -> list[str]:
    """The restore question's text: exactly the files the part left changed (going back), or
    the files the attempt gone to changed (going forward: "bring this attempt's files
    back"), each conflict with why and whether a merge can keep both, what is left alone."""
    files = chosen.files
    lines = [f"bring this attempt's files back: it and the part you are leaving changed "
             f"{len(files)} file(s) in the working folder:" if chosen.forward else
             f"the part you are leaving changed {len(files)} file(s) in the working folder:"]
    why = dict(chosen.conflicts)
    for rel in files[:limit]:
        if rel not in why:
            lines.append(f"  {rel}")
        elif rel in chosen.merges:
            lines.append(f"  {rel}  (yours: {why[rel]}; a merge can take the agent's change "
                         "out and keep yours)")
        else:
            lines.append(f"  {rel}  (yours: {why[rel]})")
    if len(files) > limit:
        lines.append(f"  ... and {len(files) - limit} more")
    lines += [f"  left as it is: {rel} ({reason})" for rel, reason in chosen.left[:5]]
    lines += [f"  not restorable: {rel} ({reason})" for rel, reason in chosen.not_restorable[:5]]
    return lines


class _Lazy:
    """A session's entries, read only if iterated."""

    def __init__(self, log: SessionLog) -> None:
        self.log = log

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        return iter(self.log.entries())
