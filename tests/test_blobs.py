"""The snapshot store's object layer (app/workspace/store/blobs.py) on real folders and stores:
deltas and their chains give back exactly the bytes they stand for (any edit sequence), a
damaged delta, base or manifest is refused by name (and a restore needing it changes
nothing), gc never frees a base a kept object needs, and a store written before compression
(whole raw blobs, one-line JSON manifests) still reads."""

from __future__ import annotations

import hashlib
import os
import time
import zlib
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mulligan.app.workspace.restore import apply, plan
from mulligan.app.workspace.store.blobs import MAGIC, MAX_DEPTH, MIN_MANIFEST_DELTA, Damaged
from mulligan.app.workspace.store.delta import apply_delta, make_delta
from mulligan.app.workspace.store.reading import _DELTA, _WHOLE
from mulligan.app.workspace.store.snapshots import Store

LINES = st.sampled_from([b"a\n", b"b\n", b"\n", b"c", b"dd\r\n", b"e\r", b"x" * 40 + b"\n",
                         b"}\n", b"\xff\x00\n", b"unique one\n", b"unique two\n"])
EDITS = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 10_000), LINES), max_size=8)


def digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=20).hexdigest()


def edited(lines: list[bytes], edits: list[tuple[int, int, bytes]]) -> list[bytes]:
    lines = list(lines)
    for kind, where, line in edits:
        if kind == 0:
            lines.insert(where % (len(lines) + 1), line)
        elif lines and kind == 1:
            del lines[where % len(lines)]
        elif lines:
            lines[where % len(lines)] = line
    return lines


@settings(max_examples=300, deadline=None)
@given(st.lists(LINES, max_size=40), st.lists(EDITS, min_size=1, max_size=6))
def test_a_delta_gives_back_exactly_the_new_bytes_for_any_edit_sequence(start, rounds):
    lines, old = start, b"".join(start)
    for edits in rounds:
        lines = edited(lines, edits)
        new = b"".join(lines)
        ops = make_delta(old, new, limit=len(new) + 1)
        assert ops is not None and apply_delta(old, ops) == new
        old = new


@settings(max_examples=25, deadline=None)
@given(st.lists(EDITS, min_size=1, max_size=12))
def test_a_chain_of_versions_reads_back_exactly_from_a_fresh_store(tmp_path_factory, rounds):
    home = tmp_path_factory.mktemp("home")
    store = Store(home)
    lines = [b"line %d of a file long enough to be worth a delta\n" % n for n in range(40)]
    names, previous = [], None
    for edits in rounds:
        lines = edited(lines, edits)
        data = b"".join(lines)
        name = digest(data)
        if not store.has_blob(name):
            store.blobs.put(name, data, base=previous)
        names.append((name, data))
        previous = name
    fresh = Store(home)  # nothing in memory: every chain is read from disk
    for name, data in names:
        assert fresh.read_blob(name) == data


def grow(tmp_path: Path, versions: int) -> tuple[Store, Path, list[tuple[str, bytes]]]:
    """A folder of 100 small files and one of 60 KB, which gets one line edited per
    snapshot; then the journal written out (as when it is full, or before a gc), so that
    every object is a file of its own, for these tests to look at and damage."""
    work = tmp_path / "work"
    work.mkdir()
    for n in range(100):
        (work / f"small{n}.txt").write_text(f"small {n}\n")
    lines = [f"line {n:05} of the big file\n" for n in range(2500)]
    store = Store(tmp_path / "home")
    kept = []
    for n in range(versions):
        lines[(n * 37) % len(lines)] = f"edited in version {n}\n"
        data = "".join(lines).encode()
        (work / "big.txt").write_bytes(data)
        tree = store.snapshot(work, reread=["big.txt"])
        kept.append((tree.id, data))
    store.journal.restart()  # a turn's objects, kept in the journal, written to their files
    return store, work, kept


def depth(store: Store, name: str) -> int:
    return store.blobs._link(name)[0]


