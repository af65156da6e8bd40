"""Thinking effort: --thinking and /thinking mapped per provider (asserted on the request each
provider's local server received, through the official SDKs), recorded as an entry a resumed
session keeps, shown in the status line; a model without the setting says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fakes import anthropic_server as claude
from fakes import gemini_server as gemini
from fakes import openai_server as chat
from fakes import responses_server as responses
from fakes.http_server import ScriptedServer, stream_all
from mulligan.app import Controller
from mulligan.app.settings import Settings
from mulligan.frontends.slash import run_command
from mulligan.frontends.status import status_line
from mulligan.providers.anthropic import AnthropicModel
from mulligan.providers.gemini import GeminiModel
from mulligan.providers.openai.chat import OpenAIChatModel
from mulligan.providers.openai.responses import OpenAIResponsesModel
from mulligan.providers.thinking import set_thinking
from mulligan.session import SessionLog
from mulligan.testing import ScriptedModel, say, user


def sent_with(level: str, make: Any, answer: Any, base_path: str = "") -> dict[str, Any]:
    with ScriptedServer([answer], base_path=base_path) as server:
        model = make(server.url)
        assert set_thinking(model, level) is None
        stream_all(model, [user("Hi")])
    body: dict[str, Any] = server.requests[0].body
    return body


@pytest.mark.parametrize("level,budget", [("low", 2048), ("high", 24576)])
def test_anthropic_gets_a_thinking_budget(level: str, budget: int) -> None:
    body = sent_with(level, lambda url: AnthropicModel(
        "claude-sonnet-4-6", api_key="k", base_url=url, prompt_caching=False),
        claude.text_reply("ok"))
    assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}
    assert body["max_tokens"] > budget
    off = sent_with("off", lambda url: AnthropicModel(
        "claude-sonnet-4-6", api_key="k", base_url=url, thinking_budget=4000),
        claude.text_reply("ok"))
    assert "thinking" not in off


def test_openai_responses_gets_a_reasoning_effort_and_chat_a_reasoning_effort() -> None:
    body = sent_with("medium", lambda url: OpenAIResponsesModel("gpt-5.5", api_key="k",
                                                                base_url=url),
                     responses.text_reply("ok"), "/v1")
    assert body["reasoning"] == {"effort": "medium", "summary": "auto"}
    body = sent_with("off", lambda url: OpenAIResponsesModel("gpt-5.5", api_key="k",
                                                             base_url=url),
                     responses.text_reply("ok"), "/v1")
    assert body["reasoning"] == {"effort": "none", "summary": "auto"}
    body = sent_with("high", lambda url: OpenAIChatModel("o4-mini", api_key="k", base_url=url),
                     chat.text_reply("ok"), "/v1")
    assert body["reasoning_effort"] == "high"


def test_gemini_gets_a_thinking_budget_and_off_is_zero() -> None:
    body = sent_with("low", lambda url: GeminiModel("gemini-2.5-pro", api_key="k",
                                                    base_url=url), gemini.text_reply("ok"))
    assert body["generationConfig"]["thinkingConfig"] == {"thinking_budget": 1024,
                                                          "include_thoughts": True}
    body = sent_with("off", lambda url: GeminiModel("gemini-2.5-pro", api_key="k",
                                                    base_url=url), gemini.text_reply("ok"))
    assert body["generationConfig"]["thinkingConfig"] == {"thinking_budget": 0,
                                                          "include_thoughts": False}


def controller(tmp_path: Path, session: Path | None) -> Controller:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    model = ScriptedModel([say("ok"), say("ok")])
    model.name = "scripted/x"  # type: ignore[attr-defined]
    return Controller(model, [], Settings(cwd=work, home=tmp_path / "home"), session)


def test_slash_thinking_sets_records_and_shows_the_level_and_a_model_without_it_says_so(
        tmp_path: Path) -> None:
    c = controller(tmp_path, tmp_path / "s.jsonl")
    shown = run_command(c, "/thinking high")
    assert shown.lines == ["thinking high from the next request on",
                           "scripted/x has no thinking setting: --thinking does not change "
                           "what it does"]
    assert "thinking high" in status_line(c)
    list(c.run_prompt("hi"))
    run_command(c, "/thinking low")
    entries = [e for e in SessionLog(tmp_path / "s.jsonl").entries()
               if e["type"] == "thinking_change"]
    assert [e["level"] for e in entries] == ["high", "low"]
    assert run_command(c, "/thinking lots").error
    assert run_command(c, "/thinking").lines[0].startswith("thinking: low")
    c.close()
    again = controller(tmp_path, tmp_path / "s.jsonl")
    assert again.thinking == "low"


@pytest.mark.slow
def test_p_thinking_is_sent_and_a_continued_session_keeps_it(tmp_path: Path) -> None:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    with ScriptedServer([claude.text_reply("one"), claude.text_reply("two")]) as server:
        env.update(MULLIGAN_HOME=str(home), ANTHROPIC_API_KEY="sk-ant-test",
                   ANTHROPIC_BASE_URL=server.url)
        for args in (["--thinking", "medium", "--model", "anthropic/claude-sonnet-4-6"],
                     ["-c"]):
            done = subprocess.run([sys.executable, "-m", "mulligan", "-p", "hi", *args],
                                  cwd=work, env=env, capture_output=True, text=True,
                                  timeout=60)
            assert done.returncode == 0, done.stderr
    for request in server.requests:
        assert request.body["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    lines = [json.loads(line) for line in next(home.glob("sessions/*/*.jsonl")).open()]
    assert [e["level"] for e in lines if e["type"] == "thinking_change"] == ["medium"]
