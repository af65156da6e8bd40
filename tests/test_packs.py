"""The journal's sealed packs (app/workspace/store/packs.py, journal.py), on real stores: a
full journal is sealed as one pack and no loose object is written on that turn; every object
stays readable from the pack (a fresh store, a fresh process), then from loose files once a
background spill has removed it; a pack a killed process left is read, and spilled by the
next seal and by gc; a spill killed midway leaves everything readable, and gc finishes it; a
seal killed before its pack is in place, or before its header, loses nothing; gc after a
seal frees nothing still named and nothing comes back, even in a process that read the pack;
a damaged, truncated or crafted pack is data; two processes filling one journal at once lose
nothing; and a delta's base whose record is old is written out when it is used, so a gc
between the lookup and the delta's record keeps it.

Spills are held back the way another process's spill would hold them: a flock of the packs
folder (`spill_held`)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from mulligan.app.workspace.store import journal
from mulligan.app.workspace.store.snapshots import Store
from mulligan.home import private_dirs
from test_journal import folder

SRC = str(Path(__file__).parents[1] / "src")


def loose(home: Path) -> set[Path]:
    root = home / "checkpoints"
    return {p for p in (root / "blobs").rglob("*") if p.is_file()} | \
        set((root / "trees").glob("*.json"))


def packs(home: Path) -> list[str]:
    found = home / "checkpoints" / "packs"
    return sorted(p.name for p in found.iterdir() if not p.name.startswith(".")) \
        if found.is_dir() else []


@contextlib.contextmanager
def spill_held(home: Path) -> Iterator[None]:
    """Hold the packs folder's flock, as a spill in another process does: no pack is
    spilled (nor removed) until it is let go."""
    folder = home / "checkpoints" / "packs"
    private_dirs(folder)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def started(tmp_path: Path) -> tuple[Path, Path, Store, list[tuple[str, str, bytes]]]:
    """A store with one snapshot of a small folder in its journal: (home, the folder, the
    store, no turns yet)."""
    home, work = tmp_path / "home", folder(tmp_path / "work")
    Store(home).snapshot(work)
    return home, work, Store(home), []


def turn(store: Store, work: Path) -> tuple[str, str, bytes]:
    """One turn's snapshot of ~30 KB that does not compress: nine fill the journal."""
    data = os.urandom(30_000)
    (work / "src" / "big.bin").write_bytes(data)
    tree = store.snapshot(work, reread=["src/big.bin"])
    return tree.id, tree.files["src/big.bin"][4], data


def readable(home: Path, made: list[tuple[str, str, bytes]]) -> None:
    """Every snapshot `made` reads back, blob and all, in this process (a fresh Store) and
    in a fresh process."""
    fresh = Store(home)
    for tree, blob, data in made:
        assert fresh.load(tree).files["src/big.bin"][4] == blob
        assert fresh.read_blob(blob) == data
    wanted = [(tree, blob, hashlib.sha256(data).hexdigest()) for tree, blob, data in made]
    script = (
        "import hashlib, json, sys\n"
        "from mulligan.app.workspace.store.snapshots import Store\n"
        "store = Store(sys.argv[1])\n"
        "for tree, blob, sha in json.loads(sys.stdin.read()):\n"
        "    assert store.load(tree).files['src/big.bin'][4] == blob\n"
        "    assert hashlib.sha256(store.read_blob(blob)).hexdigest() == sha\n"
        "print('ok')\n")
    done = subprocess.run([sys.executable, "-c", script, str(home)], input=json.dumps(wanted),
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": SRC},
                          timeout=120)
    assert done.stdout == "ok\n", done.stderr


