"""The sidecar index (`<session>.jsonl.idx`) is a cache, never a source of truth: whatever
happens to the file or to the index, a log that reads through it gives exactly what the full
read gives -- the same transcript, entries, tip, branches, or the same refusal by name.

The reference is `SessionLog(path, sidecar=False)`, which reads every line every time. The
files are real; the writers that do not know the index are plain appends, replacements,
truncations and edits in the middle; concurrent writers are real processes."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mulligan.app.sessions.catalog import overview
from mulligan.session import SessionLog, UnknownEntry
from mulligan.session import sidecar as tables
from mulligan.session.maintenance import check
from mulligan.session.sidecar import HEADER_SIZE, sidecar_path
from mulligan.testing import say as said
from mulligan.testing import user

PYTHON = sys.executable


def outcome(read: Any) -> Any:
    """What a reading gives: its value, or the refusal's type and message."""
    try:
        return ("value", read())
    except (ValueError, OSError) as exc:
        return ("refused", type(exc).__name__, str(exc))


def readings(path: Path, sidecar: bool, leaf: str | None = None) -> list[Any]:
    """Every question, each on a fresh log (a fresh process's open), through the index or not."""
    def fresh() -> SessionLog:
        return SessionLog(path, sidecar=sidecar)

    found = [outcome(lambda: fresh().tip()), outcome(lambda: fresh().replay()),
             outcome(lambda: fresh().rows()), outcome(lambda: fresh().of_type("session_info")),
             outcome(lambda: fresh().entries())]
    if leaf is not None:
        found += [outcome(lambda: fresh().branch(leaf)), outcome(lambda: fresh().entry(leaf))]
    return found


def same_as_full_read(path: Path, leaf: str | None = None) -> None:
    assert readings(path, True, leaf) == readings(path, False, leaf)


def a_session(path: Path, attempts: int = 3) -> SessionLog:
    log = SessionLog(path)
    log.append_session_info(cwd="/w", name="first")
    for n in range(attempts):
        log.append_message(user(f"ask {n}"))
        log.append_message(said(f"answer {n}"))
        log.append_message(said(f"more {n}"))
        log.branch_to(f"e{2 + 3 * n}")
    log.append_label("e3", "the first answer")
    log.branch_summary_to("e2", from_id=log.tip() or "", summary="tried things")
    log.append_entry("compaction", summary="so far", first_kept_entry_id=log.tip())
    log.append_message(user("last"))
    return log


def test_an_index_is_written_beside_the_file_and_a_new_log_reads_through_it(tmp_path):
    path = tmp_path / "s.jsonl"
    a_session(path)
    assert Path(sidecar_path(str(path))).is_file()
    assert "index: up to date" in check(path).format()
    same_as_full_read(path, "e3")
    assert overview(path) == _summary_without_index(path)


def _summary_without_index(path: Path) -> Any:
    index = Path(sidecar_path(str(path)))
    kept = index.read_bytes()
    index.unlink()
    try:
        return overview(path)  # a full read (which writes the index again)
    finally:
        index.write_bytes(kept)


@pytest.mark.parametrize("asked", ["e²", "e٣", "e01", "e0", "e99"])
def test_an_id_that_only_looks_like_a_line_id_is_unknown_through_the_index_too(tmp_path, asked):
    """Read through the index, an id is worked out from its line number: one that merely looks
    like one (a digit that is not ASCII, a leading zero, line 0, past the end) is named as
    unknown, as the full read names it -- not an int() error."""
    path = tmp_path / "s.jsonl"
    a_session(path)
    for log in (SessionLog(path), SessionLog(path, sidecar=False)):
        with pytest.raises(UnknownEntry, match="no entry has the id"):
            log.entry(asked)


def test_a_lazy_open_parses_only_the_lines_on_the_path(tmp_path):
    """Through the index, the tip's branch is parsed and the other lines are not."""
    path = tmp_path / "s.jsonl"
    a_session(path)
    entries, sketched = SessionLog(path).sketch()  # the off-path lines only as sketches
    assert sketched and 0 < sum("timestamp" not in e for e in entries) < len(entries)


def test_an_abandoned_line_edited_with_its_mtime_put_back_is_refused_by_a_replay(tmp_path):
    """An abandoned line changed behind the log's back -- same size, and its mtime put back,
    which no stat of size and mtime can see -- is refused by a replay exactly as the full read
    refuses it: the index pins the file's ctime, which no user call can set back."""
    path = tmp_path / "s.jsonl"
    log = a_session(path)
    abandoned = log.entry("e4")
    assert abandoned["message"] == said("more 0") or abandoned["message"] == said("answer 0")
    data = path.read_bytes()
    line = orjson.dumps(abandoned)
    stat = path.stat()
    path.write_bytes(data.replace(line, b"[" + b" " * (len(line) - 2) + b"]", 1))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    lazy = outcome(lambda: SessionLog(path).replay())
    assert lazy[:2] == ("refused", "NotAnObject") and "line 4" in lazy[2]
    assert lazy == outcome(lambda: SessionLog(path, sidecar=False).replay())
    same_as_full_read(path, "e3")


