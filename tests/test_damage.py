"""Damaged session files, as a careful user or an unlucky day makes them: every one refused by
name (file, line, entry), never a silently shorter transcript, never a traceback, and each
message leads to the fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mulligan.session import BadEntry, SessionError, SessionLog
from mulligan.session.maintenance import check, repair
from mulligan.testing import entry

PYTHON = sys.executable


def write(path: Path, *entries: dict | str) -> Path:
    path.write_text("".join((e if isinstance(e, str) else json.dumps(e)) + "\n"
                            for e in entries))
    return path


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MULLIGAN_HOME": str(tmp_path / "home")}
    return subprocess.run([PYTHON, "-m", "mulligan", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("bad", [["e1"], {"id": "e1"}, 7, True])
@pytest.mark.parametrize("field", ["parent_id", "id"])
def test_a_field_of_the_wrong_json_type_is_refused_by_line_never_a_shorter_transcript(
        tmp_path, field, bad):
    second = entry("e2", "e1")
    second[field] = bad
    file = write(tmp_path / "s.jsonl", entry("e1", None), second, entry("e3", "e1"),
                 entry("e4", "e3"))
    with pytest.raises(BadEntry, match=f"{tmp_path / 's.jsonl'}, line 2"):
        SessionLog(file).replay()
    report = check(file)
    assert not report.ok and report.problems[0].startswith("line 2:")


def test_a_label_whose_target_is_not_a_string_is_refused_by_line(tmp_path):
    file = write(tmp_path / "s.jsonl", entry("e1", None),
                 entry("e2", "e1", "label", target_id=["e1"], label="x"))
    with pytest.raises(BadEntry, match="line 2.*target_id is a list"):
        SessionLog(file).entries()


@pytest.mark.parametrize("kind", ["messagf", "label", None])
def test_a_message_on_an_entry_that_is_not_a_message_entry_is_refused_not_dropped(
        tmp_path, kind):
    second = entry("e2", "e1", message={"role": "user", "content": "kept?"})
    if kind is None:
        del second["type"]
    else:
        second["type"] = kind
        second["target_id"] = "e1"
    file = write(tmp_path / "s.jsonl", entry("e1", None), second, entry("e3", "e2"))
    with pytest.raises(BadEntry, match="line 2"):
        SessionLog(file).replay()
    assert not check(file).ok


@pytest.mark.parametrize("action", ["check", "tree", "show", "export"])
def test_the_cli_names_a_list_parent_and_exits_1_without_a_traceback(tmp_path, action):
    bad = entry("e2", "e1")
    bad["parent_id"] = ["e1"]
    write(tmp_path / "s.jsonl", entry("e1", None), bad, entry("e3", "e1"))
    done = cli(tmp_path, "sessions", action, "s.jsonl")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and "TypeError" not in done.stderr + done.stdout
    assert "line 2" in done.stderr + done.stdout


def test_repair_ends_a_complete_last_line_that_lacks_only_its_newline(tmp_path):
    file = tmp_path / "s.jsonl"
    text = json.dumps(entry("e1", None)) + "\n" + json.dumps(entry("e2", "e1"))
    file.write_text(text)  # what an editor saves after a hand fix
    with pytest.raises(SessionError, match="repair` adds it"):
        SessionLog(file).replay()
    report = repair(file)
    assert report.completed and report.moved_to is None and report.ok
    assert file.read_text() == text + "\n"
    assert len(SessionLog(file).replay()) == 2


def test_the_tree_of_a_file_with_a_circle_draws_every_entry_and_exits_1(tmp_path):
    write(tmp_path / "s.jsonl", entry("e1", None), entry("e2", "e1"), entry("e3", "e4"),
          entry("e4", "e3"), entry("e5", "e2"))
    done = cli(tmp_path, "sessions", "tree", "s.jsonl", "--width", "100")
    assert done.returncode == 1
    for entry_id in ("e1", "e2", "e3", "e4", "e5"):
        assert entry_id in done.stdout
    assert "(in a circle of parents)" in done.stdout
    assert "circle" in done.stderr and "e3 (line 3)" in done.stderr


def test_the_tree_of_a_file_with_a_missing_parent_draws_the_orphans_subtree(tmp_path):
    write(tmp_path / "s.jsonl", entry("e1", None), entry("e2", "e9"), entry("e3", "e2"))
    done = cli(tmp_path, "sessions", "tree", "s.jsonl", "--all")
    assert done.returncode == 1
    assert "e2" in done.stdout and "e3" in done.stdout and "'e9' is missing" in done.stdout
    assert "line 2" in done.stderr


def test_a_broken_walk_is_named_by_file_and_line_and_leads_to_check(tmp_path):
    write(tmp_path / "s.jsonl", entry("e1", None), entry("e2", "e9"), entry("e3", "e2"))
    done = cli(tmp_path, "sessions", "show", "s.jsonl")
    assert done.returncode == 1
    assert "s.jsonl, line 2, entry e2: names parent 'e9'" in done.stderr
    assert "session check FILE" in done.stderr


def test_an_unknown_leaf_is_a_mistyped_id_not_damage(tmp_path):
    write(tmp_path / "s.jsonl", entry("e1", None))
    done = cli(tmp_path, "sessions", "show", "s.jsonl", "--leaf", "e999")
    assert done.returncode == 1 and "e999" in done.stderr
    assert "damaged" not in done.stderr and "check" not in done.stderr


def test_an_old_format_file_points_to_migrate(tmp_path):
    (tmp_path / "old.jsonl").write_text('{"role": "user", "content": "hi"}\n')
    done = cli(tmp_path, "sessions", "show", "old.jsonl")
    assert done.returncode == 1 and "migrate" in done.stderr and "by hand" not in done.stderr


def test_one_bad_line_in_the_middle_is_one_problem_with_its_fix(tmp_path):
    lines: list[dict | str] = [entry(f"e{n}", f"e{n - 1}" if n > 1 else None)
                               for n in range(1, 40)]
    lines.insert(20, "a line pasted in by mistake")
    file = write(tmp_path / "s.jsonl", *lines)
    report = check(file)
    assert len(report.problems) == 1
    assert report.problems[0].startswith("line 21:") and "delete or mend line 21" in \
        report.problems[0]


def test_an_ambiguous_file_prefix_lists_the_matches(tmp_path):
    from mulligan.app.sessions.catalog import folder_dir

    folder = folder_dir(tmp_path / "home", tmp_path)
    folder.mkdir(parents=True)
    for name in ("2026-01-01_aaa.jsonl", "2026-01-02_bbb.jsonl"):
        write(folder / name, entry("e1", None))
    done = cli(tmp_path, "sessions", "show", "2026")
    assert done.returncode == 1
    assert "2026-01-01_aaa.jsonl" in done.stderr and "2026-01-02_bbb.jsonl" in done.stderr


def test_no_bare_errno_or_temporary_file_name_reaches_the_user(tmp_path):
    (tmp_path / "old.jsonl").write_text('{"role": "user", "content": "hi"}\n')
    done = cli(tmp_path, "sessions", "migrate", "old.jsonl", str(tmp_path / "no" / "new.jsonl"))
    assert done.returncode == 1
    assert "[Errno" not in done.stderr and "migrating" not in done.stderr
    assert str(tmp_path / "no") in done.stderr


def test_the_tree_of_a_file_whose_parents_are_sound_still_names_a_bad_message_and_label(
        tmp_path):
    """Every parent found on an earlier line lets the check after the tree skip the parent
    walk: a message without the wire shape and a label naming no entry are still named."""
    bad_message = entry("e2", "e1")
    bad_message["message"] = {"role": "assistant", "content": "not a list"}
    label = {"id": "e3", "type": "label", "parent_id": "e2", "target_id": "e9",
             "label": "x"}
    write(tmp_path / "s.jsonl", entry("e1", None), bad_message, label, entry("e4", "e3"))
    for fold in ([], ["--all"]):
        done = cli(tmp_path, "sessions", "tree", "s.jsonl", *fold)
        assert done.returncode == 1, done.stderr
        assert "line 2: entry e2 is a message entry holding" in done.stderr
        assert "line 3: label e3 names target 'e9', which is in no entry" in done.stderr
        assert "Traceback" not in done.stderr


@pytest.mark.parametrize("target", ["e01", "e0", "e²", "e٣", "e5", "e 1"])
def test_a_label_naming_what_only_looks_like_a_line_id_is_named_by_the_check_after_the_tree(
        tmp_path, target):
    """With the line table of the tree's own read, the check works out each id's line from the
    id (every id of such a file is "e" + its line number): an id that merely looks like one
    -- a leading zero, line 0, a digit that is not ASCII, a line past the end -- is a target
    in no entry, as the check of the file alone says."""
    label = {"id": "e3", "type": "label", "parent_id": "e2", "target_id": target,
             "label": "x"}
    file = write(tmp_path / "s.jsonl", entry("e1", None), entry("e2", "e1"), label,
                 entry("e4", "e3"))
    log = SessionLog(file)
    entries = log.entries()
    assert log.table() is not None  # the proof the check takes
    alone = check(file)
    after = check(file, entries=entries, table=log.table(), count=False)
    named = f"line 3: label e3 names target {target!r}, which is in no entry"
    assert alone.problems == after.problems == [named]
    done = cli(tmp_path, "sessions", "tree", "s.jsonl", "--all")
    assert done.returncode == 1 and named in done.stderr, done.stderr
