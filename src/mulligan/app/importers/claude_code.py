"""Claude Code transcripts (`~/.claude/projects/<folder>/<session id>.jsonl`).

Each line is a record; `user` and `assistant` records carry `uuid`, `parentUuid` (the tree),
`isSidechain` (a subagent's conversation), `timestamp`, `cwd` and an Anthropic Messages API
`message`. One reply is written as several `assistant` records in a chain, one content block
each, sharing `message.id`: they become one Mulligan assistant message. A `user` record's
`tool_result` blocks become toolResult messages (named after the tool_use they answer) and
its text and images one user message. `summary` records name the conversation. Records that
carry no conversation (file-history snapshots, queue operations, system notices) are
counted in the new session's session_info, not imported. A parent that is not in the file
(a transcript continued from another file), and a sidechain's root, hang under the first
entry, marked in their source metadata.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mulligan.app.importers.common import Node, Source, Unreadable, json_lines

__all__ = ["read_claude_code"]

STOPS = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "toolUse",
         "max_tokens": "length", "pause_turn": "stop", "refusal": "error"}


def _image(block: dict[str, Any], where: str) -> dict[str, Any]:
    source = block.get("source") or {}
    if source.get("type") != "base64":
        return {"type": "text", "text": f"[an image from {source.get('url', 'a URL')}]"}
    return {"type": "image", "mime_type": str(source.get("media_type", "image/png")),
            "data": str(source.get("data", ""))}


def _content(blocks: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    if all(b["type"] == "text" for b in blocks):
        return "\n".join(b["text"] for b in blocks)
    return blocks


def _user_parts(content: Any, names: dict[str, str], where: str
                ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(toolResult messages, user content blocks) of one user record's content."""
    if isinstance(content, str):
        return [], [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise Unreadable(f"{where}: a user message whose content is neither text nor blocks")
    results, said = [], []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "tool_result":
            inner = block.get("content", "")
            parts = [{"type": "text", "text": inner}] if isinstance(inner, str) else [
                _image(b, where) if b.get("type") == "image" else
                {"type": "text", "text": str(b.get("text", ""))}
                for b in inner or [] if isinstance(b, dict)]
            call_id = str(block.get("tool_use_id", ""))
            results.append({"role": "toolResult", "tool_call_id": call_id,
                            "tool_name": names.get(call_id, "unknown"),
                            "content": _content(parts) if parts else "",
                            "is_error": bool(block.get("is_error", False))})
        elif kind == "text":
            said.append({"type": "text", "text": str(block.get("text", ""))})
        elif kind == "image":
            said.append(_image(block, where))
        elif kind == "document":
            said.append({"type": "text", "text": "[a document was attached]"})
        else:
            raise Unreadable(f"{where}: a user content block of type {kind!r}")
    return results, said


def _assistant_blocks(content: Any, names: dict[str, str], where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    blocks = []
    for block in content or []:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            blocks.append({"type": "text", "text": str(block.get("text", ""))})
        elif kind == "thinking":
            thought: dict[str, Any] = {"type": "thinking",
                                       "thinking": str(block.get("thinking", ""))}
            if block.get("signature"):
                thought["signature"] = block["signature"]
            blocks.append(thought)
        elif kind == "redacted_thinking":
            redacted: dict[str, Any] = {"type": "thinking", "thinking": "", "redacted": True,
                                        "signature": block.get("data", "")}
            blocks.append(redacted)
        elif kind in ("tool_use", "server_tool_use"):
            call_id, name = str(block.get("id", "")), str(block.get("name", ""))
            names[call_id] = name
            arguments = block.get("input", {})
            call: dict[str, Any] = {"type": "toolCall", "id": call_id, "name": name,
                                    "arguments": arguments if isinstance(arguments, dict)
                                    else {}}
            if not isinstance(arguments, dict):
                call["invalid_arguments"] = str(arguments)
            blocks.append(call)
        elif kind == "web_search_tool_result":
            blocks.append({"type": "text", "text": "[web search results]"})
        else:
            raise Unreadable(f"{where}: an assistant content block of type {kind!r}")
    return blocks


def read_claude_code(path: Path) -> Source:
    source = Source("claude-code", "Claude Code transcript", [])
    names: dict[str, str] = {}        # tool_use id -> tool name
    merged: dict[str, str] = {}       # a record's uuid -> the node it was merged into
    replies: dict[str, Node] = {}     # message.id -> the assistant node being assembled
    seen: set[str] = set()
    tip: str | None = None
    for number, record in json_lines(path):
        where = f"{path}: line {number}"
        kind = record.get("type")
        if kind == "summary":
            if record.get("summary"):
                source.name = str(record["summary"])
            continue
        if kind not in ("user", "assistant"):
            source.skip(str(kind))
            continue
        uuid, parent = record.get("uuid"), record.get("parentUuid")
        if not isinstance(uuid, str) or not (parent is None or isinstance(parent, str)):
            raise Unreadable(f"{where}: a {kind} record without a string uuid and parentUuid")
        message = record.get("message")
        if not isinstance(message, dict):
            raise Unreadable(f"{where}: a {kind} record without a message")
        source.cwd = source.cwd or record.get("cwd")
        source.created = source.created or record.get("timestamp")
        parent = merged.get(parent, parent) if parent is not None else None
        meta: dict[str, Any] = {"id": uuid}
        if record.get("isSidechain"):
            meta["sidechain"] = True
        if parent is not None and parent not in seen:
            meta["parent_not_in_file"] = parent
            parent = None
        stamp = str(record.get("timestamp") or source.created or "")
        if kind == "assistant":
            blocks = _assistant_blocks(message.get("content"), names, where)
            reply_id = message.get("id")
            node = replies.get(reply_id) if isinstance(reply_id, str) else None
            if node is not None and parent == node.id:  # the same reply, one more block
                node.fields["message"]["content"].extend(blocks)
                stop = message.get("stop_reason")
                if stop:
                    node.fields["message"]["stop_reason"] = STOPS.get(stop, "stop")
                node.source.setdefault("merged", []).append(uuid)
                merged[uuid] = node.id
            else:
                reply: dict[str, Any] = {"role": "assistant", "content": blocks,
                                         "stop_reason": STOPS.get(message.get("stop_reason")
                                                                  or "", "stop")}
                if message.get("model"):
                    reply["model"] = str(message["model"])
                if isinstance(message.get("usage"), dict):
                    reply["usage"] = message["usage"]
                node = Node(uuid, parent, "message", stamp, {"message": reply}, meta)
                source.nodes.append(node)
                if isinstance(reply_id, str):
                    replies[reply_id] = node
                source.model = reply.get("model") or source.model
            content = node.fields["message"]["content"]
            if any(b["type"] == "toolCall" for b in content):
                node.fields["message"]["stop_reason"] = "toolUse"
        else:
            results, said = _user_parts(message.get("content", ""), names, where)
            if record.get("isCompactSummary"):
                meta["compact_summary"] = True
            chain = parent
            for at, result in enumerate(results):  # one entry per result, in order
                node_id = uuid if at == len(results) - 1 and not said else f"{uuid}#{at}"
                source.nodes.append(Node(node_id, chain, "message", stamp,
                                         {"message": result}, dict(meta)))
                seen.add(node_id)
                chain = node_id
            if said:
                source.nodes.append(Node(uuid, chain, "message", stamp,
                                         {"message": {"role": "user",
                                                      "content": _content(said)}}, meta))
            elif not results:
                source.nodes.append(Node(uuid, chain, "message", stamp,
                                         {"message": {"role": "user", "content": ""}}, meta))
        seen.add(uuid)
        if not record.get("isSidechain"):
            tip = merged.get(uuid, uuid)
    if not source.nodes:
        raise Unreadable(f"{path}: no user or assistant record: not a Claude Code transcript")
    source.tip = tip
    return source