def test_one_line_edits_are_stored_as_small_deltas_in_chains_no_deeper_than_the_limit(
        tmp_path):
    store, _, kept = grow(tmp_path, MAX_DEPTH + 30)
    blobs = [store.load(tree).files["big.txt"][4] for tree, _ in kept]
    depths = [depth(store, b) for b in blobs]
    assert max(depths) == MAX_DEPTH and depths[0] == 0
    assert depths[MAX_DEPTH + 1] == 1  # the chain was full: a delta of its first object
    assert depths.count(0) == 1  # one whole copy for the whole history
    sizes = [store.blob_path(b).stat().st_size for b in blobs]
    assert sizes[0] < 60_000 // 4  # compressed
    assert max(sizes[1:]) < 1000 and sorted(sizes)[-3] < 200  # the one of the first: 51 lines
    manifests = [(store.root / "trees" / f"{tree}.json").stat().st_size for tree, _ in kept]
    assert (store.root / "trees" / f"{kept[0][0]}.json").read_bytes().startswith(MAGIC)
    assert manifests[0] > 2000 and max(manifests[1:]) < 400  # deltas of the previous one
    fresh = Store(tmp_path / "home")
    for tree, data in kept:
        assert fresh.read_blob(fresh.load(tree).files["big.txt"][4]) == data


