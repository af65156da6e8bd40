"""kill -9 at random moments during a restore (`mulligan sessions back FILE ID --files`, a real
process): afterwards every file is as it was before the restore or as the target has it, the
safety snapshot is whole, and a second `sessions back` finishes the job.

The kill moments are calibrated by the restore itself, in this run: an uninterrupted restore
is watched with inotify and its changes to the folder counted (N); each trial kills the
process right after the k-th change it makes (k drawn in 1..N-1). A loaded machine slows the
restore and the watcher alike, so every trial is killed mid-way whatever the load."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from inotify_simple import INotify, flags

from mulligan.app.workspace.store.snapshots import TEMP_MARK, Store

PYTHON = sys.executable
TRIALS = 50


def state(folder: Path) -> dict[str, bytes | None]:
    found: dict[str, bytes | None] = {}
    for dirpath, dirs, files in os.walk(folder):
        for name in dirs:
            if TEMP_MARK not in name:  # a folder a kill left beside a swapped path
                found[(Path(dirpath) / name).relative_to(folder).as_posix()] = None
        for name in files:
            path = Path(dirpath) / name
            if ".mulligan-restore-" not in name:  # a temporary file a kill left behind
                found[path.relative_to(folder).as_posix()] = path.read_bytes()
    return found


class Changes:
    """Counts the changes made under a folder (inotify on it and every folder in it)."""

    MASK = (flags.CREATE | flags.DELETE | flags.MOVED_FROM | flags.MOVED_TO | flags.MODIFY
            | flags.ATTRIB)

    def __init__(self, folder: Path) -> None:
        self.notify = INotify()
        for dirpath, _, _ in os.walk(folder):
            self.notify.add_watch(dirpath, self.MASK)
        self.count = 0

    def wait_for(self, count: int, process: subprocess.Popen[bytes]) -> None:
        while self.count < count and process.poll() is None:
            self.count += len(self.notify.read(timeout=50))

    def close(self) -> None:
        self.notify.close()


@pytest.mark.timeout(900)
def test_a_restore_killed_at_any_moment_loses_nothing_and_can_be_finished(tmp_path):
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    for n in range(120):
        (work / f"kept-{n:03}.txt").write_text(f"original {n}\n" * 200)
    for n in range(10):  # folders that become files, files that become folders
        (work / f"was-folder-{n}").mkdir()
        (work / f"was-folder-{n}" / "inside.txt").write_text(f"inside {n}\n")
        (work / f"was-file-{n}").write_text(f"a file {n}\n")
    make = ("mkdir -p gen/a gen/b && for i in $(seq 1 150); do printf 'made %s\\n' $i > "
            "gen/a/new-$i.txt; done && for f in kept-0*.txt; do echo agent >> $f; done && "
            "rm kept-11*.txt && for n in $(seq 0 9); do rm -r was-folder-$n was-file-$n && "
            "echo now a file > was-folder-$n && mkdir was-file-$n && "
            "echo in > was-file-$n/made.txt; done")
    script = tmp_path / "script.json"
    script.write_text(json.dumps([
        {"role": "assistant", "content": [{"type": "toolCall", "id": "c1", "name": "bash",
                                           "arguments": {"command": make}}],
         "stop_reason": "toolUse"}, "done"]))
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["MULLIGAN_HOME"] = str(home)
    target = state(work)
    subprocess.run([PYTHON, "-m", "mulligan", "-p", "go", "--model", f"scripted:{script}"],
                   cwd=work, env=env, check=True, capture_output=True)
    (session,) = (home / "sessions").glob("*/*.jsonl")
    before = state(work)
    assert before != target
    pristine_work, pristine_session = tmp_path / "pristine", tmp_path / "pristine.jsonl"
    shutil.copytree(work, pristine_work, symlinks=True)
    shutil.copy2(session, pristine_session)
    back = [PYTHON, "-m", "mulligan", "sessions", "back", str(session), "e1", "--files"]
    changes = Changes(work)  # the calibration: how many changes a whole restore makes
    calibration = subprocess.Popen(back, cwd=work, env=env, stdout=subprocess.DEVNULL)
    changes.wait_for(sys.maxsize, calibration)
    changes.count += len(changes.notify.read(timeout=0))
    changes.close()
    assert calibration.returncode == 0 and state(work) == target
    total = changes.count
    assert total > 300, total
    rng = random.Random(20261201)
    killed = 0
    for _ in range(TRIALS):
        shutil.rmtree(work)
        shutil.copytree(pristine_work, work, symlinks=True)
        shutil.copy2(pristine_session, session)
        for lease in session.parent.glob("*.lease"):
            lease.unlink()
        changes = Changes(work)
        process = subprocess.Popen(back, cwd=work, env=env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        changes.wait_for(rng.randint(1, total - 1), process)
        process.send_signal(signal.SIGKILL)
        killed += process.wait() == -signal.SIGKILL
        changes.close()
        now = state(work)
        for path in now.keys() | target.keys() | before.keys():
            assert now.get(path) in (before.get(path), target.get(path)), path
        store = Store(home)
        for tree_id in store.tree_ids():  # every manifest written is whole, blobs included
            for entry in store.load(tree_id).files.values():
                assert entry[0] != "file" or store.has_blob(entry[4])
        done = subprocess.run(back, cwd=work, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert state(work) == target
        assert not list(work.rglob("*.mulligan-restore-*"))  # what a kill left is cleaned up
    assert killed >= TRIALS * 9 // 10  # the trials really were killed mid-way
