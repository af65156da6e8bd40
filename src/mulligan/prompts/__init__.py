"""System prompts: the base text for the model's size, plus the working folder and the
project's AGENTS.md instructions (CLAUDE.md where a folder has no AGENTS.md).

In: the model (its `compact_prompt` attribute picks local.md over hosted.md), the working
folder, and optionally a file replacing the base text. Out: one string. Reads files; never
writes one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

INSTRUCTIONS_FILE = "AGENTS.md"
FALLBACK_FILE = "CLAUDE.md"  # Claude Code's name, read where a folder has no AGENTS.md


def base_prompt(compact: bool = False) -> str:
    """The packaged base prompt: local.md for small models (when it exists), else hosted.md."""
    # Next to this file, as mulligan is installed (never zipped): importlib.resources and
    # the zipfile machinery it imports were a tenth of the REPL's way to its first prompt.
    folder = Path(__file__).parent
    if compact and (folder / "local.md").is_file():
        return (folder / "local.md").read_text(encoding="utf-8")
    return (folder / "hosted.md").read_text(encoding="utf-8")


def instruction_files(cwd: Path) -> list[Path]:
    """The AGENTS.md files that apply to `cwd`, outermost first: one in `cwd` and in each
    parent up to the git repository root (the folder holding ``.git``); a folder without
    AGENTS.md gives its CLAUDE.md instead. Outside a repository only `cwd` itself is looked
    in."""
    cwd = Path(cwd).resolve()
    chain = [cwd, *cwd.parents]
    root = next((folder for folder in chain if (folder / ".git").exists()), None)
    folders = chain[: chain.index(root) + 1] if root is not None else [cwd]
    found = []
    for folder in reversed(folders):
        for name in (INSTRUCTIONS_FILE, FALLBACK_FILE):
            if (folder / name).is_file():
                found.append(folder / name)
                break
    return found


def system_prompt(model: Any, cwd: Path, *, base_file: Path | None = None,
                  extra: str = "") -> str:
    """The whole system prompt for `model` working in `cwd`. `base_file` replaces the packaged
    base text (--system-prompt-file); AGENTS.md is added either way, and the working folder
    for every model but a compact (small local) one; `extra` (the skills' list) last."""
    compact = bool(getattr(model, "compact_prompt", False))
    base = Path(base_file).read_text(encoding="utf-8") if base_file else base_prompt(compact)
    parts = [base.rstrip()]
    if not compact:
        # A small local model reads an absolute path as noise: it changes with every folder,
        # and at temperature 0 that alone changes which file the model decides to open.
        parts.append(f"Working folder: {Path(cwd).resolve()}")
    for found in instruction_files(cwd):
        text = found.read_text(encoding="utf-8", errors="replace").strip()
        if text:
            parts.append(f"Project instructions from {found}:\n\n{text}")
    if extra.strip():
        parts.append(extra.strip())
    return "\n\n".join(parts) + "\n"
