"""append_message(message, parent_id=ID, **meta): appending under an entry other than the tip,
as parallel attempts do. The same cases on a file and on a database session (tests/pg_server.py);
on a file the line table beside it stays exact (a lazy read gives what the full read gives).
Threads append under different parents at once; each branch replays exactly its own messages."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from mulligan.session import SessionLog, UnknownEntry
from mulligan.session.maintenance import check
from mulligan.session.view import messages_of
from mulligan.testing import say as said
from mulligan.testing import user


@pytest.fixture(params=["file", "postgres"])
def new_log(request, tmp_path):
    """A function giving another log on one fresh session of the kind under test."""
    if request.param == "file":
        path = tmp_path / "s.jsonl"
        return lambda: SessionLog(path)
    pytest.importorskip("psycopg")
    from mulligan.session.stores.postgres import Database

    database = Database(request.getfixturevalue("pg_url"))
    return lambda: database.log("s1")


def test_a_message_appended_under_an_entry_names_it_and_the_tip_is_still_the_last_line(
        new_log):
    log = new_log()
    log.append_message(user("Fix the bug."))
    log.append_message(said("Trying one way."))
    new = log.append_message(user("Another way."), parent_id="e1",
                             attempt={"group": "g", "index": 2, "of": 2, "model": "m"})
    assert new == "e3" and log.tip() == "e3"
    entry = log.entry("e3")
    assert entry["parent_id"] == "e1" and entry["attempt"]["index"] == 2
    assert log.replay() == [user("Fix the bug."), user("Another way.")]
    assert new_log().entry("e3")["parent_id"] == "e1"  # a second reader sees the same


def test_an_unknown_parent_is_refused_by_name_and_nothing_is_written(new_log):
    log = new_log()
    with pytest.raises(UnknownEntry, match="'e7'"):
        log.append_message(user("x"), parent_id="e7")
    assert not log.storage.exists()  # no file (no session) made for nothing
    log.append_message(user("first"))
    with pytest.raises(ValueError, match="'e7'"):
        log.append_message(user("x"), parent_id="e7")
    assert [e["id"] for e in new_log().entries()] == ["e1"]


def test_parent_id_is_not_metadata_and_the_reserved_keys_stay_refused(tmp_path):
    log = SessionLog(tmp_path / "s.jsonl")
    log.append_message(user("first"))
    with pytest.raises(ValueError, match="timestamp"):
        log.append_message(user("x"), parent_id="e1", timestamp="then")
    assert log.tip() == "e1"


def _attempt(log: SessionLog, fork: str, k: int, rounds: int, ends: dict[int, str],
             start: threading.Barrier) -> None:
    start.wait()
    parent = log.append_message(user(f"attempt {k}"), parent_id=fork,
                                attempt={"group": "g", "index": k, "of": 3, "model": "m"})
    for n in range(rounds):
        parent = log.append_message(said(f"attempt {k} step {n}"), parent_id=parent)
    ends[k] = parent


@pytest.mark.parametrize("shared", [True, False], ids=["one log", "a log per thread"])
def test_threads_appending_under_different_parents_interleave_and_each_branch_replays(
        new_log, shared):
    first = new_log()
    first.append_session_info(cwd="/w")
    fork = first.append_message(user("Make it faster."))
    ends: dict[int, str] = {}
    start = threading.Barrier(3)
    rounds = 25
    threads = [threading.Thread(target=_attempt, args=(
        first if shared else new_log(), fork, k, rounds, ends, start)) for k in (1, 2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert sorted(ends) == [1, 2, 3]
    reader = new_log()
    entries = reader.entries()
    assert len(entries) == 2 + 3 * (rounds + 1)
    assert reader.tip() == entries[-1]["id"]
    for k, leaf in ends.items():
        expected = [user("Make it faster."), user(f"attempt {k}")] + [
            said(f"attempt {k} step {n}") for n in range(rounds)]
        assert messages_of(reader.branch(leaf)) == expected
        assert messages_of(new_log().branch(leaf)) == expected
    if isinstance(first.path, Path):  # the file: check it, its table, and the full read
        report = check(first.path)
        assert report.ok and f"index: up to date ({len(entries)} lines)" in report.format()
        for leaf in ends.values():
            lazy, whole = SessionLog(first.path), SessionLog(first.path, sidecar=False)
            assert lazy.branch(leaf) == whole.branch(leaf)
            assert lazy.replay() == whole.replay() and lazy.tip() == whole.tip()
