"""Hooks: the user's commands run at five points of a session, each handed one JSON object on
stdin.

    [[hooks.pre_tool_use]]                     # config.toml; also session_start,
    matcher = "bash|mcp__.*"                   # user_prompt_submit, post_tool_use, stop
    command = "./check.sh"  timeout = 30

`.claude/settings.json`'s `hooks` (Claude Code's shape: `{"PreToolUse": [{"matcher": "Bash",
"hooks": [{"type": "command", "command": ...}]}]}`) are read too when the user has trusted the
folder; their matchers ignore case, so Claude Code's `Bash` matches Mulligan's `bash`.

The object on stdin: `event`, `session_file`, `cwd`, and `tool_name`, `arguments`, `result`
or `prompt` where they apply -- plus Claude Code's names for the same things
(`hook_event_name`, `transcript_path`, `tool_input`, `tool_response`). Exit 0 goes on (its
stdout is added to the prompt for session_start and user_prompt_submit); exit 2 blocks (the
hook's stderr says why); any other exit, a timeout or a command that cannot start is
reported and ignored. Every hook that ran is a `Ran` for the frontend to show; nothing here
prints, and nothing here raises for a hook's failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["EVENTS", "Hook", "Hooks", "Ran", "hooks_from_claude", "hooks_from_config"]

EVENTS = ("session_start", "user_prompt_submit", "pre_tool_use", "post_tool_use", "stop")
CLAUDE_EVENTS = {"SessionStart": "session_start", "UserPromptSubmit": "user_prompt_submit",
                 "PreToolUse": "pre_tool_use", "PostToolUse": "post_tool_use", "Stop": "stop"}
DEFAULT_TIMEOUT = 60.0
OUTPUT_CHARS = 10_000


@dataclass(frozen=True)
class Hook:
    event: str
    command: str
    matcher: str = ""
    timeout: float = DEFAULT_TIMEOUT
    origin: str = "config.toml"
    ignore_case: bool = False

    def matches(self, tool: str | None) -> bool:
        """No matcher (or "*") matches every call; else the regex must match the whole name."""
        if tool is None or self.matcher in ("", "*"):
            return True
        try:
            flags = re.IGNORECASE if self.ignore_case else 0
            return re.fullmatch(self.matcher, tool, flags) is not None
        except re.error:
            return False


@dataclass(frozen=True)
class Ran:
    """One hook that ran: what it was, its exit code (None: it timed out or could not
    start), "ok", "blocked" or "failed", and its output (capped)."""

    hook: Hook
    exit_code: int | None
    outcome: str
    stdout: str
    stderr: str
    seconds: float
    tool_name: str | None = None

    def event(self) -> dict[str, Any]:
        """The `hook` event frontends show (a line in the REPL, a JSON line with --mode json)."""
        found: dict[str, Any] = {"type": "hook", "event": self.hook.event,
                                 "command": self.hook.command, "outcome": self.outcome,
                                 "exit_code": self.exit_code}
        if self.tool_name is not None:
            found["tool_name"] = self.tool_name
        if self.stderr:
            found["stderr"] = self.stderr
        return found

    def line(self) -> str:
        what = f"{self.hook.event}{f' ({self.tool_name})' if self.tool_name else ''}"
        said = f": {self.stderr.strip().splitlines()[0][:200]}" if self.stderr.strip() else ""
        code = f"exit {self.exit_code}" if self.exit_code is not None else "no exit"
        return f"hook {what}: {self.hook.command} -> {code}, {self.outcome}{said}"


def hooks_from_config(config: Mapping[str, Any], origin: str = "config.toml") -> list[Hook]:
    """config.toml's `[[hooks.EVENT]]` tables; ValueError naming a bad one."""
    tables = config.get("hooks", {})
    if not isinstance(tables, Mapping):
        raise ValueError(f"{origin}: hooks must be [[hooks.EVENT]] tables")
    found = []
    for event, entries in tables.items():
        if event not in EVENTS:
            raise ValueError(f"{origin}: no hook event {event!r} (one of {', '.join(EVENTS)})")
        if not isinstance(entries, list):
            raise ValueError(f"{origin}: hooks.{event} must be [[hooks.{event}]] tables")
        for entry in entries:
            found.append(_hook(event, entry, origin))
    return found


