"""Waits made visible and bounded: a provider retry is an event all the way to `--mode json`,
and a silent server is tried again at most twice however the silence shows itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from fakes import anthropic_server as wire
from fakes.http_server import ScriptedServer, stream_all
from mulligan.providers.anthropic import AnthropicModel
from mulligan.providers.retry import Backoff
from mulligan.testing import user

KEY = "sk-ant-test-0123456789abcdef"


def print_mode(tmp_path: Path, server: ScriptedServer, *args: str,
               config: str = "") -> subprocess.CompletedProcess[str]:
    """`mulligan -p ARGS --model anthropic/...` in a fresh folder, against `server`."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir(exist_ok=True)
    work.mkdir(exist_ok=True)
    (home / "config.toml").write_text(
        f'[providers.anthropic]\nbase_url = "{server.url}"\ntimeout = 10\n{config}')
    env = {**os.environ, "MULLIGAN_HOME": str(home), "ANTHROPIC_API_KEY": KEY}
    return subprocess.run([sys.executable, "-m", "mulligan", "-p", *args, "--model",
                           "anthropic/claude-sonnet-4-6"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=60)


def test_a_rate_limited_request_shows_a_retry_event_in_json_mode(tmp_path: Path) -> None:
    limited = wire.error(429, "rate_limit_error", "Number of requests has exceeded your rate "
                         "limit", {"retry-after-ms": "50"})
    with ScriptedServer([limited, wire.text_reply("fine")]) as server:
        done = print_mode(tmp_path, server, "hi", "--mode", "json")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    retries = [e for e in events if e["type"] == "retry"]
    assert retries == [{"type": "retry", "reason": "429 rate_limit_error: Number of requests "
                        "has exceeded your rate limit", "attempt": 2, "of": 5, "delay": 0.05}]
    kinds = [e["type"] for e in events]
    # Inside the reply's pair: after message_start, before the first words.
    assert kinds.index("message_start") < kinds.index("retry") < kinds.index("message_update")
    assert len(server.requests) == 2


def stalled(**sse: Any) -> Any:
    return wire.reply(wire.text_block(0, "never"), stall_after=0, **sse)  # headers, silence


def test_a_server_silent_past_the_sdks_read_timeout_is_tried_again_only_twice() -> None:
    # The SDK's own read timeout (0.3 s) comes before the driver's idle timeout (30 s): it is
    # a stall all the same, and max_retries=5 does not make it five.
    with ScriptedServer([stalled(), stalled(), stalled(), stalled(),
                         wire.text_reply("too late")]) as server:
        model = AnthropicModel("claude-sonnet-4-6", api_key=KEY, base_url=server.url,
                               timeout=0.3, idle_timeout=30.0, sleep=lambda _: None,
                               backoff=Backoff(max_retries=5, base=0.01))
        deltas, message = stream_all(model, [user("Hi")])
    assert message["stop_reason"] == "error"
    assert "timed out waiting for the server" in message["error_message"]
    assert len(server.requests) == 3  # the first try and two more
    assert [d["attempt"] for d in deltas if d["type"] == "retry"] == [2, 3]


def test_a_stall_in_print_mode_is_reported_as_a_retry_with_its_reason(tmp_path: Path) -> None:
    with ScriptedServer([stalled(), wire.text_reply("here")]) as server:
        done = print_mode(tmp_path, server, "hi", "--mode", "json",
                          config="idle_timeout = 0.5\n")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    retry = next(e for e in events if e["type"] == "retry")
    assert retry["reason"] == "the server sent nothing for 0.5 s" and retry["attempt"] == 2
