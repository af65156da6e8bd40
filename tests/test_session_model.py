"""A resumed session goes on with its own model (its newest model_change, else its
session_info) unless --model is given -- the two cases ported from Tau (-c and --session),
through real providers' local servers -- and a --no-session session still compacts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fakes import anthropic_server as claude
from fakes import openai_server as gpt
from fakes.http_server import ScriptedServer
from mulligan.app import Controller
from mulligan.app.rewind.compaction import SYSTEM, Settings
from mulligan.app.settings import Settings as RunSettings
from mulligan.session import SessionLog
from mulligan.session.view import COMPACTION_PREAMBLE
from mulligan.testing import ScriptedModel, say

LONG = "word " * 240


def mulligan(tmp_path: Path, *args: str, openai: str, anthropic: str
             ) -> subprocess.CompletedProcess[str]:
    """mulligan with Anthropic as the configured default and both providers on local
    servers, so which one a run talks to is what the servers received."""
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir(exist_ok=True)
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text('model = "anthropic/claude-sonnet-4-6"\n')
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env.update(MULLIGAN_HOME=str(home), ANTHROPIC_API_KEY="sk-ant-test",
               ANTHROPIC_BASE_URL=anthropic, OPENAI_BASE_URL=openai)
    return subprocess.run([sys.executable, "-m", "mulligan", *args], cwd=work, env=env,
                          capture_output=True, text=True, timeout=60)


def test_continue_goes_on_with_the_model_the_session_started_with(tmp_path: Path) -> None:
    with ScriptedServer([gpt.text_reply("one"), gpt.text_reply("two")],
                        base_path="/v1") as other, \
            ScriptedServer([claude.text_reply("default")]) as default:
        first = mulligan(tmp_path, "-p", "hi", "--model", "openai/qwen2.5-coder",
                         openai=other.url, anthropic=default.url)
        again = mulligan(tmp_path, "-c", "-p", "and again", openai=other.url,
                         anthropic=default.url)
    assert first.returncode == 0 and again.returncode == 0, again.stderr
    assert again.stdout.strip() == "two"
    assert len(other.requests) == 2 and default.requests == []
    assert other.requests[1].body["model"] == "qwen2.5-coder"


@pytest.mark.slow
def test_session_file_goes_on_with_its_newest_model_change_unless_model_is_given(
        tmp_path: Path) -> None:
    file = tmp_path / "s.jsonl"
    with ScriptedServer([gpt.text_reply("one"), gpt.text_reply("two")],
                        base_path="/v1") as other, \
            ScriptedServer([claude.text_reply("by change"), claude.text_reply("named")]
                           ) as default:
        mulligan(tmp_path, "--session", str(file), "-p", "hi", "--model", "openai/gpt-x",
                 openai=other.url, anthropic=default.url)
        again = mulligan(tmp_path, "--session", str(file), "-p", "more", openai=other.url,
                         anthropic=default.url)
        assert again.stdout.strip() == "two" and len(other.requests) == 2
        SessionLog(file).append_model_change("anthropic", "claude-haiku-4-5")
        changed = mulligan(tmp_path, "--session", str(file), "-p", "more", openai=other.url,
                           anthropic=default.url)
        assert changed.stdout.strip() == "by change"
        assert default.requests[0].body["model"] == "claude-haiku-4-5"
        named = mulligan(tmp_path, "--session", str(file), "-p", "more", "--model",
                         "anthropic/claude-opus-4-6", openai=other.url,
                         anthropic=default.url)
    assert named.stdout.strip() == "named"
    assert default.requests[1].body["model"] == "claude-opus-4-6"


def test_resuming_a_session_whose_model_has_no_key_here_says_so_by_name(
        tmp_path: Path) -> None:
    file = tmp_path / "s.jsonl"
    log = SessionLog(file)
    log.append_session_info(cwd=str(tmp_path), model="google/gemini-2.5-pro")
    done = mulligan(tmp_path, "--session", str(file), "-p", "more", openai="http://127.0.0.1:9",
                    anthropic="http://127.0.0.1:9")
    assert done.returncode == 1
    assert "this session goes on with its own model google/gemini-2.5-pro: no API key for " \
           "google" in done.stderr and "--model NAME" in done.stderr


def test_a_session_not_saved_still_compacts_automatically_and_on_request(
        tmp_path: Path) -> None:
    model = ScriptedModel([say(f"one {LONG}"), say("two"), say("Request: three."),
                           say("three done"), say("Request: by hand.")])
    work = tmp_path / "work"
    work.mkdir()
    c = Controller(model, [], RunSettings(cwd=work, home=tmp_path / "home", compaction=Settings(
        keep_tokens=300, reserve_tokens=200)), None)
    model.context_window = len(c.harness.system) // 4 + 1000  # type: ignore[attr-defined]
    list(c.run_prompt("first question"))
    list(c.run_prompt(f"second {LONG}"))
    events = list(c.run_prompt(f"third {LONG}"))
    assert any(e["type"] == "compaction_end" and not e["error"] for e in events)
    assert model.calls[2].system == SYSTEM
    assert model.calls[3].messages[0]["content"] == COMPACTION_PREAMBLE + "Request: three."
    assert c.compact() is True
    assert c.harness.messages[0]["content"].startswith(COMPACTION_PREAMBLE)
    assert not (tmp_path / "home").exists()  # nothing was written anywhere
