"""The stat index's native compare (`mulligan.app.workspace.store._lstats`, built by setup.py)
gives the answers of the Python path, on random trees and random changes: a walk with it
and a walk without it see the same files, yield the same paths to hash, and record the same
next index. Where it was not built these tests skip, except under CI=true, where a missing
extension is a broken build and fails."""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import stat
import time
from array import array
from pathlib import Path

import pytest

from mulligan.app.workspace.store import statindex
from mulligan.app.workspace.store.walk import Walk

try:
    from mulligan.app.workspace.store import _lstats
except ImportError:  # pragma: no cover - checked just below
    _lstats = None  # type: ignore[assignment]

SETTLE = statindex.MARGIN / 1e9 + 0.2
ODD = os.fsdecode(b"caf\xe9-\xff")  # a name whose bytes are not UTF-8
WIDE = "caf\u00e9-\u00fc"  # a name that is UTF-8, not ASCII


@pytest.fixture(autouse=True)
def built() -> None:
    if _lstats is None:
        if os.environ.get("CI") == "true":
            pytest.fail("the native stat compare (_lstats) was not built: `make` builds it "
                        "(setup.py); CI must test it")
        pytest.skip("the native stat compare (_lstats) is not built here (run make)")


def key(path: str, fd: int, follow: bool) -> tuple[int, ...]:
    try:
        info = os.stat(path, dir_fd=fd, follow_symlinks=follow)
    except OSError:
        return (-1,)
    if follow and not stat.S_ISREG(info.st_mode):
        return (0, 0, 0, 0, 0)
    return statindex.key_of(info)


def test_differ_names_the_paths_whose_stat_is_not_the_recorded_one(tmp_path):
    rnd = random.Random(11)
    root = tmp_path / "t"
    (root / ODD / "deep" / "er").mkdir(parents=True)
    paths = ["a", f"{ODD}/b", f"{ODD}/deep/er/c", "gone", "/etc/hostname", "", ODD, "link",
             "dlink", f"{ODD}/deep"]
    for rel in ("a", f"{ODD}/b", f"{ODD}/deep/er/c"):
        (root / rel).write_bytes(os.fsencode(rel))
    (root / "link").symlink_to("a")
    (root / "dlink").symlink_to(ODD)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(60):
            follow = rnd.random() < 0.5
            names = rnd.sample(paths, rnd.randint(1, len(paths)))
            now = [key(p, fd, follow) for p in names]
            keys = [k if len(k) == 5 else (1, 2, 3, 4, 5) for k in now]
            expect = []
            for at in range(len(keys)):  # some recorded keys off by one in one column
                if rnd.random() < 0.3:
                    column = rnd.randrange(5)
                    keys[at] = tuple(v + (c == column) for c, v in enumerate(keys[at]))
                if keys[at] != now[at] or names[at].startswith("/") or \
                        (not follow and len(now[at]) != 5):
                    expect.append(at)
            skip = rnd.randint(0, 2)
            blob = b"\0".join([b"x"] * skip + [os.fsencode(p) for p in names])
            stride = len(keys) + rnd.randint(0, 3)
            columns = array("q", [0] * (5 * stride))
            for at, k in enumerate(keys):
                for c in range(5):
                    columns[c * stride + at] = k[c]
            threads = rnd.randint(1, 4)
            assert _lstats.differ(fd, blob, skip, len(names), columns, stride, follow,
                                  threads) == expect, (names, follow)
        with pytest.raises(ValueError):  # fewer names than said
            _lstats.differ(fd, b"a\0b", 0, 3, array("q", [0] * 15), 3, False, 1)
        with pytest.raises(ValueError):  # keys shorter than said
            _lstats.differ(fd, b"a\0b", 0, 2, array("q", [0] * 9), 2, False, 1)
        with pytest.raises(ValueError):
            _lstats.differ(fd, b"a\0b", 3, 1, array("q", [0] * 9), 1, False, 1)
    finally:
        os.close(fd)


