"""check, repair and migrate on real files."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from mulligan.session import NotOldFormat, SessionLog, TargetExists, TornLine
from mulligan.session.maintenance import check, migrate, repair
from mulligan.testing import message_entry as msg
from mulligan.testing import say, user, write_entries


def write_lines(file: Path, items: list[Any], tail: bytes = b"") -> None:
    """Each item as a JSON line (a str too: a line that is JSON but not an object)."""
    write_entries(file, *(json.dumps(i) if isinstance(i, str) else i for i in items), tail=tail)


def sound(tmp_path: Path) -> Path:
    log = SessionLog(tmp_path / "session.jsonl")
    for text in ("one", "two", "three"):
        log.append_message(user(text))
    log.branch_to("e1")
    log.append_message(user("four"))
    return tmp_path / "session.jsonl"


def test_check_on_a_sound_file_counts_entries_and_branches_and_names_the_tip(
        tmp_path: Path) -> None:
    report = check(sound(tmp_path))
    assert report.ok and report.problems == []
    assert (report.entries, report.branches, report.went_back, report.tip) == (5, 2, 1, "e5")
    assert "5 entries, 2 branches (went back 1 time), tip e5" in report.format()


def test_check_reports_every_problem_with_its_line_and_entry_not_just_the_first(
        tmp_path: Path) -> None:
    file = tmp_path / "session.jsonl"
    write_lines(file, [msg("e1", None, "a"), "not an object", msg("e1", None, "dup"),
                       msg("e4", "e40", "orphan"), msg("e5", "e6", "ring"),
                       msg("e6", "e5", "ring"), {"id": "e7", "type": "message"}],
                tail=b'{"id": "e8", "ty')
    report = check(file)
    text = "\n".join(report.problems)
    assert not report.ok
    assert "line 2: not a JSON object" in text
    assert "line 3: duplicate id e1 (first on line 1)" in text
    assert "line 4: entry e4 names parent 'e40', which is in no entry" in text
    assert "e5 (line 5) -> e6 (line 6) -> e5 form a circle" in text
    assert "line 7: entry e7 has no parent_id key" in text
    assert "line 7: entry e7 is a message entry holding not a message object" in text
    assert "line 8: torn write" in text
    assert len(report.problems) == 7
    numbers = [int(p.split(" ")[1].rstrip(":")) for p in report.problems if p.startswith("line")]
    assert numbers == sorted(numbers)
    assert report.tip == "e7"  # the last complete line


def test_check_reports_a_file_from_before_parents_once_and_points_to_migrate(
        tmp_path: Path) -> None:
    file = tmp_path / "old.jsonl"
    write_lines(file, [user("a"), say("b"), user("c")])
    report = check(file)
    assert len(report.problems) == 1 and "migrate" in report.problems[0]


def test_check_on_a_missing_file_is_a_problem(tmp_path: Path) -> None:
    assert not check(tmp_path / "nothing.jsonl").ok


def test_repair_moves_a_torn_fragment_aside_byte_for_byte_and_the_session_opens_again(
        tmp_path: Path) -> None:
    file = sound(tmp_path)
    complete = file.read_bytes()
    fragment = b'{"id": "e6", "type": "message", "parent_id": "e5", "mess\xc3'
    with file.open("ab") as handle:
        handle.write(fragment)
    report = repair(file)
    assert report.ok and report.fragment_bytes == len(fragment)
    assert report.moved_to is not None
    sidecar = Path(report.moved_to)
    assert sidecar.parent == tmp_path and sidecar.name.startswith("session.jsonl.torn-")
    assert sidecar.read_bytes() == fragment
    assert file.read_bytes() == complete
    assert SessionLog(file).append_message(user("five")) == "e6"
    assert "set aside a torn last line" in report.format()


def test_repair_leaves_any_other_damage_for_a_person(tmp_path: Path) -> None:
    file = tmp_path / "session.jsonl"
    write_lines(file, [msg("e1", None, "a"), msg("e2", "e9", "b")])
    before = file.read_bytes()
    report = repair(file)
    assert not report.ok and report.moved_to is None
    assert "e9" in report.problems[0]
    assert file.read_bytes() == before
    assert list(tmp_path.iterdir()) == [file]


def test_repair_sets_aside_a_torn_tail_even_when_other_damage_stays(tmp_path: Path) -> None:
    file = tmp_path / "session.jsonl"
    write_lines(file, [msg("e1", None, "a"), "garbage"], tail=b'{"id"')
    report = repair(file)
    assert report.moved_to is not None and Path(report.moved_to).read_bytes() == b'{"id"'
    assert len(report.problems) == 1 and "line 2" in report.problems[0]


def test_migrate_gives_an_old_file_ids_and_parents_in_order_and_never_changes_it(
        tmp_path: Path) -> None:
    old, new = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    write_lines(old, [user("a"), say("b"),
                      {"id": "x", "type": "model_change", "provider": "p", "model": "m",
                       "timestamp": "2025-01-01T00:00:00.000Z"},
                      {"type": "message", "message": user("c"), "checkpoint": "k1"},
                      {"type": "label", "target_id": "x", "label": "switched"}])
    before = old.read_bytes()
    assert migrate(old, new) == 5
    assert old.read_bytes() == before
    entries = [json.loads(line) for line in new.read_text().splitlines()]
    assert [e["id"] for e in entries] == ["e1", "e2", "e3", "e4", "e5"]
    assert [e["parent_id"] for e in entries] == [None, "e1", "e2", "e3", "e4"]
    assert entries[2]["timestamp"] == "2025-01-01T00:00:00.000Z"
    assert entries[3]["checkpoint"] == "k1"
    assert entries[4]["target_id"] == "e3"
    assert SessionLog(new).replay() == [user("a"), say("b"), user("c")]
    assert check(new).ok
    assert os.stat(new).st_mode & 0o777 == 0o600


def test_migrate_refuses_to_write_over_an_existing_file(tmp_path: Path) -> None:
    old, new = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    write_lines(old, [user("a")])
    new.write_text("precious\n")
    with pytest.raises(TargetExists, match="new.jsonl"):
        migrate(old, new)
    assert new.read_text() == "precious\n"


def test_migrate_refuses_a_file_whose_entries_already_have_parents(tmp_path: Path) -> None:
    old, new = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    write_lines(old, [user("a"), msg("e2", "e1", "b")])
    with pytest.raises(NotOldFormat, match="line 2"):
        migrate(old, new)
    assert not new.exists()


def test_migrate_refuses_a_torn_old_file(tmp_path: Path) -> None:
    old, new = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    write_lines(old, [user("a")], tail=b'{"role": "us')
    with pytest.raises(TornLine, match="line 2"):
        migrate(old, new)
    assert not new.exists()
