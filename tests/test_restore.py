"""Restores never lose a byte that was there (issue 23, item 1): ignore rules read as they
were at each snapshot, skipped files unknown rather than absent, every replaced path compared
with what the plan saw, swaps crash-safe, Mulligan's own files never snapshotted nor
restored, gc keeping every session's snapshots. Real files, real processes, a scripted model."""

from __future__ import annotations

import json
import mmap
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from html_page import rendered
from mulligan.app import Controller
from mulligan.app.rewind.back import back_plan
from mulligan.app.sessions.catalog import new_session_path
from mulligan.app.settings import Settings
from mulligan.app.workspace.checkpoints import Checkpoints
from mulligan.app.workspace.restore import RestoreRefused, apply
from mulligan.app.workspace.store.snapshots import Store
from mulligan.session import SessionLog
from mulligan.testing import ScriptedModel, call, reply, say
from mulligan.tools import coding_tools

RUN = [sys.executable, "-m", "mulligan"]


def session(tmp_path: Path, *script, store: Store | None = None,
            home: Path | None = None, file: Path | None = None) -> Controller:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    home = home or tmp_path / "home"
    return Controller(ScriptedModel(list(script)), coding_tools(work),
                      Settings(cwd=work, home=home), file or new_session_path(home, work),
                      checkpoints=Checkpoints(store or Store(home), work))


def bash(command: str, id: str = "b1"):
    return reply(call("bash", {"command": command}, id=id))


def write(path: str, content: str, id: str = "w1"):
    return reply(call("write", {"path": path, "content": content}, id=id))


def ran(tmp_path: Path, files: dict[str, str], command: str) -> tuple[Controller, Path]:
    """A folder holding `files`, and a session whose one turn ran `command` in it."""
    work = tmp_path / "work"
    work.mkdir()
    for name, text in files.items():
        (work / name).write_text(text)
    c = session(tmp_path, bash(command), say("ok"))
    list(c.run_prompt("go"))
    assert c.checkpoints is not None and c.log is not None
    return c, work


