"""SessionLog, path and persist_to over real files: the format, branching, and the refusals."""

from __future__ import annotations

import json
import os
import re
import stat
import threading
from pathlib import Path
from typing import Any

import pytest

from mulligan import Harness
from mulligan.messages import Message
from mulligan.session import (
    BadEntry,
    CircularParent,
    DuplicateId,
    MissingParent,
    NoParentKey,
    NotAnObject,
    SessionError,
    SessionLog,
    TornLine,
    UnknownEntry,
    path,
    persist_to,
)
from mulligan.testing import ScriptedModel, call, reply, say, tool_result, user, write_entries
from mulligan.testing import message_entry as msg

READ = call("read", {"path": "main.py"}, id="c1")
SIX: list[Message] = [user("Make main.py faster."), reply("Reading it.", READ),
       tool_result(READ, "def slow(n):\n    return sum(range(n))\n"),
       say("Cache the results in a global dict."), user("Do it, then."),
       say("Done: main.py now keeps a module-level CACHE.")]


def six(tmp_path: Path) -> SessionLog:
    log = SessionLog(tmp_path / "session.jsonl")
    for message in SIX:
        log.append_message(message)
    return log


def lines_of(file: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in file.read_text().splitlines()]


def write_lines(file: Path, entries: list[dict[str, Any]]) -> None:
    write_entries(file, *entries)


# ---- the format -------------------------------------------------------------------------


def test_six_messages_become_e1_to_e6_each_naming_the_one_before(tmp_path: Path) -> None:
    log = six(tmp_path)
    written = lines_of(tmp_path / "session.jsonl")
    assert [e["id"] for e in written] == ["e1", "e2", "e3", "e4", "e5", "e6"]
    assert [e["parent_id"] for e in written] == [None, "e1", "e2", "e3", "e4", "e5"]
    assert [e["message"] for e in written] == SIX
    assert {e["type"] for e in written} == {"message"}
    assert log.entries() == written


def test_every_entry_carries_an_iso_8601_utc_timestamp(tmp_path: Path) -> None:
    log = six(tmp_path)
    log.branch_to("e2")
    log.append_label("e1", "start")
    for entry in log.entries():
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", entry["timestamp"])


def test_a_log_creates_nothing_until_the_first_append_and_then_a_private_file(
        tmp_path: Path) -> None:
    file = tmp_path / "session.jsonl"
    log = SessionLog(file)
    assert (log.entries(), log.tip(), log.rows(), log.replay()) == ([], None, [], [])
    assert not file.exists()
    log.append_message(user("hello"))
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert log.path == file


def test_tip_is_none_then_the_last_append_then_the_branch_entry(tmp_path: Path) -> None:
    log = SessionLog(tmp_path / "session.jsonl")
    assert log.tip() is None
    for message in SIX:
        last = log.append_message(message)
        assert log.tip() == last
    assert log.branch_to("e4") == "e7"
    assert log.tip() == "e7"


def test_metadata_is_stored_on_the_entry_and_never_replayed(tmp_path: Path) -> None:
    log = SessionLog(tmp_path / "session.jsonl")
    entry_id = log.append_message(user("hi"), checkpoint="abc123")
    assert log.entry(entry_id)["checkpoint"] == "abc123"
    assert log.replay() == [user("hi")]


def test_metadata_may_not_replace_the_keys_the_log_owns(tmp_path: Path) -> None:
    file = tmp_path / "session.jsonl"
    log = SessionLog(file)
    with pytest.raises(ValueError, match="'id'"):
        log.append_message(user("hi"), id="e9")
    assert not file.exists()


def test_a_message_changed_after_it_was_appended_does_not_change_the_log(
        tmp_path: Path) -> None:
    log = SessionLog(tmp_path / "session.jsonl")
    message = user("before")
    log.append_message(message)
    message["content"] = "after"
    assert log.replay() == [user("before")]


def test_entry_returns_one_entry_and_names_an_unknown_id(tmp_path: Path) -> None:
    log = six(tmp_path)
    assert log.entry("e3")["message"] == SIX[2]
    with pytest.raises(UnknownEntry, match="e99"):
        log.entry("e99")


