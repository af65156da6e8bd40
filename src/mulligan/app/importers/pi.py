"""pi sessions (versions 1 to 3) and Tau sessions: both write pi's message shapes (camelCase
in pi, either case in Tau) on entries that form a tree.

pi: a `session` header (version, id, cwd, timestamp), then entries with `id`, `parentId`
(version 1: neither -- the entries are a line), `timestamp` and a type: message,
model_change, thinking_level_change, compaction (`firstKeptEntryId`, or version 1's
`firstKeptEntryIndex`), branch_summary (`fromId`), label (`targetId`), session_info (`name`),
custom, custom_message. The tip is the last entry.
Tau: entries with `id`, `parent_id`, epoch `timestamp`; session_info (`cwd`, `title`),
compaction (`first_kept_entry_id`, or the older `replaces_entry_ids`), branch_summary,
label (on its parent), `leaf` (an older pointer at the tip: the newest one names the tip),
and Tau's first message shapes (role `tool`, `tool_calls` beside a string content).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mulligan.app.importers.common import (
    Node,
    Source,
    Unreadable,
    iso,
    json_lines,
    marked,
    text_of,
)

__all__ = ["convert_message", "read_pi", "read_tau"]


def _get(value: dict[str, Any], camel: str, snake: str, default: Any = None) -> Any:
    return value.get(camel, value.get(snake, default))


def _blocks(content: Any, where: str) -> str | list[dict[str, Any]]:
    """pi user/tool content -> Mulligan content: a string stays; text and image blocks map."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise Unreadable(f"{where}: a content that is neither text nor a list of blocks")
    out: list[dict[str, Any]] = []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            out.append({"type": "text", "text": str(block.get("text", ""))})
        elif kind == "image":
            out.append({"type": "image", "data": str(block.get("data", "")),
                        "mime_type": str(_get(block, "mimeType", "mime_type", "image/png"))})
        else:
            raise Unreadable(f"{where}: a content block of type {kind!r}")
    if all(b["type"] == "text" for b in out):
        return "\n".join(b["text"] for b in out)
    return out


def _call(block: dict[str, Any], where: str) -> dict[str, Any]:
    arguments = block.get("arguments", {})
    call: dict[str, Any] = {"type": "toolCall", "id": str(block.get("id", "")),
                            "name": str(block.get("name", ""))}
    if isinstance(arguments, dict):
        call["arguments"] = arguments
    else:
        call["arguments"] = {}
        call["invalid_arguments"] = str(arguments)
    if not call["id"] or not call["name"]:
        raise Unreadable(f"{where}: a tool call without an id or a name")
    return call


def convert_message(message: Any, where: str) -> dict[str, Any]:
    """One pi (or Tau) message as a Mulligan message; Unreadable naming `where` for a shape
    it cannot read."""
    if not isinstance(message, dict):
        raise Unreadable(f"{where}: a message entry without a message")
    role = message.get("role")
    if role == "user":
        if "custom_type" in message or "customType" in message:  # Tau's first custom shape
            return marked(f"{_get(message, 'customType', 'custom_type')} message",
                          text_of(message.get("content")))
        return {"role": "user", "content": _blocks(message.get("content", ""), where)}
    if role == "assistant":
        content = message.get("content", [])
        blocks: list[dict[str, Any]] = []
        if isinstance(content, str):
            if content:
                blocks.append({"type": "text", "text": content})
            content = []
        for block in [*content, *(_get(message, "toolCalls", "tool_calls") or [])]:
            kind = block.get("type", "toolCall") if isinstance(block, dict) else None
            if kind == "text":
                blocks.append({"type": "text", "text": str(block.get("text", ""))})
            elif kind == "thinking":
                thought: dict[str, Any] = {"type": "thinking",
                                           "thinking": str(block.get("thinking", ""))}
                signature = _get(block, "thinkingSignature", "thinking_signature")
                if signature:
                    thought["signature"] = signature
                blocks.append(thought)
            elif kind in ("toolCall", "tool_call", "function"):
                blocks.append(_call(block, where))
            else:
                raise Unreadable(f"{where}: an assistant block of type {kind!r}")
        stop = _get(message, "stopReason", "stop_reason") or (
            "toolUse" if any(b["type"] == "toolCall" for b in blocks) else "stop")
        out: dict[str, Any] = {"role": "assistant", "content": blocks, "stop_reason": stop}
        error = _get(message, "errorMessage", "error_message")
        if error:
            out["error_message"] = str(error)
        if isinstance(message.get("usage"), dict):
            out["usage"] = message["usage"]
        if message.get("model"):
            out["model"] = str(message["model"])
        return out
    if role in ("toolResult", "tool"):
        ok = message.get("ok", True)
        return {"role": "toolResult",
                "tool_call_id": str(_get(message, "toolCallId", "tool_call_id", "")),
                "tool_name": str(_get(message, "toolName", "tool_name",
                                      message.get("name", "unknown"))),
                "content": _blocks(message.get("content", "") or message.get("error") or "",
                                   where),
                "is_error": bool(_get(message, "isError", "is_error", not ok))}
    if role == "bashExecution":
        return marked("shell command the user ran (pi's !)",
                      f"$ {message.get('command', '')}\n{message.get('output', '')}"
                      f"\n(exit status {message.get('exitCode')})")
    if role in ("custom", "hookMessage"):
        return marked(f"{_get(message, 'customType', 'custom_type', 'extension')} message",
                      text_of(message.get("content")))
    raise Unreadable(f"{where}: a message of role {role!r}")