def hooks_from_claude(path: Path) -> list[Hook]:
    """The hooks of a Claude Code settings file (`.claude/settings.json`); [] when it has
    none or cannot be read; ValueError naming it when its `hooks` are not Claude's shape."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    tables = data.get("hooks") if isinstance(data, dict) else None
    if not isinstance(tables, dict):
        return []
    found = []
    for name, groups in tables.items():
        event = CLAUDE_EVENTS.get(name)
        if event is None or not isinstance(groups, list):
            continue  # Claude Code's other events (Notification, PreCompact, ...) have no twin
        for group in groups:
            if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
                raise ValueError(f"{path}: hooks.{name}: expected "
                                 '[{"matcher": ..., "hooks": [{"type": "command", ...}]}]')
            for entry in group["hooks"]:
                if isinstance(entry, dict) and entry.get("type", "command") == "command":
                    table = {"command": entry.get("command"), "timeout": entry.get(
                        "timeout", DEFAULT_TIMEOUT), "matcher": group.get("matcher", "")}
                    found.append(_hook(event, table, str(path), ignore_case=True))
    return found


def _hook(event: str, table: Any, origin: str, *, ignore_case: bool = False) -> Hook:
    where = f"{origin}: a {event} hook"
    if not isinstance(table, Mapping) or not isinstance(table.get("command"), str) \
            or not table["command"].strip():
        raise ValueError(f"{where}: needs command = \"...\"")
    matcher = table.get("matcher", "") or ""
    timeout = table.get("timeout", DEFAULT_TIMEOUT)
    if not isinstance(matcher, str):
        raise ValueError(f"{where}: matcher must be a string (a regex on the tool name)")
    try:
        re.compile(matcher)
    except re.error as exc:
        raise ValueError(f"{where}: matcher {matcher!r} is not a regex ({exc})") from None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise ValueError(f"{where}: timeout must be a positive number of seconds")
    return Hook(event, table["command"], matcher, float(timeout), origin, ignore_case)


class Hooks:
    """The session's hooks; `run(event, **fields)` runs those of one event in order and
    returns what each did. `cwd` is where they run; `session_file()` names the session."""

    def __init__(self, hooks: list[Hook], cwd: Path) -> None:
        self.hooks, self.cwd = list(hooks), Path(cwd)
        self.session_file: str | None = None

    def __bool__(self) -> bool:
        return bool(self.hooks)

    def has(self, event: str) -> bool:
        return any(h.event == event for h in self.hooks)

    def run(self, event: str, *, tool_name: str | None = None,
            **fields: Any) -> list[Ran]:
        """Run the hooks of `event` (for a tool: those whose matcher matches it), one after
        another; one that blocks ends the list (the call or prompt is blocked)."""
        ran: list[Ran] = []
        for hook in self.hooks:
            if hook.event != event or not hook.matches(tool_name):
                continue
            done = self._one(hook, self._input(event, tool_name, fields), tool_name)
            ran.append(done)
            if done.outcome == "blocked":
                break
        return ran

    def _input(self, event: str, tool_name: str | None, fields: dict[str, Any]) -> str:
        claude_name = next((k for k, v in CLAUDE_EVENTS.items() if v == event), event)
        data: dict[str, Any] = {"event": event, "session_file": self.session_file,
                                "cwd": str(self.cwd), "hook_event_name": claude_name,
                                "transcript_path": self.session_file}
        if tool_name is not None:
            data["tool_name"] = tool_name
        for key, value in fields.items():
            data[key] = value
        if "arguments" in fields:
            data["tool_input"] = fields["arguments"]
        if "result" in fields:
            data["tool_response"] = fields["result"]
        return json.dumps(data, ensure_ascii=False, default=str)

    def _one(self, hook: Hook, stdin: str, tool_name: str | None) -> Ran:
        import subprocess  # with the first hook run, not on the REPL's way to its prompt

        started = time.monotonic()
        env = {**os.environ, "MULLIGAN_PROJECT_DIR": str(self.cwd),
               "CLAUDE_PROJECT_DIR": str(self.cwd)}
        try:
            process = subprocess.Popen(hook.command, shell=True, cwd=self.cwd, env=env,
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True, errors="replace",
                                       start_new_session=True)
        except OSError as exc:
            return Ran(hook, None, "failed", "", f"could not start: {exc}",
                       time.monotonic() - started, tool_name)
        try:
            out, err = process.communicate(stdin, timeout=hook.timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)  # the hook's children too
            out, err = process.communicate()
            return Ran(hook, None, "failed", out[:OUTPUT_CHARS],
                       f"timed out after {hook.timeout:g} s; ignored",
                       time.monotonic() - started, tool_name)
        code = process.returncode
        outcome = "ok" if code == 0 else "blocked" if code == 2 else "failed"
        return Ran(hook, code, outcome, out[:OUTPUT_CHARS], err[:OUTPUT_CHARS],
                   time.monotonic() - started, tool_name)
