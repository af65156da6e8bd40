"""The snapshot store's journal (app/workspace/store/journal.py), on real stores: a turn's
snapshot is one record and no file of its own, read back by a fresh store (another process);
a record that does not check (torn, damaged) is never read and ends the ones after it, and
the next record is written over it; a torn loose copy is read from the journal and written
again when the journal is full; a full journal starts again with everything readable; gc
never brings back what it freed, and an object another process's gc freed is kept again by a
snapshot that remembered it; a store deleted under a running session gets a new journal;
snapshots killed at any moment leave every snapshot they returned readable; and a write's
target is read again even when the monitor saw nothing."""

from __future__ import annotations

import hashlib
import mmap
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mulligan.app.workspace.monitor import Monitor
from mulligan.app.workspace.store import journal
from mulligan.app.workspace.store.snapshots import Store


def digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=20).hexdigest()


def folder(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    for n in range(5):
        (root / "src" / f"f{n}.py").write_text(f"print({n})\n" * 40)
    return root


def loose(store: Store) -> set[Path]:
    return {p for p in (store.root / "blobs").rglob("*") if p.is_file()} | \
        {p for p in (store.root / "trees").glob("*.json")}


def test_a_turns_snapshot_is_one_record_no_file_and_another_store_reads_it(tmp_path):
    work = folder(tmp_path / "work")
    store = Store(tmp_path / "home")
    first = store.snapshot(work)
    files = loose(store)
    size = (store.root / "journal").stat().st_size
    (work / "src" / "f1.py").write_text("changed\n" + "print(1)\n" * 39)
    second = store.snapshot(work, reread=["src/f1.py"])
    assert loose(store) == files  # nothing created: the blob and the manifest are records
    assert (store.root / "journal").stat().st_size == size  # and the journal did not grow
    blob = second.files["src/f1.py"][4]
    assert not store.blob_path(blob).exists() and store.has_blob(blob)
    fresh = Store(tmp_path / "home")
    assert fresh.load(second.id).files == second.files
    assert fresh.read_blob(blob) == (work / "src" / "f1.py").read_bytes()
    assert fresh.load(first.id).files == first.files
    assert second.id in fresh.tree_ids()


def test_a_record_that_does_not_check_is_never_read_and_is_written_over(tmp_path):
    work = folder(tmp_path / "work")
    store = Store(tmp_path / "home")
    store.snapshot(work)
    kept = []
    for n in range(3):
        (work / "src" / "f2.py").write_text(f"version {n}\n" * 40)
        kept.append(store.snapshot(work, reread=["src/f2.py"]))
    file = store.root / "journal"
    data = bytearray(file.read_bytes())
    end = journal._START  # where each record starts: walk them as the reader does
    starts = []
    while data[end:end + 4] == b"\x00MLJ":
        size = int.from_bytes(data[end + 21:end + 25], "little")
        starts.append(end)
        end += journal._RECORD.size + size
    assert len(starts) == 4  # the first snapshot (5 small files) is a record too
    torn = bytes(data)
    data[end - 3] ^= 0x55  # the last record torn, as by a crash before its fdatasync ended
    file.write_bytes(bytes(data))
    fresh = Store(tmp_path / "home")
    assert fresh.load(kept[1].id).files == kept[1].files
    with pytest.raises(FileNotFoundError, match=f"no snapshot {kept[2].id}"):
        fresh.load(kept[2].id)
    (work / "src" / "f2.py").write_text("after the crash\n" * 40)
    after = fresh.snapshot(work, reread=["src/f2.py"])  # written over the torn record
    assert Store(tmp_path / "home").load(after.id).files == after.files
    file.write_bytes(torn)
    data = bytearray(torn)
    data[starts[2] + journal._RECORD.size + 30] ^= 0x55  # a record in the middle damaged
    file.write_bytes(bytes(data))
    fresh = Store(tmp_path / "home")
    assert fresh.load(kept[0].id).files == kept[0].files  # before it: read
    for later in kept[1:]:  # from it on: not in the store, never wrong bytes
        with pytest.raises(FileNotFoundError, match=f"no snapshot {later.id}"):
            fresh.load(later.id)


def test_a_torn_loose_copy_is_read_from_the_journal_and_written_again_on_restart(tmp_path):
    work = folder(tmp_path / "work")
    store = Store(tmp_path / "home")
    store.snapshot(work)
    (work / "src" / "f3.py").write_text("new content\n" * 40)
    after = store.snapshot(work, reread=["src/f3.py"])
    blob = after.files["src/f3.py"][4]
    path = store.blob_path(blob)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")  # a restart's copy a crash left empty (its record still counts)
    assert Store(tmp_path / "home").read_blob(blob) == b"new content\n" * 40
    Store(tmp_path / "home").journal.restart()
    assert path.read_bytes() != b""
    assert Store(tmp_path / "home").read_blob(blob) == b"new content\n" * 40
    assert Store(tmp_path / "home").blobs.sound(blob)  # the file itself, not the journal


def test_a_full_journal_starts_again_and_every_snapshot_still_reads(tmp_path):
    work = folder(tmp_path / "work")
    store = Store(tmp_path / "home")
    store.snapshot(work)
    kept = []
    for _ in range(2 * journal.SIZE // 30_000 + 2):  # incompressible: ~30 KB a record
        (work / "src" / "big.bin").write_bytes(os.urandom(30_000))
        kept.append((store.snapshot(work, reread=["src/big.bin"]),
                     (work / "src" / "big.bin").read_bytes()))
    assert store.blob_path(kept[0][0].files["src/big.bin"][4]).exists()  # written out
    assert not store.blob_path(kept[-1][0].files["src/big.bin"][4]).exists()  # a record
    fresh = Store(tmp_path / "home")
    for tree, data in kept:
        assert fresh.read_blob(fresh.load(tree.id).files["src/big.bin"][4]) == data
    when = store.blob_path(kept[0][0].files["src/big.bin"][4]).stat().st_mtime
    assert when < time.time() - 0.001  # dated when its record was written, for gc's grace


def test_gc_writes_the_journal_out_first_and_never_brings_back_what_it_freed(tmp_path):
    work = folder(tmp_path / "work")
    store = Store(tmp_path / "home")
    base = store.snapshot(work)
    (work / "src" / "f4.py").write_text("not kept\n" * 40)
    dropped = store.snapshot(work, reread=["src/f4.py"])
    (work / "src" / "f4.py").write_text("kept\n" * 40)
    kept = store.snapshot(work, reread=["src/f4.py"])
    trees, blobs, _ = store.gc([base.id, kept.id], grace=0)
    assert trees == 1 and blobs == 1
    fresh = Store(tmp_path / "home")
    assert not fresh.has_blob(dropped.files["src/f4.py"][4])
    with pytest.raises(FileNotFoundError):
        fresh.load(dropped.id)
    assert fresh.load(kept.id).files == kept.files
    assert fresh.read_blob(kept.files["src/f4.py"][4]) == b"kept\n" * 40
    assert dropped.id not in fresh.tree_ids()


def test_what_another_process_freed_is_kept_again_by_a_snapshot_that_remembered_it(tmp_path):
    """A snapshot asks the journal as this process last read it (no rescan): an object it
    remembers counts only while the header is unchanged -- after another process's gc
    (a restart first, then the freeing) the same content is kept again, never named
    missing."""
    work = folder(tmp_path / "work")
    mine = Store(tmp_path / "home")
    base = mine.snapshot(work)
    (work / "src" / "f4.py").write_text("freed elsewhere\n" * 40)
    dropped = mine.snapshot(work, reread=["src/f4.py"])
    blob = dropped.files["src/f4.py"][4]
    (work / "src" / "f4.py").write_text("print(4)\n" * 40)
    kept = mine.snapshot(work, reread=["src/f4.py"])
    assert kept.id == base.id
    assert Store(tmp_path / "home").gc([base.id], grace=0)[1] == 1  # another process's gc
    assert not Store(tmp_path / "home").has_blob(blob)
    other = tmp_path / "other"  # a folder new to this store: no index, every file hashed
    other.mkdir()
    (other / "f.py").write_text("freed elsewhere\n" * 40)
    again = mine.snapshot(other)
    assert again.files["f.py"][4] == blob
    assert Store(tmp_path / "home").read_blob(blob) == b"freed elsewhere\n" * 40


def test_a_store_deleted_under_a_running_session_gets_a_new_journal(tmp_path):
    import shutil

    work = folder(tmp_path / "work")
    store = Store(tmp_path / "home")
    store.snapshot(work)
    shutil.rmtree(store.root)  # by hand, while the session runs: its open journal is gone
    (work / "src" / "f0.py").write_text("after the store was removed\n" * 40)
    after = store.snapshot(work, reread=["src/f0.py"])
    assert (store.root / "journal").exists()
    fresh = Store(tmp_path / "home")  # another process: what was recorded since is there
    assert fresh.read_blob(fresh.load(after.id).files["src/f0.py"][4]) == \
        b"after the store was removed\n" * 40


def test_two_stores_writing_one_journal_each_read_what_the_other_wrote(tmp_path):
    a_work, b_work = folder(tmp_path / "a"), folder(tmp_path / "b")
    a, b = Store(tmp_path / "home"), Store(tmp_path / "home")
    a.snapshot(a_work)
    b.snapshot(b_work)
    made = []
    for n in range(6):
        for store, work in ((a, a_work), (b, b_work)):
            (work / "src" / "f0.py").write_text(f"{work.name} {n}\n" * 40)
            made.append((store.snapshot(work, reread=["src/f0.py"]), f"{work.name} {n}\n"))
    for tree, line in made:
        for reader in (a, b):  # each sees the other's records, written after its own
            facts = reader.load(tree.id).files["src/f0.py"]
            assert reader.read_blob(facts[4]) == line.encode() * 40


KILLED = """
import sys
from pathlib import Path
from mulligan.app.workspace.store.snapshots import Store
work, home = Path(sys.argv[1]), Path(sys.argv[2])
store = Store(home)
n = 0
while True:
    n += 1
    (work / "src" / "f1.py").write_text(f"{n}\\n" * 40)
    tree = store.snapshot(work, reread=["src/f1.py"])
    print(tree.id, tree.files["src/f1.py"][4], n, flush=True)
"""


def test_snapshots_killed_at_any_moment_leave_every_returned_one_readable(tmp_path):
    work = folder(tmp_path / "work")
    home = tmp_path / "home"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    returned: list[tuple[str, str, int]] = []
    for trial in range(8):
        process = subprocess.Popen([sys.executable, "-c", KILLED, str(work), str(home)],
                                   stdout=subprocess.PIPE, env=env)
        assert process.stdout is not None
        lines = []
        for _ in range(5 + 7 * trial):  # later and later: a different moment each time
            line = process.stdout.readline()
            if not line:
                break
            lines.append(line)
        process.send_signal(signal.SIGKILL)
        rest = process.communicate()[0]
        for line in lines + rest.splitlines(keepends=True):
            if line.endswith(b"\n"):  # a line cut by the kill: not returned
                tree, blob, n = line.split()
                returned.append((tree.decode(), blob.decode(), int(n)))
    assert len(returned) > 40
    fresh = Store(home)
    for tree, blob, n in returned:
        assert fresh.load(tree).files["src/f1.py"][4] == blob
        assert fresh.read_blob(blob) == f"{n}\n".encode() * 40


def test_a_writes_target_is_read_again_even_when_the_monitor_saw_nothing(tmp_path):
    # inotify does not see a change made through a shared mmap: the before-snapshot of a
    # write, which the monitor would answer from the last walk, reads its target anyway.
    work = folder(tmp_path / "work")
    store, monitor = Store(tmp_path / "home"), Monitor.start(work)
    assert monitor is not None
    target = work / "src" / "f0.py"
    with open(target, "r+b") as handle, mmap.mmap(handle.fileno(), 0) as mapped:
        first = store.snapshot(work, monitor=monitor)  # (closing it would be an event)
        mapped[:5] = b"PRINT"
        assert not monitor.changed()
        assert store.snapshot(work, monitor=monitor) is first  # not a target: not read
        before = store.snapshot(work, reread=["src/f0.py"], monitor=monitor)
        assert before.files["src/f0.py"][4] == digest(target.read_bytes())
        assert first.files["src/f0.py"][4] != before.files["src/f0.py"][4]
        assert store.snapshot(work, reread=["src/f1.py"], monitor=monitor) is before
