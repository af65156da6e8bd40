"""A manifest read by its lines (`store.manifests.decode` with the one read before) is exactly
what reading its whole JSON gives, for any paths (quotes, newlines, '],"' and '],' in names
and link targets), any changes between the two, and any damage."""

from __future__ import annotations

import random
from pathlib import Path

import orjson
import pytest

from mulligan.app.workspace.store.manifests import decode, encode
from mulligan.app.workspace.store.snapshots import Store

ODD = ['a"b', "new\nline", 'x],"y', "ends],", "ends]", "[", "],[", "\\", "é", "tab\t", ","]


def whole(data: bytes) -> tuple[list[tuple[str, tuple[object, ...]]], object, object]:
    parsed = orjson.loads(data)
    return ([(p, tuple(f)) for p, f in parsed["files"].items()], parsed.get("skipped", {}),
            parsed.get("ignored", []))


def facts(rng: random.Random) -> tuple[str, int, int, int, str]:
    if rng.random() < 0.1:
        return ("link", 0, 0, 0, rng.choice(ODD + ["target"]))
    if rng.random() < 0.1:
        return ("dir", 0o755, 0, 0, "")
    return ("file", rng.choice([0o644, 0o755]), rng.randint(0, 5000), rng.randint(0, 1 << 62),
            f"{rng.getrandbits(160):040x}")


def folder(rng: random.Random, count: int) -> dict[str, tuple[str, int, int, int, str]]:
    names = [f"pkg{n % 7}/mod{n}.py" for n in range(count)]
    for _ in range(rng.randint(0, 4)):
        names.insert(rng.randint(0, len(names)), f"odd/{rng.choice(ODD)}{rng.randint(0, 9)}")
    return {name: facts(rng) for name in names}


def changed(rng: random.Random, files: dict[str, tuple[str, int, int, int, str]]
            ) -> dict[str, tuple[str, int, int, int, str]]:
    items = list(files.items())
    for _ in range(rng.randint(0, 12)):
        roll, at = rng.random(), rng.randrange(len(items) + 1)
        if roll < 0.4 and items:
            at = min(at, len(items) - 1)
            items[at] = (items[at][0], facts(rng))
        elif roll < 0.6 and items:
            del items[min(at, len(items) - 1)]
        elif roll < 0.8:
            items.insert(at, (f"new{rng.randint(0, 10**6)}/{rng.choice(ODD + ['f'])}",
                              facts(rng)))
        else:
            rng.shuffle(items)
    return dict(items)


@pytest.mark.parametrize("seed", range(300))
def test_a_manifest_read_by_its_lines_is_what_its_whole_json_says(seed):
    rng = random.Random(seed)
    before = folder(rng, rng.choice([0, 1, 2, 3, 50, 400]))
    after = changed(rng, before)
    skipped = {"big.bin": "over the 20 MB limit"} if rng.random() < 0.3 else {}
    ignored = ["node_modules", ".git"] if rng.random() < 0.5 else []
    first, second = encode("/w", before, {}, []), encode("/w", after, skipped, ignored)
    read_before = decode(first)
    assert list(read_before.files.items()) == whole(first)[0]
    if rng.random() < 0.3:  # damage: a byte changed, or two lines made one (still JSON)
        cut = bytearray(second)
        breaks = [n for n, byte in enumerate(cut) if byte == ord("\n")]
        if breaks and rng.random() < 0.5:
            cut[rng.choice(breaks)] = ord(" ")
        else:
            cut[rng.randrange(len(cut))] = rng.choice(b'"],\n{}ab ')
        second = bytes(cut)
    try:
        expected = whole(second)
    except orjson.JSONDecodeError:
        with pytest.raises(ValueError):
            decode(second, read_before)
        return
    except (KeyError, AttributeError, TypeError):
        return  # JSON, but no manifest (the store refuses it elsewhere)
    read = decode(second, read_before)
    assert (list(read.files.items()), read.skipped, read.ignored) == expected
    again = decode(encode("/w", before, {}, []), read)  # and back, from the lines just read
    assert list(again.files.items()) == whole(first)[0]


def test_a_path_ending_in_a_bracket_and_comma_no_longer_makes_the_manifest_unreadable(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("a\n")
    (work / "x],").write_text("odd name\n")
    (work / "z.txt").write_text("z\n")
    store = Store(tmp_path / "home")
    taken = store.snapshot(work)
    assert Store(tmp_path / "home").load(taken.id).files == taken.files


def test_the_second_manifest_a_store_reads_shares_the_first_ones_unchanged_facts(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    for n in range(50):
        (work / f"f{n}.txt").write_text(f"{n}\n")
    store = Store(tmp_path / "home")
    one = store.snapshot(work)
    (work / "f7.txt").write_text("changed\n")
    two = store.snapshot(work, reread=["f7.txt"])
    fresh = Store(tmp_path / "home")
    a, b = fresh.load(one.id), fresh.load(two.id)
    assert a.files == one.files and b.files == two.files
    shared = [p for p in a.files if a.files[p] is b.files.get(p)]
    assert "f7.txt" not in shared and len(shared) >= 45  # the first and last lines aside
    assert Path(tmp_path / "home").is_dir()
