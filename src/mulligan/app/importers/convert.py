"""Importing: another agent's session file -> the lines of a new Mulligan session.

In: a file, and which tool wrote it (`FROM`, or "auto": told from its first lines). Out:
the new session's lines (`to_lines`), the same bytes for the same file every time (source
timestamps, source-derived ids; nothing of "now"). A file that is not what `--from` says, or
a line that cannot be read, is `Unreadable` naming the file and line; nothing is written
then.

The numbering: a `session_info` entry first (e1: the source file, tool and format, its
working folder, name and model, and how many lines held nothing to import), then every node
in an order where each parent comes before its children, as e2, e3, ...; a node's parent is
its source parent's new id, and a root (or a parent the file does not hold) hangs under e1.
Each entry carries `source` metadata (the source id, and what the reader noted). When the
source's tip is not the last node, one `branch` line back to it ends the file, so the tip
is the same. Compactions name their first kept entry by its new id (dropped to a marked user
message when that entry is not on the compaction's path), branch summaries the tip of the
attempt left, labels their target.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from mulligan.app.importers.claude_code import read_claude_code
from mulligan.app.importers.codex import read_codex
from mulligan.app.importers.common import Node, Source, Unreadable, first_lines, marked
from mulligan.app.importers.pi import read_pi, read_tau

__all__ = ["FROM", "READERS", "Unreadable", "detect", "found_for", "read", "to_lines"]

READERS: dict[str, Callable[[Path], Source]] = {
    "claude-code": read_claude_code, "codex": read_codex, "pi": read_pi, "tau": read_tau}
FROM = ("auto", *READERS)


def detect(path: Path) -> str:
    """Which tool wrote `path`, from its first lines; Unreadable when none fits."""
    for number, line in first_lines(path):
        kind = line.get("type")
        if kind == "session" and "id" in line:
            return "pi"
        if kind in ("session_meta", "response_item", "turn_context", "event_msg") and \
                "payload" in line:
            return "codex"
        if number == 1 and "id" in line and "type" not in line and (
                "instructions" in line or "timestamp" in line):
            return "codex"
        if "parentUuid" in line or "uuid" in line or kind in (
                "summary", "file-history-snapshot", "queue-operation"):
            return "claude-code"
        if "parent_id" in line and isinstance(line.get("id"), str):
            return "tau"
    raise Unreadable(f"{path}: not a session file of Claude Code, Codex, pi or Tau "
                     "(say which with --from)")


def read(path: Path, tool: str = "auto") -> Source:
    """The source file read by its tool's reader; `tool` the wrong one is refused by name."""
    found = detect(path)
    if tool not in ("auto", found):
        raise Unreadable(f"{path}: not a {tool} session (it looks like {found}'s); "
                         f"--from {found}, or --from auto")
    return READERS[found](path)


def _ordered(nodes: list[Node]) -> Iterator[Node]:
    """The nodes, each after its parent (file order wherever the file already has it)."""
    known = {n.id for n in nodes}
    waiting: dict[str, list[Node]] = {}
    placed: set[str] = set()
    for node in nodes:
        if node.parent is not None and node.parent in known and node.parent not in placed:
            waiting.setdefault(node.parent, []).append(node)
            continue
        stack = [node]
        while stack:
            ready = stack.pop()
            placed.add(ready.id)
            yield ready
            stack.extend(reversed(waiting.pop(ready.id, [])))
    for orphans in waiting.values():  # parents in a circle: still imported, under e1
        for node in orphans:
            node.source["parent_in_a_circle"] = node.parent
            node.parent = None
            yield node


