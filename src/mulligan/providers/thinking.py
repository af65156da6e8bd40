"""Thinking effort (`--thinking off|low|medium|high`, `/thinking`), mapped per provider.

In: a model object and a level. Out: the model set to think that much on its next request,
and None -- or a sentence saying this model has no such setting (the user is told; the level
is still kept for the next model). Never: a request sent with a setting its API refuses.

    level    Anthropic budget_tokens   OpenAI reasoning.effort   Gemini thinking_budget
    off      (thinking off)            "none"                    0
    low      2,048                     "low"                     1,024
    medium   8,192                     "medium"                  8,192
    high     24,576                    "high"                    24,576

Chat Completions servers get ``reasoning_effort`` (OpenAI's reasoning models read it; a
compatible server may ignore it), and nothing at "off". The embedded model does not think.
A `Deferred` model (its SDK still loading) takes the level once it is built.
"""

from __future__ import annotations

from typing import Any

LEVELS = ("off", "low", "medium", "high")
ANTHROPIC_BUDGET: dict[str, int | None] = {"off": None, "low": 2048, "medium": 8192,
                                           "high": 24576}
GEMINI_BUDGET = {"off": 0, "low": 1024, "medium": 8192, "high": 24576}
OPENAI_EFFORT = {"off": "none", "low": "low", "medium": "medium", "high": "high"}
CHAT_EFFORT: dict[str, str | None] = {"off": None, "low": "low", "medium": "medium",
                                      "high": "high"}


def set_thinking(model: Any, level: str) -> str | None:
    """Set `model` to think at `level` (one of LEVELS; ValueError otherwise). Returns None, or
    why this model has no thinking setting."""
    if level not in LEVELS:
        raise ValueError(f"thinking {level!r}: one of {', '.join(LEVELS)}")
    if hasattr(model, "ready") and hasattr(model, "thinking"):  # a Deferred: on build
        model.thinking = level
        built = getattr(model, "_model", None)
        return set_thinking(built, level) if built is not None else _note_by_name(model.name)
    kind = type(model).__name__
    if kind == "AnthropicModel":
        model.thinking_budget = ANTHROPIC_BUDGET[level]
    elif kind == "OpenAIResponsesModel":
        model.reasoning_effort = OPENAI_EFFORT[level]
    elif kind == "OpenAIChatModel":
        model.reasoning_effort = CHAT_EFFORT[level]
    elif kind == "GeminiModel":
        model.thinking_budget = GEMINI_BUDGET[level]
    else:
        return _unsupported(str(getattr(model, "name", kind)))
    return None


def set_web_search(model: Any) -> str | None:
    """Turn on the provider's own server-side web search (`--web-search`): Anthropic's web
    search tool, OpenAI's (Responses API) ``web_search``. Returns None, or why this model has
    none (the user is told)."""
    if hasattr(model, "ready") and hasattr(model, "web_search"):  # a Deferred: on build
        model.web_search = True
        built = getattr(model, "_model", None)
        if built is not None:
            return set_web_search(built)
        provider = str(model.name).partition("/")[0]
        return None if provider in ("anthropic", "openai") else _no_search(model.name)
    if type(model).__name__ in ("AnthropicModel", "OpenAIResponsesModel"):
        model.web_search = True
        return None
    return _no_search(str(getattr(model, "name", type(model).__name__)))


def _no_search(name: str) -> str:
    return (f"{name} has no server-side web search: --web-search does nothing for it (the "
            "fetch tool still reads pages)")


def _note_by_name(name: str) -> str | None:
    provider = name.partition("/")[0]
    return None if provider in ("anthropic", "openai", "google") else _unsupported(name)


def _unsupported(name: str) -> str:
    return f"{name} has no thinking setting: --thinking does not change what it does"