def damage(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x55
    path.write_bytes(bytes(data))


def test_a_damaged_delta_or_base_is_refused_naming_the_blob_and_the_link_at_fault(tmp_path):
    store, _, kept = grow(tmp_path, 4)
    blobs = [store.load(tree).files["big.txt"][4] for tree, _ in kept]
    assert [depth(store, b) for b in blobs] == [0, 1, 2, 3]
    damage(store.blob_path(blobs[2]), -3)  # inside the delta's compressed ops
    with pytest.raises(Damaged, match=f"blob {blobs[3]} .*3 deep.* damaged: the delta "
                                      f"{blobs[2]} .*refused"):
        Store(tmp_path / "home").read_blob(blobs[3])
    damage(store.blob_path(blobs[2]), -3)  # repaired
    assert Store(tmp_path / "home").read_blob(blobs[3]) == kept[3][1]
    # Well-formed, but not what it says: only the hash check can tell.
    top = store.blob_path(blobs[3])
    good = top.read_bytes()
    head = len(MAGIC) + 1 + 20 + 1 + 20
    top.write_bytes(good[:head] + zlib.compress(make_delta(kept[2][1], b"other bytes\n",
                                                           limit=100)))
    with pytest.raises(Damaged, match=f"blob {blobs[3]} .*damaged: the delta {blobs[3]} "
                                      "gives bytes that do not match its hash.*refused"):
        Store(tmp_path / "home").read_blob(blobs[3])
    top.write_bytes(good)
    second = store.blob_path(blobs[1]).read_bytes()
    store.blob_path(blobs[1]).write_bytes(store.blob_path(blobs[0]).read_bytes())
    with pytest.raises(Damaged, match=f"blob {blobs[1]} is damaged: its bytes do not hash "
                                      "to its name: refused"):
        Store(tmp_path / "home").read_blob(blobs[1])
    store.blob_path(blobs[1]).write_bytes(second)
    base = store.blob_path(blobs[0])
    data = bytearray(base.read_bytes())
    base.write_bytes(data[:len(MAGIC) + 21] + b"not what was compressed")
    with pytest.raises(Damaged, match=f"blob {blobs[1]} .*damaged: {blobs[0]} cannot be "
                                      "decompressed.*refused"):
        Store(tmp_path / "home").read_blob(blobs[1])
    base.unlink()
    with pytest.raises(Damaged, match=f"blob {blobs[3]} .*its delta base {blobs[2]}|"
                                      f"blob {blobs[3]} .*base {blobs[0]} is missing"):
        Store(tmp_path / "home").read_blob(blobs[3])


def test_a_damaged_manifest_is_refused_naming_the_snapshot(tmp_path):
    store, _, kept = grow(tmp_path, 3)
    damage(store.root / "trees" / f"{kept[1][0]}.json", -2)
    with pytest.raises(Damaged, match=f"snapshot {kept[2][0]} .*damaged.*refused"):
        Store(tmp_path / "home").load(kept[2][0])


def test_a_restore_whose_copy_is_damaged_changes_nothing_and_names_the_file(tmp_path):
    store, work, kept = grow(tmp_path, 3)
    here = [{"id": "e1", "workspace": {"after": kept[0][0]}},
            {"id": "e2", "workspace": {"before": kept[0][0], "after": kept[2][0],
                                       "changed": ["big.txt"]}}]
    damage(store.blob_path(store.load(kept[0][0]).files["big.txt"][4]), -3)
    fresh = Store(tmp_path / "home")
    chosen = plan(fresh, work, here, here[:1])
    assert chosen is not None and chosen.changes == ["big.txt"]
    with pytest.raises(ValueError, match="not restoring: the store's copy of big.txt cannot "
                                         "be read .*damaged.*nothing was changed"):
        apply(fresh, work, chosen)
    assert (work / "big.txt").read_bytes() == kept[2][1]


def test_gc_never_frees_a_base_a_kept_blob_or_manifest_needs(tmp_path):
    store, _, kept = grow(tmp_path, 6)
    blobs = [store.load(tree).files["big.txt"][4] for tree, _ in kept]
    assert store.manifests.base_of(kept[-1][0]) == kept[-2][0]
    trees, freed, _ = store.gc([kept[-1][0]], grace=0)
    assert (trees, freed) == (5, 0)  # every earlier version of big.txt is a base of the last
    assert store.manifests.base_of(kept[-1][0]) is None  # its base freed: written whole
    fresh = Store(tmp_path / "home")
    assert fresh.load(kept[-1][0]).files["big.txt"][4] == blobs[-1]
    assert fresh.read_blob(blobs[-1]) == kept[-1][1]
    # A blob whose base no kept manifest names: the base stays, the rest goes.
    other = Store(tmp_path / "home2")
    first, second = b"one line\n" * 200, b"one line\n" * 199 + b"two\n"
    other.keep(first)
    other.blobs.put(digest(second), second, base=digest(first))
    assert depth(other, digest(second)) == 1
    alone = other.record(tmp_path / "somewhere", {"f": ("file", 0o644, len(second), 0,
                                                        digest(second))}, {}, [])
    gone = other.keep(b"nobody needs this" * 100)
    assert other.gc([alone.id], grace=0)[1] == 1
    assert not other.has_blob(gone) and other.has_blob(digest(first))
    assert Store(tmp_path / "home2").read_blob(digest(second)) == second
    # A delta written just now (kept by the grace) keeps its old base too.
    old = time.time() - 7200
    os.utime(other.blob_path(digest(first)), (old, old))
    assert other.gc([], grace=3600)[1] == 0 and other.has_blob(digest(first))
    assert other.gc([], grace=0)[1] == 2  # nothing kept: both freed


def test_gc_counts_what_is_there_and_never_follows_a_link(tmp_path):
    """gc lists the store, then dates each file: one gone in between (a writer's temporary
    file renamed, another gc) is not counted, and never a traceback; a link someone put
    there is dated and removed as itself, its target never touched."""
    store = Store(tmp_path / "home")
    gone = store.keep(b"nobody needs this" * 100)
    folder = store.blob_path(gone).parent
    outside = tmp_path / "outside.txt"
    outside.write_text("the user's\n")
    (folder / ("0" * 38)).symlink_to(tmp_path / "nowhere")  # dangling: its stat fails
    (folder / ("1" * 38)).symlink_to(outside)
    old = time.time() - 7200
    for path in folder.iterdir():
        os.utime(path, (old, old), follow_symlinks=False)
    trees, blobs, _ = store.gc([], grace=3600)
    assert blobs == 3 and list(folder.iterdir()) == []
    assert outside.read_text() == "the user's\n"


def test_a_new_delta_makes_every_link_of_its_bases_chain_recent_for_a_running_gc(tmp_path):
    # A gc that listed the store before this delta existed frees what is older than its
    # grace when it comes to it: every link the delta needs must be recent by then, not
    # only its base (the links under it were freed, leaving the new version unreadable).
    versions = [b"".join(b"line %05d\n" % n for n in range(400))]
    for n in range(3):
        versions.append(versions[-1].replace(b"line %05d" % (100 * n), b"edit %05d" % n))
    store = Store(tmp_path / "home")
    store.keep(versions[0])
    for before, data in zip(versions[:-2], versions[1:-1], strict=True):
        store.blobs.put(digest(data), data, base=digest(before))
    assert depth(store, digest(versions[2])) == 2
    old = time.time() - 7200
    for data in versions[:-1]:
        os.utime(store.blob_path(digest(data)), (old, old))
    later = Store(tmp_path / "home")  # another session, a while later
    later.blobs.put(digest(versions[3]), versions[3], base=digest(versions[2]))
    assert depth(later, digest(versions[3])) == 3
    for data in versions[:-1]:
        assert store.blob_path(digest(data)).stat().st_mtime > time.time() - 60
    assert later.gc([], grace=3600)[1] == 0  # all recent: a running gc keeps them too
    assert Store(tmp_path / "home").read_blob(digest(versions[3])) == versions[3]


def test_a_store_written_before_compression_still_reads_and_grows_by_deltas(tmp_path):
    home = tmp_path / "home"
    root = home / "checkpoints"
    work = tmp_path / "work"
    work.mkdir()
    old = b"".join(b"an old line %d\n" % n for n in range(300))
    tricky = MAGIC + b"z" + b"an old raw file that starts like a compressed one"
    trickier = MAGIC + b"z" + bytes(20) + zlib.compress(b"and goes on like one")
    files = {}
    for rel, data in (("a.txt", old), ("b.bin", tricky), ("c.bin", trickier)):
        (work / rel).write_bytes(data)
        blob = root / "blobs" / digest(data)[:2] / digest(data)[2:]
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)  # as the store kept every blob before: raw
        info = os.stat(work / rel)
        files[rel] = ["file", 0o644, len(data), info.st_mtime_ns, digest(data)]
    from mulligan.app.workspace.store.snapshots import manifest_id
    tree = manifest_id({k: tuple(v) for k, v in files.items()}, {}, [])
    (root / "trees").mkdir()
    (root / "trees" / f"{tree}.json").write_bytes(orjson.dumps(
        {"version": 1, "root": str(work), "files": files, "skipped": {}, "ignored": []}))
    store = Store(home)
    manifest = store.load(tree)
    assert store.read_blob(manifest.files["a.txt"][4]) == old
    assert store.read_blob(manifest.files["b.bin"][4]) == tricky
    assert store.read_blob(manifest.files["c.bin"][4]) == trickier
    store._last[str(work.resolve())] = manifest  # as a session that just took it
    new = old.replace(b"an old line 7\n", b"a new line\n")
    (work / "a.txt").write_bytes(new)
    after = store.snapshot(work, reread=["a.txt"])
    assert store.blobs.base_of(after.files["a.txt"][4]) == digest(old)
    assert Store(home).read_blob(after.files["a.txt"][4]) == new
    (root / "blobs" / digest(old)[:2] / digest(old)[2:]).write_bytes(old + b"tampered")
    with pytest.raises(Damaged, match=f"blob {digest(old)} is damaged: .*do not hash to its "
                                      "name: refused"):
        Store(home).read_blob(digest(old))