def make_tree(root: Path, rnd: random.Random, files: int) -> list[str]:
    """Folders up to 20 deep, names not ASCII, links, nested .gitignore files. (Not names
    that are not UTF-8: a walk lists those as skipped, and a folder holding one is read
    every time -- tests/test_checkpoints.py; `differ` takes them, above.)"""
    folders = [""]
    for n in range(files // 6):
        parent = rnd.choice(folders)
        name = f"{WIDE}{n}" if rnd.random() < 0.1 else f"d{n}"
        rel = f"{parent}/{name}" if parent else name
        if rel.count("/") < 20:
            (root / rel).mkdir(parents=True)
            folders.append(rel)
    chain = ""
    for depth in range(20):  # one deep path at least
        chain = f"{chain}/z{depth}" if chain else "z0"
        (root / chain).mkdir(exist_ok=True)
        folders.append(chain)
    rels = []
    for n in range(files):
        folder = rnd.choice(folders)
        name = f"{WIDE}{n}.txt" if rnd.random() < 0.1 else f"f{n}.{rnd.choice(['py', 'log'])}"
        rel = f"{folder}/{name}" if folder else name
        (root / rel).write_text(f"{n}\n" * rnd.randint(1, 5))
        rels.append(rel)
    for folder in rnd.sample(folders, 3):
        (root / folder / ".gitignore").write_text("*.log\n")
    (root / "link").symlink_to(rels[0])
    return rels


def change(root: Path, rels: list[str], rnd: random.Random) -> str:
    """One random change to one file, as a person or a tool makes it."""
    rel = rnd.choice(rels)
    path = root / rel
    if not path.is_file() or path.is_symlink():
        return "none"
    old = path.stat()
    what = rnd.choice(["size", "mtime", "mode", "inode", "delete", "dir", "link", "racy",
                       "gitignore", "new"])
    if what == "size":
        with open(path, "a") as handle:
            handle.write("more\n")
    elif what == "mtime":
        os.utime(path, ns=(old.st_atime_ns, old.st_mtime_ns - 3_000_000_000))
    elif what == "mode":
        path.chmod(0o755 if not old.st_mode & 0o100 else 0o644)
    elif what == "inode":  # the same bytes and mtime in a new file renamed over it
        spare = path.with_name(path.name + ".new")
        spare.write_bytes(path.read_bytes())
        os.utime(spare, ns=(old.st_atime_ns, old.st_mtime_ns))
        spare.rename(path)
    elif what == "delete":
        path.unlink()
    elif what == "dir":
        path.unlink()
        path.mkdir()
        (path / "inside.txt").write_text("inside\n")
    elif what == "link":
        path.unlink()
        path.symlink_to("elsewhere")
    elif what == "racy":  # the same size, the mtime put back: only the ctime says so
        path.write_text(path.read_text().upper())
        os.utime(path, ns=(old.st_atime_ns, old.st_mtime_ns))
    elif what == "gitignore":
        (path.parent / ".gitignore").write_text("*.py\n")
    else:
        (path.parent / f"new{rnd.randrange(10**6)}.txt").write_text("new\n")
    return what


def walked(root: Path, index: statindex.Index | None, native: bool = True,
           started: int | None = None) -> tuple:
    """Everything a walk gives, its files hashed as the store hashes them. `started`: the
    time the walk counts as its start (what is racy for the next index depends on it: two
    walks compared must share it)."""
    walk = Walk(str(root), index, max_file=1 << 20, native=native)
    walk.started = started or walk.started
    asked = []
    for rel, info, previous in walk:
        digest = hashlib.blake2b((root / rel).read_bytes(), digest_size=20).hexdigest()
        walk.files[rel] = ("file", stat.S_IMODE(info.st_mode), info.st_size,
                           info.st_mtime_ns, digest)
        asked.append((rel, previous))
    return (asked, list(walk.files.items()), walk.ignored, walk.skipped, walk.temps,
            walk.unchanged(), walk.recorded(), walk)


def settled(root: Path) -> statindex.Index:
    """The index of a walk that began once the tree was older than the racy margin, as its
    file has it."""
    time.sleep(SETTLE)
    walk = walked(root, None)[-1]
    index = statindex.parse(statindex.dump(statindex.build(
        walk.started, "0" * 40, walk.meta, walk.recorded())))
    assert index is not None and all(f.clean for f in index.folders.values())
    return index


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_walk_with_the_native_compare_gives_what_the_python_walk_gives(tmp_path, seed):
    rnd = random.Random(seed)
    root = tmp_path / "work"
    rels = make_tree(root, rnd, 300)
    index = settled(root)
    now = time.time_ns()
    unchanged = walked(root, index, started=now)
    assert unchanged[:-1] == walked(root, index, False, now)[:-1]
    assert unchanged[5] == index.tree and not unchanged[0]  # nothing to hash
    seen = set()
    for _ in range(25):
        seen.add(change(root, rels, rnd))
        now = time.time_ns()
        native = walked(root, index, started=now)
        assert native[:-1] == walked(root, index, False, now)[:-1], seen
        assert native[1:5] == walked(root, None)[1:5], seen  # what no index at all gives
    assert len(seen) >= 6


def test_a_large_tree_stated_natively_and_on_python_threads_gives_the_same(tmp_path):
    """Past 4,096 paths the Python path states ahead on two threads too."""
    rnd = random.Random(4)
    root = tmp_path / "work"
    rels = make_tree(root, rnd, 4300)
    index = settled(root)
    now = time.time_ns()
    assert walked(root, index, started=now)[:-1] == walked(root, index, False, now)[:-1]
    for _ in range(4):
        change(root, rels, rnd)
    shutil.rmtree(root / rels[7].split("/")[0], ignore_errors=True)
    now = time.time_ns()
    native = walked(root, index, started=now)
    assert native[:-1] == walked(root, index, False, now)[:-1]
    assert native[1:5] == walked(root, None)[1:5]


def test_a_gitignore_that_ignores_itself_or_is_a_link_is_stated_natively_as_in_python(
        tmp_path):
    """Such a .gitignore is no entry of its folder: only its own stat says the rules
    changed (and through the link, as git reads it)."""
    root = tmp_path / "work"
    (root / "sub").mkdir(parents=True)
    (root / "other").mkdir()
    for rel in ("a.py", "a.log", "sub/b.py", "sub/b.log", "other/c.py", "rules.txt"):
        (root / rel).write_text(rel)
    (root / "sub" / ".gitignore").write_text(".gitignore\n*.log\n")
    (root / "rules.txt").write_text("*.log\n")
    (root / "other" / ".gitignore").symlink_to("../rules.txt")
    index = settled(root)
    (root / "sub" / ".gitignore").write_text(".gitignore\n*.py\n")  # in place: same names
    now = time.time_ns()
    native = walked(root, index, started=now)
    assert native[:-1] == walked(root, index, False, now)[:-1]
    assert native[1:5] == walked(root, None)[1:5] and "sub/b.log" in dict(native[1])
    index = settled(root)
    with open(root / "rules.txt", "a") as rules:  # the link's target: the link is as it was
        rules.write("*.py\n")
    now = time.time_ns()
    native = walked(root, index, started=now)
    assert native[:-1] == walked(root, index, False, now)[:-1]
    assert native[1:5] == walked(root, None)[1:5] and "other/c.py" not in dict(native[1])
