"""Secrets stay out of the tools and out of the record: the bash child has no provider key
and no variable named in [tools] hide_env, and a key value that reaches a message anyway is
redacted before the message is written -- in the session file and in every export."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from mulligan.app.secrets import Secrets
from mulligan.providers.errors import redact
from mulligan.testing import call, reply, say, tool_result
from mulligan.tools import sandbox_problem

PYTHON = sys.executable
KEY = "sk-ant-test-0123456789abcdef"
TOKEN = "ghp_not_a_real_token_42"
PROBLEM = sandbox_problem()
if PROBLEM is not None and os.environ.get("CI") == "true":
    raise RuntimeError(f"CI must run the sandbox tests: {PROBLEM}")
needs_bwrap = pytest.mark.skipif(PROBLEM is not None, reason=PROBLEM or "")


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


# A probe the agent's bash runs: can it find the key in any process's environ, in Mulligan's
# memory, or ptrace Mulligan? It gets the key reversed, so that the command itself holds no
# key to be redacted, and prints only verdicts.
PROBE = r'''
import ctypes, os, sys
key, token, target = sys.argv[1][::-1].encode(), sys.argv[2][::-1].encode(), int(sys.argv[3])
found = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            seen = handle.read()
            if key in seen or token in seen:
                found.append(pid)
    except OSError:
        pass
print("environ-with-key:", len(found))
try:
    with open(f"/proc/{target}/environ", "rb") as handle:
        handle.read()
    print("target-environ: readable")
except OSError:
    print("target-environ: denied")
leaked = "denied"
try:
    with open(f"/proc/{target}/maps") as maps, open(f"/proc/{target}/mem", "rb") as mem:
        leaked = "no key"
        for line in maps:
            span, perms = line.split()[:2]
            if not perms.startswith("rw"):
                continue
            start, end = (int(x, 16) for x in span.split("-"))
            try:
                mem.seek(start)
                if key in mem.read(end - start):
                    leaked = "KEY FOUND"
                    break
            except (OSError, OverflowError, ValueError):
                continue
except OSError:
    pass
print("target-memory:", leaked)
libc = ctypes.CDLL(None, use_errno=True)
attached = libc.ptrace(16, target, None, None) == 0  # PTRACE_ATTACH
print("target-ptrace:", "ATTACHED" if attached else "denied")
if attached:
    libc.ptrace(17, target, None, None)  # PTRACE_DETACH
'''


def probe_run(tmp_path: Path, *extra: str) -> tuple[str, bytes, str, str]:
    """Mulligan -p runs the probe with bash, then waits; meanwhile this test reads Mulligan's
    /proc/PID/environ itself (as root it still can). (probe verdicts, Mulligan's environ, the
    key, the token): fresh ones, as other runs on this machine may hold the usual ones."""
    key, token = f"sk-ant-{uuid.uuid4().hex}", f"ghp_{uuid.uuid4().hex}"
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    (work / "probe.py").write_text(PROBE)
    (home / "config.toml").write_text('[tools]\nhide_env = ["MY_TOKEN"]\n')
    command = (f"python3 probe.py {key[::-1]} {token[::-1]} $(cat mulligan.pid) > probe.out 2>&1; "
               "touch ready; for i in $(seq 400); do [ -e go ] && break; sleep 0.05; done")
    script = tmp_path / "script.json"
    script.write_text(json.dumps([reply(call("bash", {"command": command}, id="c1")),
                                  say("probed")]))
    env = {**os.environ, "MULLIGAN_HOME": str(home), "ANTHROPIC_API_KEY": key,
           "MY_TOKEN": token}
    proc = subprocess.Popen([PYTHON, "-m", "mulligan", "--model", f"scripted:{script}", "-p",
                             "probe", *extra], cwd=work, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    (work / "mulligan.pid").write_text(str(proc.pid))
    try:
        for _ in range(400):
            if (work / "ready").exists() or proc.poll() is not None:
                break
            time.sleep(0.05)
        environ = Path(f"/proc/{proc.pid}/environ").read_bytes() if proc.poll() is None \
            else b""
        (work / "go").touch()
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    return (work / "probe.out").read_text(), environ, key, token


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_bash_cannot_read_the_keys_from_mulligans_environ_or_memory(tmp_path):
    verdicts, environ, key, token = probe_run(tmp_path)
    assert "environ-with-key: 0" in verdicts, verdicts
    # As root, a command keeps CAP_SYS_ADMIN (bubblewrap needs it), which reads an environ
    # block; that block no longer holds the key (below). Any other user: denied.
    assert "target-environ: denied" in verdicts or os.geteuid() == 0, verdicts
    assert "target-memory: denied" in verdicts, verdicts
    assert "target-ptrace: denied" in verdicts, verdicts
    # The kernel's copy of the environment Mulligan started with no longer holds the key.
    assert environ and key.encode() not in environ and b"ANTHROPIC_API_KEY" not in environ
    assert token.encode() not in environ  # nor a variable hide_env names
    assert b"MULLIGAN_HOME=" in environ  # the rest of it is still there


@needs_bwrap
def test_sandboxed_bash_cannot_find_the_keys_either(tmp_path):
    verdicts, *_ = probe_run(tmp_path, "--sandbox")
    assert "environ-with-key: 0" in verdicts, verdicts
    assert "target-memory: KEY FOUND" not in verdicts and "ATTACHED" not in verdicts, verdicts


def test_json_mode_never_prints_a_key_even_split_over_deltas(tmp_path):
    leak = call("bash", {"command": f"echo {KEY}", KEY: 1}, id="c1")  # value and name
    done, session = run(tmp_path, [reply(leak), say(f"It is {KEY} indeed.")], "-p", "go",
                        "--mode", "json")
    assert done.returncode == 0, done.stderr
    assert KEY not in done.stdout and KEY not in session.read_text()
    assert "[redacted: ANTHROPIC_API_KEY]" in done.stdout
    updates = [json.loads(line) for line in done.stdout.splitlines()
               if '"message_update"' in line]
    said = "".join(u["delta"]["delta"] for u in updates if u["delta"]["type"] == "text")
    assert said == "It is [redacted: ANTHROPIC_API_KEY] indeed."
    arguments = "".join(u["delta"]["delta"] for u in updates if u["delta"]["type"] == "toolcall")
    assert json.loads(arguments) == {"command": "echo [redacted: ANTHROPIC_API_KEY]",
                                     "[redacted: ANTHROPIC_API_KEY]": 1}


def test_a_key_split_over_deltas_is_held_until_it_is_whole():
    scrub = Secrets(["K"], {"K": KEY}).scrubber()
    shown = [*scrub({"type": "message_update", "delta": {"type": "text", "delta": "a " + KEY[:5]}}),
             *scrub({"type": "message_update", "delta": {"type": "text", "delta": KEY[5:] + " b"}}),
             *scrub({"type": "message_update", "delta": {"type": "text", "delta": " sk"}}),
             *scrub({"type": "message_end", "message": {"role": "assistant", "content": []}})]
    texts = [e["delta"]["delta"] for e in shown if e["type"] == "message_update"]
    assert texts == ["a ", "[redacted: K] b", " ", "sk"]  # "sk" could begin the key: held
    assert shown[-1]["type"] == "message_end"


def test_a_key_split_over_a_running_tools_updates_is_held_until_it_is_whole():
    scrub = Secrets(["K"], {"K": KEY}).scrubber()

    def update(output, call_id="c1"):
        return {"type": "tool_execution_update", "tool_call_id": call_id, "tool_name": "bash",
                "output": output, "elapsed": 0.1}

    shown = [*scrub(update("token=" + KEY[:6])), *scrub(update(KEY[6:] + "\n")),
             *scrub(update("tail sk")), *scrub(update("other", "c2")),
             *scrub({"type": "message_end", "message": {"role": "toolResult", "content": ""}})]
    outputs = [(e["tool_call_id"], e["output"]) for e in shown
               if e["type"] == "tool_execution_update"]
    assert outputs == [("c1", "token="), ("c1", "[redacted: K]\n"), ("c1", "tail "),
                       ("c1", "sk"), ("c2", "other")]
    assert shown[-1]["type"] == "message_end" and KEY[:6] not in json.dumps(shown)


def test_a_key_in_a_wrongly_typed_setting_is_not_echoed(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    for setting in (f'[providers.anthropic]\nbase_url = ["{KEY}"]\n',
                    f'[tools]\nhide_env = "{KEY}"\n', f'summarize_on_back = "{KEY}"\n',
                    f'[compaction]\nkeep_tokens = "{KEY}"\n'):
        (home / "config.toml").write_text(setting)
        done = subprocess.run([PYTHON, "-m", "mulligan", "-p", "x"], cwd=tmp_path,
                              env={**os.environ, "MULLIGAN_HOME": str(home)},
                              capture_output=True, text=True, timeout=60)
        assert done.returncode != 0 and "config.toml" in done.stderr
        assert KEY not in done.stderr and KEY[:12] not in done.stderr, done.stderr


def test_a_one_character_key_is_not_redacted_out_of_ordinary_words():
    assert redact("401: invalid x-api-key", "x") == "401: invalid x-api-key"
    assert redact(f"bad key {KEY}", KEY) == "bad key [redacted]"
    assert Secrets(["X"], {"X": "e"}).redact_text("the eel") == "the eel"
