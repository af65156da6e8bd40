"""The session catalog: names, modes, listing and finding the newest."""

from __future__ import annotations

import stat
from datetime import UTC, datetime
from pathlib import Path

from mulligan.app.sessions.catalog import (
    folder_dir,
    folder_slug,
    list_sessions,
    new_session_path,
    newest_session,
)
from mulligan.home import create_private as create_file
from mulligan.session import SessionLog
from mulligan.testing import say, user


def write_session(path: Path, *messages, name: str | None = None) -> SessionLog:
    create_file(path)
    log = SessionLog(path, fsync=False)
    log.append_session_info(cwd="/w", model="scripted", **({"name": name} if name else {}))
    for message in messages:
        log.append_message(message)
    return log


def test_a_new_session_path_is_timestamp_and_short_id_under_the_folder_slug(tmp_path):
    when = datetime(2026, 11, 30, 10, 0, 5, tzinfo=UTC)
    made = new_session_path(tmp_path, Path("/work/main"), now=when)
    assert made.parent == tmp_path / "sessions" / folder_slug(Path("/work/main"))
    assert made.name.startswith("2026-11-30T10-00-05_") and made.suffix == ".jsonl"
    assert not made.exists() and not made.parent.exists()


def test_two_folders_whose_paths_read_alike_get_different_slugs():
    assert folder_slug(Path("/a-b")) != folder_slug(Path("/a/b"))
    assert folder_slug(Path("/work/main")).startswith("work-main-")


def test_session_files_are_created_0600_in_folders_of_0700(tmp_path):
    path = new_session_path(tmp_path / "home", tmp_path)
    create_file(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "home").stat().st_mode) == 0o700


def test_listing_is_newest_first_with_name_entries_and_branches(tmp_path):
    home, cwd = tmp_path / "home", tmp_path / "work"
    older = write_session(folder_dir(home, cwd) / "2026-01-01T00-00-00_aaaaaa.jsonl",
                          user("first question"), say("answer"))
    newer = write_session(folder_dir(home, cwd) / "2026-01-02T00-00-00_bbbbbb.jsonl",
                          user("second question"), say("one"), name="caching")
    newer.branch_to("e2")
    newer.append_message(user("again"))
    found = list_sessions(home, cwd)
    assert [s.path for s in found] == [Path(newer.path), Path(older.path)]
    assert (found[0].name, found[0].entries, found[0].branches) == ("caching", 5, 2)
    assert (found[1].name, found[1].first_message, found[1].branches) == (
        "", "first question", 1)
    assert newest_session(home, cwd) == Path(newer.path)


def test_listing_without_a_folder_covers_every_folder(tmp_path):
    home = tmp_path / "home"
    write_session(new_session_path(home, tmp_path / "a"), user("in a"))
    write_session(new_session_path(home, tmp_path / "b"), user("in b"))
    assert len(list_sessions(home, tmp_path / "a")) == 1
    assert sorted(s.first_message for s in list_sessions(home)) == ["in a", "in b"]


def test_an_unreadable_file_is_listed_with_its_problem_not_raised(tmp_path):
    home, cwd = tmp_path / "home", tmp_path / "work"
    bad = folder_dir(home, cwd) / "2026-01-01T00-00-00_cccccc.jsonl"
    create_file(bad)
    bad.write_text('{"id": "e1", "type": "message"')  # torn: no newline
    (summary,) = list_sessions(home, cwd)
    assert summary.problem
    assert newest_session(home, cwd) == bad  # for -c to refuse by name, not to skip


def test_a_folder_with_no_sessions_has_no_newest(tmp_path):
    assert newest_session(tmp_path / "home", tmp_path) is None


def test_a_message_entry_of_the_wrong_shape_is_listed_not_a_crash(tmp_path):
    # Hand-damaged files that SessionLog.entries() accepts (the message is checked by the
    # walk, not by the listing): one such file must not break `sessions ls` or `mulligan -c`.
    home, cwd = tmp_path / "home", tmp_path / "work"
    good = write_session(folder_dir(home, cwd) / "2026-01-01T00-00-00_aaaaaa.jsonl",
                         user("fine"))
    odd = folder_dir(home, cwd) / "2026-01-02T00-00-00_bbbbbb.jsonl"
    odd.write_text('{"id": "e1", "type": "session_info", "parent_id": null, "name": 5}\n'
                   '{"id": "e2", "type": "message", "parent_id": "e1", "message": "oops", '
                   '"timestamp": 7}\n')
    found = {s.path: s for s in list_sessions(home, cwd)}
    assert (found[odd].name, found[odd].entries, found[odd].first_message) == ("5", 2, "")
    assert found[Path(good.path)].first_message == "fine"
    assert newest_session(home, cwd) in (odd, Path(good.path))  # no crash: -c still works
    from mulligan.frontends.commands import format_sessions

    assert any(str(odd) in line for line in format_sessions(list_sessions(home, cwd)))


def test_the_newest_session_is_the_one_written_to_last_found_without_reading_any(tmp_path):
    # -c must not parse every session of the folder to find one; the file's mtime is the
    # time of its last append. Here the entries' own timestamps say the opposite.
    import os

    home, cwd = tmp_path / "home", tmp_path / "work"
    early = write_session(folder_dir(home, cwd) / "2026-01-01T00-00-00_aaaaaa.jsonl", user("a"))
    late = write_session(folder_dir(home, cwd) / "2026-01-02T00-00-00_bbbbbb.jsonl", user("b"))
    os.utime(late.path, (1_000_000, 1_000_000))
    os.utime(early.path, (2_000_000, 2_000_000))
    create_file(folder_dir(home, cwd) / "2026-01-03T00-00-00_cccccc.jsonl")  # empty: skipped
    assert newest_session(home, cwd) == Path(early.path)
