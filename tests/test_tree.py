"""The tree view, drawn from entry dicts of a real session file."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from mulligan.brief import cut, flat, message_line
from mulligan.frontends.tree import render_tree
from mulligan.session import SessionLog
from mulligan.session.branches import children_of, links, message_leaves
from mulligan.testing import call, reply, say, tool_result, user

READ = call("read", {"path": "main.py"}, id="c1")


def drawn(entries, tip, **options) -> list[str]:
    """The tree's lines with the id column's padding squeezed to one space."""
    return [re.sub(r"(e\d+) +", r"\1 ", line, count=1)
            for line in render_tree(entries, tip, **options)]


def regret_session(tmp_path: Path) -> SessionLog:
    """The session from the design's lesson: six messages, then back to e5 (the offer)."""
    log = SessionLog(tmp_path / "s.jsonl", fsync=False)
    log.append_session_info(cwd="/work", model="scripted")
    for message in [user("Make main.py faster."), reply("Reading it.", READ),
                    tool_result(READ, "def slow(n): return sum(range(n))"),
                    say("Cache the results in a global dict."), user("Do it, then."),
                    say("Done: main.py now keeps a module-level CACHE.")]:
        log.append_message(message)
    log.branch_to("e5")
    log.append_message(user("No global, please."))
    log.append_message(say("Then functools.cache on slow()."))
    return log


def test_the_current_path_runs_down_the_left_and_the_tip_is_marked(tmp_path):
    log = regret_session(tmp_path)
    lines = drawn(log.entries(), log.tip(), width=100)
    assert lines[0].startswith("e1 session:")
    assert lines[1] == "e2 you: Make main.py faster."
    assert lines[2] == "e3 ai: Reading it. read(main.py)"
    assert lines[3] == "e4 read → def slow(n): return sum(range(n))"
    assert lines[-1] == "e10 ai: Then functools.cache on slow(). ◀ tip"
    assert sum("◀ tip" in line for line in lines) == 1


def test_an_abandoned_attempt_is_folded_into_one_line_by_default(tmp_path):
    log = regret_session(tmp_path)
    lines = drawn(log.entries(), log.tip(), width=100)
    assert "├─ … 2 entries on an abandoned attempt (e6..e7)" in lines
    assert not any("Do it, then." in line for line in lines)
    assert "e8 ↩ back to e5" in lines


def test_unfolded_the_abandoned_attempt_hangs_off_its_fork_point(tmp_path):
    log = regret_session(tmp_path)
    lines = drawn(log.entries(), log.tip(), fold=False, width=100)
    at = lines.index("e5 ai: Cache the results in a global dict.")
    assert lines[at + 1] == "├─ e6 you: Do it, then."
    assert lines[at + 2] == "│  e7 ai: Done: main.py now keeps a module-level CACHE."
    assert lines[at + 3] == "e8 ↩ back to e5"


def test_every_line_fits_a_narrow_terminal(tmp_path):
    log = regret_session(tmp_path)
    for width in (30, 40, 60):
        lines = render_tree(log.entries(), log.tip(), fold=False, width=width)
        assert all(len(line) <= width for line in lines)
        assert lines[-1].endswith("◀ tip")


def test_labels_show_on_the_entries_they_name_and_in_folded_attempts(tmp_path):
    log = regret_session(tmp_path)
    log.append_label("e10", "the good one")
    log.append_label("e6", "regret")
    lines = drawn(log.entries(), log.tip(), width=100)
    assert "e10 ai: Then functools.cache on slow(). [the good one] ◀ tip" in lines
    assert any("(e6..e7) [regret]" in line for line in lines)


def test_the_tip_on_an_old_attempt_is_followed_and_the_newer_one_folded(tmp_path):
    log = regret_session(tmp_path)
    log.branch_to("e7")
    lines = drawn(log.entries(), log.tip(), width=100)
    assert "e6 you: Do it, then." in lines
    assert any("abandoned attempt (e8..e10)" in line for line in lines)
    assert lines[-1] == "e11 ↩ back to e7 ◀ tip"


def test_each_attempt_that_ends_in_a_message_counts_as_a_branch(tmp_path):
    log = regret_session(tmp_path)
    assert message_leaves(log.entries()) == ["e7", "e10"]
    log.branch_to("e2")  # a branch line nobody wrote after adds no attempt
    assert message_leaves(log.entries()) == ["e7", "e10"]


