"""Hooks, end to end: `mulligan -p` as a subprocess with hooks in config.toml (and in a trusted
folder's .claude/settings.json) running real shell scripts, for each event and each exit
code. A scripted model asks for the tool calls; the session file is the record checked."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from mulligan.app.extensions.hooks import Hook, Hooks, hooks_from_claude, hooks_from_config
from mulligan.app.extensions.mcp_config import Trust
from mulligan.frontends.live import LiveRenderer
from mulligan.session import SessionLog
from test_cli import mulligan, script, session_files

HOOK = """#!/bin/sh
# $1: a name; $2: the exit code. Keeps stdin, says something on both streams.
cat > "{out}/$1.stdin"
echo "stdout of $1"
echo "stderr of $1" >&2
exit $2
"""


def setup(tmp_path: Path, hooks: dict[str, list[dict]]) -> Path:
    """config.toml with `hooks` ({event: [{...}]}, the command `NAME CODE` run by the
    recording script); returns the folder the script writes into."""
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    hook = tmp_path / "hook.sh"
    hook.write_text(HOOK.format(out=out))
    lines = []
    for event, entries in hooks.items():
        for entry in entries:
            lines.append(f"[[hooks.{event}]]")
            for key, value in entry.items():
                value = f"sh {hook} {value}" if key == "command" else value
                lines.append(f"{key} = {json.dumps(value)}")
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text("\n".join(lines) + "\n")
    return out


def bash_call(command: str) -> dict:
    return {"role": "assistant", "stop_reason": "toolUse", "content": [
        {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": command}}]}


def events(stdout: str, kind: str = "hook") -> list[dict]:
    found = [json.loads(line) for line in stdout.splitlines()]
    return [e for e in found if e["type"] == kind]


def recorded(tmp_path: Path) -> list[dict]:
    (file,) = session_files(tmp_path)
    return [e["message"] for e in SessionLog(file).entries() if e["type"] == "message"]


def test_every_event_gets_one_json_object_on_stdin_and_is_an_event(tmp_path):
    out = setup(tmp_path, {event: [{"command": f"{event} 0"}] for event in (
        "session_start", "user_prompt_submit", "pre_tool_use", "post_tool_use", "stop")})
    done = mulligan(tmp_path, "-p", "do it", "--mode", "json",
                    "--model", script(tmp_path, bash_call("echo hi"), "done"))
    assert done.returncode == 0, done.stderr
    ran = events(done.stdout)
    assert [(e["event"], e["outcome"], e["exit_code"]) for e in ran] == [
        ("session_start", "ok", 0), ("user_prompt_submit", "ok", 0), ("pre_tool_use", "ok", 0),
        ("post_tool_use", "ok", 0), ("stop", "ok", 0)]
    (file,) = session_files(tmp_path)
    work = str((tmp_path / "work").resolve())
    given = {e: json.loads((out / f"{e}.stdin").read_text()) for e in (
        "session_start", "user_prompt_submit", "pre_tool_use", "post_tool_use", "stop")}
    for event, data in given.items():
        assert (data["event"], data["cwd"]) == (event, work)
        assert data["session_file"] == str(file)
    assert given["user_prompt_submit"]["prompt"] == "do it"
    assert given["pre_tool_use"]["tool_name"] == "bash"
    assert given["pre_tool_use"]["arguments"] == {"command": "echo hi"}
    assert given["post_tool_use"]["result"].startswith("hi")
    assert given["post_tool_use"]["tool_response"] == given["post_tool_use"]["result"]
    assert "tool_name" not in given["stop"]
    # exit 0: what session_start and user_prompt_submit printed goes with the prompt
    user = recorded(tmp_path)[0]
    assert user["content"] == "do it\n\nstdout of session_start\n\nstdout of user_prompt_submit"


def test_a_pre_tool_use_hook_that_exits_2_blocks_the_call_and_its_stderr_is_the_result(tmp_path):
    setup(tmp_path, {"pre_tool_use": [{"command": "guard 2", "matcher": "bash"}]})
    done = mulligan(tmp_path, "-p", "x", "--mode", "json",
                    "--model", script(tmp_path, bash_call("touch made.txt"), "ok"))
    assert not (tmp_path / "work" / "made.txt").exists()
    result = recorded(tmp_path)[2]
    assert result == {"role": "toolResult", "tool_call_id": "c1", "tool_name": "bash",
                      "content": "stderr of guard", "is_error": True}
    (hook,) = events(done.stdout)
    assert (hook["outcome"], hook["exit_code"], hook["tool_name"]) == ("blocked", 2, "bash")


def test_a_hook_that_exits_otherwise_is_reported_and_ignored(tmp_path):
    setup(tmp_path, {"pre_tool_use": [{"command": "broken 1"}],
                     "post_tool_use": [{"command": "broken-post 7"}],
                     "stop": [{"command": "broken-stop 3"}]})
    done = mulligan(tmp_path, "-p", "x", "--mode", "json",
                    "--model", script(tmp_path, bash_call("touch made.txt"), "ok"))
    assert done.returncode == 0
    assert (tmp_path / "work" / "made.txt").exists()
    assert recorded(tmp_path)[2]["is_error"] is False
    assert [(e["event"], e["outcome"], e["exit_code"], e["stderr"].strip())
            for e in events(done.stdout)] == [
        ("pre_tool_use", "failed", 1, "stderr of broken"),
        ("post_tool_use", "failed", 7, "stderr of broken-post"),
        ("stop", "failed", 3, "stderr of broken-stop")]


def test_a_matcher_chooses_the_tools_a_hook_runs_for(tmp_path):
    setup(tmp_path, {"pre_tool_use": [{"command": "reads 2", "matcher": "read|grep"}]})
    done = mulligan(tmp_path, "-p", "x", "--mode", "json",
                    "--model", script(tmp_path, bash_call("touch made.txt"), "ok"))
    assert (tmp_path / "work" / "made.txt").exists() and events(done.stdout) == []


def test_a_post_tool_use_hook_that_exits_2_makes_the_result_an_error_with_its_stderr(tmp_path):
    setup(tmp_path, {"post_tool_use": [{"command": "review 2"}]})
    mulligan(tmp_path, "-p", "x", "--mode", "json",
             "--model", script(tmp_path, bash_call("echo ran"), "ok"))
    result = recorded(tmp_path)[2]
    assert result["is_error"] is True
    assert result["content"].startswith("ran")
    assert result["content"].endswith("[a post_tool_use hook objected: stderr of review]")


def test_a_user_prompt_submit_hook_that_exits_2_keeps_the_prompt_from_being_sent(tmp_path):
    setup(tmp_path, {"user_prompt_submit": [{"command": "policy 2"}]})
    done = mulligan(tmp_path, "-p", "secret plans", "--model", script(tmp_path, "never sent"))
    assert done.returncode == 1
    assert "a user_prompt_submit hook blocked the prompt: stderr of policy" in done.stderr
    assert done.stdout == "" and session_files(tmp_path) == []
    as_json = mulligan(tmp_path, "-p", "secret plans", "--mode", "json",
                       "--model", script(tmp_path, "never sent"))
    assert as_json.returncode == 1
    assert [e["type"] for e in map(json.loads, as_json.stdout.splitlines())] == [
        "session", "hook"]


def test_a_stop_hook_that_exits_2_sends_the_agent_back_with_its_stderr(tmp_path):
    out = setup(tmp_path, {})
    once = tmp_path / "once.sh"
    once.write_text(f'cat > {out}/stop.stdin\nif [ -e {out}/again ]; then exit 0; fi\n'
                    f'touch {out}/again\necho "tests fail: fix them" >&2\nexit 2\n')
    (tmp_path / "home" / "config.toml").write_text(
        f'[[hooks.stop]]\ncommand = "sh {once}"\n')
    done = mulligan(tmp_path, "-p", "x", "--mode", "json",
                    "--model", script(tmp_path, "first answer", "fixed them"))
    assert done.returncode == 0, done.stderr
    users = [m["content"] for m in recorded(tmp_path) if m["role"] == "user"]
    assert users == ["x", f"A stop hook (sh {once}) asks you to go on: tests fail: fix them"]
    assert json.loads((out / "stop.stdin").read_text())["stop_hook_active"] is True
    assert [e["outcome"] for e in events(done.stdout)] == ["blocked", "ok"]


def test_a_hook_that_runs_too_long_is_killed_reported_and_ignored(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[[hooks.pre_tool_use]]\ncommand = "sleep 30"\ntimeout = 0.5\n')
    done = mulligan(tmp_path, "-p", "x", "--mode", "json",
                    "--model", script(tmp_path, bash_call("touch made.txt"), "ok"))
    (hook,) = events(done.stdout)
    assert (hook["outcome"], hook["exit_code"]) == ("failed", None)
    assert "timed out after 0.5 s" in hook["stderr"]
    assert (tmp_path / "work" / "made.txt").exists()


def test_claude_code_settings_hooks_run_only_in_a_trusted_folder(tmp_path):
    out = setup(tmp_path, {})
    (tmp_path / "home" / "config.toml").write_text("")
    claude = tmp_path / "work" / ".claude"
    claude.mkdir(parents=True)
    (claude / "settings.json").write_text(json.dumps({"hooks": {"PreToolUse": [
        {"matcher": "Bash", "hooks": [{"type": "command",
                                       "command": f"sh {tmp_path / 'hook.sh'} claude 2"}]}],
        "Notification": [{"hooks": [{"type": "command", "command": "true"}]}]}}))
    untrusted = mulligan(tmp_path, "-p", "x", "--mode", "json",
                         "--model", script(tmp_path, bash_call("touch one.txt"), "ok"))
    assert events(untrusted.stdout) == [] and (tmp_path / "work" / "one.txt").exists()
    Trust(tmp_path / "home").remember(tmp_path / "work", True)
    trusted = mulligan(tmp_path, "-p", "x", "--mode", "json",
                       "--model", script(tmp_path, bash_call("touch two.txt"), "ok"))
    assert [e["outcome"] for e in events(trusted.stdout)] == ["blocked"]
    assert not (tmp_path / "work" / "two.txt").exists()
    given = json.loads((out / "claude.stdin").read_text())
    assert (given["hook_event_name"], given["tool_input"]) == (
        "PreToolUse", {"command": "touch two.txt"})


def test_hook_settings_are_checked_naming_the_mistake(tmp_path):
    for config, problem in [({"hooks": {"before_tool": []}}, "no hook event 'before_tool'"),
                            ({"hooks": {"stop": [{"timeout": 3}]}}, "needs command"),
                            ({"hooks": {"pre_tool_use": [{"command": "x", "matcher": "("}]}},
                             "is not a regex")]:
        try:
            hooks_from_config(config)
        except ValueError as exc:
            assert problem in str(exc)
        else:
            raise AssertionError(f"{config} was accepted")
    bad = tmp_path / "settings.json"
    bad.write_text(json.dumps({"hooks": {"Stop": [{"command": "x"}]}}))
    try:
        hooks_from_claude(bad)
    except ValueError as exc:
        assert str(bad) in str(exc)
    else:
        raise AssertionError("a malformed Claude Code hook was accepted")


def test_the_repl_shows_each_hook_that_ran_as_a_line(tmp_path):
    ran = Hooks([Hook("pre_tool_use", "exit 2")], tmp_path).run("pre_tool_use",
                                                                tool_name="bash")
    screen = io.StringIO()
    renderer = LiveRenderer(Console(file=screen, width=100, color_system=None))
    renderer.render(ran[0].event() | {"line": ran[0].line()})
    assert screen.getvalue().strip() == "hook pre_tool_use (bash): exit 2 -> exit 2, blocked"
