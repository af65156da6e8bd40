"""--web-search: Anthropic's and OpenAI's server-side web search turned on in the request (as
the local server received it, through the official SDKs), and the searches and their results
recorded in the reply as words, so the session file and the exports keep them; a provider
without one says so."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fakes import anthropic_server as claude
from fakes import openai_server as chat
from fakes import responses_server as responses
from fakes.http_server import ScriptedServer
from mulligan.session import SessionLog


def mulligan(tmp_path: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    environment = {k: v for k, v in os.environ.items()
                   if not k.endswith(("_API_KEY", "_BASE_URL"))}
    environment.update(MULLIGAN_HOME=str(tmp_path / "home"), **env)
    return subprocess.run([sys.executable, "-m", "mulligan", *args], cwd=work,
                          env=environment, capture_output=True, text=True, timeout=60)


def test_anthropic_web_search_is_asked_for_and_its_results_are_recorded_and_exported(
        tmp_path: Path) -> None:
    answer = claude.reply(
        claude.web_search_block(0, "srvtoolu_01WYG3", "python 3.14 release date"),
        claude.web_search_results_block(1, "srvtoolu_01WYG3", [
            ("Python 3.14 release schedule", "https://peps.python.org/pep-0745/")]),
        claude.text_block(2, "It came out in October 2025."))
    file = tmp_path / "s.jsonl"
    with ScriptedServer([answer]) as server:
        done = mulligan(tmp_path, "-p", "When was 3.14 released?", "--web-search",
                        "--session", str(file), "--model", "anthropic/claude-sonnet-4-6",
                        env={"ANTHROPIC_API_KEY": "sk-ant-t", "ANTHROPIC_BASE_URL": server.url})
    assert done.returncode == 0, done.stderr
    assert {"type": "web_search_20250305", "name": "web_search", "max_uses": 5} in \
        server.requests[0].body["tools"]
    reply = SessionLog(file).replay()[-1]
    assert reply["content"] == [
        {"type": "text", "text": "[web_search: python 3.14 release date]\n"},
        {"type": "text", "text": "[web search results]\n- Python 3.14 release schedule "
                                 "<https://peps.python.org/pep-0745/>\n"},
        {"type": "text", "text": "It came out in October 2025."}]
    subprocess.run([sys.executable, "-m", "mulligan", "sessions", "export", str(file),
                    "--format", "md", "-o", str(tmp_path / "out.md")], check=True,
                   capture_output=True, env={**os.environ, "MULLIGAN_HOME": str(tmp_path)})
    assert "https://peps.python.org/pep-0745/" in (tmp_path / "out.md").read_text()


def test_openai_web_search_is_asked_for_and_the_search_is_recorded(tmp_path: Path) -> None:
    answer = responses.Reply().search("mulligan agent", ["https://example.org/a"]) \
        .text("Found it.").sse()
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "config.toml").write_text('[providers.openai]\nopenai_api = '
                                                   '"responses"\n')
    file = tmp_path / "s.jsonl"
    with ScriptedServer([answer], base_path="/v1") as server:
        done = mulligan(tmp_path, "-p", "Look it up", "--web-search", "--session", str(file),
                        "--model", "openai/gpt-5.5", "--base-url", server.url,
                        env={"OPENAI_API_KEY": "sk-t"})
    assert done.returncode == 0, done.stderr
    body = server.requests[0].body
    assert {"type": "web_search"} in body["tools"]
    assert "web_search_call.action.sources" in body["include"]
    assert SessionLog(file).replay()[-1]["content"] == [
        {"type": "text", "text": "[web search: mulligan agent]\n- https://example.org/a"},
        {"type": "text", "text": "Found it."}]


def test_a_provider_without_web_search_says_so(tmp_path: Path) -> None:
    with ScriptedServer([chat.text_reply("ok")], base_path="/v1") as server:
        done = mulligan(tmp_path, "-p", "hi", "--web-search", "--no-session", "--model",
                        "openai/qwen", "--base-url", server.url, env={})
    assert done.returncode == 0
    assert "openai/qwen has no server-side web search" in done.stderr
    assert "tools" not in server.requests[0].body or all(
        t.get("type") == "function" for t in server.requests[0].body["tools"])