def test_the_links_of_a_crafted_file_are_those_the_file_names():
    # A parent written after its child (only a crafted file: the pass goes over it again),
    # a missing parent, a parent that is not a string, a duplicate id, an id that is not one.
    entries = [{"id": "e1", "parent_id": None}, {"id": "e2", "parent_id": "e4"},
               {"id": "e3", "parent_id": "e9"}, {"id": "e4", "parent_id": "e1"},
               {"id": "e5", "parent_id": 7}, {"id": "e2", "parent_id": "e1"},
               {"id": 5, "parent_id": "e1"}, {"id": "e6", "parent_id": "e1"}]
    up, children, missing = links(entries)
    assert up == {"e1": None, "e2": "e4", "e3": None, "e4": "e1", "e5": None, "e6": "e1"}
    # file order under each parent; the duplicate e2 hangs where the first one does
    assert children == {None: ["e1", "e3", "e5", 5], "e4": ["e2", "e2"], "e1": ["e4", "e6"]}
    assert missing == [("e3", "e9"), ("e5", 7)]
    assert children_of(entries) == children
    # a circle: each entry its own parent's child, nothing missing, nothing under None
    assert links([{"id": "e1", "parent_id": "e2"}, {"id": "e2", "parent_id": "e1"}]) == (
        {"e1": "e2", "e2": "e1"}, {"e2": ["e1"], "e1": ["e2"]}, [])


def test_an_empty_session_says_so(tmp_path):
    assert render_tree([], None) == ["(empty session: nothing has been said yet)"]


def test_a_folded_line_counts_the_attempts_inside_it(tmp_path):
    log = regret_session(tmp_path)       # e6..e7 abandoned, e8..e10 current
    log.branch_to("e6")                  # e11: a second answer to "Do it, then."
    log.append_message(say("Done differently."))
    log.branch_to("e10")                 # back to the current attempt's end
    lines = drawn(log.entries(), log.tip(), width=100)
    assert "├─ … 4 entries on 2 abandoned attempts (e6..e12)" in lines


def test_a_damaged_message_is_drawn_as_damaged_not_a_crash(tmp_path):
    log = SessionLog(tmp_path / "s.jsonl", fsync=False)
    log.append_message("oops")  # type: ignore[arg-type]
    log.append_message({"role": "assistant", "content": [5, {"type": "toolCall", "name": "ls",
                                                             "arguments": [1]}],
                        "stop_reason": "stop"})
    lines = drawn(log.entries(), log.tip())
    assert "damaged" in lines[0]
    assert "ai: ls([1])" in lines[1]


def nested_attempts(path: Path, depth: int) -> None:
    """A session whose abandoned attempts nest `depth` deep: each one's first entry has two
    children, the next nested attempt (first in the file, so drawn as a side branch) and a
    reply ending it; the session went back to e1 and goes on there. Written as a file in the
    format, as a session with parallel attempts interleaves its lines."""
    lines = [{"id": "e1", "type": "message", "parent_id": None, "message": user("start")}]

    def add(parent: str, message: dict) -> str:
        entry_id = f"e{len(lines) + 1}"
        lines.append({"id": entry_id, "type": "message", "parent_id": parent,
                      "message": message})
        return entry_id

    attempts = [add("e1", user("attempt 1"))]
    for n in range(2, depth + 1):
        attempts.append(add(attempts[-1], user(f"attempt {n}")))
    for at in reversed(attempts):
        add(at, say("given up"))
    lines.append({"id": f"e{len(lines) + 1}", "type": "branch", "parent_id": "e1"})
    add(f"e{len(lines)}", user("going on from the start"))
    with open(path, "wb") as handle:
        for entry in lines:
            handle.write(orjson.dumps({**entry, "timestamp": "2026-12-01T00:00:00.000Z"}))
            handle.write(b"\n")


def test_two_thousand_nested_abandoned_attempts_are_drawn_by_the_real_command(tmp_path):
    path = tmp_path / "deep.jsonl"
    nested_attempts(path, 2000)
    for fold in ([], ["--all"]):
        done = subprocess.run([sys.executable, "-m", "mulligan", "sessions", "tree", str(path),
                               "--width", "60", *fold], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "Error" not in done.stderr and "Traceback" not in done.stderr
        drawn_ids = [re.search(r"e\d+", line).group() for line in done.stdout.splitlines()]
        if fold:  # every entry, once
            assert sorted(drawn_ids) == sorted(f"e{n}" for n in range(1, 4004))
        else:
            assert "… 4000 entries on 2000 abandoned attempts (e2..e4001)" in done.stdout


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(st.text(alphabet=" \n\tab…é", max_size=400), min_size=1, max_size=3),
       room=st.integers(1, 120), role=st.sampled_from(["user", "assistant", "toolResult"]))
def test_a_line_bounded_by_its_room_reads_as_the_whole_message_cut(texts, room, role):
    """The tree folds only as much of a long message as its line can show: the line is the
    one the whole message, folded and cut, gives."""
    if role == "assistant":
        message = {"role": role, "stop_reason": "stop", "content": [
            *({"type": "text", "text": t} for t in texts[:-1]),
            {"type": "toolCall", "id": "c", "name": "write", "arguments": {"x": texts[-1]}}]}
    else:
        message = {"role": role, "content": texts[0], "tool_name": "bash"}
    assert cut(message_line(message, room), room) == cut(message_line(message), room)
    assert cut(flat(texts[0], room), room) == cut(flat(texts[0]), room)