# ---- going back ---------------------------------------------------------------------------


def test_going_back_writes_exactly_one_line_and_leaves_every_earlier_byte(
        tmp_path: Path) -> None:
    log = six(tmp_path)
    file = tmp_path / "session.jsonl"
    before = file.read_bytes()
    new_id = log.branch_to("e4")
    after = file.read_bytes()
    assert after.startswith(before)
    added = after[len(before):]
    assert added.count(b"\n") == 1 and added.endswith(b"\n")
    entry = json.loads(added)
    assert (entry["id"], entry["type"], entry["parent_id"]) == (new_id, "branch", "e4")
    assert "message" not in entry


def test_after_going_back_replay_is_the_messages_before_the_fork_and_the_new_attempt(
        tmp_path: Path) -> None:
    log = six(tmp_path)
    log.branch_to("e4")
    log.append_message(user("No global, please."))
    log.append_message(say("Then functools.cache on slow()."))
    assert log.replay() == SIX[:4] + [user("No global, please."),
                                      say("Then functools.cache on slow().")]
    assert [entry_id for entry_id, _ in log.rows()] == ["e1", "e2", "e3", "e4", "e8", "e9"]


def test_the_attempt_left_behind_is_still_readable_in_full_with_path(tmp_path: Path) -> None:
    log = six(tmp_path)
    log.branch_to("e4")
    log.append_message(user("No global, please."))
    walked = path(log.entries(), "e6")
    assert [e["id"] for e in walked] == ["e1", "e2", "e3", "e4", "e5", "e6"]
    assert [e["message"] for e in walked] == SIX
    assert [e["id"] for e in log.branch("e6")] == ["e1", "e2", "e3", "e4", "e5", "e6"]


def test_going_back_twice_keeps_three_attempts_and_never_reuses_an_id(tmp_path: Path) -> None:
    log = six(tmp_path)
    assert log.branch_to("e4") == "e7"
    log.append_message(user("No global, please."))
    assert log.branch_to("e4") == "e9"
    log.append_message(user("Nor an import."))
    entries = log.entries()
    assert [e["id"] for e in entries] == [f"e{n}" for n in range(1, 11)]
    assert [e["id"] for e in path(entries, "e6")] == ["e1", "e2", "e3", "e4", "e5", "e6"]
    assert [e["id"] for e in path(entries, "e8")] == ["e1", "e2", "e3", "e4", "e7", "e8"]
    assert [e["id"] for e in path(entries, "e10")] == ["e1", "e2", "e3", "e4", "e9", "e10"]
    assert path(entries, "e10")[-1]["message"] == user("Nor an import.")
    assert len(log.replay()) == 5


def test_going_back_to_the_first_entry_leaves_it_alone(tmp_path: Path) -> None:
    log = six(tmp_path)
    log.branch_to("e1")
    assert log.replay() == [SIX[0]]
    assert path(log.entries(), None) == []


def test_going_back_closing_and_reopening_continues_from_the_branch(tmp_path: Path) -> None:
    six(tmp_path).branch_to("e4")
    again = SessionLog(tmp_path / "session.jsonl")
    assert again.tip() == "e7"
    assert again.append_message(user("No global, please.")) == "e8"
    assert again.entry("e8")["parent_id"] == "e7"
    assert again.replay() == SIX[:4] + [user("No global, please.")]


def test_going_back_to_an_unknown_id_names_it_and_writes_nothing(tmp_path: Path) -> None:
    log = six(tmp_path)
    file = tmp_path / "session.jsonl"
    before = file.read_bytes()
    with pytest.raises(UnknownEntry, match="e42") as raised:
        log.branch_to("e42")
    assert isinstance(raised.value, ValueError)
    assert file.read_bytes() == before


def test_going_back_on_a_session_that_has_not_started_names_the_id_and_creates_nothing(
        tmp_path: Path) -> None:
    file = tmp_path / "session.jsonl"
    with pytest.raises(UnknownEntry, match="e1"):
        SessionLog(file).branch_to("e1")
    assert not file.exists()