def to_lines(source: Source, path: Path) -> list[bytes]:
    """The new session's lines (see the module docstring)."""
    info: dict[str, Any] = {"imported": {"from": source.tool, "file": str(path.resolve()),
                                         "format": source.format}}
    if source.skipped:
        info["imported"]["not_imported"] = dict(sorted(source.skipped.items()))
    for key, value in (("cwd", source.cwd), ("name", source.name), ("model", source.model),
                       ("created", source.created)):
        if value:
            info[key] = value
    first = source.nodes[0].timestamp if source.nodes else ""
    entries: list[dict[str, Any]] = [
        {"id": "e1", "type": "session_info", "parent_id": None,
         "timestamp": source.created or first, **info}]
    new_id: dict[str, str] = {}
    path_of: dict[str, set[str]] = {"e1": {"e1"}}
    for node in _ordered(source.nodes):
        number = f"e{len(entries) + 1}"
        parent = new_id.get(node.parent, "e1") if node.parent is not None else "e1"
        new_id[node.id] = number
        path_of[number] = path_of[parent] | {number}
        meta = {"source": node.source}
        head = {"id": number, "type": node.kind, "parent_id": parent,
                "timestamp": node.timestamp}
        fields = node.fields
        if node.kind == "compaction":
            kept = new_id.get(fields.get("first_kept") or "")
            if kept is None or kept not in path_of[parent]:
                entries.append({**head, "type": "message", "message": marked(
                    f"{source.tool} compaction summary", fields["summary"]), **meta})
                continue
            body: dict[str, Any] = {"summary": fields["summary"], "first_kept_entry_id": kept}
            if isinstance(fields.get("tokens_before"), int):
                body["tokens_before"] = fields["tokens_before"]
            entries.append({**head, **body, **meta})
        elif node.kind == "branch_summary":
            left = new_id.get(fields.get("from_id") or "")
            entries.append({**head, "summary": fields["summary"],
                            "from_id": left or fields.get("from_id") or parent, **meta})
        elif node.kind == "label":
            target = new_id.get(fields.get("target") or "", parent)
            entries.append({**head, "target_id": target, "label": fields["label"], **meta})
        else:
            entries.append({**head, **fields, **meta})
    tip = new_id.get(source.tip) if source.tip is not None else None
    if tip is not None and tip != entries[-1]["id"]:
        entries.append({"id": f"e{len(entries) + 1}", "type": "branch", "parent_id": tip,
                        "timestamp": entries[-1]["timestamp"],
                        "source": {"tip": source.tip}})
    return [orjson.dumps(entry) for entry in entries]


def found_for(tool: str, cwd: Path, environ: dict[str, str] | os._Environ[str] = os.environ
              ) -> list[Path]:
    """Every session file `tool` keeps for the working folder `cwd`, oldest first: Claude
    Code's `~/.claude/projects/<cwd, / as ->/` (CLAUDE_CONFIG_DIR), Codex's
    `~/.codex/sessions/**/rollout-*.jsonl` whose session_meta names `cwd` (CODEX_HOME), pi's
    `~/.pi/agent/sessions/--<cwd, / as ->--/` (PI_CODING_AGENT_DIR)."""
    home = Path(environ.get("HOME") or Path.home())
    folder = str(cwd.resolve())
    if tool == "claude-code":
        root = Path(environ.get("CLAUDE_CONFIG_DIR") or home / ".claude") / "projects"
        found = sorted((root / folder.replace("/", "-")).glob("*.jsonl"))
    elif tool == "pi":
        root = Path(environ.get("PI_CODING_AGENT_DIR") or home / ".pi" / "agent")
        slug = "--" + folder.lstrip("/").replace("/", "-").replace(":", "-") + "--"
        found = sorted((root / "sessions" / slug).glob("*.jsonl"))
    elif tool == "codex":
        root = Path(environ.get("CODEX_HOME") or home / ".codex") / "sessions"
        found = [f for f in sorted(root.rglob("rollout-*.jsonl")) if _codex_cwd(f) == folder]
    else:
        raise ValueError(f"--all takes claude-code, codex or pi, not {tool!r}")
    return sorted(found, key=lambda f: (f.stat().st_mtime, str(f)))


def _codex_cwd(file: Path) -> str | None:
    try:
        with open(file, "rb") as handle:
            first = orjson.loads(handle.readline() or b"{}")
    except (OSError, orjson.JSONDecodeError):
        return None
    payload = first.get("payload", first) if isinstance(first, dict) else {}
    cwd = payload.get("cwd") if isinstance(payload, dict) else None
    return str(Path(cwd).resolve()) if isinstance(cwd, str) else None
