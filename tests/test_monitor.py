"""The snapshot store's inotify monitor, on real folders: an unchanged folder is not walked
again, and no change of any kind is missed -- after every operation below, the snapshot the
monitor allows is the snapshot a full walk takes."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from mulligan.app.workspace.monitor import Monitor
from mulligan.app.workspace.store.snapshots import Store


def tree(root: Path) -> Path:
    (root / "src" / "deep").mkdir(parents=True)
    (root / "src" / "a.py").write_text("print('a')\n")
    (root / "src" / "deep" / "b.py").write_text("b = 1\n")
    (root / "README").write_text("hello\n")
    (root / ".gitignore").write_text("*.log\nbuild/\n")
    (root / ".git" / "info").mkdir(parents=True)
    (root / ".git" / "info" / "exclude").write_text("")
    return root


def test_nothing_changed_means_no_walk_and_the_same_snapshot(tmp_path):
    root = tree(tmp_path / "work")
    store, monitor = Store(tmp_path / "home"), Monitor.start(root)
    assert monitor is not None
    assert monitor.changed()  # nothing known before a walk
    first = store.snapshot(root, monitor=monitor)
    assert not monitor.changed()
    assert store.snapshot(root, monitor=monitor) is first  # no walk: the same manifest
    (root / "src" / "a.py").write_text("print('A')\n")
    assert monitor.changed()
    again = store.snapshot(root, monitor=monitor)
    assert again.id != first.id and again.id == store.snapshot(root).id


OPERATIONS = ["write_new", "rewrite_same_size", "append", "chmod", "rename", "delete",
              "new_folder_with_file", "remove_folder", "symlink", "ignore_more", "exclude",
              "touch", "ignored_file", "replace_file_by_folder", "move_folder"]


@pytest.mark.parametrize("operation", OPERATIONS)
def test_every_kind_of_change_is_seen(tmp_path, operation):
    root = tree(tmp_path / "work")
    store, monitor = Store(tmp_path / "home"), Monitor.start(root)
    store.snapshot(root, monitor=monitor)
    act(root, operation, random.Random(operation))
    assert store.snapshot(root, monitor=monitor).files == store.snapshot(root).files
    assert store.snapshot(root, monitor=monitor).files == store.snapshot(root).files


def test_a_random_run_of_changes_never_disagrees_with_a_walk(tmp_path):
    rnd = random.Random(2026)
    root = tree(tmp_path / "work")
    store, monitor = Store(tmp_path / "home"), Monitor.start(root)
    for _ in range(120):
        for _ in range(rnd.randint(0, 2)):
            act(root, rnd.choice(OPERATIONS), rnd)
        watched = store.snapshot(root, monitor=monitor)
        walked = store.snapshot(root)
        assert watched.files == walked.files and watched.id == walked.id


def test_a_watch_that_cannot_be_added_means_a_walk_every_time(tmp_path):
    root = tree(tmp_path / "work")
    store, monitor = Store(tmp_path / "home"), Monitor.start(root)
    store.snapshot(root, monitor=monitor)
    monitor.watch(str(tmp_path / "gone"))  # as when the system's watch limit is reached
    assert monitor.changed()
    store.snapshot(root, monitor=monitor)
    assert monitor.changed()


def test_a_monitor_of_another_folder_is_not_used(tmp_path):
    root, other = tree(tmp_path / "work"), tree(tmp_path / "other")
    store, monitor = Store(tmp_path / "home"), Monitor.start(other)
    first = store.snapshot(root, monitor=monitor)
    (root / "README").write_text("changed\n")
    assert store.snapshot(root, monitor=monitor).id != first.id


def act(root: Path, operation: str, rnd: random.Random) -> None:
    found = [p for p in root.rglob("*") if ".git" not in p.parts and not p.is_symlink()]
    files = sorted(p for p in found if p.is_file())
    folders = sorted(p for p in found if p.is_dir())
    name = f"n{rnd.randrange(10_000)}"
    pick = rnd.choice(files) if files else None
    if operation == "write_new":
        (rnd.choice([root, *folders]) / f"{name}.txt").write_text(name)
    elif operation == "rewrite_same_size" and pick:
        data = pick.read_bytes()
        pick.write_bytes(bytes(reversed(data)) if data else b"")
    elif operation == "append" and pick:
        with open(pick, "a") as handle:
            handle.write("more\n")
    elif operation == "chmod" and pick:
        pick.chmod(0o755 if not os.access(pick, os.X_OK) else 0o644)
    elif operation == "rename" and pick:
        pick.rename(pick.with_name(f"{name}{pick.suffix}"))
    elif operation == "delete" and pick:
        pick.unlink()
    elif operation == "new_folder_with_file":  # made and filled at once, before any watch
        folder = rnd.choice([root, *folders]) / name / "inner"
        folder.mkdir(parents=True)
        (folder / "x.txt").write_text("x\n")
    elif operation == "remove_folder" and folders:
        shutil.rmtree(rnd.choice(folders))
    elif operation == "symlink":
        (rnd.choice([root, *folders]) / f"{name}.link").symlink_to("README")
    elif operation == "ignore_more":
        with open(root / ".gitignore", "a") as handle:
            handle.write(f"{pick.name if pick else name}\n")
    elif operation == "exclude":
        with open(root / ".git" / "info" / "exclude", "a") as handle:
            handle.write(f"{pick.name if pick else name}\n")
    elif operation == "touch" and pick:
        stat = pick.stat()
        os.utime(pick, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    elif operation == "ignored_file":
        (root / f"{name}.log").write_text("ignored\n")
    elif operation == "replace_file_by_folder" and pick:
        pick.unlink()
        pick.mkdir()
        (pick / "now-a-folder.txt").write_text("f\n")
    elif operation == "move_folder" and folders:
        source = rnd.choice(folders)
        if source.exists():
            source.rename(root / f"{name}-moved")
