"""The stat index (`mulligan.app.workspace.store.statindex`) on real folders: a walk that takes what
it can from the index records exactly what a walk without one records, after every kind of
change; git's racy-clean rule holds (a file whose stat is not older than the index's time is
hashed again); a replaced file is never taken for the one it replaced; a damaged index is no
index."""

from __future__ import annotations

import os
import random
import shutil
import time
from pathlib import Path

from mulligan.app.workspace.monitor import Monitor
from mulligan.app.workspace.restore import RestoreRefused
from mulligan.app.workspace.store import statindex
from mulligan.app.workspace.store.snapshots import SAVE_NOW, Store
from mulligan.home import folder_slug
from test_checkpoints import session, write
from test_monitor import OPERATIONS, act, tree

SETTLE = statindex.MARGIN / 1e9 + 0.2  # seconds after which a stat is no longer racy


def reference(root: Path, scratch: Path) -> object:
    """What a walk with no index at all records (a store of its own, thrown away)."""
    shutil.rmtree(scratch, ignore_errors=True)
    return Store(scratch).snapshot(root)


def index_file(store: Store, root: Path) -> Path:
    return store.root / "stat" / f"{folder_slug(root.resolve())}.idx"


def test_an_unchanged_folder_is_taken_from_the_index_whole_with_the_same_id(tmp_path):
    root = tree(tmp_path / "work")
    for n in range(30):
        (root / "src" / f"m{n}.py").write_text(f"m = {n}\n")
    store = Store(tmp_path / "home")
    first = store.snapshot(root)
    time.sleep(SETTLE)  # everything was racy when first indexed: read again once
    second = store.snapshot(root)
    written = index_file(store, root).stat().st_mtime_ns
    third = store.snapshot(root)
    assert first.id == second.id == third.id and third.files == first.files
    assert index_file(store, root).stat().st_mtime_ns == written  # nothing read: not rewritten
    loaded = statindex.load(index_file(store, root))
    assert loaded is not None and all(f.clean for f in loaded.folders.values())
    blob = store.blob_path(first.files["src/m1.py"][4])
    blob.unlink()  # a file taken from the index is not read: its blob is not written again
    assert store.snapshot(root).id == first.id and not blob.exists()  # the index in memory
    assert Store(tmp_path / "home").snapshot(root).id == first.id and not blob.exists()


def test_a_walk_from_the_index_records_what_a_walk_without_one_does_after_any_change(
        tmp_path):
    rnd = random.Random(29)
    root = tree(tmp_path / "work")
    for n in range(40):
        folder = root / "src" / f"p{n % 4}"
        folder.mkdir(exist_ok=True)
        (folder / f"f{n}.txt").write_text(f"{n}\n" * (n + 1))
    store = Store(tmp_path / "home")
    store.snapshot(root)
    time.sleep(SETTLE)  # from here on, what a round leaves untouched is taken whole
    store.snapshot(root)
    for n, operation in enumerate(OPERATIONS * 3):
        act(root, operation, rnd)
        if rnd.random() < 0.3:
            act(root, rnd.choice(OPERATIONS), rnd)
        if n % 2:  # a new process: the index read back from disk, not the one in memory
            store = Store(tmp_path / "home")
        indexed = store.snapshot(root)
        walked = reference(root, tmp_path / "reference")
        assert (indexed.files, indexed.ignored, indexed.skipped, indexed.id) == (
            walked.files, walked.ignored, walked.skipped, walked.id), operation  # type: ignore[attr-defined]