def test_a_harness_resumed_on_a_branched_log_sends_nothing_from_the_abandoned_attempt(
        tmp_path: Path) -> None:
    log = six(tmp_path)
    log.branch_to("e4")
    model = ScriptedModel([say("Then functools.cache on slow().")])
    harness = Harness(model, "You are careful.", [], messages=log.replay())
    harness.subscribe(persist_to(log))
    for _ in harness.prompt("No global, please."):
        pass
    sent = model.calls[0]
    assert sent.messages == SIX[:4] + [user("No global, please.")]
    for abandoned in ("Do it, then.", "module-level CACHE"):
        assert abandoned not in sent.text
        assert abandoned not in json.dumps(list(harness.messages))
    assert log.replay() == list(harness.messages)
    assert [e["parent_id"] for e in log.entries()[-2:]] == ["e7", "e8"]


# ---- other entry types ----------------------------------------------------------------


def test_labels_session_info_and_model_changes_hang_on_the_tree_and_rows_steps_over_them(
        tmp_path: Path) -> None:
    log = SessionLog(tmp_path / "session.jsonl")
    info = log.append_session_info(name="speed-up", cwd="/src")
    first = log.append_message(user("Make main.py faster."))
    label = log.append_label(first, "the ask")
    change = log.append_model_change("anthropic", "claude-sonnet-4-5")
    second = log.append_message(say("Sure."))
    # Any other type hangs on the tree too (compaction has rules of its own: test_view.py).
    compaction = log.append_entry("note", text="short")
    entries = {e["id"]: e for e in log.entries()}
    assert entries[info]["name"] == "speed-up" and entries[info]["type"] == "session_info"
    assert (entries[label]["target_id"], entries[label]["label"]) == (first, "the ask")
    assert (entries[change]["provider"], entries[change]["model"]) == (
        "anthropic", "claude-sonnet-4-5")
    assert entries[compaction]["parent_id"] == second
    assert log.rows() == [(first, user("Make main.py faster.")), (second, say("Sure."))]


def test_a_label_for_an_unknown_entry_names_it_and_writes_nothing(tmp_path: Path) -> None:
    log = six(tmp_path)
    before = (tmp_path / "session.jsonl").read_bytes()
    with pytest.raises(UnknownEntry, match="e77"):
        log.append_label("e77", "nope")
    assert (tmp_path / "session.jsonl").read_bytes() == before


def test_append_entry_leaves_messages_and_branches_to_their_own_methods(tmp_path: Path) -> None:
    log = SessionLog(tmp_path / "session.jsonl")
    for kind in ("message", "branch"):
        with pytest.raises(ValueError, match=kind):
            log.append_entry(kind, parent_id="e1")
    assert log.tip() is None


def test_persist_to_appends_every_completed_message_and_nothing_else(tmp_path: Path) -> None:
    log = SessionLog(tmp_path / "session.jsonl")
    listener = persist_to(log)
    listener({"type": "agent_start"})
    listener({"type": "message_update", "message": say("Hal")})
    listener({"type": "message_end", "message": say("Hallo")})
    listener({"type": "turn_end", "message": say("Hallo"), "tool_results": []})
    assert log.replay() == [say("Hallo")]


# ---- refusals on hand-made files ------------------------------------------------------


def refusal(tmp_path: Path, entries: list[dict[str, Any]], leaf: str,
            kind: type[SessionError]) -> list[str]:
    """rows(), replay() and path() all raise `kind`; returns the three messages."""
    file = tmp_path / "session.jsonl"
    write_lines(file, entries)
    log = SessionLog(file)
    said = []
    for attempt in (log.rows, log.replay, lambda: path(log.entries(), leaf)):
        with pytest.raises(kind) as raised:
            attempt()
        said.append(str(raised.value))
    return said


def test_a_file_from_before_parents_is_refused_naming_the_entry(tmp_path: Path) -> None:
    old = [{"id": "e1", "type": "message", "message": user("Make main.py faster.")},
           {"id": "e2", "type": "message", "message": user("Do it, then.")}]
    for said in refusal(tmp_path, old, "e2", NoParentKey):
        assert "e2" in said and "parent_id" in said


