"""Parallel attempts (`-p --attempts N`, `mulligan.app.attempts`): N scripted models, each with
its own script, on a real folder; real processes for the command line and for kill -9.

What is checked: the attempts run at once, each in its own folder, and the user's folder is
untouched until one is adopted; the session file holds each attempt's branch under the fork,
replaying exactly its own messages; --check records exit codes; --adopt takes the passing one
with the fewest changed lines; adopting over an outside edit refuses and changes nothing;
`sessions diff` shows the diff between two attempts; kill -9 mid-attempts leaves a valid
session file and the user's folder as it was."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from mulligan.app import Controller
from mulligan.app.attempts.record import rows_of
from mulligan.app.attempts.session import adopt, running, start_attempts
from mulligan.app.permissions import Permissions
from mulligan.app.settings import Settings
from mulligan.app.workspace.checkpoints import Checkpoints, RestoreRefused
from mulligan.app.workspace.store.snapshots import Store
from mulligan.session import SessionLog
from mulligan.session.view import messages_of
from mulligan.testing import ScriptedModel, call, reply, say, tool_result, user
from mulligan.tools import coding_tools, sandbox_problem
from test_cli import script, session_files

PYTHON = sys.executable
ORIGINAL = "def add(a, b):\n    return a - b\n"
TEST = "from calc import add\nassert add(2, 3) == 5\n"
BODIES = {1: "def add(a, b):\n    return a + b\n",
          2: "def add(a, b):\n    return b + a  # either way\n\n\n"
             "def sub(a, b):\n    return a - b\n",
          3: "def add(a, b):\n    return a * b\n"}


def writes(k: int) -> list[Any]:
    """Attempt k's script: write its version of calc.py, then say it is done."""
    return [reply(call("write", {"path": "calc.py", "content": BODIES[k]}, id=f"w{k}")),
            say(f"attempt {k} done")]


def project(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / "calc.py").write_text(ORIGINAL)
    (work / "test_calc.py").write_text(TEST)
    return work


