"""One branch of a session, out of the tree: as Markdown for people, or as a new linear
session file for Mulligan (what /fork and ``sessions export --format jsonl`` write).

In: a session's entries and the leaf whose branch to take (the walk is `session.path`, so a
broken file is refused by name, never half-exported). Out: a string, or a new file. The source
file is never written to.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mulligan.app.exports.reply_markdown import reply_markdown
from mulligan.brief import call_text, flat
from mulligan.home import open_private, private_dirs
from mulligan.messages import content_text
from mulligan.session import SessionLog, path
from mulligan.session.branches import blocks_of, labels_of, message_of
from mulligan.session.entries import timestamp


class ExportTargetExists(ValueError):
    """The file to export into already exists; exports never overwrite."""


def branch_entries(entries: Sequence[Mapping[str, Any]], leaf_id: str | None) -> list[Any]:
    """The entries on the branch ending at `leaf_id`, oldest first, checked by `session.path`."""
    return list(path([dict(e) for e in entries], leaf_id))


def to_markdown(
    entries: Sequence[Mapping[str, Any]], leaf_id: str | None, *, title: str = "Session"
) -> str:
    """The branch ending at `leaf_id` as a Markdown transcript: who said what, tool calls with
    their arguments, tool results, labels and model changes as small notes.

    The model's replies are Markdown, as written (`reply_markdown`: no HTML, their headings
    below the export's own, no fence left open); everything else -- the user's words, tool
    results, arguments, summaries -- is in a fenced block whose fence is longer than any
    backtick run inside it; session facts are code spans; every other short piece set in
    running text (a label, a tool name, a title) has its punctuation escaped and its line
    breaks folded. No content can make HTML or a heading of level 1 or 2."""
    chosen = branch_entries(entries, leaf_id)
    labels = labels_of(entries)
    out = [f"# {_inline(title)}", ""]
    for entry in chosen:
        kind = entry.get("type")
        label = f" — *{_inline(labels[entry['id']])}*" if entry["id"] in labels else ""
        if kind == "session_info":
            facts = [f"{k}: {_code(entry[k])}" for k in ("name", "cwd", "model", "created",
                                                           "origin_file", "origin_entry")
                     if entry.get(k)]
            if facts:
                out += ["> " + " · ".join(facts), ""]
        elif kind == "model_change":
            changed = _inline(f"{entry.get('provider')}/{entry.get('model')}")
            out += [f"> model changed to {changed}", ""]
        elif kind in ("branch_summary", "compaction"):
            what = ("Summary of the attempt left" if kind == "branch_summary" else
                    "Compaction: summary of the earlier conversation")
            out += [f"## {what} ({_inline(entry['id'])}){label}", "",
                    *_fenced(str(entry.get("summary", ""))), ""]
        elif kind == "message":
            message = message_of(entry)
            out += (_message_markdown(_inline(entry["id"]), message, label)
                    if message is not None else
                    [f"*({_inline(entry['id'])}: a message entry without a message object)*",
                     ""])
    return "\n".join(out).rstrip() + "\n"


def _message_markdown(entry_id: str, message: Mapping[str, Any], label: str) -> list[str]:
    role = message.get("role")
    if role == "user":
        return [f"## You ({entry_id}){label}", "", *_fenced(content_text(message.get("content"))),
                ""]
    if role == "toolResult":
        flag = " — error" if message.get("is_error") else ""
        return [f"**Result of {_inline(message.get('tool_name'))}** ({entry_id}){flag}{label}",
                "", *_fenced(content_text(message.get("content"))), ""]
    lines = [f"## Assistant ({entry_id}){label}", ""]
    for block in blocks_of(message):
        if block.get("type") == "text":
            lines += [*reply_markdown(str(block.get("text", ""))), ""]
        elif block.get("type") == "thinking" and block.get("thinking"):
            lines += ["<details><summary>thinking</summary>", "",
                      *_fenced(str(block["thinking"])), "", "</details>", ""]
        elif block.get("type") == "toolCall":
            lines += [f"**Tool call** {_inline(call_text(block, room=80))}", "",
                      *_fenced(json.dumps(block.get("arguments"), indent=2, ensure_ascii=False),
                               "json"), ""]
    if message.get("stop_reason") in ("error", "aborted"):
        why = _inline(f"{message.get('stop_reason')}: {message.get('error_message', '')}")
        lines += [f"*({why})*", ""]
    return lines


def _fenced(text: str, language: str = "") -> list[str]:
    """`text` in a fenced block that nothing inside it can close."""
    longest, run = 0, 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return [fence + language, text.rstrip("\n"), fence]


# The ASCII punctuation that can mean something in the middle of a line (emphasis, code,
# links, images, HTML, entities, a heading's closing #); `-`, `.`, `/`, `:` and the like only
# mean something at a line's start, where a piece never is, and are left readable.
_PUNCTUATION = re.compile(r"([\\`*_\[\]<>&#!|~{}^])")


def _code(value: Any) -> str:
    """A short piece as a code span (a path, a model name): read as it is, nothing escaped."""
    words = flat(value)
    longest = max((len(run) for run in re.findall("`+", words)), default=0)
    tick = "`" * (longest + 1)
    return f"{tick} {words} {tick}" if longest or words.startswith(" ") else f"`{words}`"


def _inline(value: Any) -> str:
    """A short piece for running text: one line, the punctuation that could mean something
    there backslash-escaped (CommonMark's escape), so it is read as the words it is."""
    return _PUNCTUATION.sub(r"\\\1", flat(value))


def write_linear(
    entries: Sequence[Mapping[str, Any]], leaf_id: str | None, destination: Path | SessionLog,
    *, origin_file: Path | str | os.PathLike[str], info: Mapping[str, Any] | None = None,
) -> Path | SessionLog:
    """Write the branch ending at `leaf_id` into the new session file `destination` (mode 0600)
    as a straight line: a session_info entry first (the origin's cwd/model from the branch, its
    name as `sessions ls` shows it, then `info`, plus origin_file and origin_entry = `leaf_id`),
    then the branch's messages, model changes and workspace restores (with their file
    checkpoints) with fresh ids e1, e2, ..., then the labels
    the copied entries carry, as /tree shows them (a label set before the session went back
    hangs on the abandoned attempt, but names an entry on this branch all the same). Branch
    lines and older session_info entries are not copied: the new file has one attempt.
    `ExportTargetExists` if `destination` exists. `destination` may also be a new database
    session's log (a fork with a database store); it is written through that log."""
    if isinstance(destination, SessionLog):  # a new session in a database store
        log = destination
        if log.storage.exists():
            raise ExportTargetExists(f"{log.path} already exists; exports never overwrite")
    else:
        destination = Path(destination)
        if destination.exists():  # checked before any work; _create_new closes the race
            raise ExportTargetExists(f"{destination} already exists; exports never overwrite")
    chosen = branch_entries(entries, leaf_id)
    fields: dict[str, Any] = {}
    for entry in chosen:
        if entry.get("type") == "session_info":
            fields.update({k: entry[k] for k in ("cwd", "model", "name") if entry.get(k)})
    names = [e["name"] for e in entries if e.get("type") == "session_info" and e.get("name")]
    if names:  # the newest, wherever it hangs: the name `sessions ls` shows
        fields["name"] = names[-1]
    fields.update(info or {})
    fields.update(created=timestamp(), origin_file=os.fspath(origin_file), origin_entry=leaf_id)
    baseline = next((e["workspace"] for e in chosen if e.get("type") == "session_info"
                     and isinstance(e.get("workspace"), dict)), None)
    if baseline is not None:  # the copy's file checkpoints start where the origin's did
        fields["workspace"] = {"after": baseline.get("after")}
    if not isinstance(destination, SessionLog):
        os.close(_create_new(destination))
        log = SessionLog(destination, fsync=False)
    log.append_session_info(**fields)
    renamed: dict[str, str] = {}
    for entry in chosen:
        kind = entry.get("type")
        if kind == "message":
            meta = {"workspace": entry["workspace"]} if "workspace" in entry else {}
            renamed[entry["id"]] = log.append_message(entry["message"], **meta)
        elif kind == "model_change":
            renamed[entry["id"]] = log.append_model_change(entry.get("provider"),
                                                           entry.get("model"))
        elif kind == "branch_summary":  # part of the transcript: kept, in place
            renamed[entry["id"]] = log.branch_summary_to(
                str(log.tip()), from_id=str(entry.get("from_id")),
                summary=str(entry.get("summary")), details=entry.get("details"))
        elif kind == "compaction" and entry.get("first_kept_entry_id") in renamed:
            renamed[entry["id"]] = log.append_entry(
                "compaction", summary=entry.get("summary"),
                first_kept_entry_id=renamed[entry["first_kept_entry_id"]],
                tokens_before=entry.get("tokens_before"))
        elif kind == "workspace_restore":  # the folder's expected state moves with it
            renamed[entry["id"]] = log.append_entry(
                "workspace_restore", **{k: v for k, v in entry.items()
                                        if k not in ("id", "type", "parent_id", "timestamp")})
    for target, text in labels_of(entries).items():
        if target in renamed:
            log.append_label(renamed[target], text)
    return destination


def write_new(destination: Path | str | os.PathLike[str], text: str | bytes) -> Path:
    """Write `text` (an export; bytes are written as they are) to the new file
    `destination`, mode 0600 like the session it comes from (a transcript holds whatever the
    tools read). Never overwrites: `ExportTargetExists` if the file exists, checked and
    created in one step."""
    destination = Path(destination)
    fd = _create_new(destination)
    with os.fdopen(fd, "wb") as out:
        out.write(text.encode() if isinstance(text, str) else text)
    return destination


def _create_new(destination: Path) -> int:
    """Create `destination` (mode 0600; missing folders 0700) and return its open descriptor;
    `ExportTargetExists` if anything is already there, so no export ever writes into or over
    an existing file, even one that appeared after an earlier check."""
    private_dirs(destination.parent)
    try:
        return open_private(destination)
    except FileExistsError:
        raise ExportTargetExists(
            f"{destination} already exists; exports never overwrite") from None


def to_text(entries: Sequence[Mapping[str, Any]], leaf_id: str | None) -> str:
    """The branch ending at `leaf_id` as a plain-text transcript for a terminal: one block per
    message, headed by its id and who spoke; tool calls as ``→ name {arguments}``."""
    out = []
    for entry in branch_entries(entries, leaf_id):
        if entry.get("type") in ("branch_summary", "compaction"):
            what = "summary of the attempt left" if entry["type"] == "branch_summary" else \
                "compaction: summary of what came before"
            out.append(f"[{entry['id']}] {what}\n{entry.get('summary', '')}")
            continue
        if entry.get("type") != "message":
            continue
        message = message_of(entry)
        if message is None:
            out.append(f"[{entry['id']}] (a message entry without a message object)")
            continue
        role = message.get("role")
        if role == "user":
            out.append(f"[{entry['id']}] you\n{message.get('content', '')}")
        elif role == "toolResult":
            flag = " (error)" if message.get("is_error") else ""
            out.append(f"[{entry['id']}] {message.get('tool_name')} result{flag}\n"
                       f"{message.get('content', '')}")
        else:
            parts = []
            for block in blocks_of(message):
                if block.get("type") == "text":
                    parts.append(str(block.get("text", "")))
                elif block.get("type") == "toolCall":
                    parts.append(f"→ {call_text(block, brief=False)}")
            if message.get("stop_reason") in ("error", "aborted"):
                parts.append(f"({message.get('stop_reason')}: {message.get('error_message', '')})")
            out.append(f"[{entry['id']}] assistant\n" + "\n".join(parts))
    return "\n\n".join(out) + ("\n" if out else "")
