"""The transcript a branch stands for, by the pinned rules: branch summaries and compactions,
from hand-written files, read back through SessionLog and checked by `sessions check`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mulligan.session import BadEntry, SessionLog
from mulligan.session.maintenance import check
from mulligan.session.view import COMPACTION_PREAMBLE, SUMMARY_PREAMBLE
from mulligan.testing import message_entry


def msg(entry_id, parent, role, text):
    return message_entry(entry_id, parent, text, role)


def write(tmp_path: Path, *entries: dict) -> SessionLog:
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return SessionLog(path)


def words(log: SessionLog) -> list[str]:
    out = []
    for message in log.replay():
        content = message["content"]
        out.append(content if isinstance(content, str) else content[0]["text"])
    return out


def test_a_branch_summary_replays_as_one_user_message_with_the_preamble(tmp_path):
    log = write(tmp_path, msg("e1", None, "user", "make it fast"),
                msg("e2", "e1", "assistant", "a global cache?"),
                msg("e3", "e2", "user", "do it"), msg("e4", "e3", "assistant", "done, CACHE"),
                {"id": "e5", "type": "branch_summary", "parent_id": "e2", "timestamp": "t",
                 "from_id": "e4", "summary": "tried a global CACHE; the user disliked it"},
                msg("e6", "e5", "user", "no global, please"))
    assert words(log) == ["make it fast", "a global cache?",
                          SUMMARY_PREAMBLE + "tried a global CACHE; the user disliked it",
                          "no global, please"]
    assert log.replay()[2]["role"] == "user" and check(log.path).ok


def chain(count: int) -> list[dict]:
    entries = []
    for n in range(1, count + 1):
        entries.append(msg(f"e{n}", f"e{n - 1}" if n > 1 else None,
                           "user" if n % 2 else "assistant", f"m{n}"))
    return entries


def compaction(entry_id, parent, first_kept, summary):
    return {"id": entry_id, "type": "compaction", "parent_id": parent, "timestamp": "t",
            "summary": summary, "first_kept_entry_id": first_kept, "tokens_before": 1000}


def test_one_compaction_gives_its_summary_then_the_kept_tail_then_what_came_after(tmp_path):
    log = write(tmp_path, *chain(6), compaction("e7", "e6", "e5", "m1 to m4 in short"),
                msg("e8", "e7", "user", "m8"))
    assert words(log) == [COMPACTION_PREAMBLE + "m1 to m4 in short", "m5", "m6", "m8"]


def test_only_the_latest_of_two_compactions_applies(tmp_path):
    log = write(tmp_path, *chain(6), compaction("e7", "e6", "e5", "first summary"),
                msg("e8", "e7", "user", "m8"), msg("e9", "e8", "assistant", "m9"),
                compaction("e10", "e9", "e8", "second summary, updated"),
                msg("e11", "e10", "user", "m11"))
    assert words(log) == [COMPACTION_PREAMBLE + "second summary, updated", "m8", "m9", "m11"]


def test_a_first_kept_entry_off_the_branch_is_refused_naming_the_compaction(tmp_path):
    log = write(tmp_path, *chain(4), msg("e5", "e2", "assistant", "side"),
                compaction("e6", "e4", "e5", "s"))
    with pytest.raises(BadEntry, match="entry e6: a compaction whose first_kept_entry_id 'e5'"):
        log.replay()


def test_going_back_before_a_compaction_brings_the_whole_history_back(tmp_path):
    log = write(tmp_path, *chain(6), compaction("e7", "e6", "e5", "short"),
                {"id": "e8", "type": "branch", "parent_id": "e4", "timestamp": "t"})
    assert words(log) == ["m1", "m2", "m3", "m4"]


def test_a_summary_that_is_not_a_string_is_refused_by_line(tmp_path):
    log = write(tmp_path, *chain(2), {"id": "e3", "type": "branch_summary", "parent_id": "e1",
                                      "timestamp": "t", "from_id": "e2", "summary": ["x"]})
    with pytest.raises(BadEntry, match="line 3.*summary is a list"):
        log.replay()
    assert not check(log.path).ok