def run(tmp_path: Path, *args: str, wait: bool = True) -> Any:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY",
                                                            "OPENAI_API_KEY")}
    env["MULLIGAN_HOME"] = str(tmp_path / "home")
    command = [PYTHON, "-m", "mulligan", *args]
    if not wait:
        return subprocess.Popen(command, cwd=tmp_path / "work", env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(command, cwd=tmp_path / "work", env=env, capture_output=True,
                          text=True, timeout=120)


def three(tmp_path: Path, *extra: str) -> Any:
    models = [a for k in (1, 2, 3) for a in ("--model", script(tmp_path, *writes(k)))]
    return run(tmp_path, "-p", "Fix add.", "--attempts", "3", *models, *extra)


def folder_tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


def test_three_attempts_keep_their_files_in_their_folders_and_each_branch_replays(tmp_path):
    work = project(tmp_path)
    before = folder_tree(work)
    done = three(tmp_path, "--check", "python3 test_calc.py")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 4 and "passed" in lines[1] and "passed" in lines[2] \
        and "failed (exit 1)" in lines[3]
    assert folder_tree(work) == before  # nothing adopted: the user's folder as it was
    [file] = session_files(tmp_path)
    log = SessionLog(file)
    rows = rows_of(log.entries(), Store(tmp_path / "home"))
    assert [r.check for r in rows] == [0, 0, 1]
    assert [(r.added, r.removed, r.files) for r in rows] == [(1, 1, 1), (4, 0, 1), (1, 1, 1)]
    folders = sorted((tmp_path / "home" / "attempts").glob("*/*"))
    assert [(f / "calc.py").read_text() for f in folders] == [BODIES[1], BODIES[2], BODIES[3]]
    store = Store(tmp_path / "home")
    store.journal.restart()  # a turn's objects, kept in the journal, in files of their own
    blob = store.blob_path(store.load(rows[0].base or "").files["test_calc.py"][4])
    shared = {blob.stat().st_ino, (work / "test_calc.py").stat().st_ino}
    assert not shared & {(f / "test_calc.py").stat().st_ino for f in folders}
    for row in rows:
        script_k = writes(row.index)
        assert messages_of(log.branch(row.last_id)) == [
            user("Fix add."), script_k[0],
            tool_result(script_k[0]["content"][0], f"Wrote {len(BODIES[row.index])} bytes "
                        "to calc.py (replaced)."),
            script_k[1]]
        assert log.branch(row.last_id)[-1]["type"] == "check"
        assert log.entry(row.first_id)["attempt"] == {
            "group": row.group, "index": row.index, "of": 3, "model": row.model}
    assert log.entry(log.tip())["type"] == "branch"  # back at the fork, none adopted
    assert log.replay() == []
    check = run(tmp_path, "sessions", "check", str(file))
    assert check.returncode == 0 and "index: up to date" in check.stdout
    tree = run(tmp_path, "sessions", "tree", str(file), "--width", "140").stdout
    assert "attempt 1/3 · scripted/script0.json · check passed" in tree
    assert "attempt 3/3 · scripted/script2.json · check failed (exit 1)" in tree


def test_adopt_takes_the_passing_attempt_with_the_fewest_changed_lines(tmp_path):
    work = project(tmp_path)
    done = three(tmp_path, "--check", "python3 test_calc.py", "--adopt")
    assert done.returncode == 0, done.stderr
    assert "adopted attempt 1" in done.stdout and "restored 1 file(s): calc.py" in done.stdout
    assert (work / "calc.py").read_text() == BODIES[1]
    assert list((tmp_path / "home" / "attempts").glob("*/*")) == []  # folders removed
    [file] = session_files(tmp_path)
    log = SessionLog(file)
    assert log.entry(log.tip())["type"] == "workspace_restore"
    assert messages_of(log.branch(log.tip()))[-1] == say("attempt 1 done")


def test_no_attempt_passing_the_check_exits_1_and_adopts_nothing(tmp_path):
    work = project(tmp_path)
    done = three(tmp_path, "--check", "false", "--adopt")
    assert done.returncode == 1
    assert "no attempt passed" in done.stderr and (work / "calc.py").read_text() == ORIGINAL


def test_sessions_diff_shows_the_diff_between_two_attempts_and_their_transcripts(tmp_path):
    project(tmp_path)
    assert three(tmp_path).returncode == 0
    [file] = session_files(tmp_path)
    done = run(tmp_path, "sessions", "diff", str(file), "1", "3")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n" \
           "-    return a + b\n+    return a * b\n" in out
    assert "ai: attempt 1 done" in out and "ai: attempt 3 done" in out
    assert out.index("ai: attempt 1 done") < out.index("ai: attempt 3 done")


def _controller(tmp_path: Path, work: Path, models: dict[str, Any]) -> Controller:
    home = tmp_path / "home"
    return Controller(ScriptedModel([]), coding_tools(work), Settings(cwd=work, home=home),
                      tmp_path / "s.jsonl",
                      checkpoints=Checkpoints(Store(home), work), resolver=models.__getitem__,
                      tools_for=lambda folder: Permissions("auto", folder).guard(
                          coding_tools(folder)))


def meeting(k: int, barrier: threading.Barrier) -> ScriptedModel:
    """Attempt k's scripted model, whose first reply waits until every attempt has asked for
    one: the attempts get past it only if they run at the same time."""
    first, last = writes(k)
    return ScriptedModel([lambda request: (barrier.wait(timeout=20), first)[1], last])


def test_attempts_run_at_the_same_time_and_adopting_over_an_outside_edit_refuses(tmp_path):
    work = project(tmp_path)
    barrier = threading.Barrier(3)
    models = {f"m{k}": meeting(k, barrier) for k in (1, 2, 3)}
    controller = _controller(tmp_path, work, models)
    attempts = start_attempts(controller, "Fix add.", 3, ["m1", "m2", "m3"])
    assert attempts.wait(timeout=60)
    assert all(a.error is None for a in attempts.attempts), [a.error for a in attempts.attempts]
    controller.reload()
    (work / "calc.py").write_text("def add(a, b):\n    return a + b  # mine\n")
    mine, session = folder_tree(work), Path(tmp_path / "s.jsonl").read_bytes()
    with pytest.raises(RestoreRefused, match="calc.py"):
        adopt(controller, 2)
    assert folder_tree(work) == mine and Path(tmp_path / "s.jsonl").read_bytes() == session
    row, done = adopt(controller, 2, files="keep-mine")
    assert done.kept == ["calc.py"] and (work / "calc.py").read_text().endswith("# mine\n")
    controller.close()


def test_kill_9_during_attempts_leaves_a_valid_session_and_the_folder_untouched(tmp_path):
    work = project(tmp_path)
    before = folder_tree(work)
    slow = [reply(call("bash", {"command": "echo started > note.txt; sleep 60"})), "done"]
    models = [a for _ in (1, 2, 3) for a in ("--model", script(tmp_path, *slow))]
    process = run(tmp_path, "-p", "Go.", "--attempts", "3", *models, wait=False)
    folders = tmp_path / "home" / "attempts"
    deadline = time.monotonic() + 60
    while len(list(folders.glob("*/*/note.txt"))) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(list(folders.glob("*/*/note.txt"))) == 3, process.communicate()
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=10)
    [file] = session_files(tmp_path)
    check = run(tmp_path, "sessions", "check", str(file))
    assert check.returncode == 0, check.stdout + check.stderr
    assert folder_tree(work) == before
    _kill_inside(folders)  # the orphaned sleeps, by their ids


