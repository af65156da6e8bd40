"""The snapshot store's inotify monitor, on real folders: an unchanged folder is not walked
again, a changed one is looked at only where the events named something, and no change of any
kind is missed -- after every operation below, the snapshot the monitor allows is the snapshot
a full walk takes: the same id, the same files in the same order, the same skipped, ignored
and leftovers, and a stat index the next walk without a monitor can trust."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
from pathlib import Path

import pytest

from mulligan.app.workspace.monitor import MAX_NAMES, Monitor
from mulligan.app.workspace.store import manifests
from mulligan.app.workspace.store.snapshots import TEMP_MARK, Manifest, Store


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
              "touch", "ignored_file", "replace_file_by_folder", "move_folder", "racy_rewrite",
              "hostile_name", "fifo", "move_in", "move_out", "nested_gitignore",
              "replace_folder_by_file", "leftover", "link_to_folder", "chmod_folder",
              "hard_link", "unignore", "deep_new_file"]


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


def same(watched: Manifest, walked: Manifest) -> None:
    """The same snapshot: id, files in order, skipped in order, ignored, leftovers."""
    assert list(watched.files.items()) == list(walked.files.items())
    assert list(watched.skipped.items()) == list(walked.skipped.items())
    assert (watched.ignored, watched.temps) == (walked.ignored, walked.temps)
    assert watched.id == walked.id


def written(store: Store, root: Path, snapshot: Manifest, seen: set[str]) -> None:
    """The manifest the store keeps is what `manifests.encode` makes of the snapshot, byte
    for byte (a look writes it from its folders' texts) -- when this snapshot wrote it: an
    id `seen` before was kept as first written (ids leave out sizes and mtimes), and is
    then that form of what it holds, with the same paths, kinds, modes and content."""
    body = store.manifests.read(snapshot.id)
    if snapshot.id not in seen:
        assert body == manifests.encode(root.resolve(), snapshot.files, snapshot.skipped,
                                        snapshot.ignored)
    kept = manifests.decode(body)
    assert body == manifests.encode(root.resolve(), kept.files, kept.skipped, kept.ignored)
    assert [(p, f[:2], f[4]) for p, f in kept.files.items()] == \
        [(p, f[:2], f[4]) for p, f in snapshot.files.items()]
    seen.add(snapshot.id)


def test_a_look_writes_the_manifest_a_walk_writes_even_where_a_name_breaks_the_lines(
        tmp_path):
    """A name holding '],"' makes the manifest one line (no line is one path there): a look
    that takes its folder whole, or looks into it, writes that same line; once it is gone,
    one path a line again."""
    root = tree(tmp_path / "work")
    odd = root / "src" / "odd],"  # its key, '"src/odd],":', holds '],"'
    odd.write_text("x\n")
    store, monitor = Store(tmp_path / "home"), Monitor.start(root)
    assert monitor is not None
    first = store.snapshot(root, monitor=monitor)
    seen: set[str] = set()
    written(store, root, first, seen)
    assert store.manifests.read(first.id).count(b"\n") == 0
    for change in (root / "README", root / "src" / "a.py", odd):
        change.write_text(change.read_text() + "more\n")
        looked = store.snapshot(root, monitor=monitor)
        same(looked, Store(tmp_path / f"full-{change.name}").snapshot(root))
        written(store, root, looked, seen)
    odd.unlink()
    (root / "README").write_text("again\n")
    looked = store.snapshot(root, monitor=monitor)
    written(store, root, looked, seen)
    assert store.manifests.read(looked.id).count(b"\n") == len(looked.files) - 1
    assert store.ways["looked"] == 4, store.ways


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_look_at_the_named_paths_gives_what_a_full_walk_gives(tmp_path, seed):
    """Random runs of every kind of change (a write's target read whatever, some rounds):
    each watched snapshot -- most of them looks at what the events named -- equals a full
    walk by a store with no index; and the stat index the looks leave, written and read by a
    new store as after a restart, gives that walk too."""
    rnd = random.Random(seed)
    root = tree(tmp_path / "work")
    store, monitor = Store(tmp_path / "home"), Monitor.start(root)
    assert monitor is not None
    seen = {store.snapshot(root, monitor=monitor).id}
    for n in range(70):
        for _ in range(rnd.randint(1, 3)):
            act(root, rnd.choice(OPERATIONS), rnd)
        files = [p for p in root.rglob("*") if p.is_file() and ".git" not in p.parts]
        reread = [rnd.choice(files).relative_to(root).as_posix()] if files and n % 3 == 0 \
            else []
        watched = store.snapshot(root, reread=reread, monitor=monitor)
        same(watched, Store(tmp_path / f"full-{n}").snapshot(root))
        written(store, root, watched, seen)
        if n % 10 == 9:
            store.flush()  # the index the looks left, as the next process reads it
            same(Store(tmp_path / "home").snapshot(root), watched)
    assert store.ways["looked"] >= 35, store.ways  # (a run of full walks would prove little)


@pytest.mark.parametrize("then", ["write", "write_then_remove", "write_then_replace"])
def test_a_file_changed_through_another_of_its_names_is_seen(tmp_path, then):
    """Hard links in the folder: an event names the name written through, not the others,
    yet they changed too (a same-size rewrite with its mtime put back: only the ctime says)."""
    root = tree(tmp_path / "work")
    os.link(root / "README", root / "src" / "deep" / "README.again")
    os.link(root / "README", root / "README.too")
    store, monitor = Store(tmp_path / "home"), Monitor.start(root)
    store.snapshot(root, monitor=monitor)
    before = (root / "README").stat()
    (root / "README").write_text("HELLO\n")
    os.utime(root / "README", ns=(before.st_atime_ns, before.st_mtime_ns))
    if then == "write_then_remove":
        (root / "README").unlink()
    elif then == "write_then_replace":
        (root / "new").write_text("new\n")
        (root / "new").rename(root / "README")
    watched = store.snapshot(root, monitor=monitor)
    same(watched, Store(tmp_path / "full").snapshot(root))
    assert store.ways["looked"] == 1


def test_an_ignore_file_that_is_a_link_is_read_again_every_time(tmp_path):
    """A .gitignore that is a link: its target can change with no event in the folder, so
    every snapshot walks (a look, or keeping the last snapshot, would miss the new rule)."""
    root = tree(tmp_path / "work")
    rules = tmp_path / "rules.txt"
    rules.write_text("*.log\n")
    (root / ".gitignore").unlink()
    (root / ".gitignore").symlink_to(rules)
    store, monitor = Store(tmp_path / "home"), Monitor.start(root)
    store.snapshot(root, monitor=monitor)
    rules.write_text("*.log\nREADME\n")  # outside the folder: no event in it
    watched = store.snapshot(root, monitor=monitor)
    assert "README" in watched.ignored
    same(watched, Store(tmp_path / "full").snapshot(root))
    assert store.ways["walked"] == 2


def test_reading_the_folder_names_nothing(tmp_path):
    """The walk's own reads, and anyone's, make no event the monitor asks for: an atime
    update (relatime: the atime older than the mtime) is no change."""
    root = tree(tmp_path / "work")
    readme = root / "README"
    os.utime(readme, ns=(0, readme.stat().st_mtime_ns))  # the next read updates the atime
    store, monitor = Store(tmp_path / "home"), Monitor.start(root)
    first = store.snapshot(root, monitor=monitor)
    for path in root.rglob("*"):
        if path.is_file():
            path.read_bytes()
        path.stat()
    assert readme.stat().st_atime_ns != 0 or os.statvfs(root).f_flag & os.ST_NOATIME
    assert not monitor.changed()
    assert store.snapshot(root, monitor=monitor) is first


def test_too_many_names_walk_the_whole_folder(tmp_path):
    root = tree(tmp_path / "work")
    store, monitor = Store(tmp_path / "home"), Monitor.start(root)
    store.snapshot(root, monitor=monitor)
    for n in range(MAX_NAMES + 1):
        (root / "src" / f"f{n}").write_bytes(b"")
    watched = store.snapshot(root, monitor=monitor)
    assert store.ways == {"kept": 0, "looked": 0, "walked": 2}
    same(watched, Store(tmp_path / "full").snapshot(root))


def test_a_name_written_again_and_again_counts_once(tmp_path):
    """Two files written in turns (events inotify cannot merge) past the cap of names: two
    names, so a look, not a walk."""
    root = tree(tmp_path / "work")
    store, monitor = Store(tmp_path / "home"), Monitor.start(root)
    store.snapshot(root, monitor=monitor)
    with open(root / "README", "a") as one, open(root / "src" / "a.py", "a") as two:
        for n in range(MAX_NAMES):
            for handle in (one, two):
                handle.write(f"{n}\n")
                handle.flush()
    same(store.snapshot(root, monitor=monitor), Store(tmp_path / "full").snapshot(root))
    assert store.ways["looked"] == 1


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
    """Do `operation` somewhere under `root` (nothing, when the tree as the earlier ones left
    it does not allow it: a .gitignore become a folder, a name taken)."""
    with contextlib.suppress(OSError):
        _act(root, operation, rnd)


def _act(root: Path, operation: str, rnd: random.Random) -> None:
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
    elif operation == "racy_rewrite" and pick:  # same size, same mtime: only inotify says
        before = pick.stat()
        data = pick.read_bytes()
        pick.write_bytes(data.swapcase() if data.swapcase() != data else data[::-1])
        os.utime(pick, ns=(before.st_atime_ns, before.st_mtime_ns))
    elif operation == "hostile_name":
        folder = rnd.choice([root, *folders])
        hostile = rnd.choice(["new\nline", "..dots", "a b", "x" * 250, "tab\tname",
                              os.fsdecode(b"bad\xff"), "-dash", "\u00e9t\u00e9"])
        (folder / hostile).write_text(name)
    elif operation == "fifo":
        os.mkfifo(rnd.choice([root, *folders]) / f"{name}.fifo")
    elif operation == "move_in":  # made outside (unwatched), then moved in whole
        outside = root.parent / "outside" / name
        (outside / "inner" / "deeper").mkdir(parents=True)  # ("outside": beside the root)
        (outside / "a.txt").write_text("a\n")
        (outside / "inner" / "deeper" / "b.txt").write_text("b\n")
        (outside / "inner" / ".gitignore").write_text("*.tmp\n")
        (outside / "inner" / "c.tmp").write_text("c\n")
        outside.rename(rnd.choice([root, *folders]) / name)
    elif operation == "move_out" and folders:
        source = rnd.choice(folders)
        if source.exists():
            (root.parent / "outside").mkdir(exist_ok=True)
            source.rename(root.parent / "outside" / f"{name}-out")
    elif operation == "nested_gitignore":
        folder = rnd.choice([root, *folders]) / name
        folder.mkdir()
        (folder / ".gitignore").write_text("*.txt\n!keep.txt\n")
        (folder / "drop.txt").write_text("d\n")
        (folder / "keep.txt").write_text("k\n")
    elif operation == "replace_folder_by_file" and folders:
        source = rnd.choice(folders)
        if source.exists():
            shutil.rmtree(source)
            source.write_text("now a file\n")
    elif operation == "leftover":
        (rnd.choice([root, *folders]) / f".{name}{TEMP_MARK}1").write_text("left\n")
    elif operation == "link_to_folder" and folders:
        (root / f"{name}.dirlink").symlink_to(rnd.choice(folders))
    elif operation == "chmod_folder" and folders:
        folder = rnd.choice(folders)
        folder.chmod(0o700 if folder.stat().st_mode & 0o077 else 0o755)
    elif operation == "hard_link" and pick:
        os.link(pick, pick.with_name(f"{name}.hard"))
    elif operation == "unignore":
        (root / ".gitignore").write_text("build/\n")
    elif operation == "deep_new_file":  # a new file under new folders, made by one write
        folder = rnd.choice([root, *folders]) / name / "b" / "c"
        folder.mkdir(parents=True)
        (folder / "d.txt").write_text("d\n")


def test_a_file_excluded_after_the_walk_leaves_the_next_snapshot_even_when_looked(tmp_path):
    """A session file attached after the first walk (`Store.exclude_session`) changes what
    a walk records: the index made before does not describe that walk, so the next snapshot
    -- with names to look at -- walks, and the session file is not in it."""
    root = tree(tmp_path)
    session = root / "session.jsonl"
    session.write_text("{}\n")
    store, monitor = Store(tmp_path / "home"), Monitor.start(root)
    assert monitor is not None
    assert "session.jsonl" in store.snapshot(root, monitor=monitor).files
    store.exclude_session(session)
    (root / "a.txt").write_text("changed\n")
    after = store.snapshot(root, monitor=monitor)
    assert "session.jsonl" not in after.files and "a.txt" in after.files
    assert after.files == store.snapshot(root).files