def _entry_node(entry: dict[str, Any], entry_id: str, parent: str | None, stamp: str,
                where: str, source: Source) -> Node | None:
    """One pi or Tau entry as a node (None: nothing to import, counted)."""
    kind = entry.get("type")
    meta = {"id": entry_id}
    if kind == "message":
        return Node(entry_id, parent, "message", stamp,
                    {"message": convert_message(entry.get("message"), where)}, meta)
    if kind == "custom_message":
        text = text_of(entry.get("content"))
        label = f"{_get(entry, 'customType', 'custom_type', 'extension')} message"
        return Node(entry_id, parent, "message", stamp, {"message": marked(label, text)}, meta)
    if kind == "compaction":
        first = _get(entry, "firstKeptEntryId", "first_kept_entry_id")
        if not first and entry.get("replaces_entry_ids"):  # Tau's older compaction
            first = None
        return Node(entry_id, parent, "compaction", stamp,
                    {"summary": str(entry.get("summary", "")), "first_kept": first,
                     "tokens_before": _get(entry, "tokensBefore", "tokens_before")}, meta)
    if kind == "branch_summary":
        return Node(entry_id, parent, "branch_summary", stamp,
                    {"summary": str(entry.get("summary", "")),
                     "from_id": _get(entry, "fromId", "branch_root_id")}, meta)
    if kind == "label":
        target = _get(entry, "targetId", "target_id", parent)
        return Node(entry_id, parent, "label", stamp,
                    {"target": target, "label": entry.get("label") or ""}, meta)
    if kind == "model_change":
        return Node(entry_id, parent, "model_change", stamp,
                    {"provider": entry.get("provider") or "",
                     "model": _get(entry, "modelId", "model", "")}, meta)
    if kind == "thinking_level_change":
        level = _get(entry, "thinkingLevel", "thinking_level")
        return Node(entry_id, parent, "thinking_level_change", stamp, {"level": level}, meta)
    if kind == "session_info":
        name = entry.get("name") or entry.get("title")
        if name:
            source.name = str(name)
        if entry.get("cwd"):
            source.cwd = str(entry["cwd"])
        return None
    if kind == "custom":
        return Node(entry_id, parent, "imported_custom", stamp,
                    {"data": entry.get("data"),
                     "custom_type": _get(entry, "customType", "namespace")}, meta)
    raise Unreadable(f"{where}: an entry of type {kind!r}")


def read_pi(path: Path) -> Source:
    lines = list(json_lines(path))
    if not lines or lines[0][1].get("type") != "session":
        raise Unreadable(f"{path}: line 1 is not a pi session header (type session)")
    header = lines[0][1]
    version = int(header.get("version") or 1)
    source = Source("pi", f"pi session version {version}", [], cwd=header.get("cwd"),
                    created=iso(header.get("timestamp")))
    previous: str | None = None
    for number, entry in lines[1:]:
        where = f"{path}: line {number}"
        entry_id: Any
        parent: Any
        if version < 2:  # no ids yet: the entries are one line, as pi's migration reads them
            entry_id, parent = f"line{number}", previous
            if entry.get("type") == "compaction" and "firstKeptEntryIndex" in entry:
                index = entry["firstKeptEntryIndex"]
                entry = {**entry, "firstKeptEntryId": f"line{lines[index][0]}"
                         if isinstance(index, int) and 0 < index < len(lines) else None}
        else:
            entry_id, parent = entry.get("id"), entry.get("parentId")
            if not isinstance(entry_id, str) or not (parent is None or isinstance(parent, str)):
                raise Unreadable(f"{where}: an entry without a string id and parentId")
        node = _entry_node(entry, entry_id, parent, iso(entry.get("timestamp"),
                                                        source.created or ""), where, source)
        if node is None:
            source.skip(str(entry.get("type")))
            continue
        source.nodes.append(node)
        previous = entry_id
    return source


def read_tau(path: Path) -> Source:
    source = Source("tau", "tau session", [])
    for number, entry in json_lines(path):
        where = f"{path}: line {number}"
        entry_id, parent = entry.get("id"), entry.get("parent_id")
        if not isinstance(entry_id, str) or "parent_id" not in entry or not (
                parent is None or isinstance(parent, str)):
            raise Unreadable(f"{where}: not a Tau entry (a string id and a parent_id)")
        stamp = iso(entry.get("timestamp"))
        if entry.get("type") == "session_info":
            source.created = source.created or iso(entry.get("created_at"), stamp)
        if entry.get("type") == "leaf":  # an older pointer at the tip, while it is the newest
            source.tip = entry.get("entry_id") or None
            source.skip("leaf")
            continue
        source.tip = None  # an entry after the pointer: the tip is the last entry again
        node = _entry_node(entry, entry_id, parent, stamp, where, source)
        if node is None:
            source.skip(str(entry.get("type")))
            continue
        source.nodes.append(node)
    return source