def test_a_parent_that_is_in_no_entry_is_refused_naming_the_entry(tmp_path: Path) -> None:
    entries = [msg("e1", None, "a"), msg("e2", "e1", "b"), msg("e4", "e3", "c")]
    for said in refusal(tmp_path, entries, "e4", MissingParent):
        assert "e4" in said and "e3" in said


def test_a_circle_is_refused_naming_an_entry_on_it(tmp_path: Path) -> None:
    entries = [msg("e1", None, "a"), msg("e2", "e3", "b"), msg("e3", "e2", "c")]
    for said in refusal(tmp_path, entries, "e3", CircularParent):
        assert "entry e3" in said


def test_a_circle_above_the_tip_is_named_where_the_walk_comes_back(tmp_path: Path) -> None:
    entries = [msg("e1", None, "a"), msg("e2", "e3", "b"), msg("e3", "e2", "c"),
               msg("e4", "e3", "d")]
    for said in refusal(tmp_path, entries, "e4", CircularParent):
        assert "entry e3" in said and "e4" not in said


def test_an_entry_that_is_its_own_parent_is_a_circle(tmp_path: Path) -> None:
    entries = [msg("e1", None, "a"), msg("e2", "e2", "b")]
    for said in refusal(tmp_path, entries, "e2", CircularParent):
        assert "entry e2" in said


def test_a_duplicate_id_anywhere_is_refused_naming_both_lines(tmp_path: Path) -> None:
    file = tmp_path / "session.jsonl"
    write_lines(file, [msg("e1", None, "a"), msg("e2", "e1", "b"), msg("e2", "e1", "c"),
                       msg("e4", "e1", "d")])
    log = SessionLog(file)
    for attempt in (log.entries, log.tip, log.replay):
        with pytest.raises(DuplicateId, match=r"line 3.*e2.*line 2"):
            attempt()
    with pytest.raises(DuplicateId):
        path(json.loads("[" + ",".join(file.read_text().splitlines()) + "]"), "e4")


def test_a_line_that_is_not_a_json_object_is_refused_by_line_number(tmp_path: Path) -> None:
    file = tmp_path / "session.jsonl"
    for bad in ("this is not json", "[1, 2, 3]", "", '"e3"'):
        file.write_text(json.dumps(msg("e1", None, "a")) + "\n" + json.dumps(
            msg("e2", "e1", "b")) + "\n" + bad + "\n")
        log = SessionLog(file)
        with pytest.raises(NotAnObject, match=f"{re.escape(str(file))}, line 3"):
            log.replay()
        with pytest.raises(NotAnObject):
            log.append_message(user("never written"))
        assert "never written" not in file.read_text()


def test_an_object_without_a_string_id_is_refused_by_line_number(tmp_path: Path) -> None:
    file = tmp_path / "session.jsonl"
    write_lines(file, [msg("e1", None, "a"), {"type": "message", "parent_id": "e1"}])
    with pytest.raises(BadEntry, match="line 2"):
        SessionLog(file).entries()


def test_a_message_entry_without_a_message_is_refused_naming_it(tmp_path: Path) -> None:
    file = tmp_path / "session.jsonl"
    write_lines(file, [msg("e1", None, "a"), {"id": "e2", "type": "message", "parent_id": "e1"}])
    with pytest.raises(BadEntry, match="entry e2"):
        SessionLog(file).replay()


def test_a_hand_edited_message_without_its_wire_shape_is_refused_naming_the_entry(
        tmp_path: Path) -> None:
    file = tmp_path / "session.jsonl"
    no_stop = {"role": "assistant", "content": [{"type": "text", "text": "hi"}]}
    write_lines(file, [msg("e1", None, "a"),
                       {"id": "e2", "type": "message", "parent_id": "e1", "message": no_stop}])
    with pytest.raises(BadEntry, match="entry e2.*'stop_reason' is missing"):
        SessionLog(file).replay()