def fill(store: Store, work: Path, made: list[tuple[str, str, bytes]]) -> None:
    """Turns until one seals the journal: its header's generation changes. (Not "a pack
    more than before": the background spill may remove the new pack before it is counted,
    and the turns then went on into the next generation -- a test failed so.)"""
    def generation() -> bytes:
        with open(store.journal.file, "rb") as handle:
            return handle.read(journal.HEADER.size)

    before = generation()
    for _ in range(2 * journal.SIZE // 30_000):
        made.append(turn(store, work))
        if generation() != before:
            return
    raise AssertionError("the journal was never sealed")


def test_a_full_journal_is_sealed_as_one_pack_and_no_loose_object_is_written_then(tmp_path):
    home, work, store, made = started(tmp_path)
    with spill_held(home):
        for _ in range(2 * journal.SIZE // 30_000):
            files = loose(home)
            made.append(turn(store, work))
            if packs(home):
                break
        assert loose(home) == files  # the sealing turn wrote no loose object
        assert len(packs(home)) == 1
        assert len(made) > 5
        readable(home, made)  # from the pack (the journal started again) and the journal
        assert not store.blob_path(made[0][1]).exists()
    store.journal.wait()  # the background spill, let go
    assert packs(home) == []
    for _, blob, _ in made[:-1]:  # (the last turn's record is in the new generation)
        assert store.blob_path(blob).exists()
    readable(home, made)
    first = store.blob_path(made[0][1]).stat().st_mtime
    assert first < time.time() - 0.001  # dated when its record was written (gc's grace)


def test_a_process_that_seals_alone_forgets_the_packs_spilled_since(tmp_path):
    """The only writer never sees another's generation: at its next seal it keeps in memory
    only the packs still there (what was spilled is read from its files)."""
    home, work, store, made = started(tmp_path)
    fill(store, work, made)
    store.journal.wait()
    first = len(made)
    fill(store, work, made)
    view = store.journal.view()
    assert not any((b"b", blob) in view for _, blob, _ in made[:first - 1])
    assert all((b"b", blob) in view for _, blob, _ in made[first:])
    store.journal.wait()
    readable(home, made)


LEFT = """
import os, sys
from pathlib import Path
from mulligan.app.workspace.store.snapshots import Store
work, home = Path(sys.argv[1]), Path(sys.argv[2])
store = Store(home)
folder = home / "checkpoints" / "packs"
while not any(name.endswith(".pack") for name in os.listdir(folder)):
    data = os.urandom(30_000)
    (work / "src" / "big.bin").write_bytes(data)
    tree = store.snapshot(work, reread=["src/big.bin"])
    print(tree.id, tree.files["src/big.bin"][4], data.hex(), flush=True)
os._exit(0)  # killed before its spill could run (it waits for the flock the test holds)
"""


def leave_a_pack(home: Path, work: Path) -> list[tuple[str, str, bytes]]:
    """A process that seals the journal and dies before its spill: its turns."""
    with spill_held(home):
        done = subprocess.run([sys.executable, "-c", LEFT, str(work), str(home)],
                              capture_output=True, text=True, timeout=120,
                              env={**os.environ, "PYTHONPATH": SRC})
        assert done.returncode == 0, done.stderr
    made = []
    for line in done.stdout.splitlines():
        tree, blob, data = line.split()
        made.append((tree, blob, bytes.fromhex(data)))
    return made


def test_a_pack_left_by_a_killed_process_is_read_then_spilled_by_the_next_seal_and_by_gc(
        tmp_path):
    home, work = tmp_path / "home", folder(tmp_path / "work")
    Store(home).snapshot(work)
    made = leave_a_pack(home, work)
    left = packs(home)
    assert len(left) == 1
    readable(home, made)
    store = Store(home)
    fill(store, work, made)  # the next seal, in another process: its spill takes both
    store.journal.wait()
    assert packs(home) == []
    readable(home, made)
    made += leave_a_pack(home, work)
    assert len(packs(home)) == 1
    trees = [tree for tree, _, _ in made]
    Store(home).gc(trees, grace=0)  # gc spills it first, and frees nothing still named
    assert packs(home) == []
    readable(home, made)


MID = """
import os, sys, time
from pathlib import Path
from mulligan.app.workspace.store.snapshots import Store
work, home = Path(sys.argv[1]), Path(sys.argv[2])
store = Store(home)
folder = home / "checkpoints" / "packs"
n = 0
while not (folder.is_dir() and any(name.endswith(".pack") for name in os.listdir(folder))):
    n += 1  # small turns: a pack of ~1,000 objects, whose spill takes a while
    (work / "src" / "a.txt").write_text(f"{n}\\n")
    (work / "src" / f"b{n % 40}.txt").write_text(f"{n}\\n")
    tree = store.snapshot(work, reread=["src/a.txt"])
    print(tree.id, tree.files["src/a.txt"][4], n, flush=True)
print("sealed", flush=True)
time.sleep(600)  # the spill goes on, on its thread, until the test kills this process
"""


def test_a_spill_killed_midway_leaves_everything_readable_and_gc_finishes_it(tmp_path):
    home, work = tmp_path / "home", folder(tmp_path / "work")
    Store(home).snapshot(work)
    child = subprocess.Popen([sys.executable, "-c", MID, str(work), str(home)],
                             stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": SRC})
    assert child.stdout is not None
    made = []
    for line in child.stdout:
        if line == "sealed\n":
            break
        tree, blob, n = line.split()
        made.append((tree, blob, int(n)))
    before = len(loose(home))
    deadline = time.monotonic() + 60
    while len(loose(home)) < before + 50 and time.monotonic() < deadline:
        time.sleep(0.001)  # (a few objects spilled: killed in the middle, most likely)
    child.kill()
    child.wait()
    for gc in (False, True):
        if gc:
            Store(home).gc([tree for tree, _, _ in made], grace=0)
            assert packs(home) == []
        fresh = Store(home)
        for tree, blob, n in made:
            assert fresh.load(tree).files["src/a.txt"][4] == blob
            assert fresh.read_blob(blob) == f"{n}\n".encode()


def test_gc_after_a_seal_frees_nothing_still_named_and_nothing_comes_back(tmp_path):
    home, work, store, made = started(tmp_path)
    with spill_held(home):
        fill(store, work, made)
        reader = Store(home)  # another process, which reads the pack before gc
        assert all(reader.has_blob(blob) for _, blob, _ in made)
    kept, dropped = made[1::2], made[0::2]
    freed = Store(home).gc([tree for tree, _, _ in kept], grace=0)
    assert freed[0] >= len(dropped) and freed[1] >= len(dropped)
    assert packs(home) == []
    readable(home, kept)
    for tree, blob, _ in dropped:  # gone everywhere: no pack, no journal, not in memory
        for where in (Store(home), reader, store):
            assert not where.has_blob(blob)
            assert tree not in where.tree_ids()


def test_a_crash_before_the_pack_is_in_place_or_before_the_header_loses_nothing(tmp_path):
    """A seal killed with its temporary file half written leaves the journal as it was (the
    file is removed by the next seal); killed after the pack is in place but before the
    header moved on, the pack repeats the journal's records (read as well), and the next
    seal puts a copy of them, with the records added since, in its place."""
    home, work = tmp_path / "home", folder(tmp_path / "work")
    store = Store(home)
    store.snapshot(work)
    made = [turn(store, work) for _ in range(3)]
    folder_ = home / "checkpoints" / "packs"
    private_dirs(folder_)
    data = (home / "checkpoints" / "journal").read_bytes()
    generation = int.from_bytes(data[5:13], "little")
    (folder_ / f".{generation:016x}.12345.part").write_bytes(data[:9000])  # cut mid-write
    (folder_ / f"{generation:016x}.pack").write_bytes(data[:records(data)[-1]])  # sealed
    readable(home, made)
    reader = Store(home)  # a process that reads the crashed seal's pack, then goes on
    assert reader.read_blob(made[0][1]) == made[0][2]
    with spill_held(home):
        store = Store(home)  # the next seal: same generation, over the crashed one
        while (home / "checkpoints" / "journal").read_bytes()[5:13] == data[5:13]:
            made.append(turn(store, work))
        for _, blob, content in made:  # the pack read again, whole: not the crashed one's
            assert reader.read_blob(blob) == content
        assert packs(home) == [f"{generation:016x}.pack"]
        assert not any(p.name.endswith(".part") for p in folder_.iterdir())
        readable(home, made)
        with open(folder_ / f"{generation:016x}.pack", "rb") as sealed:
            assert len(records(sealed.read())) == len(made)  # the first snapshot's too
    Store(home).gc([tree for tree, _, _ in made], grace=0)
    assert packs(home) == []
    readable(home, made)


def records(data: bytes) -> list[int]:
    """Where each record of a journal or pack starts (walked as the reader does)."""
    at, found = journal._START, []
    while data[at:at + 4] == b"\x00MLJ":
        found.append(at)
        at += journal._RECORD.size + int.from_bytes(data[at + 21:at + 25], "little")
    return found


def test_a_damaged_truncated_or_crafted_pack_is_data_never_a_crash(tmp_path):
    home, work, store, made = started(tmp_path)
    with spill_held(home):
        fill(store, work, made)
        folder_ = home / "checkpoints" / "packs"
        real = folder_ / packs(home)[0]
        data, generation = real.read_bytes(), int(real.stem, 16)
        starts = records(data)  # the first snapshot's record, then one a turn
        assert len(starts) == len(made)  # (the last turn's is in the next generation)
        damaged = bytearray(data)
        damaged[starts[2] + journal._RECORD.size + 40] ^= 0x55  # the second turn's payload
        others = {  # never a pack: nothing in them counts, whatever they hold
            f"{generation - 1:016x}.pack": data,  # its header says another generation
            f"{generation - 2:016x}.pack": b"",
            f"{generation - 3:016x}.pack": b"\x00MLJh" + os.urandom(300),
            "ffffffffffffffff.pack": os.urandom(5000),
            "..pack": data, "x.pack": data, f"{generation:016x}.pack.x": data,
        }
        for name, content in others.items():
            (folder_ / name).write_bytes(content)
        (tmp_path / "outside").write_bytes(data)
        (folder_ / f"{generation - 4:016x}.pack").symlink_to(tmp_path / "outside")
        (folder_ / f"{generation - 5:016x}.pack").mkdir()
        for case in (bytes(damaged), data[:starts[2] + 100], data[:starts[2]]):
            real.write_bytes(case)  # damaged, cut in the second turn's record, cut before it
            fresh = Store(home)
            assert fresh.read_blob(made[0][1]) == made[0][2]  # the records before: read
            for _, blob, _ in made[1:-1]:  # from the damage on: not in the store
                assert not fresh.has_blob(blob)
            assert not fresh.has_blob(hashlib.blake2b(b"", digest_size=20).hexdigest())
    fresh.gc([tree for tree, _, _ in made], grace=0)  # spills what counts: never a crash
    assert (tmp_path / "outside").read_bytes() == data  # a link is never followed
    assert sorted(p.name for p in folder_.iterdir()) == sorted(
        ["..pack", "x.pack", f"{generation:016x}.pack.x", f"{generation - 4:016x}.pack",
         f"{generation - 5:016x}.pack"])  # spilled and removed: only what were packs
    assert Store(home).read_blob(made[0][1]) == made[0][2]
    assert Store(home).read_blob(made[-1][1]) == made[-1][2]  # (the journal's)


TWO = """
import os, sys
from pathlib import Path
from mulligan.app.workspace.store.snapshots import Store
work, home = Path(sys.argv[1]), Path(sys.argv[2])
store = Store(home)
for n in range(40):
    data = os.urandom(30_000)
    (work / "src" / "big.bin").write_bytes(data)
    tree = store.snapshot(work, reread=["src/big.bin"])
    print(tree.id, tree.files["src/big.bin"][4], data.hex(), flush=True)
"""


def test_two_processes_filling_one_journal_at_once_lose_nothing(tmp_path):
    home = tmp_path / "home"
    works = [folder(tmp_path / "a"), folder(tmp_path / "b")]
    made = []
    with spill_held(home):  # every pack kept: what they hold is what is read
        running = [subprocess.Popen([sys.executable, "-c", TWO, str(work), str(home)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    env={**os.environ, "PYTHONPATH": SRC}) for work in works]
        for process in running:
            out, err = process.communicate(timeout=300)
            assert process.returncode == 0, err
            for line in out.splitlines():
                tree, blob, data = line.split()
                made.append((tree, blob, bytes.fromhex(data)))
        assert len(made) == 80  # 2.4 MB through a 256 KB journal: sealed about ten times
        assert len(packs(home)) >= 8
        readable(home, made)
    Store(home).gc([tree for tree, _, _ in made], grace=0)
    assert packs(home) == []
    readable(home, made)


def test_a_base_whose_record_is_old_is_written_out_when_a_delta_is_made_against_it(tmp_path):
    """The race: a delta's base held only in the journal, its record older than gc's grace;
    a gc in another process between the delta's lookup of its base and the delta's own
    record writes the base out dated then, and frees it, unless the lookup wrote it out
    first (mtime now). Interleaved at the seams a snapshot uses: `Objects.put` (the lookup,
    the delta made, handed back), another store's gc, then `Journal.put` (the record)."""
    home, work = tmp_path / "home", folder(tmp_path / "work")
    text = "".join(f"line {n} of a file long enough for a delta\n" for n in range(200))
    (work / "src" / "f0.py").write_text(text)
    base = Store(home).snapshot(work).files["src/f0.py"][4]
    file = home / "checkpoints" / "journal"
    data = bytearray(file.read_bytes())
    old = time.time_ns() - 2000 * 10**9  # written long ago: outside a gc grace of 1000 s
    at = journal._START  # date every record then (its hash covers its payload, not this)
    while data[at:at + 4] == b"\x00MLJ":
        data[at + 13:at + 21] = old.to_bytes(8, "little")
        at += journal._RECORD.size + int.from_bytes(data[at + 21:at + 25], "little")
    file.write_bytes(bytes(data))
    mine = Store(home)
    new = (text + "one more line\n").encode()
    name = hashlib.blake2b(new, digest_size=20).hexdigest()
    staged: list[tuple[str, bytes]] = []
    mine.blobs.put(name, new, base=base, into=staged)  # the lookup of its base, the delta
    assert staged[0][1].startswith(b"\x00MLBd")  # (a delta of it)
    Store(home).gc([], grace=1000)  # another process's gc, before the delta's record
    assert mine.journal.put([(b"b", name, staged[0][1])])
    assert Store(home).read_blob(name) == new
