"""The walk a snapshot takes: every folder, file and link under a root that git would not
ignore (the `.gitignore` files as they are now, read with pathspec), in name order, never
into `.git` nor through a link; what it skipped or found ignored is listed, not dropped.

In: a root and the lists to fill. Out: (relative path, lstat) pairs, lazily. Never follows a
link, never reads a file's content, never raises for one unreadable folder (it is listed in
`skipped`)."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pathspec

__all__ = ["TEMP_MARK", "walk"]

TEMP_MARK = ".mulligan-restore-"


def walk(root: str, skipped: dict[str, str], ignored: list[str], temps: list[str],
          visit: Callable[[str], None] | None = None,
          excluded: tuple[set[str], list[tuple[str, str]]] = (set(), [])
          ) -> Iterator[tuple[str, os.stat_result]]:
    """(relative path, lstat) of every folder, file and link under `root` that git would not
    ignore, folder by folder in name order, never into `.git` nor through a link. Unreadable
    folders are listed in `skipped`; sockets, pipes and devices too; what is ignored (and
    `excluded`: Mulligan's own files) in `ignored`, topmost only; a restore's temporary files
    in `temps`. Paths are plain strings: this runs once per file on every snapshot.
    `visit(folder)` is called with each folder's absolute path before it is read (and with
    `.git/info`, whose `exclude` counts too)."""
    exclude = os.path.join(root, ".git", "info", "exclude")
    if visit is not None and os.path.isdir(os.path.dirname(exclude)):
        visit(os.path.dirname(exclude))
    base = [("", _spec(Path(exclude)))] if os.path.isfile(exclude) else []
    stack: list[tuple[str, list[tuple[str, pathspec.GitIgnoreSpec | None]]]] = [("", base)]
    isdir, isreg, islnk = stat.S_ISDIR, stat.S_ISREG, stat.S_ISLNK
    whole, prefixes = excluded
    mine = {rel.rpartition("/")[0] for rel in whole}
    while stack:
        rel_dir, specs = stack.pop()
        here = os.path.join(root, rel_dir) if rel_dir else root
        if visit is not None:  # before its .gitignore and its entries are read
            visit(here)
        ignore_file = os.path.join(here, ".gitignore")
        if os.path.isfile(ignore_file):
            specs = [*specs, (rel_dir, _spec(Path(ignore_file)))]
        specs = [(b, s) for b, s in specs if s is not None]
        prefix = rel_dir + "/" if rel_dir else ""
        try:
            with os.scandir(here) as found:
                items = sorted(found, key=lambda e: e.name)
        except OSError as exc:
            skipped[rel_dir or "."] = f"folder could not be read ({exc.strerror})"
            continue
        below = []
        for item in items:
            name = item.name
            if name == ".git":
                continue  # "ignored" by Manifest.state's own rule
            rel = prefix + name
            if TEMP_MARK in name:
                temps.append(rel)
                continue
            if rel_dir in mine and (rel in whole or any(
                    folder == rel_dir and name.startswith(start) for folder, start in prefixes)):
                ignored.append(rel)
                continue
            info = item.stat(follow_symlinks=False)
            mode = info.st_mode
            folder = isdir(mode)
            if specs and _ignored(rel, folder, specs):
                ignored.append(rel)
                continue
            if not (folder or isreg(mode) or islnk(mode)):
                skipped[rel] = "not a file, folder or link (a pipe, socket, device)"
                continue
            yield rel, info
            if folder:
                below.append((rel, specs))
        stack.extend(reversed(below))


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
