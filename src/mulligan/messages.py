"""The wire shapes: messages and content blocks as JSON-ready dicts.

A conversation is a list of messages; each is a plain dict tagged by ``role``. These TypedDicts
name the shapes (see DESIGN.md, "Messages"); nothing here carries an id or a parent -- those live
on session entries, never on messages. Constructors and readers here never mutate their input.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

StopReason = Literal["stop", "toolUse", "length", "error", "aborted"]

# The one reason recorded for a reply cut short by the user (Ctrl-C, abort()): by the loop when
# it replaces a model call, and by every provider when it stops a stream.
ABORTED = "Aborted by the user."
# What a reply cut short by a signal records instead (`abort(reason)`): the terminal closed,
# or the process was told to stop -- not the user's choice.
HUNG_UP = "Aborted: the terminal was closed (SIGHUP)."
TERMINATED = "Aborted: Mulligan was told to stop (SIGTERM)."


class TextBlock(TypedDict):
    type: Literal["text"]
    text: str


class ThinkingBlock(TypedDict):
    type: Literal["thinking"]
    thinking: str
    # A provider's proof that the thinking is its own (Anthropic), passed back verbatim.
    signature: NotRequired[str]
    # Thinking the provider sent only in encrypted form.
    redacted: NotRequired[bool]
    data: NotRequired[str]
    # Whose thinking this is, when not Anthropic's ("openai", "google"): each provider sends
    # back only its own. OpenAI's reasoning item: its id and encrypted content; Gemini's
    # thought signature is kept in `encrypted_content` too (base64).
    provider: NotRequired[str]
    item_id: NotRequired[str]
    encrypted_content: NotRequired[str]


class ToolCallBlock(TypedDict):
    type: Literal["toolCall"]
    id: str
    name: str
    arguments: dict[str, Any]
    # The raw text, when the model's arguments were not a JSON object (then `arguments` is {}):
    # the call is answered with an error quoting it, never run on made-up arguments.
    invalid_arguments: NotRequired[str]


Block = TextBlock | ThinkingBlock | ToolCallBlock


class ImageBlock(TypedDict):
    """An image in a user message or a tool result (DESIGN.md, "Messages: images")."""

    type: Literal["image"]
    mime_type: str  # "image/png", "image/jpeg", "image/gif", "image/webp"
    data: str  # base64


InputBlock = TextBlock | ImageBlock
# About what one image costs in a request, in tokens (Anthropic: width x height / 750, so a
# 1568 x 784 screenshot is ~1,600): what context estimates count for one, not its base64.
IMAGE_TOKENS = 1_600
# A user message's or a tool result's content: a string, or text and image blocks. Lists are
# written only when an image is in them, so a session without images stays readable by a
# reader that knows only strings.
Content = str | list[InputBlock]


class Usage(TypedDict, total=False):
    input: int
    output: int
    cache_read: int
    cache_write: int
    reasoning: int  # output tokens spent thinking, where the provider counts them apart


class UserMessage(TypedDict):
    role: Literal["user"]
    content: Content


class AssistantMessage(TypedDict):
    role: Literal["assistant"]
    content: list[Block]
    stop_reason: StopReason
    error_message: NotRequired[str]
    usage: NotRequired[Usage]
    model: NotRequired[str]


class ToolResultMessage(TypedDict):
    role: Literal["toolResult"]
    tool_call_id: str
    tool_name: str
    content: Content
    is_error: bool


Message = UserMessage | AssistantMessage | ToolResultMessage


def user_message(text: Content) -> UserMessage:
    """A message from the user; its content is a plain string, or text and image blocks."""
    return {"role": "user", "content": text if isinstance(text, str) else list(text)}


def is_content(value: object) -> bool:
    """True for a user's or tool result's content: a string, or a list of text and image
    blocks of the right shape."""
    return type(value) is str or _input_blocks_ok(value)


def image_block(mime_type: str, data: str) -> ImageBlock:
    """An image block: `data` is the base64 of the file's bytes."""
    return {"type": "image", "mime_type": mime_type, "data": data}


def images_in(content: object) -> list[ImageBlock]:
    """The image blocks of a message's content ([] for a string)."""
    if not isinstance(content, list):
        return []
    return [b for b in content  # type: ignore[misc]
            if isinstance(b, dict) and b.get("type") == "image"]


def image_note(block: ImageBlock | dict[str, Any]) -> str:
    """A short stand-in for an image, for a reader that cannot show it:
    "[image: image/png, 12.3 KB]"."""
    size = len(str(block.get("data", ""))) * 3 // 4
    return f"[image: {block.get('mime_type', '?')}, {size / 1024:.1f} KB]"