def test_a_writer_that_does_not_know_the_index_leaves_it_stale_and_stale_is_noticed(tmp_path):
    path = tmp_path / "s.jsonl"
    log = a_session(path)
    line = {"id": f"e{len(log.entries()) + 1}", "type": "message", "parent_id": log.tip(),
            "timestamp": "2026-12-01T00:00:00.000Z", "message": user("appended by hand")}
    with open(path, "ab") as handle:
        handle.write(orjson.dumps(line) + b"\n")
    assert "index: stale" in check(path).format()
    same_as_full_read(path)
    assert SessionLog(path).replay()[-1] == user("appended by hand")
    assert "index: up to date" in check(path).format()  # the open rebuilt it


def test_a_replaced_a_truncated_and_a_torn_file_read_as_the_full_read_does(tmp_path):
    path, other = tmp_path / "s.jsonl", tmp_path / "other.jsonl"
    data = a_session(path).entries() and path.read_bytes()
    SessionLog(other).append_message(user("another session entirely"))
    os.replace(other, path)  # the index now names a file that is gone
    same_as_full_read(path)
    path.write_bytes(data)
    SessionLog(path).tip()  # the index rebuilt for it
    cut = data[:data.index(b"\n", len(data) // 2) + 1]
    path.write_bytes(cut)  # truncated at a line's end
    same_as_full_read(path)
    path.write_bytes(data[:-7])  # a torn last line
    assert readings(path, True)[0][:2] == ("refused", "TornLine")
    same_as_full_read(path)


def edit(path: Path, data: bytes) -> None:
    """Write `data` over the file as an editor would, a moment after the last append: the
    file's mtime moves on. (Within the same clock tick as the append, mtime cannot show an
    edit that keeps the size and the last line -- the limit git's index has too; the line
    checks below catch such an edit wherever the lazy read looks.)"""
    before = path.stat().st_mtime_ns
    path.write_bytes(data)
    if path.stat().st_mtime_ns == before:
        os.utime(path, ns=(before, before + 1_000_000_000))


def test_an_edit_in_the_middle_is_read_as_the_full_read_reads_it(tmp_path):
    path = tmp_path / "s.jsonl"
    log = a_session(path)
    data = path.read_bytes()
    edit(path, data.replace(b"ask 0", b"ASK 0"))  # same size, same last line
    same_as_full_read(path)
    assert SessionLog(path).entry("e2")["message"]["content"] == "ASK 0"
    abandoned = orjson.dumps(log.entry("e4"))
    edit(path, data.replace(abandoned, b"[" + b" " * (len(abandoned) - 2) + b"]"))
    assert readings(path, True)[1][:2] == ("refused", "NotAnObject")  # off the path, seen
    same_as_full_read(path)
    edit(path, data.replace(b'"parent_id":"e2"', b'"parent_id":"e9"', 1))
    same_as_full_read(path, "e5")


def test_an_edit_no_stat_can_see_is_still_caught_where_the_lazy_read_looks(tmp_path):
    path = tmp_path / "s.jsonl"
    a_session(path)
    data = path.read_bytes()
    stat = path.stat()
    for changed in (data.replace(b'"id":"e2"', b'"id":"e8"', 1),
                    data.replace(b'"parent_id":"e1"', b'"parent_id":"e2"', 1)):
        path.write_bytes(changed)  # on the path; size, mtime and last line as they were
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        lazy, full = readings(path, True, "e2"), readings(path, False, "e2")
        # what reads the path (replay, rows, the branch) reads it as the full read does
        assert [lazy[i] for i in (1, 2, 5)] == [full[i] for i in (1, 2, 5)]
        assert lazy[1][0] == "refused"


def test_a_torn_missing_or_foreign_index_is_ignored_and_rebuilt(tmp_path):
    path = tmp_path / "s.jsonl"
    a_session(path)
    index = Path(sidecar_path(str(path)))
    good = index.read_bytes()
    for damaged in (good[:HEADER_SIZE - 3], good[:HEADER_SIZE + 30], b"",
                    good[:20] + b"\xff" + good[21:], good[:-24]):
        index.write_bytes(damaged)
        same_as_full_read(path, "e3")
    index.unlink()
    same_as_full_read(path, "e3")
    assert index.read_bytes() == good  # rebuilt exactly
    other = tmp_path / "other.jsonl"
    a_session(other, attempts=1)
    index.write_bytes(Path(sidecar_path(str(other))).read_bytes())  # another file's index
    same_as_full_read(path, "e3")


def test_check_names_an_index_that_claims_to_describe_the_file_and_does_not(tmp_path):
    path = tmp_path / "s.jsonl"
    a_session(path)
    index = Path(sidecar_path(str(path)))
    data = bytearray(index.read_bytes())
    parent = HEADER_SIZE + 4 * 24 + 8  # line 5's parent
    data[parent:parent + 8] = struct.pack("<q", 0)
    # As a buggy writer would leave it: every CRC right, one record wrong.
    data[HEADER_SIZE - 8:HEADER_SIZE - 4] = struct.pack("<I", zlib.crc32(data[HEADER_SIZE:]))
    data[HEADER_SIZE - 4:HEADER_SIZE] = struct.pack("<I", zlib.crc32(data[:HEADER_SIZE - 4]))
    index.write_bytes(bytes(data))
    report = check(path)
    assert not report.ok and any("line 5: the index" in p for p in report.problems)
    cli = subprocess.run([PYTHON, "-m", "mulligan", "sessions", "check", str(path)],
                         capture_output=True, text=True)
    assert cli.returncode == 1 and "line 5: the index" in cli.stdout


def test_concurrent_writers_keep_file_and_index_in_step(tmp_path):
    path = tmp_path / "s.jsonl"
    SessionLog(path).append_message(user("start"))
    code = ("import sys\nfrom mulligan.session import SessionLog\n"
            "log = SessionLog(sys.argv[1])\n"
            "for i in range(100):\n"
            "    log.append_message({'role': 'user', 'content': sys.argv[2] + str(i)})\n"
            "    if i % 25 == 0:\n"
            "        log.replay()\n")
    writers = [subprocess.Popen([PYTHON, "-c", code, str(path), f"w{n}-"]) for n in range(4)]
    assert [w.wait(timeout=120) for w in writers] == [0, 0, 0, 0]
    report = check(path)
    assert report.ok and report.entries == 401 and "index: up to date (401 lines)" in \
        report.format()
    same_as_full_read(path, "e200")


MUTATIONS = ["append_line", "append_junk", "truncate", "flip", "replace_middle", "break_line",
             "drop_index", "cut_index", "flip_index", "nothing"]


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.sampled_from(["say", "back", "label", "summary"]),
                                st.integers(0, 10_000)), min_size=1, max_size=25),
       mutation=st.sampled_from(MUTATIONS), where=st.floats(0, 1), leaf=st.integers(1, 40))
