"""Workspace checkpoints, with real files, real bash processes and a scripted model: going
back puts the folder back exactly, bash included, and refuses rather than overwrite anything
the agent did not write."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from mulligan.app import Controller
from mulligan.app.sessions.catalog import new_session_path, referenced_snapshots
from mulligan.app.settings import Settings
from mulligan.app.workspace.checkpoints import Checkpoints
from mulligan.app.workspace.restore import RestoreRefused
from mulligan.app.workspace.store.snapshots import Store, Unsafe
from mulligan.session import SessionLog
from mulligan.testing import ScriptedModel, call, reply, say
from mulligan.tools import coding_tools


def session(tmp_path: Path, *script) -> Controller:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    home = tmp_path / "home"
    return Controller(ScriptedModel(list(script)), coding_tools(work),
                      Settings(cwd=work, home=home), new_session_path(home, work),
                      checkpoints=Checkpoints(Store(home), work))


def bash(command: str, id: str = "b1"):
    return reply(call("bash", {"command": command}, id=id))


def write(path: str, content: str, id: str = "w1"):
    return reply(call("write", {"path": path, "content": content}, id=id))


def tree(folder: Path) -> dict[str, object]:
    """What a folder holds: content, mode and kind of everything in it."""
    found: dict[str, object] = {}
    for dirpath, dirs, files in os.walk(folder):
        for name in dirs + files:
            full = Path(dirpath) / name
            rel = full.relative_to(folder).as_posix()
            info = full.lstat()
            if stat.S_ISLNK(info.st_mode):
                found[rel] = ("link", os.readlink(full))
            elif stat.S_ISDIR(info.st_mode):
                found[rel] = ("dir", stat.S_IMODE(info.st_mode))
            else:
                found[rel] = ("file", stat.S_IMODE(info.st_mode), full.read_bytes())
    return found


def test_going_back_with_the_files_undoes_a_write_and_a_bash_command(tmp_path):
    c = session(tmp_path, write("NOTES.md", "notes\n"), bash("echo x > made-by-bash.txt"),
                say("done"))
    (tmp_path / "work" / "keep.txt").write_text("mine\n")
    before = tree(tmp_path / "work")
    list(c.run_prompt("take notes"))
    assert (tmp_path / "work" / "NOTES.md").exists()
    assert (tmp_path / "work" / "made-by-bash.txt").exists()
    done = c.back("e1", files="restore")
    assert sorted(done.restored) == ["NOTES.md", "made-by-bash.txt"]
    assert tree(tmp_path / "work") == before
    last = SessionLog(c.session_file).entries()[-1]
    assert last["type"] == "workspace_restore" and last["workspace"]["safety"]


def test_a_tool_result_entry_records_its_snapshots_and_what_it_changed(tmp_path):
    c = session(tmp_path, bash("mkdir -p src && echo 1 > src/a.py"), say("ok"))
    list(c.run_prompt("go"))
    result = next(e for e in SessionLog(c.session_file).entries()
                  if e.get("message", {}).get("role") == "toolResult")
    meta = result["workspace"]
    assert meta["changed"] == ["src", "src/a.py"] and meta["before"] != meta["after"]
    assert "workspace" not in result["message"]  # never sent to the model


def test_going_forward_to_an_abandoned_attempt_brings_its_files_back(tmp_path):
    c = session(tmp_path, write("plan.txt", "attempt one\n"), say("done"),
                write("plan.txt", "attempt two\n", id="w2"), say("done too"))
    list(c.run_prompt("first"))  # e2..e5
    c.back("e1", files="restore")
    list(c.run_prompt("second"))
    assert (tmp_path / "work" / "plan.txt").read_text() == "attempt two\n"
    c.back("e5", files="restore")  # the end of attempt one, on another branch
    assert (tmp_path / "work" / "plan.txt").read_text() == "attempt one\n"


def test_a_file_changed_outside_the_agent_refuses_the_whole_restore_and_changes_nothing(
        tmp_path):
    c = session(tmp_path, write("a.txt", "agent a\n"), write("b.txt", "agent b\n", id="w2"),
                say("done"))
    list(c.run_prompt("write two"))
    (tmp_path / "work" / "a.txt").write_text("user edit\n")
    folder, file = tree(tmp_path / "work"), c.session_file.read_bytes()
    with pytest.raises(RestoreRefused, match="a.txt: changed outside the agent"):
        c.back("e1", files="restore")
    assert tree(tmp_path / "work") == folder and c.session_file.read_bytes() == file


def test_keep_mine_restores_the_rest_and_overwrite_keeps_a_safety_copy(tmp_path):
    c = session(tmp_path, write("a.txt", "agent a\n"), write("b.txt", "agent b\n", id="w2"),
                say("done"))
    list(c.run_prompt("write two"))
    (tmp_path / "work" / "a.txt").write_text("user edit\n")
    done = c.back("e1", files="keep-mine")
    assert done.kept == ["a.txt"] and done.restored == ["b.txt"]
    assert (tmp_path / "work" / "a.txt").read_text() == "user edit\n"
    assert not (tmp_path / "work" / "b.txt").exists()
    store = c.checkpoints.store
    safety = store.load(done.safety).files["a.txt"]
    assert store.read_blob(safety[4]) == b"user edit\n"


def test_a_users_change_the_session_saw_is_not_undone_later(tmp_path):
    c = session(tmp_path, write("a.txt", "agent\n"), bash("true", id="b2"), say("ok"))
    (tmp_path / "work" / "notes.txt").write_text("v1\n")
    list(c.run_prompt("go"))  # write a.txt; the user edits notes.txt before bash runs?
    (tmp_path / "work" / "notes.txt").write_text("v2 by the user\n")
    c2 = session(tmp_path, bash("true", id="b3"), say("ok"))
    c.close()
    c2.resume(c.session_file)
    list(c2.run_prompt("again"))  # the bash call's before-snapshot sees the user's change
    done = c2.back("e1", files="restore")  # the agent never changed notes.txt: left alone
    assert done.restored == ["a.txt"] and done.kept == ["notes.txt"]
    assert (tmp_path / "work" / "notes.txt").read_text() == "v2 by the user\n"


def test_two_sessions_in_one_folder_never_overwrite_each_other(tmp_path):
    first = session(tmp_path, write("shared.txt", "from the first\n"), say("ok"))
    list(first.run_prompt("one"))
    second = session(tmp_path, write("shared.txt", "from the second\n", id="w9"), say("ok"))
    list(second.run_prompt("two"))
    with pytest.raises(RestoreRefused, match="shared.txt"):
        first.back("e1", files="restore")
    assert (tmp_path / "work" / "shared.txt").read_text() == "from the second\n"


def test_binary_links_modes_folders_and_odd_names_come_back_exactly(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "bin.dat").write_bytes(bytes(range(256)) * 4)
    (work / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (work / "run.sh").chmod(0o755)
    (work / "empty dir").mkdir()
    (work / "dossier é").mkdir()
    (work / "dossier é" / "naïve name.txt").write_text("ü\n")
    (work / "link").symlink_to("run.sh")
    (work / "outside").symlink_to("/etc")  # a link out of the folder: kept as a link
    (work / "becomes-folder").write_text("a file at first\n")
    before = tree(work)
    c = session(tmp_path, bash(
        "rm -r 'empty dir' 'dossier é' link && chmod -x run.sh && printf 'x' >> bin.dat"
        " && rm becomes-folder && mkdir becomes-folder && echo in > becomes-folder/f"
        " && ln -sfn bin.dat outside && mkdir -p new/deep && touch new/deep/t"), say("ok"))
    list(c.run_prompt("mess it up"))
    assert tree(work) != before
    c.back("e1", files="restore")
    assert tree(work) == before
    assert os.readlink(work / "outside") == "/etc"


def test_names_and_link_targets_not_utf8_are_listed_as_skipped_and_never_touched(tmp_path):
    """A manifest is JSON: a name (or link target) that is not UTF-8 cannot be in it. Such a
    path is listed as skipped under its escaped name, the session goes on, and going back
    leaves it exactly as it is while restoring the rest."""
    c = session(tmp_path, bash("printf x > $'bad\\xff.txt' && mkdir $'d\\xfe' && "
                               "echo y > $'d\\xfe/in.txt' && ln -s $'t\\xfe' link && "
                               "echo ok > ok.txt"), say("done"))
    list(c.run_prompt("make odd names"))
    work = os.fsencode(tmp_path / "work")
    made = sorted(os.listdir(work))
    assert made == sorted([b"bad\xff.txt", b"d\xfe", b"link", b"ok.txt"])
    result = next(e for e in SessionLog(c.session_file).entries()
                  if e.get("message", {}).get("role") == "toolResult")
    assert result["workspace"]["changed"] == ["ok.txt"]
    after = c.checkpoints.store.load(result["workspace"]["after"])
    assert after.skipped == {"bad\\xff.txt": "its name is not valid UTF-8: not recorded",
                             "d\\xfe": "its name is not valid UTF-8: not recorded",
                             "link": "a link whose target is not valid UTF-8: not recorded"}
    done = c.back("e1", files="restore")
    assert done.restored == ["ok.txt"]
    assert sorted(os.listdir(work)) == sorted([b"bad\xff.txt", b"d\xfe", b"link"])
    assert os.readlink(os.path.join(work, b"link")) == b"t\xfe"
    assert Path(os.fsdecode(os.path.join(work, b"d\xfe", b"in.txt"))).read_bytes() == b"y\n"


def test_ignored_files_and_the_git_folder_are_never_touched(tmp_path):
    work = tmp_path / "work"
    (work / ".git" / "info").mkdir(parents=True)
    (work / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (work / ".git" / "info" / "exclude").write_text("local-only.txt\n")
    (work / ".gitignore").write_text("*.log\nbuild/\n")
    (work / "sub").mkdir()
    (work / "sub" / ".gitignore").write_text("secret.txt\n")
    c = session(tmp_path, bash("echo 1 > app.log && mkdir build && echo b > build/o && "
                               "echo s > sub/secret.txt && echo l > local-only.txt && "
                               "echo t > tracked.txt && echo x >> .git/HEAD"), say("ok"))
    list(c.run_prompt("build"))
    done = c.back("e1", files="restore")
    assert done.restored == ["tracked.txt"]
    for kept in ("app.log", "build/o", "sub/secret.txt", "local-only.txt"):
        assert (work / kept).exists(), kept
    assert (work / ".git" / "HEAD").read_text() == "ref: refs/heads/main\nx\n"


def test_going_back_keeping_the_files_records_that_they_were_kept(tmp_path):
    c = session(tmp_path, write("a.txt", "agent\n"), say("ok"))
    list(c.run_prompt("go"))
    done = c.back("e1", files="keep")
    assert done.kept == ["a.txt"] and (tmp_path / "work" / "a.txt").exists()
    last = SessionLog(c.session_file).entries()[-1]
    assert last["type"] == "workspace_restore" and last["chose"] == "keep"


def test_the_store_is_private_and_gc_frees_only_what_no_session_names(tmp_path):
    c = session(tmp_path, write("a.txt", "agent\n"), say("ok"))
    list(c.run_prompt("go"))
    store = c.checkpoints.store
    for path in store.root.rglob("*"):
        assert stat.S_IMODE(path.stat().st_mode) == (0o700 if path.is_dir() else 0o600)
    (tmp_path / "work" / "a.txt").write_text("a later state nobody recorded\n")
    orphan = store.snapshot(tmp_path / "work")
    keep = referenced_snapshots(tmp_path / "home")
    assert orphan.id not in keep
    trees, blobs, _ = store.gc(keep, grace=0)
    assert trees == 1 and blobs == 1
    c.back("e1", files="overwrite")  # what the session names still restores
    assert not (tmp_path / "work" / "a.txt").exists()


def test_home_and_root_are_never_checkpointed(tmp_path):
    store = Store(tmp_path / "home")
    for folder in (Path.home(), Path("/")):
        with pytest.raises(Unsafe):
            store.snapshot(folder)


def test_the_stat_cache_rereads_only_files_whose_stat_changed(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    for n in range(20):
        (work / f"f{n}.txt").write_text(f"{n}\n")
    old = os.stat(work / "f0.txt").st_mtime_ns - 10_000_000_000
    for n in range(20):
        os.utime(work / f"f{n}.txt", ns=(old, old))  # older than the racy window
    store = Store(tmp_path / "home")
    first = store.snapshot(work)
    blob = store.blob_path(first.files["f3.txt"][4])
    blob.write_bytes(b"tampered\n")  # a cached file is trusted, not read again
    again = store.snapshot(work)
    assert again.id == first.id
    (work / "f3.txt").write_text("changed\n")
    third = store.snapshot(work)
    assert third.files["f3.txt"][4] != first.files["f3.txt"][4]


def test_sessions_back_files_exits_1_naming_the_file_and_changes_nothing(tmp_path):
    import json
    import subprocess
    import sys

    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    script = tmp_path / "s.json"
    script.write_text(json.dumps([write("a.txt", "agent\n"), "done"]))
    env = {**os.environ, "MULLIGAN_HOME": str(home)}
    run = [sys.executable, "-m", "mulligan"]
    subprocess.run([*run, "-p", "go", "--model", f"scripted:{script}"], cwd=work, env=env,
                   check=True, capture_output=True)
    (file,) = (home / "sessions").glob("*/*.jsonl")
    (work / "a.txt").write_text("mine\n")
    recorded = file.read_bytes()
    done = subprocess.run([*run, "sessions", "back", str(file), "e1", "--files"], cwd=work,
                          env=env, capture_output=True, text=True)
    assert done.returncode == 1 and "a.txt: changed outside the agent" in done.stderr
    assert file.read_bytes() == recorded and (work / "a.txt").read_text() == "mine\n"
    kept = subprocess.run([*run, "sessions", "back", str(file), "e1", "--files", "--keep-mine"],
                          cwd=work, env=env, capture_output=True, text=True)
    assert kept.returncode == 0 and "kept as they are: a.txt" in kept.stdout


def test_a_prompt_readies_the_monitor_the_first_snapshot_uses_and_close_closes_it(tmp_path):
    """In a new process the recorder imports the store and opens its inotify instance on a
    thread as a prompt starts (25-40 ms, hidden behind the model's answer): a prompt that
    changed nothing has them ready, and closing the recorder closes the instance; the first
    snapshot uses that instance -- not a second. (A process that has them imported already
    opens the instance at the first snapshot, as before: see the last part.)"""
    import json
    import subprocess
    import sys

    script = """
import gc, json, os, sys, time
from pathlib import Path
from mulligan.app import Controller
from mulligan.app.sessions.catalog import new_session_path
from mulligan.app.settings import Settings
from mulligan.app.workspace.checkpoints import Checkpoints
from mulligan.testing import ScriptedModel, call, reply, say
from mulligan.tools import coding_tools

def inotify():
    gc.collect()
    found = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            found += os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:inotify"
        except OSError:
            pass
    return found

def store():
    from mulligan.app.workspace.store.snapshots import Store
    return Store(home)

root = Path(sys.argv[1])
seen = {}
for name, script in (("quiet", [say("nothing to change")]),
                     ("busy", [reply(call("write", {"path": "a.txt", "content": "a"}, id="w")),
                               say("done")])):
    work, home = root / name, root / "home"
    work.mkdir()
    c = Controller(ScriptedModel(script), coding_tools(work), Settings(cwd=work, home=home),
                   new_session_path(home, work), checkpoints=Checkpoints(store, work))
    before = "inotify_simple" in sys.modules
    list(c.run_prompt("go"))
    for _ in range(300):  # (the thread may still be at it: waited for, up to 3 s)
        if "inotify_simple" in sys.modules and inotify() == 1:
            break
        time.sleep(0.01)
    seen[name] = [before, "inotify_simple" in sys.modules, inotify()]
    c.close()
    seen[name].append(inotify())
print(json.dumps(seen))
"""
    if not Path("/proc/self/fd").is_dir():
        pytest.skip("no /proc/self/fd on this system")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True,
                          text=True, check=True)
    seen = json.loads(done.stdout.splitlines()[-1])
    # imported before the prompt: no; after it: yes; instances open, then after close
    assert seen["quiet"] == [False, True, 1, 0]
    assert seen["busy"] == [True, True, 1, 0]  # the first snapshot's: one, closed by close