def test_a_base_freed_while_its_bytes_are_still_in_memory_is_not_used(tmp_path):
    store, work, kept = grow(tmp_path, 2)
    blobs = [store.load(tree).files["big.txt"][4] for tree, _ in kept]
    store.blob_path(blobs[1]).unlink()  # as a gc in another process would
    data = kept[1][1].replace(b"line 00100 ", b"changed 100 ")
    (work / "big.txt").write_bytes(data)
    after = store.snapshot(work, reread=["big.txt"])
    assert store.blobs.base_of(after.files["big.txt"][4]) is None  # whole, not a delta
    assert Store(tmp_path / "home").read_blob(after.files["big.txt"][4]) == data


def test_settle_waits_for_this_threads_blobs_not_another_ones(tmp_path):
    # Parallel attempts share one Store: a snapshot's new blobs are written on worker
    # threads, and each snapshot waits for its own (and only its own) before its manifest
    # names them.
    import threading

    from mulligan.app.workspace.store.blobs import _INLINE, Objects

    held = threading.Event()

    def path_of(name: str) -> Path:
        if name == digest(b"slow"):
            held.wait(30)  # another thread's blob, slow to write
        return tmp_path / name

    objects = Objects(path_of, by_content=True, what="blob")
    ready, go, other_done = threading.Event(), threading.Event(), threading.Event()

    def fill(k: int) -> None:  # the first few are written by the caller itself
        for n in range(_INLINE):
            objects.put_soon(digest(b"%d %d" % (k, n)), b"%d %d" % (k, n))

    def other() -> None:
        fill(1)
        objects.put_soon(digest(b"slow"), b"slow")
        ready.set()
        go.wait(30)
        objects.settle()
        other_done.set()

    def mine() -> None:
        ready.wait(30)
        fill(2)
        objects.put_soon(digest(b"mine"), b"mine")
        objects.settle()

    threading.Thread(target=other).start()
    mine_thread = threading.Thread(target=mine)
    mine_thread.start()
    mine_thread.join(10)
    assert not mine_thread.is_alive()  # settled without waiting for the other's blob
    assert (tmp_path / digest(b"mine")).exists()
    go.set()
    time.sleep(0.2)
    assert not other_done.is_set()  # the other thread waits for its own, still held
    held.set()
    assert other_done.wait(10) and (tmp_path / digest(b"slow")).exists()


