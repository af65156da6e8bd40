"""Branch summaries: what the attempt being left found out and did, for the next one.

In: a session's log, the entry gone back to, the model, and whether the files were restored.
Out: a `Summary` -- the text and the `details` (files read, files changed, commands run with
their exit codes, whether the changes were restored) -- or None when the user aborted it
(then the caller writes a plain branch line). Never raises for a model's failure: a model
that fails or is offline gives the deterministic summary made from the entries, which says
that it is one.

What the model is sent: one request, with this module's `SYSTEM` prompt and one user message
holding the abandoned messages -- from the fork to the old tip, nothing after the fork on the
branch kept -- written out as text, tool results clipped, fitted newest-first into a budget
well below the model's context window (older messages beyond it are left out, and the text
says how many). An attempt that itself began from a summary carries that summary's file lists
forward.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mulligan.app.workspace.checkpoints import workspace_of
from mulligan.boundary import call_model
from mulligan.brief import arguments_text
from mulligan.messages import Message, content_text, is_failed, text_of, user_message
from mulligan.providers.facts import window_of
from mulligan.session import SessionLog
from mulligan.session.branches import message_of
from mulligan.session.entries import Entry
from mulligan.wire import Model

__all__ = ["SYSTEM", "Summary", "abandoned", "ask_model", "context_window", "details_of",
           "summarize"]

SYSTEM = """You summarise an attempt at a coding task that the user abandoned: they went back to an
earlier point of the conversation to try another way. A new attempt starts from that point and
will be given only your summary, so write what it needs and nothing it does not.

Write plain text under these headings, each with a few short lines:
Goal: what the user wanted in this attempt.
Tried: what was done, in order.
Learned: facts found out (about the code, the tools, errors, what did not work).
Decisions: what the user accepted or rejected, in their words where it matters.
Files: files read and files changed (say changed files may have been put back).
Left: what was unfinished.
At most 300 words. No preamble, no advice."""

TOOL_CLIP = 1500  # characters of one tool result in the request
MAX_SUMMARY = 8000  # characters of a summary kept (about 2k tokens)
_EXIT = re.compile(r"\[exit code (-?\d+)\]")

Events = Callable[[dict[str, Any]], None]


@dataclass
class Summary:
    text: str
    details: dict[str, Any]
    fallback: bool  # made from the entries, not by the model
    usage: dict[str, Any] | None = None  # what the model's call reported (free metadata)


def context_window(model: Model) -> int:
    """The model's context window in tokens (`mulligan.providers.facts.window_of`)."""
    return window_of(model)


def abandoned(log: SessionLog, target: str) -> Sequence[Entry]:
    """The entries of the attempt being left: on the branch to the tip, after the last entry
    it shares with the branch to `target`."""
    here, there = log.branch(log.tip()), log.branch(target)
    shared = {entry["id"] for entry in there}
    fork = max((at for at, entry in enumerate(here) if entry["id"] in shared), default=-1)
    return here[fork + 1:]


def details_of(entries: Sequence[Entry], *, restored: bool) -> dict[str, Any]:
    """Files read, files changed (from checkpoints, so bash's changes count; write and edit
    targets too), commands with exit codes, whether the changes were put back; carried
    forward from a summary the attempt began from."""
    read: list[str] = []
    changed: list[str] = []
    commands: list[dict[str, Any]] = []
    calls: dict[str, Mapping[str, Any]] = {}
    for entry in entries:
        if entry.get("type") == "branch_summary" and isinstance(entry.get("details"), Mapping):
            earlier = entry["details"]
            read += [p for p in earlier.get("files_read", []) if isinstance(p, str)]
            changed += [p for p in earlier.get("files_changed", []) if isinstance(p, str)]
        message = message_of(entry)
        if message is None:
            continue
        if message.get("role") == "assistant":
            for block in message.get("content") or []:
                if isinstance(block, Mapping) and block.get("type") == "toolCall":
                    calls[str(block.get("id"))] = block
            continue
        if message.get("role") != "toolResult":
            continue
        changed += [p for p in workspace_of(entry).get("changed") or [] if isinstance(p, str)]
        call = calls.get(str(message.get("tool_call_id")), {})
        found = call.get("arguments")
        arguments: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        name = message.get("tool_name")
        if name == "read" and isinstance(arguments.get("path"), str):
            read.append(arguments["path"])
        elif name in ("write", "edit") and isinstance(arguments.get("path"), str) \
                and not message.get("is_error"):
            changed.append(arguments["path"])
        elif name == "bash":
            commands.append({"command": str(arguments.get("command", "")),
                             "exit_code": _exit_code(content_text(message.get("content")),
                                                     bool(message.get("is_error")))})
    return {"files_read": _unique(read), "files_changed": _unique(changed),
            "commands": commands, "restored": restored}


def _exit_code(content: str, is_error: bool) -> int | str:
    if "[Timed out after" in content:
        return "timeout"
    if "[Aborted" in content:
        return "aborted"
    found = _EXIT.search(content[-300:])
    return int(found.group(1)) if found else (1 if is_error else 0)