def env_for(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return {**env, "MULLIGAN_HOME": str(home)}


# ---- ignore rules, read as they were ----------------------------------------------------

def test_an_agent_dropping_an_ignore_rule_never_gets_the_users_ignored_files_deleted(
        tmp_path):
    """The reproduction: `.gitignore` loses `data/`, then `sessions back FILE e1 --files`."""
    work, home = tmp_path / "work", tmp_path / "home"
    (work / "data").mkdir(parents=True)
    (work / ".gitignore").write_text("data/\n*.log\n")
    for n in range(50):
        (work / "data" / f"table-{n:02}.csv").write_text(f"a,b\n{n},{n * n}\n")
    script = tmp_path / "s.json"
    script.write_text(json.dumps([bash("printf '*.log\\n' > .gitignore"), "done"]))
    subprocess.run([*RUN, "-p", "tidy", "--model", f"scripted:{script}"], cwd=work,
                   env=env_for(home), check=True, capture_output=True)
    (file,) = (home / "sessions").glob("*/*.jsonl")
    back = subprocess.run([*RUN, "sessions", "back", str(file), "e1", "--files"], cwd=work,
                          env=env_for(home), capture_output=True, text=True)
    assert back.returncode == 0, back.stderr
    assert (work / ".gitignore").read_text() == "data/\n*.log\n"
    assert len(list((work / "data").glob("*.csv"))) == 50
    assert (work / "data" / "table-07.csv").read_text() == "a,b\n7,49\n"
    # Neither were they "changed" by the agent: they only became visible.
    result = next(e for e in SessionLog(file).entries() if e.get("workspace", {}).get("before"))
    assert result["workspace"]["changed"] == [".gitignore"]


def test_a_file_the_user_edits_after_the_agent_ignored_it_is_never_overwritten(tmp_path):
    work = tmp_path / "work"
    (work / "data").mkdir(parents=True)
    (work / "data" / "x.csv").write_text("original\n")
    c = session(tmp_path, bash("echo '*.csv' >> .gitignore"), say("ok"))
    list(c.run_prompt("ignore the tables"))
    (work / "data" / "x.csv").write_text("the user's edit\n")
    done = c.back("e1", files="restore")
    assert done.restored == [".gitignore"]
    assert (work / "data" / "x.csv").read_text() == "the user's edit\n"
    assert [p for p, _ in done.not_restorable] == ["data/x.csv"]
    assert not (work / ".gitignore").exists()


def test_a_file_the_user_made_while_it_was_ignored_is_not_the_agents_to_remove(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / ".gitignore").write_text("*.log\n")
    c = session(tmp_path, write("a.txt", "agent\n"), say("ok"),
                bash("rm .gitignore && mkdir -p build && echo o > build/out", id="b2"),
                say("ok"))
    list(c.run_prompt("first"))
    (work / "debug.log").write_text("the user's log\n")  # ignored: no snapshot lists it
    list(c.run_prompt("build"))
    done = c.back("e1", files="restore")
    assert done.restored == [".gitignore", "a.txt", "build", "build/out"]  # the agent's
    assert (work / "debug.log").read_text() == "the user's log\n"
    assert ("debug.log", "shown or hidden by an ignore rule's change, never changed by the "
                         "agent; left as it is") in done.not_restorable


def test_a_file_written_just_before_the_session_and_deleted_by_the_agent_comes_back(
        tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "fresh.txt").write_text("written a moment ago\n")  # too new for the stat cache
    c = session(tmp_path, bash("rm fresh.txt"), say("ok"))
    list(c.run_prompt("remove"))
    assert c.back("e1", files="restore").restored == ["fresh.txt"]
    assert (work / "fresh.txt").read_text() == "written a moment ago\n"


# ---- what a snapshot skipped is unknown, never absent ----------------------------------

def test_a_file_over_the_size_cap_is_unknown_refused_by_name_and_overwrite_keeps_a_copy(
        tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "big.txt").write_text("small at first\n")
    store = Store(tmp_path / "home", max_file=1000)
    c = session(tmp_path, bash("yes agent | head -c 3000 > big.txt"), say("ok"), store=store)
    list(c.run_prompt("grow it"))
    users = b"the user's edit\n" * 2000  # 32 KB: over the cap, never in a snapshot walk
    (work / "big.txt").write_bytes(users)
    with pytest.raises(RestoreRefused, match="big.txt: unknown when the session last saw it"):
        c.back("e1", files="restore")
    assert (work / "big.txt").read_bytes() == users
    done = c.back("e1", files="overwrite")
    assert (work / "big.txt").read_text() == "small at first\n"
    copy = store.load(done.safety).files["big.txt"]
    assert store.read_blob(copy[4]) == users


def test_a_socket_where_a_file_was_is_never_replaced(tmp_path):
    import socket

    work = tmp_path / "work"
    work.mkdir()
    (work / "s").write_text("file\n")
    c = session(tmp_path, bash("rm s"), say("ok"))
    list(c.run_prompt("remove it"))
    server = socket.socket(socket.AF_UNIX)
    os.chdir(work)  # a socket path must be short
    server.bind("s")
    try:
        with pytest.raises(RestoreRefused, match="s: a pipe, socket or device now"):
            c.back("e1", files="restore")
        done = c.back("e1", files="overwrite")
        assert done.kept == ["s"]
    finally:
        server.close()


# ---- the gap between planning and applying ----------------------------------------------

def test_a_write_between_plan_and_apply_is_kept_not_lost(tmp_path):
    work = tmp_path / "work"
    c = session(tmp_path, write("a.txt", "agent a\n"), write("b.txt", "agent b\n", id="w2"),
                say("ok"))
    list(c.run_prompt("two files"))
    assert c.checkpoints is not None and c.log is not None
    chosen = back_plan(c.log, c.checkpoints, "e1")
    assert chosen is not None and chosen.changes == ["a.txt", "b.txt"]
    (work / "a.txt").write_text("a write racing the restore\n")
    done = apply(c.checkpoints.store, work, chosen)
    assert (work / "a.txt").read_text() == "a write racing the restore\n"
    assert not (work / "b.txt").exists()
    assert done.raced == ["a.txt"] and done.kept == ["a.txt"] and done.restored == ["b.txt"]


def test_an_mmap_change_with_its_mtime_restored_is_caught_by_the_same_comparison(tmp_path):
    work = tmp_path / "work"
    c = session(tmp_path, write("m.bin", "agent data\n"), say("ok"))
    list(c.run_prompt("write"))
    assert c.checkpoints is not None and c.log is not None
    chosen = back_plan(c.log, c.checkpoints, "e1")
    assert chosen is not None
    info = os.stat(work / "m.bin")
    with open(work / "m.bin", "r+b") as handle, mmap.mmap(handle.fileno(), 0) as mapped:
        mapped[0:5] = b"USER "  # no write(): inotify sees nothing
        mapped.flush()
    os.utime(work / "m.bin", ns=(info.st_atime_ns, info.st_mtime_ns))
    done = apply(c.checkpoints.store, work, chosen)
    assert (work / "m.bin").read_bytes() == b"USER  data\n" and done.kept == ["m.bin"]


def test_a_file_created_between_plan_and_apply_where_the_restore_creates_one_is_kept(
        tmp_path):
    c, work = ran(tmp_path, {"gone.txt": "was here\n"}, "rm gone.txt")
    assert c.checkpoints is not None and c.log is not None
    chosen = back_plan(c.log, c.checkpoints, "e1")
    assert chosen is not None
    (work / "gone.txt").write_text("new by the user\n")
    done = apply(c.checkpoints.store, work, chosen)
    assert (work / "gone.txt").read_text() == "new by the user\n" and done.kept == ["gone.txt"]


def test_what_a_killed_restore_with_this_process_id_left_after_the_plan_is_replaced(tmp_path):
    # A temporary name is not looked for before each creation (one lstat a path): one
    # already there (a killed restore of a process that had this id) is removed and made
    # again, for a file, a link and a folder alike.
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("the agent's before\n")
    (work / "ln").symlink_to("a.txt")
    (work / "d").write_text("a file, then a folder\n")
    c = session(tmp_path, bash("echo after > a.txt && rm ln d && mkdir ln d"), say("ok"))
    list(c.run_prompt("change"))
    assert c.checkpoints is not None and c.log is not None
    chosen = back_plan(c.log, c.checkpoints, "e1")
    assert chosen is not None and chosen.files == ["a.txt", "d", "ln"]
    for name in ("a.txt", "ln", "d"):
        (work / f".{name}.mulligan-restore-{os.getpid()}").write_text("left by a kill\n")
    done = apply(c.checkpoints.store, work, chosen)
    assert done.restored == ["a.txt", "d", "ln"]
    assert (work / "a.txt").read_text() == "the agent's before\n"
    assert os.readlink(work / "ln") == "a.txt"
    assert (work / "d").read_text() == "a file, then a folder\n"
    assert not list(work.rglob("*mulligan-restore*"))


def test_what_a_restore_killed_after_its_last_swap_left_goes_though_nothing_is_left_to_do(
        tmp_path):
    c, work = ran(tmp_path, {"a.txt": "before\n"}, "echo after > a.txt")
    assert c.checkpoints is not None and c.log is not None
    # A restore killed once every path was swapped, before it removed what it swapped out
    # (and before it wrote its entry): the folder is the target's, a temporary name beside.
    (work / "a.txt").write_text("before\n")
    leftover = work / f".a.txt.mulligan-restore-{_dead_pid()}"
    leftover.write_text("after\n")
    assert back_plan(c.log, c.checkpoints, "e1") is None  # nothing to apply
    assert not leftover.exists() and (work / "a.txt").read_text() == "before\n"


def _dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


# ---- swaps and links --------------------------------------------------------------------

def test_a_folder_replaced_by_a_file_and_a_file_by_a_folder_both_come_back(tmp_path):
    work = tmp_path / "work"
    (work / "pkg").mkdir(parents=True)
    (work / "pkg" / "a.py").write_text("a\n")
    (work / "notes").write_text("a file\n")
    (work / "ln").symlink_to("pkg")
    c = session(tmp_path, bash("rm -r pkg notes ln && echo flat > pkg && mkdir notes && "
                               "echo in > notes/n && mkdir ln"), say("ok"))
    list(c.run_prompt("swap"))
    done = c.back("e1", files="restore")
    assert (work / "pkg" / "a.py").read_text() == "a\n"
    assert (work / "notes").read_text() == "a file\n"
    assert os.readlink(work / "ln") == "pkg"
    assert not list(work.rglob("*mulligan-restore*"))
    assert "pkg" in done.restored


def test_a_folder_holding_an_ignored_file_is_not_removed_but_named(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / ".gitignore").write_text("*.pyc\n")
    (work / "thing").write_text("a file\n")
    c = session(tmp_path, bash("rm thing && mkdir thing && echo x > thing/m.py"), say("ok"))
    list(c.run_prompt("make a folder"))
    (work / "thing" / "m.pyc").write_text("compiled\n")
    with pytest.raises(RestoreRefused, match="thing: a folder holding m.pyc"):
        c.back("e1", files="restore")
    assert (work / "thing" / "m.pyc").exists() and (work / "thing" / "m.py").exists()


# ---- Mulligan's own files ----------------------------------------------------------------

def test_a_home_inside_the_working_folder_is_never_snapshotted_nor_restored(tmp_path):
    work = tmp_path / "work"
    home = work / ".mulligan"
    c = session(tmp_path, write("a.txt", "agent\n"), say("ok"), home=home)
    list(c.run_prompt("go"))
    file = c.session_file
    assert file is not None and file.is_relative_to(home)
    store = c.checkpoints.store if c.checkpoints else None
    assert store is not None
    for tree_id in store.tree_ids():
        assert not [p for p in store.load(tree_id).files if p.startswith(".mulligan")]
    recorded = file.read_bytes()
    done = c.back("e1", files="overwrite")
    assert done.restored == ["a.txt"]
    assert file.read_bytes().startswith(recorded) and (home / "checkpoints").is_dir()


def test_a_session_file_inside_the_folder_is_never_snapshotted(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    c = session(tmp_path, write("a.txt", "agent\n"), say("ok"), file=work / "my.jsonl")
    list(c.run_prompt("go"))
    assert c.checkpoints is not None
    store = c.checkpoints.store
    for tree_id in store.tree_ids():
        assert not [p for p in store.load(tree_id).files if p.startswith("my.jsonl")]
    done = c.back("e1", files="overwrite")
    assert done.restored == ["a.txt"] and (work / "my.jsonl").exists()


def test_gc_keeps_the_snapshots_of_a_session_file_kept_outside_the_home(tmp_path):
    work, home = tmp_path / "work", tmp_path / "home"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    c = session(tmp_path, write("a.txt", "agent\n"), say("ok"), file=elsewhere / "s.jsonl")
    list(c.run_prompt("go"))
    c.close()
    assert c.checkpoints is not None
    store = c.checkpoints.store
    old = time.time() - 7200  # past gc's grace hour
    for path in store.root.rglob("*"):
        os.utime(path, (old, old))
    done = subprocess.run([*RUN, "gc"], cwd=work, env=env_for(home), capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    assert "freed 0 snapshot(s)" in done.stdout
    c2 = session(tmp_path, say("ok"), file=elsewhere / "s.jsonl")
    assert c2.back("e1", files="restore").restored == ["a.txt"]
    assert not (work / "a.txt").exists()


# ---- hostile session content is data (issue 23, item 2) -----------------------------------

def test_a_crafted_session_cannot_read_a_file_outside_the_store_into_an_export_or_the_folder(
        tmp_path):
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    secret = tmp_path / "secret.txt"  # stands for /etc/passwd
    secret.write_text("root:x:0:0:the secret\n")
    (home / "checkpoints" / "trees").mkdir(parents=True)  # a store in use
    # Manifests outside the store, named by path-like "ids"; the second names the secret by
    # a path-like "hash".
    (tmp_path / "evil.json").write_text(json.dumps({"files": {}}))
    (tmp_path / "evil2.json").write_text(json.dumps(
        {"files": {"stolen.txt": ["file", 420, 0, 0, "x" * 2 + str(secret)]}}))
    entries = [
        {"type": "session_info", "cwd": str(work), "workspace": {"after": "../../../evil"}},
        {"type": "message", "message": {"role": "user", "content": "go"}},
        {"type": "message", "message": {
            "role": "assistant", "stop_reason": "toolUse", "content": [
                {"type": "toolCall", "id": "c1", "name": "bash",
                 "arguments": {"command": "true"}}]}},
        {"type": "message", "message": {"role": "toolResult", "tool_call_id": "c1",
                                        "tool_name": "bash", "content": "", "is_error": False},
         "workspace": {"before": "../../../evil", "after": "../../../evil2",
                       "changed": ["stolen.txt"], "outside": []}},
    ]
    file = tmp_path / "crafted.jsonl"
    with file.open("w") as out:
        for n, entry in enumerate(entries, 1):
            entry = {"id": f"e{n}", "parent_id": f"e{n - 1}" if n > 1 else None,
                     "timestamp": "2026-12-01T00:00:00Z", **entry}
            out.write(json.dumps(entry) + "\n")
        out.write(json.dumps({"id": "e5", "type": "branch", "parent_id": "e1",
                              "timestamp": "2026-12-01T00:00:00Z"}) + "\n")
    back = subprocess.run([*RUN, "sessions", "back", str(file), "e4", "--files"], cwd=work,
                          env=env_for(home), capture_output=True, text=True)
    assert back.returncode == 1 and "is not 40 hex digits" in back.stderr, back.stderr
    assert not (work / "stolen.txt").exists()
    page = tmp_path / "page.html"
    export = subprocess.run([*RUN, "sessions", "export", str(file), "--format", "html", "-o",
                             str(page)], cwd=work, env=env_for(home), capture_output=True,
                            text=True)
    assert export.returncode == 0, export.stderr
    parts = rendered(page)  # what Chromium draws, and the embedded file
    assert parts["cards"] and "the secret" not in json.dumps(parts)


# ---- the restore question, exact; a three-way merge (issue 24, item 4) ------------------

def test_the_plan_lists_exactly_the_files_the_part_left_changed(tmp_path):
    c = session(tmp_path, write("first.txt", "attempt one\n"), say("ok"),
                write("second.txt", "attempt two\n", id="w2"), say("ok"))
    list(c.run_prompt("one"))  # e2..e5
    c.back("e1", files="keep")  # first.txt stays, as the user chose
    list(c.run_prompt("two"))
    assert c.log is not None
    chosen = c.back_plan("e1")
    assert chosen is not None and chosen.files == ["second.txt"] and not chosen.forward
    assert [rel for rel, _ in chosen.left] == ["first.txt"]
    done = c.back("e1", files="restore")
    assert done.restored == ["second.txt"]
    assert (tmp_path / "work" / "first.txt").read_text() == "attempt one\n"


def test_going_forward_is_worded_as_bringing_the_attempts_files_back(tmp_path):
    from mulligan.app.rewind.back import plan_lines

    c = session(tmp_path, write("plan.txt", "attempt one\n"), say("ok"),
                write("other.txt", "attempt two\n", id="w2"), say("ok"))
    list(c.run_prompt("one"))
    c.back("e1", files="restore")
    list(c.run_prompt("two"))
    chosen = c.back_plan("e5")
    assert chosen is not None and chosen.forward and chosen.files == ["other.txt", "plan.txt"]
    assert plan_lines(chosen)[0].startswith("bring this attempt's files back")


TEN = "".join(f"line {n}\n" for n in range(1, 11))


def test_a_merge_takes_the_agents_change_out_and_keeps_the_users(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "f.txt").write_text(TEN)
    c = session(tmp_path, bash("sed -i 's/line 2$/line 2 by the agent/' f.txt"), say("ok"))
    list(c.run_prompt("edit"))
    (work / "f.txt").write_text((work / "f.txt").read_text().replace("line 8\n", "mine 8\n"))
    chosen = c.back_plan("e1")
    assert chosen is not None and list(chosen.merges) == ["f.txt"]
    with pytest.raises(RestoreRefused, match="f.txt: changed outside the agent"):
        c.back("e1", files="restore")
    done = c.back("e1", files="merge")
    assert (work / "f.txt").read_text() == TEN.replace("line 8\n", "mine 8\n")
    assert done.merged == ["f.txt"] and done.restored == [] and done.kept == []
    from mulligan.app.rewind.back import describe
    assert any(line.startswith("merged 1 file(s)") for line in describe(done))


def test_a_merge_where_both_touched_the_same_lines_is_refused_by_name(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "f.txt").write_text(TEN)
    (work / "g.txt").write_text("g\n")
    c = session(tmp_path, bash("sed -i 's/line 2$/line 2 by the agent/' f.txt && "
                               "echo agent > g.txt"), say("ok"))
    list(c.run_prompt("edit"))
    mine = (work / "f.txt").read_text().replace("line 2 by the agent\n", "line 2 mine\n")
    (work / "f.txt").write_text(mine)
    with pytest.raises(RestoreRefused, match="f.txt: your edit and the agent's change touch "
                                             r"the same lines \(lines 2-2 of yours\)"):
        c.back("e1", files="merge")
    assert (work / "f.txt").read_text() == mine and (work / "g.txt").read_text() == "agent\n"


def test_sessions_back_merge_from_the_shell(tmp_path):
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    (work / "f.txt").write_text(TEN)
    script = tmp_path / "s.json"
    script.write_text(json.dumps([bash("sed -i 's/line 2$/line 2 by the agent/' f.txt"),
                                  "done"]))
    subprocess.run([*RUN, "-p", "go", "--model", f"scripted:{script}"], cwd=work,
                   env=env_for(home), check=True, capture_output=True)
    (file,) = (home / "sessions").glob("*/*.jsonl")
    (work / "f.txt").write_text((work / "f.txt").read_text().replace("line 9\n", "mine 9\n"))
    done = subprocess.run([*RUN, "sessions", "back", str(file), "e1", "--files", "--merge"],
                          cwd=work, env=env_for(home), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "merged 1 file(s)" in done.stdout
    assert (work / "f.txt").read_text() == TEN.replace("line 9\n", "mine 9\n")


# ---- no full walk before the first model call (issue 29, item 4) --------------------------

def test_a_print_run_walks_nothing_before_its_first_model_call(tmp_path):
    """A -p run that changes no file takes no snapshot at all; one that does takes its first
    one when the first file-changing call runs, and going back to e1 still restores."""
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    (work / "kept.txt").write_text("the user's\n")
    quiet = tmp_path / "quiet.json"
    quiet.write_text(json.dumps(["just an answer"]))
    subprocess.run([*RUN, "-p", "hi", "--model", f"scripted:{quiet}"], cwd=work,
                   env=env_for(home), check=True, capture_output=True)
    assert not list((home / "checkpoints").glob("trees/*.json"))
    busy = tmp_path / "busy.json"
    busy.write_text(json.dumps([write("new.txt", "agent\n"), "done"]))
    subprocess.run([*RUN, "-p", "go", "--model", f"scripted:{busy}"], cwd=work,
                   env=env_for(home), check=True, capture_output=True)
    file = max((home / "sessions").glob("*/*.jsonl"), key=lambda f: f.stat().st_mtime)
    assert "workspace" not in SessionLog(file).entries()[0]
    back = subprocess.run([*RUN, "sessions", "back", str(file), "e1", "--files"], cwd=work,
                          env=env_for(home), capture_output=True, text=True)
    assert back.returncode == 0, back.stderr
    assert not (work / "new.txt").exists() and (work / "kept.txt").read_text() == "the user's\n"
