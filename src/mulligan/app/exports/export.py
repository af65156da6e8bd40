"""Exporting a session: the one workflow the REPL's /export and `mulligan sessions export`
share.

In: a session's log, a kind (`KINDS`), the leaf whose branch is written (md, jsonl; html
writes every attempt and opens at the leaf), and a target file. Out: the file written. Never
overwrites anything (`ExportTargetExists`); a target of None takes the kind's default: for md
and html `mulligan-<session>.<kind>` in `exports_folder(home)` (never the working folder: a
file left there would later block `sessions back --files` as changed outside the agent), for
jsonl a new session of `cwd`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from mulligan.app.exports.linear import to_markdown, write_linear, write_new
from mulligan.app.sessions.catalog import new_session_path
from mulligan.session import SessionLog

if TYPE_CHECKING:
    from mulligan.app.workspace.store.snapshots import Store

__all__ = ["KINDS", "Kind", "export", "exports_folder", "origin_of", "render"]

Kind = Literal["md", "jsonl", "html"]
KINDS: tuple[Kind, ...] = ("md", "jsonl", "html")


def exports_folder(home: Path) -> Path:
    """Where md and html exports go when no file is named: `$MULLIGAN_HOME/exports`."""
    return home / "exports"


def origin_of(log: SessionLog) -> str:
    """What a copy names as its origin: the session file's absolute path, or the database
    session's name."""
    file = log.storage.file
    return str(file.resolve()) if file is not None else str(log.path)


def render(log: SessionLog, kind: Literal["md", "html"], leaf: str | None = None, *,
           system: str | None = None, store: Store | None = None,
           redact: Callable[[str], str] = lambda text: text) -> str:
    """The page or the Markdown of `log` (the branch ending at `leaf`, default the tip)."""
    leaf = leaf if leaf is not None else log.tip()
    stem = log.storage.short
    entries = log.entries()
    if kind == "md":
        return to_markdown(entries, leaf, title=f"Session {stem}")
    # Only when asked: markdown-it and the page's template cost the REPL's start 60 ms.
    from mulligan.app.exports.html import to_html

    return to_html(entries, leaf, title=f"Session {stem}", session=log.storage.whole(),
                   file_name=f"{stem}.jsonl", system=system, store=store, redact=redact)


def export(log: SessionLog, kind: Kind, target: Path | None, *, home: Path, cwd: Path,
           leaf: str | None = None, system: str | None = None,
           store: Store | None = None,
           redact: Callable[[str], str] = lambda text: text) -> Path:
    """Write `log` out as `kind` to `target` (see the module docstring); returns the file."""
    if kind not in KINDS:
        raise ValueError(f"no export format {kind!r}; {', '.join(KINDS)}")
    leaf = leaf if leaf is not None else log.tip()
    if kind == "jsonl":
        target = target or new_session_path(home, cwd)
        write_linear(log.entries(), leaf, target, origin_file=origin_of(log))
        return target
    target = target or exports_folder(home) / f"mulligan-{log.storage.short}.{kind}"
    return write_new(target, render(log, kind, leaf, system=system, store=store,
                                    redact=redact))