def _unique(items: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(items))


def request_text(entries: Sequence[Entry], budget: int) -> str:
    """The abandoned messages as text, newest first into `budget` characters, then put back
    in order."""
    texts = [t for t in map(entry_text, entries) if t is not None]
    parts: list[str] = []
    used = 0
    for part in reversed(texts):
        if used + len(part) > budget and parts:
            break
        parts.append(part[:budget])
        used += len(part)
    parts.reverse()
    head = [] if len(parts) == len(texts) else [
        f"[{len(texts) - len(parts)} earlier messages left out]"]
    return "\n\n".join([*head, *parts])


def entry_text(entry: Entry) -> str | None:
    """An entry as the summariser reads it (None for one that says nothing)."""
    if entry.get("type") == "branch_summary":
        return f"Summary of an attempt before this one:\n{entry.get('summary', '')}"
    message = message_of(entry)
    if message is None:
        return None
    role = message.get("role")
    if role == "user":
        return f"User: {message.get('content', '')}"
    if role == "toolResult":
        content = content_text(message.get("content"))
        clipped = content if len(content) <= TOOL_CLIP else \
            content[:TOOL_CLIP] + f"\n[... {len(content) - TOOL_CLIP} more characters]"
        flag = " (error)" if message.get("is_error") else ""
        return f"Result of {message.get('tool_name')}{flag}:\n{clipped}"
    lines = []
    words = text_of(message)  # type: ignore[arg-type]
    if words:
        lines.append(f"Assistant: {words}")
    for block in message.get("content") or []:
        if isinstance(block, Mapping) and block.get("type") == "toolCall":
            lines.append(f"Assistant calls {block.get('name')}("
                         f"{arguments_text(block.get('arguments'), brief=False, room=600)})")
    return "\n".join(lines) or None


def fallback_text(entries: Sequence[Entry], details: Mapping[str, Any]) -> str:
    """The deterministic summary: what the user asked, files changed, commands run."""
    asked = [content_text(m.get("content")) for m in map(message_of, entries)
             if m is not None and m.get("role") == "user"]
    lines = ["(A summary made from the session's entries, not by the model.)"]
    if asked:
        lines.append("The user asked: " + " / ".join(" ".join(a.split())[:200] for a in asked))
    if details["files_read"]:
        lines.append("Files read: " + ", ".join(details["files_read"]))
    if details["files_changed"]:
        where = "put back since" if details["restored"] else "still on disk"
        lines.append(f"Files changed ({where}): " + ", ".join(details["files_changed"]))
    for command in details["commands"][:20]:
        lines.append(f"Ran `{command['command'][:200]}` (exit {command['exit_code']})")
    return "\n".join(lines)


def ask_model(model: Model, system: str, text: str,
              abort: threading.Event | None = None) -> str | None:
    """One request -- `system`, and `text` as the one user message -- through the provider
    boundary the loop uses (`mulligan.boundary.call_model`: streamed or not, `abort` honoured,
    never raises); the reply's text, or None when the model failed, was aborted or said
    nothing."""
    return ask_model_usage(model, system, text, abort)[0]


def ask_model_usage(model: Model, system: str, text: str, abort: threading.Event | None = None
                    ) -> tuple[str | None, dict[str, Any] | None]:
    """`ask_model`, and the usage the call reported (None when none was): a failed or
    aborted call may have cost something too. The usage names the model that made the call
    (its `model`: the reply's, else `model`'s name), so that it is priced at its own."""
    call = call_model(model, system, [user_message(text)], [], abort)
    while True:
        try:
            next(call)  # message_start, message_update, retry: nobody is drawing them
        except StopIteration as done:
            reply: Message = done.value
            break
    usage = reply.get("usage")
    used = dict(usage) if isinstance(usage, Mapping) else None
    made_by = str(reply.get("model") or getattr(model, "name", "") or "")
    if used is not None and made_by:
        used["model"] = made_by
    if is_failed(reply):
        return None, used
    words = text_of(reply).strip()
    return words[:MAX_SUMMARY] or None, used


def summarize(log: SessionLog, target: str, model: Model, *, restored: bool,
              abort: threading.Event | None = None,
              on_event: Events | None = None) -> Summary | None:
    """The summary of the attempt left by going back to `target` (see the module docstring);
    None when `abort` was set by the user while the model was writing it."""
    entries = abandoned(log, target)
    details = details_of(entries, restored=restored)
    tell = on_event or (lambda event: None)
    tell({"type": "branch_summary_start", "from_id": log.tip(), "to_id": target})
    budget = int(context_window(model) * 0.5 * 3.5)  # characters: half the window
    text, usage = ask_model_usage(model, SYSTEM, request_text(entries, budget), abort)
    if abort is not None and abort.is_set():
        tell({"type": "branch_summary_end", "aborted": True})
        return None
    fallback = text is None
    if text is None:
        text = fallback_text(entries, details)
    tell({"type": "branch_summary_end", "summary": text, "fallback": fallback})
    return Summary(text, details, fallback, usage)
