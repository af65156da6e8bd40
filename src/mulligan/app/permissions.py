"""Permission modes: the agent asks before it acts.

- "ask": before every bash command and every file change (`write`, `edit`), the frontend is
  shown the command, or the diff of the change, and answers yes, yes and don't ask again for
  this tool in this session, or no with an optional reason.
- "edits": file changes go through (the file tools only ever act inside the working folder);
  bash asks, and so does a change under a `.git` folder (or to a `.git` file) anywhere in the
  working folder: git runs what its folder names -- a hook (`.git/hooks/pre-commit`), or a
  setting such as `core.fsmonitor`, `core.pager` or `core.hooksPath` in `.git/config` runs a
  program at the user's next `git status` -- so such an edit is a command, and asks like one.
- "auto": nothing asks.
- "plan": the user is planning: only the read-only tools run; every change and every command
  (bash, write, edit, and any tool not known to be read-only, MCP's included) is refused with
  a note saying so. Only the user leaves plan mode (/permissions, Shift-Tab); nothing the
  model does changes the mode.

MCP tools (`mcp__SERVER__TOOL`) ask like bash: under "ask" and "edits"; "a" allows that
one tool for the session; plan mode refuses them. Read-only tools (`read`, `ls`, `grep`,
`find`) never ask. With nobody to ask (no terminal:
`-p` under "ask" or "edits") a call that would ask is refused. A refusal -- "no", nobody to
ask, or an abort while the question is on screen -- is the call's recorded toolResult
(is_error true, with the reason), so the model reads it and carries on: `guard` wraps each
tool's execute, and the refusal is a ToolError that `run_tool` turns into the result.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mulligan.messages import Content
from mulligan.tools import OnOutput, Tool, ToolError, invoke
from mulligan.tools.workspace import Workspace

__all__ = ["MODES", "Answer", "Permissions", "Question"]

MODES = ("ask", "edits", "auto", "plan")  # Shift-Tab cycles them in this order
READ_ONLY = frozenset({"read", "ls", "grep", "find"})
EDITS = frozenset({"write", "edit"})
ASKING = EDITS | {"bash", "fetch"}
PREVIEW_LINES = 60
MCP_PREFIX = "mcp__"


def _asks(tool: str) -> bool:
    """Whether `tool` is one that may ask: bash, the file changes, and every MCP tool."""
    return tool in ASKING or tool.startswith(MCP_PREFIX)


@dataclass
class Question:
    """What the frontend is asked: may `tool` run with `arguments`? `preview` is the command,
    or the diff the change would make, as lines."""

    tool: str
    arguments: Mapping[str, Any]
    preview: list[str]


@dataclass
class Answer:
    """"yes", "always" (this tool, for the rest of the session) or "no", with a reason."""

    choice: str
    reason: str = ""


Asker = Callable[[Question, threading.Event | None], Answer]


class Permissions:
    """The session's permission mode and what the user has allowed for good. `asker` is the
    frontend's question (None: nobody to ask). `mode` may be changed between runs
    (/permissions)."""

    def __init__(self, mode: str, root: Path, asker: Asker | None = None, *,
                 sandbox: bool = False) -> None:
        if mode not in MODES:
            raise ValueError(f"permission mode {mode!r}: one of {', '.join(MODES)}")
        self.mode, self.asker = mode, asker
        self.sandbox = sandbox  # bash runs with only the working folder writable (shown)
        self.workspace = Workspace(root)
        self.always: set[str] = set()
        self.fetch_allow: tuple[str, ...] = ()  # [tools] fetch_allow: fetched without asking

    def describe(self) -> str:
        what = {"ask": "asks before every bash command and file change",
                "edits": "file changes in the working folder go through; bash asks",
                "auto": "nothing asks",
                "plan": "planning: read-only tools only, every change and command refused"
                }[self.mode]
        allowed = f"; allowed for this session: {', '.join(sorted(self.always))}" \
            if self.always and self.mode != "plan" else ""
        sandbox = "; bash in a sandbox (only the working folder writable)" \
            if self.sandbox else ""
        return f"permission mode {self.mode}: {what}{allowed}{sandbox}"

    def next_mode(self) -> str:
        """The mode after this one in Shift-Tab's cycle (ask -> edits -> auto -> plan)."""
        return MODES[(MODES.index(self.mode) + 1) % len(MODES)]

    def needs_asking(self, tool: str, arguments: Mapping[str, Any] | None = None) -> bool:
        """Whether a call of `tool` with `arguments` asks first in this mode (in plan mode:
        whether it is refused)."""
        if self.mode == "plan":
            return tool not in READ_ONLY
        if not _asks(tool) or self.mode == "auto" or tool in self.always:
            return False
        if self.mode == "edits" and tool in EDITS:
            return self._in_git(str((arguments or {}).get("path", "")))
        if tool == "fetch":
            from mulligan.tools.fetch import allowed_domain

            host = urlsplit(str((arguments or {}).get("url", ""))).hostname or ""
            return not allowed_domain(host, self.fetch_allow)
        return True

    def _in_git(self, path: str) -> bool:
        """Whether `path` (symlinks resolved) is a `.git` file or folder of the working
        folder, or under one. A path the file tool will refuse anyway does not ask."""
        try:
            inside = self.workspace.resolve(path).relative_to(self.workspace.root)
        except (ToolError, ValueError):
            return False
        return any(part.casefold() == ".git" for part in inside.parts)

    def guard(self, tools: Sequence[Tool]) -> list[Tool]:
        """`tools` with every tool but the read-only ones checked first (as the mode says, at
        call time: bash, write and edit may ask; in plan mode all of them are refused)."""
        return [tool if tool["name"] in READ_ONLY else self._guarded(tool) for tool in tools]

    def _guarded(self, tool: Tool) -> Tool:
        def guarded(arguments: dict[str, Any], abort: threading.Event | None = None,
                    on_output: OnOutput | None = None) -> Content:
            self.check(tool["name"], arguments, abort)
            return invoke(tool, arguments, abort=abort, on_output=on_output)

        return {**tool, "execute": guarded, "interruptible": True}

    def check(self, tool: str, arguments: Mapping[str, Any],
              abort: threading.Event | None) -> None:
        """Return if the call may run; raise ToolError (the recorded refusal) if not."""
        if not self.needs_asking(tool, arguments):
            return
        if self.mode == "plan":
            raise ToolError(f"Refused: the user is planning (permission mode plan), so only "
                            f"read-only tools run; this {tool} call did not run. Do not try "
                            "to make the change another way: read what you need and "
                            "describe the plan. Leaving plan mode is the user's choice.")
        if self.asker is None:
            raise ToolError(f"Refused: permission mode {self.mode} asks before {tool}, and "
                            "there is nobody to ask (no terminal). Run with "
                            "--permission-mode auto to let it through, or do without it.")
        answer = self.asker(Question(tool, arguments, self.preview(tool, arguments)), abort)
        if abort is not None and abort.is_set():
            raise ToolError(f"Refused: the run was aborted while the user was asked about "
                            f"this {tool} call; it did not run.")
        if answer.choice == "always":
            self.always.add(tool)
        elif answer.choice != "yes":
            reason = answer.reason.strip()
            if reason and reason[-1] not in ".!?":
                reason += "."
            why = f" Their reason: {reason}" if reason else ""
            raise ToolError(f"The user refused this {tool} call; it did not run.{why} Do not "
                            "run it again as it is: ask, or try another way.")

    def preview(self, tool: str, arguments: Mapping[str, Any]) -> list[str]:
        """The command, or the diff the change would make (capped)."""
        if tool == "bash":
            return [f"$ {line}" for line in str(arguments.get("command", "")).splitlines()]
        if tool == "fetch":
            return [f"fetch {arguments.get('url', '')}"]
        if tool.startswith(MCP_PREFIX):
            shown = json.dumps(dict(arguments), indent=1, ensure_ascii=False).splitlines()
            return shown[:PREVIEW_LINES] + ([f"... {len(shown) - PREVIEW_LINES} more lines"]
                                            if len(shown) > PREVIEW_LINES else [])
        path = str(arguments.get("path", ""))
        try:
            file = self.workspace.resolve(path)
            old = file.read_text(encoding="utf-8") if file.is_file() else None
        except (ToolError, OSError, UnicodeDecodeError):
            old = None
        if tool == "write":
            new = str(arguments.get("content", ""))
        elif old is not None and str(arguments.get("old_text", "")) in old:
            new = old.replace(str(arguments["old_text"]), str(arguments.get("new_text", "")), 1)
        else:
            old = str(arguments.get("old_text", ""))
            new = str(arguments.get("new_text", ""))
        import difflib  # here, for the first question that shows a diff: not at startup

        lines = [line.rstrip("\n") for line in difflib.unified_diff(
            (old or "").splitlines(keepends=True), new.splitlines(keepends=True),
            fromfile=f"a/{path}" if old is not None else "/dev/null", tofile=f"b/{path}")]
        if len(lines) > PREVIEW_LINES:
            lines = [*lines[:PREVIEW_LINES], f"... {len(lines) - PREVIEW_LINES} more lines"]
        return lines or [f"(no change to {path})"]
