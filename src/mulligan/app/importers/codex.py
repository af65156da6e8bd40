"""Codex CLI rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`).

The current format: one `{timestamp, type, payload}` record a line -- `session_meta` (id, cwd,
cli_version, instructions), `turn_context` (the model), `response_item` (what the model was
sent and answered, in the Responses API's item shapes), `compacted` (a summary that replaced
the history), and `event_msg` (what the terminal showed: the same conversation again,
counted, not imported). The older format: a first line holding the session's `id` and
`timestamp`, then the items themselves, and `{"record_type": "state"}` lines.

A rollout is one line of turns, so the session is one branch. The items of one reply
(reasoning, text, function calls) become one assistant message; each function call's output
a toolResult named after the call; developer and system messages marked user messages.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mulligan.app.importers.common import Node, Source, Unreadable, json_lines, marked, text_of

__all__ = ["read_codex"]

CALLS = ("function_call", "custom_tool_call", "local_shell_call", "web_search_call")
OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")
CONTEXT = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions")


def _user_content(content: Any, where: str) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    blocks: list[dict[str, Any]] = []
    for part in content or []:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text", "text"):
            blocks.append({"type": "text", "text": str(part.get("text", ""))})
        elif kind == "input_image":
            url = str(part.get("image_url", ""))
            if url.startswith("data:") and ";base64," in url:
                mime, data = url[5:].split(";base64,", 1)
                blocks.append({"type": "image", "mime_type": mime, "data": data})
            else:
                blocks.append({"type": "text", "text": f"[an image: {url[:200]}]"})
        else:
            raise Unreadable(f"{where}: a message part of type {kind!r}")
    if all(b["type"] == "text" for b in blocks):
        return "\n".join(b["text"] for b in blocks)
    return blocks


def _call(item: dict[str, Any]) -> dict[str, Any]:
    kind = item["type"]
    call_id = str(item.get("call_id") or item.get("id") or "")
    if kind == "function_call":
        name, raw = str(item.get("name", "")), item.get("arguments", "{}")
    elif kind == "custom_tool_call":
        name, raw = str(item.get("name", "")), json.dumps({"input": item.get("input", "")})
    elif kind == "local_shell_call":
        name, raw = "shell", json.dumps(item.get("action") or {})
    else:
        name, raw = "web_search", json.dumps(item.get("action") or {})
    call: dict[str, Any] = {"type": "toolCall", "id": call_id, "name": name}
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        arguments = None
    if isinstance(arguments, dict):
        call["arguments"] = arguments
    else:
        call["arguments"], call["invalid_arguments"] = {}, str(raw)
    return call


def _output(item: dict[str, Any]) -> tuple[str, bool]:
    output = item.get("output", "")
    if isinstance(output, dict):  # {"content": ..., "success": ...}
        return text_of(output.get("content")) or json.dumps(output), \
            output.get("success") is False
    if isinstance(output, list):
        return text_of(output), False
    return str(output), False


def _start_reply(source: Source, node_id: str, parent: str | None, stamp: str,
                 number: int) -> Node:
    """A new, empty assistant message the items of one reply go into, added to `source`."""
    reply = Node(node_id, parent, "message", stamp,
                 {"message": {"role": "assistant", "content": [], "stop_reason": "stop"}},
                 {"line": number})
    source.nodes.append(reply)
    return reply


def read_codex(path: Path) -> Source:
    source = Source("codex", "Codex CLI rollout", [])
    names: dict[str, str] = {}
    previous: str | None = None
    reply: Node | None = None  # the assistant message the items of a reply go into
    for number, record in json_lines(path):
        where = f"{path}: line {number}"
        stamp = str(record.get("timestamp") or source.created or "")
        if "payload" in record and isinstance(record.get("type"), str):
            kind, payload = record["type"], record["payload"]
        elif number == 1 and "id" in record and "type" not in record:  # the older format
            kind, payload = "session_meta", record
            source.format = "Codex CLI rollout (before session_meta records)"
        elif "record_type" in record:
            source.skip(f"record_type {record['record_type']}")
            continue
        elif isinstance(record.get("type"), str):
            kind, payload = "response_item", record
        else:
            raise Unreadable(f"{where}: neither a rollout record nor a response item")
        if not isinstance(payload, dict):
            raise Unreadable(f"{where}: a {kind} record whose payload is not an object")
        if kind == "session_meta":
            meta = payload.get("meta", payload) if isinstance(payload.get("meta"), dict) \
                else payload
            source.cwd = meta.get("cwd") or source.cwd
            source.created = meta.get("timestamp") or stamp
            if meta.get("cli_version"):
                source.format = f"Codex CLI rollout (cli {meta['cli_version']})"
            continue
        if kind == "turn_context":
            source.model = payload.get("model") or source.model
            continue
        if kind == "event_msg":
            source.skip(f"event_msg {payload.get('type')}")
            continue
        if kind == "compacted":
            node = Node(f"line{number}", previous, "message", stamp,
                        {"message": marked("Codex compaction summary",
                                           str(payload.get("message", "")))},
                        {"line": number, "compacted": True})
            source.nodes.append(node)
            previous, reply = node.id, None
            continue
        if kind != "response_item":
            source.skip(str(kind))
            continue
        item_type = payload.get("type")
        node_id = f"line{number}"
        if item_type == "message":
            role = payload.get("role")
            if role == "assistant":
                text = text_of(payload.get("content"))
                if reply is None:
                    reply = _start_reply(source, node_id, previous, stamp, number)
                    previous = reply.id
                reply.fields["message"]["content"].append({"type": "text", "text": text})
                if source.model:
                    reply.fields["message"]["model"] = source.model
                continue
            if role == "user" and text_of(payload.get("content")).lstrip().startswith(
                    CONTEXT):  # what Codex itself sends with every session, not the user
                message: dict[str, Any] = marked("Codex context", text_of(payload["content"]))
            elif role == "user":
                message = {"role": "user", "content": _user_content(payload.get("content"),
                                                                    where)}
            elif role in ("developer", "system"):
                message = marked(f"Codex {role} message", text_of(payload.get("content")))
            else:
                raise Unreadable(f"{where}: a message of role {role!r}")
            source.nodes.append(Node(node_id, previous, "message", stamp,
                                     {"message": message}, {"line": number}))
            previous, reply = node_id, None
        elif item_type == "reasoning" or item_type in CALLS:
            if reply is None:
                reply = _start_reply(source, node_id, previous, stamp, number)
                previous = reply.id
            blocks = reply.fields["message"]["content"]
            if item_type == "reasoning":
                summary = "\n".join(str(s.get("text", "")) for s in payload.get("summary") or []
                                    if isinstance(s, dict))
                thought: dict[str, Any] = {"type": "thinking", "thinking": summary}
                if payload.get("encrypted_content"):
                    thought["encrypted_content"] = payload["encrypted_content"]
                blocks.append(thought)
            else:
                call = _call(payload)
                names[call["id"]] = call["name"]
                blocks.append(call)
                reply.fields["message"]["stop_reason"] = "toolUse"
        elif item_type in OUTPUTS:
            call_id = str(payload.get("call_id", ""))
            text, failed = _output(payload)
            source.nodes.append(Node(node_id, previous, "message", stamp, {"message": {
                "role": "toolResult", "tool_call_id": call_id,
                "tool_name": names.get(call_id, "unknown"), "content": text,
                "is_error": failed}}, {"line": number}))
            previous, reply = node_id, None
        else:
            source.skip(f"response_item {item_type}")
    if not source.nodes:
        raise Unreadable(f"{path}: no conversation items: not a Codex rollout")
    return source
