"""Secrets stay out of the tools and out of the record: the bash child has no provider key
and no variable named in [tools] hide_env, and a key value that reaches a message anyway is
redacted before the message is written -- in the session file and in every export."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mulligan.app.secrets import Secrets
from mulligan.testing import call, reply, say, tool_result

PYTHON = sys.executable
KEY = "sk-ant-test-0123456789abcdef"
TOKEN = "ghp_not_a_real_token_42"


def run(tmp_path: Path, replies: list, *extra: str) -> tuple[subprocess.CompletedProcess[str],
                                                               Path]:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir(exist_ok=True)
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text('[tools]\nhide_env = ["MY_TOKEN"]\n')
    script = tmp_path / "script.json"
    script.write_text(json.dumps(replies))
    env = {**os.environ, "MULLIGAN_HOME": str(home), "ANTHROPIC_API_KEY": KEY,
           "MY_TOKEN": TOKEN}
    done = subprocess.run([PYTHON, "-m", "mulligan", "--model", f"scripted:{script}", *extra],
                          cwd=work, env=env, capture_output=True, text=True, timeout=60)
    (session,) = (home / "sessions").glob("*/*.jsonl")
    return done, session


def test_bash_runs_without_the_provider_keys_or_hidden_variables(tmp_path):
    env_call = call("bash", {"command": "env"}, id="c1")
    done, session = run(tmp_path, [reply(env_call), say("listed")], "-p", "show env")
    assert done.returncode == 0, done.stderr
    text = session.read_text()
    result = [json.loads(line) for line in text.splitlines()][3]["message"]
    assert result["role"] == "toolResult" and "PATH=" in result["content"]
    assert "ANTHROPIC_API_KEY" not in result["content"] and "MY_TOKEN" not in result["content"]
    assert KEY not in text and TOKEN not in text


def test_a_key_quoted_by_the_model_or_the_user_is_redacted_in_the_file_and_exports(tmp_path):
    done, session = run(tmp_path, [say(f"Your key is {KEY}, and the token {TOKEN}.")], "-p",
                        f"is {KEY} my key?")
    assert done.returncode == 0, done.stderr
    text = session.read_text()
    assert KEY not in text and TOKEN not in text
    assert "[redacted: ANTHROPIC_API_KEY]" in text and "[redacted: MY_TOKEN]" in text
    exported = subprocess.run([PYTHON, "-m", "mulligan", "sessions", "export", str(session)],
                              capture_output=True, text=True, check=True).stdout
    assert KEY not in exported and "[redacted: ANTHROPIC_API_KEY]" in exported


def test_redaction_returns_the_same_message_when_there_is_nothing_to_hide():
    secrets = Secrets(["ANTHROPIC_API_KEY"], {"ANTHROPIC_API_KEY": KEY})
    clean = tool_result(call("read", {"path": "a"}, id="c1"), "nothing secret")
    assert secrets.redact(clean) is clean
    leaky = reply("here", call("bash", {"command": f"curl -H 'x-api-key: {KEY}'"}, id="c2"))
    redacted = secrets.redact(leaky)
    assert KEY not in json.dumps(redacted) and KEY in json.dumps(leaky)  # never in place


def test_short_values_are_not_treated_as_secrets():
    secrets = Secrets(["X"], {"X": "abc"})
    assert secrets.redact_text("abc abc") == "abc abc"