def _kill_inside(folder: Path) -> None:
    """Kill the processes whose working folder is inside `folder` (by pid)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if cwd.startswith(str(folder)):
            with contextlib.suppress(OSError):
                os.kill(int(proc.name), signal.SIGKILL)


def test_the_html_export_labels_the_attempts_and_escapes_a_hostile_model_name(tmp_path):
    from html_page import rendered
    from mulligan.app.exports.html import to_html

    project(tmp_path)
    models = [a for k in (1, 2) for a in ("--model", script(tmp_path, *writes(k)))]
    assert run(tmp_path, "-p", "Fix add.", "--attempts", "2", *models, "--check",
               "python3 test_calc.py").returncode == 0
    [file] = session_files(tmp_path)
    log = SessionLog(file)
    entries = log.entries()
    first = next(e for e in entries if e.get("attempt", {}).get("index") == 1)
    hostile = dict(first, attempt={**first["attempt"], "model": "<script>x</script>"})
    hostile_file = tmp_path / "hostile.jsonl"  # the page is made from the file it embeds
    hostile_file.write_text("".join(json.dumps(hostile if e is first else e) + "\n"
                                    for e in entries))
    page_file = tmp_path / "page.html"
    page_file.write_text(to_html([hostile if e is first else e for e in entries], log.tip(),
                                 title="t", session=hostile_file.read_bytes(),
                                 file_name="s.jsonl"))
    parts = rendered(page_file)  # as Chromium draws it
    page = parts["html"] + " ".join(parts["rows"]) + " ".join(parts["cards"].values())
    assert "attempt 2/2 · scripted/script1.json · check passed" in page
    assert "&lt;script&gt;x&lt;/script&gt; · check passed" in page and "<script>x" not in page


def test_a_check_that_runs_too_long_is_killed_and_recorded_as_exit_124(tmp_path):
    from mulligan.app.attempts.run import run_check

    done = run_check("echo begun; sleep 30", tmp_path, timeout=0.5)
    assert done["exit_code"] == 124 and done["output"].startswith("begun\n")
    assert "timed out after 0.5 s" in done["output"] and done["duration_ms"] < 5000
    assert run_check("exit 3", tmp_path)["exit_code"] == 3


def test_gc_removes_attempt_folders_a_day_old_and_keeps_newer_ones(tmp_path):
    project(tmp_path)
    old = tmp_path / "home" / "attempts" / "old-group" / "1"
    new = tmp_path / "home" / "attempts" / "new-group" / "1"
    for folder in (old, new):
        folder.mkdir(parents=True)
        (folder / "f.txt").write_text("x")
    (old / "locked").mkdir(mode=0o500)  # a read-only folder an attempt left: still removed
    day_ago = time.time() - 2 * 86400
    os.utime(old.parent, (day_ago, day_ago))
    done = run(tmp_path, "gc")
    assert done.returncode == 0 and "1 attempt group(s)" in done.stdout
    assert not old.parent.exists() and new.is_dir()


SANDBOX_PROBLEM = sandbox_problem()
if SANDBOX_PROBLEM is not None and os.environ.get("CI") == "true":
    raise RuntimeError(f"CI must run the sandbox tests: {SANDBOX_PROBLEM}")


@pytest.mark.skipif(SANDBOX_PROBLEM is not None, reason=SANDBOX_PROBLEM or "")
def test_under_the_sandbox_an_attempt_reads_the_shared_venv_and_writes_only_its_folder(
        tmp_path):
    work = project(tmp_path)
    (work / ".gitignore").write_text(".venv/\n")
    (work / ".venv").mkdir()
    (work / ".venv" / "marker").write_text("the venv\n")
    command = (f"cat .venv/marker; touch .venv/new 2>/dev/null || echo venv-read-only; "
               f"echo x > {work}/calc.py 2>/dev/null; echo mine > own")
    steps = [reply(call("bash", {"command": command}, id="b1")), say("done")]
    done = run(tmp_path, "-p", "Go.", "--attempts", "1", "--sandbox", "--model",
               script(tmp_path, *steps))
    assert done.returncode == 0, done.stderr
    [file] = session_files(tmp_path)
    result = next(e["message"]["content"] for e in SessionLog(file).entries()
                  if e.get("type") == "message" and e["message"]["role"] == "toolResult")
    assert "the venv" in result and "venv-read-only" in result
    assert (work / "calc.py").read_text() == ORIGINAL and not (work / ".venv" / "new").exists()
    [folder] = (tmp_path / "home" / "attempts").glob("*/1")
    assert (folder / "own").read_text() == "mine\n" and (folder / ".venv").is_symlink()


def test_the_slash_commands_compare_show_the_table_and_refuse_by_name(tmp_path):
    from mulligan.frontends.slash import run_command

    work = project(tmp_path)
    models = {f"m{k}": ScriptedModel(writes(k)) for k in (1, 2, 3)}
    controller = _controller(tmp_path, work, models)
    assert run_command(controller, "/attempts").lines[0].startswith("no attempts")
    started = run_command(controller, "/try 3 --model m1 --model m2 --model m3 Fix add.")
    assert not started.error and "permission mode auto" in started.lines[0]
    attempts = running(controller)
    assert attempts is not None and attempts.wait(timeout=60)
    table = run_command(controller, "/attempts")
    assert [line.split()[:2] for line in table.lines[1:4]] == [
        [str(k), "ScriptedModel"] for k in (1, 2, 3)] and table.lines[4].startswith("/compare")
    compared = run_command(controller, "/compare 1 3")
    assert compared.diff and "-    return a + b" in compared.lines and \
        "+    return a * b" in compared.lines
    assert run_command(controller, "/adopt 9").error
    assert run_command(controller, "/stop").lines == ["no attempts are running"]
    adopted = run_command(controller, "/adopt 3")
    assert not adopted.error and (work / "calc.py").read_text() == BODIES[3]
    controller.close()