@pytest.mark.slow
def test_through_the_index_or_not_a_mutated_file_reads_the_same(tmp_path_factory, steps,
                                                               mutation, where, leaf):
    path = tmp_path_factory.mktemp("fuzz") / "s.jsonl"
    log = SessionLog(path)
    log.append_message(user("first"))
    for kind, pick in steps:
        known = len(log.entries())
        target = f"e{pick % known + 1}"
        if kind == "say":
            log.append_message(said(f"reply {pick}"))
        elif kind == "back":
            log.branch_to(target)
        elif kind == "label":
            log.append_label(target, f"label {pick}")
        else:
            log.branch_summary_to(target, from_id=str(log.tip()), summary=f"summary {pick}")
    SessionLog(path).tip()  # a reader in step with the file
    mutate(path, mutation, where)
    same_as_full_read(path, f"e{leaf}")


def mutate(path: Path, mutation: str, where: float) -> None:
    data = path.read_bytes()
    index = Path(sidecar_path(str(path)))
    at = int(where * (len(data) - 1))
    if mutation == "append_line":
        count = data.count(b"\n")
        with open(path, "ab") as handle:
            handle.write(orjson.dumps({"id": f"e{count + 1}", "type": "message",
                                       "parent_id": f"e{max(1, at % count)}",
                                       "message": user("by hand")}) + b"\n")
    elif mutation == "append_junk":
        with open(path, "ab") as handle:
            handle.write(b'{"id": "e1", "type": "branch", "parent_id": null}\n' if at % 2
                         else b"not json\n")
    elif mutation == "truncate":
        edit(path, data[:at])
    elif mutation == "flip":
        edit(path, data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1:])
    elif mutation == "replace_middle":
        edit(path, data[:at] + data[at:].replace(b'"e1"', b'"e2"', 1))
    elif mutation == "break_line":  # one line, anywhere, no longer JSON; the size kept
        start = data.rfind(b"\n", 0, at) + 1
        edit(path, data[:start] + b"#" + data[start + 1:])
    elif mutation == "drop_index":
        index.unlink(missing_ok=True)
    elif mutation in ("cut_index", "flip_index") and index.exists():
        raw = index.read_bytes()
        spot = int(where * max(len(raw) - 1, 0))
        index.write_bytes(raw[:spot] if mutation == "cut_index" else
                          raw[:spot] + bytes([raw[spot] ^ 0x80]) + raw[spot + 1:])