def content_text(content: object) -> str:
    """A message's content as plain text: a string as it is; blocks as their text, each image
    as its `image_note`. For showing and summarising, never for sending an image."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else str(content)
    parts = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif isinstance(block, dict) and block.get("type") == "image":
            parts.append(image_note(block))
    return "\n".join(parts)


def assistant_message(
    blocks: list[Block], stop_reason: StopReason | None = None, **extra: Any
) -> AssistantMessage:
    """An assistant message holding `blocks`. The stop reason defaults to "toolUse" when a block
    is a tool call and "stop" otherwise; `extra` (usage, model, error_message) is copied on."""
    if stop_reason is None:
        stop_reason = "toolUse" if any(b["type"] == "toolCall" for b in blocks) else "stop"
    message: dict[str, Any] = {"role": "assistant", "content": list(blocks),
                               "stop_reason": stop_reason}
    message.update(extra)
    return message  # type: ignore[return-value]


def text_of(message: Message) -> str:
    """The words of a message: a user's string, a tool result's content, or the text blocks of
    an assistant message joined together (thinking and tool calls are not words)."""
    content = message["content"]
    if isinstance(content, str):
        return content
    return "".join(block["text"] for block in content if block["type"] == "text")


def tool_calls(message: Message) -> list[ToolCallBlock]:
    """The tool calls an assistant message asks for, in order; [] for any other message.
    Worked out from `content` on every call and stored nowhere else."""
    if message["role"] != "assistant":
        return []
    return [block for block in message["content"] if block["type"] == "toolCall"]


def error_message(
    text: str, *, stop_reason: Literal["error", "aborted"] = "error",
    content: list[Block] | None = None,
) -> AssistantMessage:
    """An assistant message that says why a run stopped: stop_reason "error" (or "aborted") and
    the reason in `error_message`. `content` keeps whatever partial reply had arrived. A stop is
    written into the record, never raised."""
    return {"role": "assistant", "content": list(content or []), "stop_reason": stop_reason,
            "error_message": text}


def is_failed(message: Message) -> bool:
    """True for an assistant message that ended in an error or an abort."""
    return message["role"] == "assistant" and message["stop_reason"] in ("error", "aborted")


# The keys each message role and each content block must have, and their types.
_MESSAGE_FIELDS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "user": {"content": (str, list)},
    "assistant": {"content": list, "stop_reason": str},
    "toolResult": {"tool_call_id": str, "tool_name": str, "content": (str, list),
                   "is_error": bool},
}
_BLOCK_FIELDS: dict[str, dict[str, type]] = {
    "text": {"text": str}, "thinking": {"thinking": str},
    "toolCall": {"id": str, "name": str, "arguments": dict},
}


def shape_problem(message: object) -> str | None:
    """What keeps `message` from having the wire shape above, in a few words, or None when it
    has it. For data from outside -- a model's reply, a session file -- read before any code
    indexes into it. Never raises."""
    # Replaying a long session checks every message on the branch: well-shaped ones take the
    # fast path below (about 0.3 µs each); only a suspect one is looked at in detail.
    if _well_shaped(message):
        return None
    return _explain(message)


def _well_shaped(message: object) -> bool:
    if type(message) is not dict:
        return False
    role = message.get("role")
    if role == "user":
        return type(message.get("content")) is str or _input_blocks_ok(message.get("content"))
    if role == "toolResult":
        content = message.get("content")
        return ((type(content) is str or _input_blocks_ok(content))
                and type(message.get("is_error")) is bool
                and type(message.get("tool_call_id")) is str
                and type(message.get("tool_name")) is str)
    content = message.get("content")
    if role != "assistant" or type(content) is not list \
            or type(message.get("stop_reason")) is not str:
        return False
    for block in content:
        kind = block.get("type") if type(block) is dict else None
        if kind == "text":
            if type(block.get("text")) is not str:
                return False
        elif kind == "toolCall":
            if type(block.get("id")) is not str or type(block.get("name")) is not str \
                    or type(block.get("arguments")) is not dict:
                return False
        elif kind != "thinking" or type(block.get("thinking")) is not str:
            return False
    return True


def _input_blocks_ok(content: object) -> bool:
    """A user's or tool result's list content: text and image blocks only."""
    if type(content) is not list:
        return False
    for block in content:
        kind = block.get("type") if type(block) is dict else None
        if kind == "text":
            if type(block.get("text")) is not str:
                return False
        elif kind != "image" or type(block.get("mime_type")) is not str \
                or type(block.get("data")) is not str:
            return False
    return True


def _explain(message: object) -> str | None:
    if not isinstance(message, dict):
        return f"not a message object but {type(message).__name__}"
    fields = _MESSAGE_FIELDS.get(str(message.get("role")))
    if fields is None:
        return f"a message with an unknown role {message.get('role')!r}"
    for key, kind in fields.items():
        if not isinstance(message.get(key), kind):
            article = "an" if message["role"] == "assistant" else "a"
            return (f"{article} {message['role']} message whose {key!r} is missing or not "
                    f"a {_name(kind)}")
    if message["role"] != "assistant" and isinstance(message["content"], list) \
            and not _input_blocks_ok(message["content"]):
        bad = next((b for b in message["content"] if not _input_blocks_ok([b])), None)
        return (f"a {message['role']} message with a malformed content block (text and "
                f"image blocks only): {repr(bad)[:120]}")
    if message["role"] == "assistant":
        for block in message["content"]:
            wanted = _BLOCK_FIELDS.get(str(block.get("type"))) if isinstance(block, dict) \
                else None
            if wanted is None or not all(isinstance(block.get(k), t) for k, t in wanted.items()):
                return f"an assistant message with a malformed content block: {repr(block)[:120]}"
    return None


def _name(kind: type | tuple[type, ...]) -> str:
    return kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