def test_a_file_whose_stat_is_not_older_than_the_index_is_hashed_again(tmp_path):
    """git's racy-clean rule: a stat taken in the same tick as a rewrite cannot vouch for the
    content. Seen from outside: a racy file's blob, removed from the store, is written again
    by the next snapshot (it was read), a settled file's is not (it was trusted)."""
    root = tmp_path / "work"
    root.mkdir()
    (root / "settled.txt").write_text("old enough\n")
    time.sleep(SETTLE)
    (root / "racy.txt").write_text("just written\n")
    store = Store(tmp_path / "home")
    first = store.snapshot(root)
    store.journal.restart()  # its objects in files of their own, to be removed
    settled, racy = (store.blob_path(first.files[n][4]) for n in ("settled.txt", "racy.txt"))
    settled.unlink()
    racy.unlink()
    again = store.snapshot(root)
    assert again.id == first.id
    assert store.has_blob(first.files["racy.txt"][4]), "a racy file was trusted from its stat"
    assert not store.has_blob(first.files["settled.txt"][4])  # the index is used: not read


def test_a_same_size_rewrite_with_its_mtime_put_back_is_seen(tmp_path):
    root = tmp_path / "work"
    root.mkdir()
    target = root / "a.txt"
    target.write_text("version 1\n")
    time.sleep(SETTLE)
    store = Store(tmp_path / "home")
    store.snapshot(root)
    before = store.snapshot(root)  # settled: taken from the index
    mtime = target.stat().st_mtime_ns
    target.write_text("version 2\n")  # same size, within the same second
    os.utime(target, ns=(mtime, mtime))  # and the same mtime
    after = store.snapshot(root)
    assert after.files["a.txt"][4] != before.files["a.txt"][4]
    assert store.read_blob(after.files["a.txt"][4]) == b"version 2\n"


def test_a_file_replaced_between_walks_is_seen_and_never_restored_over(tmp_path):
    c = session(tmp_path, write("a.txt", "agent's\n"), "done")
    list(c.run_prompt("write it"))
    work = tmp_path / "work"
    time.sleep(SETTLE)
    c.checkpoints.store.snapshot(work)  # type: ignore[union-attr]  # the index settles
    agents = work / "a.txt"
    info = agents.stat()
    mine = work / "mine.tmp"
    mine.write_text("user's!\n")  # the same size
    os.utime(mine, ns=(info.st_atime_ns, info.st_mtime_ns))  # and the same mtime
    os.replace(mine, agents)  # replaced, not rewritten: another inode
    try:
        c.back("e1", files="restore")
        raise AssertionError("a replaced file was restored over")
    except RestoreRefused as refused:
        assert "a.txt" in str(refused)
    assert agents.read_text() == "user's!\n"


def test_a_new_gitignore_rule_applies_to_a_folder_the_index_had_whole(tmp_path):
    root = tree(tmp_path / "work")
    (root / "src" / "keep.py").write_text("k\n")
    store = Store(tmp_path / "home")
    store.snapshot(root)
    time.sleep(SETTLE)
    store.snapshot(root)
    (root / "src" / ".gitignore").write_text("a.py\n")
    indexed = store.snapshot(root)
    assert "src/a.py" not in indexed.files and "src/a.py" in indexed.ignored
    (root / ".git" / "info" / "exclude").write_text("keep.py\n")
    indexed = store.snapshot(root)
    assert "src/keep.py" in indexed.ignored
    assert indexed.files == reference(root, tmp_path / "ref").files  # type: ignore[attr-defined]