def test_the_folded_tree_drawn_through_the_index_is_the_tree_of_the_full_read(tmp_path):
    from mulligan.frontends.tree import render_tree

    path = tmp_path / "s.jsonl"
    log = a_session(path, attempts=6)
    log.append_label("e8", "an abandoned one")
    log.append_entry("model_change", provider="p", model="m")
    log.append_message(said("after a model change"))
    full = SessionLog(path, sidecar=False)
    expected = render_tree(full.entries(), full.tip(), fold=True, width=90)
    entries, sketched = SessionLog(path).sketch()
    assert sketched and render_tree(entries, full.tip(), fold=True, width=90) == expected
    cli = subprocess.run([PYTHON, "-m", "mulligan", "sessions", "tree", str(path), "--width",
                          "90"], capture_output=True, text=True)
    assert cli.returncode == 0 and cli.stdout.splitlines() == expected


def test_a_live_lazy_log_sees_the_file_replaced_with_its_index_by_one_just_like_it(tmp_path):
    path, other = tmp_path / "s.jsonl", tmp_path / "other.jsonl"
    a_session(path)
    live = SessionLog(path)
    assert live.entry("e2")["message"]["content"] == "ask 0"  # parsed, and kept
    live.replay()
    other.write_bytes(path.read_bytes().replace(b"ask 0", b"ASK 0"))  # same sizes throughout
    SessionLog(other).tip()  # its own, valid index
    os.replace(sidecar_path(str(other)), sidecar_path(str(path)))
    os.replace(other, path)
    assert live.replay() == SessionLog(path, sidecar=False).replay()
    assert live.entry("e2")["message"]["content"] == "ASK 0"


def restamp(path: Path, table: tables.Table) -> None:
    """Write `table` as the file's index, stamped with the file's state as it is now: what a
    forger (or a buggy writer) leaves, every CRC right."""
    size = path.stat().st_size
    start = table.start(table.count - 1)
    table.state = tables.file_state(path.stat())
    table.last = tables.line_hash(path.read_bytes()[start:size])
    table.crc = zlib.crc32(table.records())
    tables.save(str(path), table)


def test_an_append_takes_its_id_from_the_real_last_line_not_from_a_forged_index(tmp_path):
    """An index describing one line fewer (its last record spanning the file's last two
    lines, every CRC and the state right) would make an append hand out the id the last line
    already has: the append reads the real last line under the lock, sees the table is wrong,
    and appends as the full read would."""
    path = tmp_path / "s.jsonl"
    log = a_session(path)
    count = len(log.entries())
    table = SessionLog(path).table()
    assert table is not None and table.count == count
    forged = tables.Table(table.ends[:-2], table.parents[:-2], table.marks[:-2], table.state,
                          b"")
    forged.add(table.ends[-1], table.parents[-2], table.marks[-2] & 0xFF)
    restamp(path, forged)
    assert SessionLog(path).tip() == f"e{count - 1}"  # the forgery is believed by a read
    new_id = SessionLog(path).append_message(user("after the forgery"))
    assert new_id == f"e{count + 1}"
    check_log = SessionLog(path, sidecar=False)
    assert len(check_log.entries()) == count + 1 and check_log.tip() == new_id
    same_as_full_read(path, "e3")


def test_a_line_the_lazy_read_parses_is_checked_as_the_full_read_checks_it(tmp_path):
    """A label line the full read refuses (its target not a string), with the index stamped
    for the file as it is now: the lazy read of the labels refuses it too, by name."""
    path = tmp_path / "s.jsonl"
    log = a_session(path)
    table = log.table()
    assert table is not None
    data = path.read_bytes()
    changed = data.replace(b'"target_id":"e3"', b'"target_id":3333', 1)
    assert changed != data and len(changed) == len(data)
    path.write_bytes(changed)
    restamp(path, table)
    lazy = outcome(lambda: SessionLog(path).of_type("label"))
    assert lazy[:2] == ("refused", "BadEntry") and "target_id" in lazy[2]
    assert lazy == outcome(lambda: SessionLog(path, sidecar=False).of_type("label"))
