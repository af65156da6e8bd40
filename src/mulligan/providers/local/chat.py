"""Our transcript as the chat messages a small local model reads.

In: the system prompt, our messages, the tool specs, and a character budget for tool results.
Out: a list of {"role": "system"|"user"|"assistant", "content": str} with roles alternating
after the system message. Never mutates its input, never raises on odd transcripts.

Choices, all for a short context window and a model that copies what it sees:
- assistant tool calls are written as the JSON object the model is constrained to produce, and
  (when tools are offered) assistant text as {"answer": ...}, so the history shows the format;
- tool results go back as user messages ("Result of read: ..."), because small models' chat
  templates rarely know a "tool" role; each is trimmed to a budget, saying so in the text;
- replies that failed with nothing in them (errors, aborts) are left out;
- neighbouring messages of the same role are joined, which keeps templates happy.
"""

from __future__ import annotations

from typing import Any

from mulligan.messages import Content, Message, image_note
from mulligan.providers.local.reply import render_answer, render_call, tool_catalogue
from mulligan.wire import ToolSpec

# Shown after the most recent tool result: tiny models otherwise tend to call the same tool
# again instead of answering. (Worded by trial on SmolLM2-135M; a placeholder such as
# {"answer": "..."} here gets copied literally.)
NEXT_STEP = "You have the result of {tool}. Now answer (or use another tool if you must)."


def trim(text: str, budget: int) -> str:
    """`text` cut to about `budget` characters, keeping head and tail, with a note saying how
    much was left out (so the model knows it did not see everything)."""
    if len(text) <= budget:
        return text
    head = budget * 2 // 3
    tail = max(budget - head, 0)
    left_out = len(text) - head - tail
    return (f"{text[:head]}\n[... {left_out} of {len(text)} characters left out to fit the "
            f"context window ...]\n{text[len(text) - tail:] if tail else ''}")


def _assistant_text(message: dict[str, Any], with_tools: bool) -> str:
    calls = [b for b in message["content"] if b["type"] == "toolCall"]
    if calls:
        return "\n".join(render_call(b["name"], b["arguments"]) for b in calls)
    text = "".join(b["text"] for b in message["content"] if b["type"] == "text")
    if not text:
        return ""
    return render_answer(text) if with_tools else text


def words(content: Content) -> str:
    """A user's or tool result's content as text: this model reads no images, so each one is
    a short note saying it was there and could not be shown."""
    if isinstance(content, str):
        return content
    return "\n".join(b["text"] if b["type"] == "text" else
                     f"{image_note(b)} (this model cannot see images)" for b in content)


def _result_text(message: dict[str, Any], budget: int) -> str:
    label = "Error from" if message.get("is_error") else "Result of"
    return f"{label} {message['tool_name']}:\n{trim(words(message['content']), budget)}"


def chat_messages(system: str, messages: list[Message], tools: list[ToolSpec], *,
                  result_budget: int, older_result_budget: int | None = None
                  ) -> list[dict[str, str]]:
    """The chat for one request. The latest tool result keeps up to `result_budget`
    characters; earlier ones `older_result_budget` (default a quarter of it)."""
    if older_result_budget is None:
        older_result_budget = max(result_budget // 4, 200)
    system_text = system.strip()
    if tools:
        system_text = f"{system_text}\n\n{tool_catalogue(tools)}".strip()
    chat: list[dict[str, str]] = [{"role": "system", "content": system_text}] \
        if system_text else []
    last_result = max((i for i, m in enumerate(messages) if m["role"] == "toolResult"),
                      default=-1)
    for index, message in enumerate(messages):
        if message["role"] == "user":
            role, text = "user", words(message["content"])
        elif message["role"] == "assistant":
            role, text = "assistant", _assistant_text(dict(message), bool(tools))
        else:
            budget = result_budget if index == last_result else older_result_budget
            role, text = "user", _result_text(dict(message), budget)
            if index == last_result and index == len(messages) - 1 and tools:
                text = f"{text}\n\n{NEXT_STEP.format(tool=message['tool_name'])}"
        if not text:
            continue
        if chat and chat[-1]["role"] == role:
            chat[-1] = {"role": role, "content": f"{chat[-1]['content']}\n\n{text}"}
        else:
            chat.append({"role": role, "content": text})
    return chat
