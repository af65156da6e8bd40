"""Path confinement: the tools see one folder, the workspace, and nothing outside it.

`Workspace(root)` turns the paths a model sends (relative to the root, or absolute inside it)
into real paths, and refuses anything that lands outside: an absolute path elsewhere, a "../"
escape, or a symlink whose target is outside. Symlinks are resolved before the check, so a link
cannot smuggle a path out. Refusals are `OutsideWorkspace` errors worded for the model.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from mulligan.tools.base import ToolError

__all__ = ["SKIPPED_DIRS", "OutsideWorkspace", "Root", "Workspace", "is_binary"]

# Folders a walk (grep, find) does not go into unless asked for by path: version-control
# internals and installed dependencies, which drown a search in matches nobody wrote.
SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", ".venv", "__pycache__"})


class OutsideWorkspace(ToolError):
    """A path that resolves outside the workspace."""


class Workspace:
    """The folder the tools work in. `root` must be an existing folder; it is resolved once
    (symlinks included) when the workspace is made, and NotADirectoryError names it if not."""

    def __init__(self, root: str | os.PathLike[str],
                 read_roots: tuple[str | os.PathLike[str], ...] = ()) -> None:
        resolved = Path(root).resolve()
        if not resolved.is_dir():
            raise NotADirectoryError(f"Workspace {root} is not an existing folder")
        self.root = resolved
        # Folders outside the root that `read` (only) may open: the user's skill folders.
        self.read_roots = tuple(Path(r).resolve() for r in read_roots)

    @classmethod
    def of(cls, root: Root) -> Workspace:
        """`root` itself when it is a Workspace (the coding tools share one), else a new one."""
        return root if isinstance(root, Workspace) else cls(root)

    def resolve(self, path: str, *, reading: bool = False) -> Path:
        """The real path for `path` (relative to the root, or absolute), symlinks resolved.
        Raises OutsideWorkspace when it lands outside the root (`reading`: and outside every
        one of `read_roots`). The path need not exist."""
        candidate = Path(path)
        if not candidate.is_absolute():
            candidate = self.root / candidate
        try:
            resolved = candidate.resolve()
        except (RuntimeError, OSError):  # a symlink loop (RuntimeError before Python 3.13)
            raise ToolError(f"{path} cannot be used: it is a symlink loop (a link that leads "
                            "back to itself).") from None
        if resolved == self.root or resolved.is_relative_to(self.root):
            return resolved
        if reading and any(resolved.is_relative_to(r) for r in self.read_roots):
            return resolved
        lexical = Path(os.path.normpath(candidate))
        if lexical == self.root or lexical.is_relative_to(self.root):
            raise OutsideWorkspace(f"{path} is a symlink to {resolved}, outside the workspace "
                                   f"{self.root}; only paths inside it can be used.")
        raise OutsideWorkspace(f"{path} is outside the workspace {self.root}; use a path "
                               "inside it (relative paths start from the workspace).")

    def inside(self, path: Path) -> bool:
        """Whether `path`, symlinks resolved, is inside the workspace (a symlink loop is not)."""
        try:
            resolved = path.resolve()
        except (RuntimeError, OSError):
            return False
        return resolved == self.root or resolved.is_relative_to(self.root)

    def show(self, path: Path) -> str:
        """`path` as the model should see it: relative to the root, "/" separated, "." for it."""
        try:
            relative = path.relative_to(self.root)
        except ValueError:
            return str(path)
        return relative.as_posix() or "."

    def walk(self, start: Path, *, dirs: bool = False) -> Iterator[Path]:
        """Every file under `start` (and every folder too, with dirs=True), sorted, depth first.
        Never enters SKIPPED_DIRS, never follows a symlinked folder, and leaves out symlinks
        that point outside the workspace or loop. Unreadable folders are passed over silently."""
        for folder, subdirs, files in os.walk(start):
            subdirs[:] = sorted(d for d in subdirs if d not in SKIPPED_DIRS)
            here = Path(folder)
            names = sorted(files + subdirs) if dirs else sorted(files)
            for name in names:
                path = here / name
                if path.is_symlink() and not self.inside(path):
                    continue
                yield path


# What a tool factory accepts as its folder: a path, or the Workspace the coding tools share.
Root = str | os.PathLike[str] | Workspace


def is_binary(head: bytes) -> bool:
    """Whether a file whose first bytes are `head` is binary: it holds a NUL byte, which text
    in any encoding a model can use does not (UTF-16 does, and is treated as binary)."""
    return b"\0" in head
