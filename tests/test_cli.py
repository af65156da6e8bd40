"""`mulligan` end to end, as subprocesses, with MULLIGAN_HOME in tmp_path and a scripted model
read from a JSON file (``--model scripted:FILE``), so nothing touches the network."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from mulligan.session import SessionLog

PYTHON = sys.executable


def mulligan(tmp_path: Path, *args: str, stdin: str | None = None,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    environment.update(MULLIGAN_HOME=str(tmp_path / "home"), **(env or {}))
    return subprocess.run([PYTHON, "-m", "mulligan", *args], cwd=work, env=environment,
                          input=stdin, capture_output=True, text=True, timeout=60)


def script(tmp_path: Path, *replies: object) -> str:
    path = tmp_path / f"script{len(list(tmp_path.glob('script*')))}.json"
    path.write_text(json.dumps(list(replies)))
    return f"scripted:{path}"


def session_files(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "home" / "sessions").glob("*/*.jsonl"))


def test_version_prints_the_version(tmp_path):
    done = mulligan(tmp_path, "--version")
    assert done.returncode == 0 and done.stdout.strip() == "mulligan 0.1.0"


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_version_and_help_import_no_agent_schema_checker_or_provider(flag):
    code = (f"import sys\nfrom mulligan.cli import main\ntry:\n    main([{flag!r}])\n"
            "except SystemExit:\n    pass\n"
            "heavy = ('mulligan.modes', 'mulligan.app', 'mulligan.harness', 'jsonschema', "
            "'mulligan.providers', 'anthropic', 'openai', 'rich', 'prompt_toolkit')\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy or m in heavy))\n")
    done = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_help_documents_every_flag(tmp_path):
    done = mulligan(tmp_path, "--help")
    for flag in ("-p", "--mode", "--model", "--base-url", "--cwd", "--max-turns",
                 "--system-prompt-file", "--continue", "--resume", "--session",
                 "--no-session", "--version", "sessions", "scripted:FILE"):
        assert flag in done.stdout, flag
    sub = mulligan(tmp_path, "sessions", "--help")
    for action in ("ls", "show", "tree", "export", "check", "repair", "migrate"):
        assert action in sub.stdout


def test_print_mode_prints_only_the_final_answer_and_saves_the_session(tmp_path):
    done = mulligan(tmp_path, "-p", "say hi", "--model", script(tmp_path, "Hi there."))
    assert (done.returncode, done.stdout, done.stderr) == (0, "Hi there.\n", "")
    (file,) = session_files(tmp_path)
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    first, *rest = SessionLog(file).entries()
    assert first["type"] == "session_info"
    assert first["cwd"] == str((tmp_path / "work").resolve())
    assert first["model"].startswith("scripted/") and first["created"]
    assert [e["message"]["role"] for e in rest] == ["user", "assistant"]
    assert not Path(str(file) + ".lease").exists()


def test_a_failed_run_exits_1_with_the_reason_on_stderr(tmp_path):
    done = mulligan(tmp_path, "-p", "say hi", "--model", script(tmp_path))  # no replies
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith("Error: ")


def test_json_mode_prints_one_event_per_line(tmp_path):
    done = mulligan(tmp_path, "-p", "say hi", "--mode", "json",
                    "--model", script(tmp_path, "Hi there."))
    assert done.returncode == 0
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[0]["type"] == "session" and events[0]["file"].endswith(".jsonl")
    assert events[1]["type"] == "agent_start" and events[-1]["type"] == "agent_end"
    updates = [e for e in events if e["type"] == "message_update"]
    assert updates and all(set(e) == {"type", "delta"} for e in updates)  # the delta only
    assert events[-1]["messages"][-1]["content"] == [{"type": "text", "text": "Hi there."}]


def test_json_mode_exits_1_on_a_failed_run(tmp_path):
    done = mulligan(tmp_path, "-p", "x", "--mode", "json", "--model", script(tmp_path))
    assert done.returncode == 1
    assert json.loads(done.stdout.splitlines()[-1])["type"] == "agent_end"


def test_continue_carries_on_in_the_newest_session_of_the_folder(tmp_path):
    mulligan(tmp_path, "-p", "first", "--model", script(tmp_path, "one"))
    done = mulligan(tmp_path, "-p", "second", "-c", "--model", script(tmp_path, "two"))
    assert done.stdout == "two\n"
    (file,) = session_files(tmp_path)
    assert [m["content"] for m in SessionLog(file).replay() if m["role"] == "user"] == [
        "first", "second"]


def test_continue_with_no_session_in_the_folder_fails_by_name(tmp_path):
    done = mulligan(tmp_path, "-p", "x", "-c", "--model", script(tmp_path, "one"))
    assert done.returncode == 1 and "no session to continue" in done.stderr


def test_no_session_writes_nothing(tmp_path):
    done = mulligan(tmp_path, "-p", "x", "--no-session", "--model", script(tmp_path, "ok"))
    assert done.stdout == "ok\n"
    assert not (tmp_path / "home" / "sessions").exists()


def test_session_flag_uses_that_file(tmp_path):
    file = tmp_path / "mine.jsonl"
    mulligan(tmp_path, "-p", "x", "--session", str(file), "--model", script(tmp_path, "ok"))
    assert [m["role"] for m in SessionLog(file).replay()] == ["user", "assistant"]


def test_conflicting_flags_are_a_usage_error(tmp_path):
    assert mulligan(tmp_path, "-c", "--no-session", "-p", "x").returncode == 2
    assert mulligan(tmp_path, "--mode", "json").returncode == 2


def test_a_hosted_model_without_its_key_fails_naming_the_variable(tmp_path):
    done = mulligan(tmp_path, "-p", "x", "--model", "anthropic/claude-sonnet-4-5")
    assert done.returncode == 1 and "ANTHROPIC_API_KEY" in done.stderr
    assert not (tmp_path / "home" / "sessions").exists()


def test_max_turns_stops_a_run_and_it_counts_as_failed(tmp_path):
    call = {"role": "assistant", "stop_reason": "toolUse", "content": [
        {"type": "toolCall", "id": "c1", "name": "ls", "arguments": {}}]}
    done = mulligan(tmp_path, "-p", "x", "--max-turns", "1",
                    "--model", script(tmp_path, call, "never"))
    assert done.returncode == 1 and "max_turns" in done.stderr


def test_tools_act_in_the_cwd_folder(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "hello.txt").write_text("from other\n")
    call = {"role": "assistant", "stop_reason": "toolUse", "content": [
        {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "hello.txt"}}]}
    done = mulligan(tmp_path, "-p", "x", "--cwd", str(other), "--mode", "json",
                    "--model", script(tmp_path, call, "done"))
    results = [json.loads(line) for line in done.stdout.splitlines()]
    ended = [e for e in results if e["type"] == "tool_execution_end"]
    assert "from other" in ended[0]["result"]["content"]


@pytest.fixture
def two_attempts(tmp_path) -> Path:
    mulligan(tmp_path, "-p", "Make it faster.", "--model", script(tmp_path, "Use a global?"))
    (file,) = session_files(tmp_path)
    log = SessionLog(file)
    log.append_message({"role": "user", "content": "Do it, then."})
    log.append_message({"role": "assistant", "content": [{"type": "text", "text": "Done."}],
                        "stop_reason": "stop"})
    log.branch_to("e3")
    log.append_message({"role": "user", "content": "No global, please."})
    return file


def test_sessions_ls_lists_this_folders_sessions_with_entries_and_branches(tmp_path,
                                                                             two_attempts):
    done = mulligan(tmp_path, "sessions", "ls")
    assert done.returncode == 0
    assert "7 entries   2 branches  Make it faster." in done.stdout
    assert str(two_attempts) in done.stdout
    assert "Make it faster." in mulligan(tmp_path, "sessions", "ls", "--all").stdout


def test_sessions_show_prints_a_branch_and_leaf_picks_another(tmp_path, two_attempts):
    tip = mulligan(tmp_path, "sessions", "show", str(two_attempts)).stdout
    assert "No global, please." in tip and "Do it, then." not in tip
    old = mulligan(tmp_path, "sessions", "show", str(two_attempts), "--leaf", "e5").stdout
    assert "Do it, then." in old and "No global" not in old


def test_sessions_show_of_an_unknown_leaf_fails_naming_it(tmp_path, two_attempts):
    done = mulligan(tmp_path, "sessions", "show", str(two_attempts), "--leaf", "e99")
    assert done.returncode == 1 and "e99" in done.stderr


def test_sessions_tree_folds_and_all_unfolds(tmp_path, two_attempts):
    folded = mulligan(tmp_path, "sessions", "tree", two_attempts.name[:20]).stdout
    assert "abandoned attempt (e4..e5)" in folded and "◀ tip" in folded
    unfolded = mulligan(tmp_path, "sessions", "tree", str(two_attempts), "--all").stdout
    assert "Do it, then." in unfolded


def test_sessions_export_writes_markdown_or_a_linear_session(tmp_path, two_attempts):
    md = mulligan(tmp_path, "sessions", "export", str(two_attempts), "--format", "md")
    assert md.stdout.startswith("# Session ") and "No global, please." in md.stdout
    out = tmp_path / "linear.jsonl"
    done = mulligan(tmp_path, "session", "export", str(two_attempts), "--format", "jsonl",
                    "--leaf", "e5", "-o", str(out))
    assert done.returncode == 0
    entries = SessionLog(out).entries()
    assert entries[0]["origin_entry"] == "e5"
    assert [m["content"] for m in SessionLog(out).replay() if m["role"] == "user"] == [
        "Make it faster.", "Do it, then."]


def test_sessions_export_md_never_overwrites_a_file_and_writes_it_0600(tmp_path, two_attempts):
    precious = tmp_path / "other.jsonl"
    precious.write_text('{"id":"e1","type":"session_info","parent_id":null}\n')
    done = mulligan(tmp_path, "sessions", "export", str(two_attempts), "-o", str(precious))
    assert done.returncode == 1 and "already exists" in done.stderr
    assert precious.read_text() == '{"id":"e1","type":"session_info","parent_id":null}\n'
    out = tmp_path / "branch.md"
    assert mulligan(tmp_path, "sessions", "export", str(two_attempts), "-o", str(out)).returncode \
        == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and "No global" in out.read_text()


def test_sessions_export_dash_is_stdout_and_the_default_is_not_the_working_folder(
        tmp_path, two_attempts):
    """Issue 24 item 9: `-o -` writes to stdout; an html export without -o goes to
    $MULLIGAN_HOME/exports (a file left in the working folder would later block
    `sessions back --files`), and the path is printed."""
    page = mulligan(tmp_path, "sessions", "export", str(two_attempts), "--format", "html",
                    "-o", "-")
    assert page.returncode == 0 and page.stdout.lstrip().startswith("<!")
    assert not (tmp_path / "-").exists()
    md = mulligan(tmp_path, "sessions", "export", str(two_attempts), "-o", "-")
    assert md.returncode == 0 and "No global, please." in md.stdout
    assert f"cwd: `{tmp_path / 'work'}`" in md.stdout  # readable, not `\/tmp\/...`
    assert "\nUse a global?\n" in md.stdout and "```\nUse a global?" not in md.stdout
    done = mulligan(tmp_path, "sessions", "export", str(two_attempts), "--format", "html")
    assert done.returncode == 0, done.stderr
    written = sorted((tmp_path / "home" / "exports").glob("mulligan-*.html"))
    assert len(written) == 1 and str(written[0]) in done.stdout
    assert not list((tmp_path / "work").glob("mulligan-*.html"))
    jsonl = mulligan(tmp_path, "sessions", "export", str(two_attempts), "--format", "jsonl",
                     "-o", "-")
    assert jsonl.returncode == 2 and "md or html" in jsonl.stderr


def test_session_is_an_alias_of_sessions(tmp_path, two_attempts):
    assert mulligan(tmp_path, "session", "ls").stdout == mulligan(tmp_path, "sessions",
                                                                   "ls").stdout


def test_session_check_reports_a_torn_line_and_repair_sets_it_aside(tmp_path, two_attempts):
    assert mulligan(tmp_path, "session", "check", str(two_attempts)).returncode == 0
    with open(two_attempts, "ab") as f:
        f.write(b'{"id": "e8", "type": "mess')
    checked = mulligan(tmp_path, "session", "check", str(two_attempts))
    assert checked.returncode == 1 and "line 8" in checked.stdout
    refused = mulligan(tmp_path, "-p", "x", "--session", str(two_attempts),
                       "--model", script(tmp_path, "ok"))
    assert refused.returncode == 1 and "session repair" in refused.stderr
    repaired = mulligan(tmp_path, "sessions", "repair", str(two_attempts))
    assert repaired.returncode == 0 and "torn" in repaired.stdout
    assert mulligan(tmp_path, "session", "check", str(two_attempts)).returncode == 0


def test_continue_refuses_a_damaged_newest_session_rather_than_resume_an_older_one(tmp_path):
    assert mulligan(tmp_path, "-p", "old talk", "--model", script(tmp_path, "ok")).returncode == 0
    assert mulligan(tmp_path, "-p", "new talk", "--model", script(tmp_path, "ok")).returncode == 0
    older, newer = sorted(session_files(tmp_path), key=lambda f: "new talk" in f.read_text())
    with open(newer, "ab") as f:
        f.write(b'{"id": "e9", "type": "mess')  # a write cut off by a crash
    done = mulligan(tmp_path, "-c", "-p", "go on", "--model", script(tmp_path, "ok"))
    assert done.returncode == 1
    assert str(newer) in done.stderr and "session repair" in done.stderr
    assert "go on" not in older.read_text()


def test_a_scripted_model_file_that_is_not_json_is_named(tmp_path):
    broken = tmp_path / "replies.json"
    broken.write_text("[\"one\",")
    done = mulligan(tmp_path, "-p", "x", "--no-session", "--model", f"scripted:{broken}")
    assert done.returncode == 1
    assert done.stderr.startswith(f"mulligan: {broken}: not a JSON list of replies (")


def test_show_tree_and_export_of_a_damaged_file_point_to_check_and_repair(tmp_path):
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text('{"id": "e1", "type": "message", "parent_id": "e40", '
                       '"message": {"role": "user", "content": "hi"}}\n')
    for action in ("show", "export"):
        done = mulligan(tmp_path, "sessions", action, str(damaged))
        assert done.returncode == 1 and "e40" in done.stderr, action
        assert "'mulligan session check FILE' lists every problem" in done.stderr, action
        assert "Traceback" not in done.stderr


def test_a_folder_given_as_session_is_named_in_one_line(tmp_path):
    done = mulligan(tmp_path, "-p", "x", "--session", str(tmp_path), "--model",
                    script(tmp_path, "ok"))
    assert (done.returncode, done.stderr) == (
        1, f"mulligan: --session {tmp_path}: is a folder, not a session file\n")


def test_session_migrate_gives_an_old_file_parents(tmp_path):
    old = tmp_path / "old.jsonl"
    old.write_text(json.dumps({"role": "user", "content": "hi"}) + "\n"
                   + json.dumps({"role": "assistant", "stop_reason": "stop",
                                 "content": [{"type": "text", "text": "hello"}]}) + "\n")
    new = tmp_path / "new.jsonl"
    done = mulligan(tmp_path, "session", "migrate", str(old), str(new))
    assert done.returncode == 0 and "2 entries" in done.stdout
    assert [m["role"] for m in SessionLog(new).replay()] == ["user", "assistant"]


@pytest.mark.slow
def test_with_nothing_configured_the_embedded_model_is_announced_once_on_stderr(tmp_path):
    # A task the embedded model answers at once (one call, real inference: about a second).
    done = mulligan(tmp_path, "-p", "Say hi.", "--no-session", "--max-turns", "1")
    assert done.stderr.count("No provider configured: using the embedded "
                             "local/smollm2-135m") == 1


def test_an_empty_task_and_max_turns_0_are_usage_errors(tmp_path):
    for args in (["-p", ""], ["-p", "  "], ["-p", "x", "--max-turns", "0"]):
        done = mulligan(tmp_path, *args, "--model", script(tmp_path, "never"))
        assert done.returncode == 2 and "usage:" in done.stderr, args


@pytest.mark.parametrize(("task", "stdin", "sent"), [
    # piped stdin is appended to the task, as claude -p does
    ("why does it fail?", "Traceback: boom\n", "why does it fail?\n\nTraceback: boom\n"),
    # "-p -" reads the task itself from stdin
    ("-", "a task\non two lines\n", "a task\non two lines\n"),
], ids=["piped stdin is appended to the task", "a dash reads the task from stdin"])
def test_print_mode_takes_stdin_into_the_task(tmp_path, task, stdin, sent):
    done = mulligan(tmp_path, "-p", task, "--no-session", "--mode", "json",
                    "--model", script(tmp_path, "ok"), stdin=stdin)
    first_user = next(json.loads(line) for line in done.stdout.splitlines()
                      if '"role":"user"' in line)
    assert first_user["message"]["content"] == sent


def test_the_repl_refuses_a_stdin_that_is_not_a_terminal(tmp_path):
    done = mulligan(tmp_path, "--model", script(tmp_path, "ok"), stdin="hello\n")
    assert done.returncode == 2 and "use -p" in done.stderr


def test_sessions_ls_says_which_session_is_in_use_and_by_whom(tmp_path, two_attempts):
    holder = subprocess.Popen(
        [PYTHON, "-c",
         "import sys; from mulligan.session.stores.lease import acquire;"
         f"acquire(__import__('pathlib').Path({str(two_attempts)!r})); print('held', flush=True);"
         "sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        listed = mulligan(tmp_path, "sessions", "ls").stdout
        assert f"(in use by pid {holder.pid})" in listed
    finally:
        holder.stdin.close()
        holder.wait()
    assert "in use" not in mulligan(tmp_path, "sessions", "ls").stdout