def test_a_damaged_or_foreign_index_is_no_index(tmp_path):
    root = tree(tmp_path / "work")
    store = Store(tmp_path / "home")
    first = store.snapshot(root)
    time.sleep(SETTLE)
    store.snapshot(root)
    path = index_file(store, root)
    data = path.read_bytes()
    assert statindex.parse(data) is not None
    for damaged in (data[:-1], data[:40], b"", b"MULSTAT1" + data[8:-4] + b"\0\0\0\0",
                    data.replace(b"README", b"READMF")):
        assert statindex.parse(damaged) is None
    path.write_bytes(data[:len(data) // 2])
    (root / "README").write_text("changed\n")
    again = Store(tmp_path / "home").snapshot(root)  # a new process, with the damaged index
    assert again.id != first.id and store.read_blob(again.files["README"][4]) == b"changed\n"


def test_an_edited_gitignore_that_ignores_itself_still_changes_what_is_ignored(tmp_path):
    """The .gitignore is then no recorded entry of its folder: its own stat is what says the
    rules changed, for the folder and every folder below it."""
    root = tree(tmp_path / "work")
    (root / ".gitignore").write_text(".gitignore\n*.log\n")
    store = Store(tmp_path / "home")
    store.snapshot(root)
    time.sleep(SETTLE)
    assert "src/a.py" in store.snapshot(root).files
    (root / ".gitignore").write_text(".gitignore\n*.log\na.py\n")  # in place: same names
    indexed = store.snapshot(root)
    assert "src/a.py" not in indexed.files and "src/a.py" in indexed.ignored
    assert indexed.files == reference(root, tmp_path / "ref").files  # type: ignore[attr-defined]


def test_a_watched_folders_index_is_kept_in_memory_and_written_when_the_recorder_stops(
        tmp_path):
    """A watched folder's index goes to disk when the recorder stops (and at most every
    SAVE_EVERY seconds): not during a turn -- unless the walk hashed more than SAVE_NOW
    files, work a process killed before it stops would leave the next one to do again."""
    root = tree(tmp_path / "work")
    store, monitor = Store(tmp_path / "home"), Monitor.start(root)
    assert monitor is not None
    first = store.snapshot(root, monitor=monitor)  # a few files hashed: kept in memory
    assert statindex.load(index_file(store, root)) is None
    (root / "README").write_text("changed\n")
    second = store.snapshot(root, monitor=monitor)
    assert second.id != first.id and statindex.load(index_file(store, root)) is None
    store.flush()  # what Checkpoints.close does
    assert statindex.load(index_file(store, root)).tree == second.id  # type: ignore[union-attr]
    monitor.close()
    big = tmp_path / "big"
    big.mkdir()
    for n in range(SAVE_NOW + 1):
        (big / f"f{n}.txt").write_text(f"{n}\n")
    monitor = Monitor.start(big)
    assert monitor is not None
    walked = store.snapshot(big, monitor=monitor)  # many hashed: on disk at once
    assert statindex.load(index_file(store, big)).tree == walked.id  # type: ignore[union-attr]
    monitor.close()


def test_a_large_tree_stated_ahead_by_two_threads_records_what_a_plain_walk_does(tmp_path):
    """Over 4,096 paths an unwatched walk states the index's paths ahead, two threads at a
    time: a change, a removal (a stat that fails) and an addition are all seen."""
    root = tmp_path / "work"
    for n in range(4200):
        folder = root / f"d{n % 40}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{n}.txt").write_text(f"{n}\n")
    store = Store(tmp_path / "home")
    store.snapshot(root)
    time.sleep(SETTLE)
    store.snapshot(root)
    (root / "d3" / "f3.txt").write_text("changed\n")
    (root / "d39" / "f4199.txt").unlink()
    shutil.rmtree(root / "d20")
    (root / "d7" / "new.txt").write_text("new\n")
    indexed = Store(tmp_path / "home").snapshot(root)
    walked = reference(root, tmp_path / "ref")
    assert (indexed.files, indexed.id) == (walked.files, walked.id)  # type: ignore[attr-defined]
    assert "d20/f20.txt" not in indexed.files and "d7/new.txt" in indexed.files


def test_an_index_whose_snapshot_is_gone_from_the_store_vouches_for_nothing(tmp_path):
    """The store emptied under a running process (or its snapshot freed elsewhere): the
    blobs the index names may be gone too, so every file is read and stored again."""
    root = tree(tmp_path / "work")
    store = Store(tmp_path / "home")
    store.snapshot(root)
    time.sleep(SETTLE)
    first = store.snapshot(root)  # settled: the index (in memory too) vouches for all
    shutil.rmtree(tmp_path / "home")
    again = store.snapshot(root)
    assert again.id == first.id
    assert all(store.has_blob(f[4]) for f in again.files.values() if f[0] == "file")