def test_past_its_backlog_put_soon_waits_for_the_oldest_blob_in_every_snapshot(tmp_path):
    # Each snapshot's blobs wait in memory up to a backlog; past it, `put_soon` waits for
    # the oldest still being written (each job asked once: asking all of them every time
    # made a 20k-file first snapshot quadratic). A snapshot's `settle` starts the next
    # one's count again.
    import threading

    from mulligan.app.workspace.store.blobs import _INLINE, Objects

    slow = [digest(b"a slow blob %d" % n) for n in range(2)]
    gates = [threading.Event(), threading.Event()]

    def path_of(name: str) -> Path:
        if name in slow:
            gates[slow.index(name)].wait(30)  # a blob slow to write
        return tmp_path / name

    objects = Objects(path_of, by_content=True, what="blob", backlog=8)
    started, returned = [threading.Event(), threading.Event()], [threading.Event(),
                                                                  threading.Event()]

    def snapshots() -> None:  # one thread: a snapshot is its put_soon's up to its settle
        for snapshot in range(2):
            for n in range(_INLINE):  # written by the caller itself
                objects.put_soon(digest(b"%d %d" % (snapshot, n)), b"%d %d" % (snapshot, n))
            if snapshot == 0:  # a quick one first: waited for, ended, counted past
                objects.put_soon(digest(b"a quick blob"), b"a quick blob")
            started[snapshot].set()
            objects.put_soon(slow[snapshot], b"a slow blob %d" % snapshot)  # over the backlog
            returned[snapshot].set()
            objects.settle()

    thread = threading.Thread(target=snapshots)
    thread.start()
    for snapshot in range(2):
        assert started[snapshot].wait(10)
        time.sleep(0.2)
        assert not returned[snapshot].is_set()  # waiting for the slow blob, the oldest
        gates[snapshot].set()
        assert returned[snapshot].wait(10)
    thread.join(10)
    assert all((tmp_path / name).exists() for name in slow)


def test_a_chains_first_object_read_for_a_delta_is_checked_on_its_own_when_read(tmp_path):
    # Reading a delta checks the bytes its chain gives against the top's hash only; the
    # first object's bytes, kept aside (a restore reads that manifest next), are checked
    # against their own hash before they are handed out: here they differ where the delta
    # copies nothing, which the top's check cannot see.
    lines = [b"line %05d of a file long enough to be worth a delta\n" % n for n in range(200)]
    first = b"".join(lines)
    second = b"".join(lines[:-1]) + b"the last line, changed\n"
    store = Store(tmp_path / "home")
    store.keep(first)
    store.blobs.put(digest(second), second, base=digest(first))
    assert depth(store, digest(second)) == 1
    forged = b"".join(lines[:-1]) + b"not what the first object held\n"
    store.blob_path(digest(first)).write_bytes(
        MAGIC + b"z" + bytes.fromhex(digest(first)) + zlib.compress(forged))
    fresh = Store(tmp_path / "home")
    assert fresh.read_blob(digest(second)) == second
    with pytest.raises(Damaged, match=f"blob {digest(first)} is damaged: .*do not match"):
        fresh.read_blob(digest(first))
    sound = Store(tmp_path / "home2")
    sound.keep(first)
    sound.blobs.put(digest(second), second, base=digest(first))
    again = Store(tmp_path / "home2")
    assert again.read_blob(digest(second)) == second and again.read_blob(digest(first)) == first


def test_a_small_manifest_is_stored_whole_and_a_big_one_as_a_delta(tmp_path):
    """A manifest of a few paths is kept whole, compressed (its delta would save a few
    hundred bytes for a base read and a line match on every turn); one of many paths, as a
    delta of the folder's previous manifest."""
    forms = {}
    for paths in (25, 60):
        work = tmp_path / f"work{paths}"
        work.mkdir()
        for n in range(paths):
            (work / f"file{n}.txt").write_text(f"file {n}\n")
        store = Store(tmp_path / f"home{paths}")
        store.snapshot(work)
        (work / "file0.txt").write_text("changed\n")
        tree = store.snapshot(work)
        body = store.manifests.read(tree.id)
        form = store.journal.get(b"t", tree.id)
        assert form is not None and form.startswith(MAGIC)
        forms[paths] = (len(body), form[len(MAGIC):len(MAGIC) + 1])
    assert 2048 < forms[25][0] < MIN_MANIFEST_DELTA < forms[60][0]
    assert forms[25][1] == _WHOLE and forms[60][1] == _DELTA