def test_a_torn_last_line_is_refused_by_line_number_and_never_appended_to(
        tmp_path: Path) -> None:
    file = tmp_path / "session.jsonl"
    six(tmp_path)
    with file.open("ab") as torn:
        torn.write(b'{"id": "e7", "type": "mess')
    before = file.read_bytes()
    log = SessionLog(file)
    for attempt in (log.entries, log.tip, log.replay):
        with pytest.raises(TornLine, match="line 7"):
            attempt()
    with pytest.raises(TornLine, match="line 7"):
        log.append_message(user("glued on"))
    with pytest.raises(TornLine):
        log.branch_to("e2")
    assert file.read_bytes() == before


def test_an_append_that_would_reuse_a_hand_written_id_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "session.jsonl"
    write_lines(file, [msg("e2", None, "a")])
    log = SessionLog(file)
    with pytest.raises(DuplicateId, match="e2"):
        log.append_message(user("b"))
    assert len(file.read_text().splitlines()) == 1


# ---- many writers, and files that change underneath -----------------------------------


def test_two_logs_over_one_file_see_each_others_entries_and_the_true_tip(
        tmp_path: Path) -> None:
    file = tmp_path / "session.jsonl"
    a, b = SessionLog(file), SessionLog(file)
    assert a.append_message(user("from a")) == "e1"
    assert b.tip() == "e1"
    assert b.append_message(say("from b")) == "e2"
    assert a.branch_to("e1") == "e3"
    assert b.append_message(user("again")) == "e4"
    assert a.entry("e4")["parent_id"] == "e3"
    assert a.replay() == b.replay() == [user("from a"), user("again")]


def test_threads_appending_through_two_logs_never_collide(tmp_path: Path) -> None:
    file = tmp_path / "session.jsonl"
    logs = [SessionLog(file, fsync=False), SessionLog(file, fsync=False)]

    def write(log: SessionLog, who: int) -> None:
        for n in range(100):
            log.append_message(user(f"{who}-{n}"))

    threads = [threading.Thread(target=write, args=(logs[i % 2], i)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    entries = lines_of(file)
    assert [e["id"] for e in entries] == [f"e{n}" for n in range(1, 401)]
    assert [e["parent_id"] for e in entries] == [None] + [f"e{n}" for n in range(1, 400)]
    assert len(logs[0].replay()) == 400


def test_a_file_replaced_under_a_live_log_is_read_again(tmp_path: Path) -> None:
    log = six(tmp_path)
    file = tmp_path / "session.jsonl"
    other = tmp_path / "other.jsonl"
    write_lines(other, [msg("e1", None, "elsewhere")])
    os.replace(other, file)
    assert log.replay() == [user("elsewhere")]
    assert log.append_message(say("ok")) == "e2"


def test_a_file_that_shrank_under_a_live_log_is_read_again(tmp_path: Path) -> None:
    log = six(tmp_path)
    file = tmp_path / "session.jsonl"
    data = file.read_bytes()
    keep = data[: data.index(b"\n", data.index(b"\n") + 1) + 1]  # two lines
    with file.open("r+b") as handle:
        handle.truncate(len(keep))
    assert log.replay() == SIX[:2]
    assert log.tip() == "e2"


def test_a_file_rewritten_in_place_at_its_end_is_read_again(tmp_path: Path) -> None:
    log = six(tmp_path)
    file = tmp_path / "session.jsonl"
    entries = lines_of(file)
    entries[-1]["message"] = say("Done, differently, with more words than before.")
    write_lines(file, entries)  # same inode, larger, different last line
    assert log.replay()[-1] == say("Done, differently, with more words than before.")


def test_a_file_deleted_under_a_live_log_reads_as_not_started(tmp_path: Path) -> None:
    log = six(tmp_path)
    (tmp_path / "session.jsonl").unlink()
    assert log.tip() is None and log.replay() == []
    assert log.append_message(user("fresh")) == "e1"


def test_a_missing_folder_is_the_callers_to_create_and_nothing_is_made(tmp_path: Path) -> None:
    log = SessionLog(tmp_path / "not-yet" / "session.jsonl")
    with pytest.raises(FileNotFoundError):
        log.append_message(user("hi"))
    assert not (tmp_path / "not-yet").exists()
