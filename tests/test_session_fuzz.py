"""Damaged files, generated: a SessionLog gives a named refusal or the correct transcript --
never a shorter one in silence, never a hang.

"Correct" is decided by a reference reader written here from the format's rules alone, in the
plainest way: parse every line, refuse what the rules refuse, walk from the last line.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mulligan.messages import shape_problem
from mulligan.session import SessionError, SessionLog
from mulligan.session.maintenance import check, repair


def reference(data: bytes) -> list[Any] | None:
    """The transcript the format promises for `data`, or None where it promises a refusal."""
    lines = data.split(b"\n")
    if lines.pop():
        return None  # torn last line
    by_id: dict[str, dict[str, Any]] = {}
    last = None
    for raw in lines:
        try:
            entry = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            return None
        # Every field of the wrong JSON type is refused wherever the entry is, on the branch
        # or not: a type that is not a string, a parent_id that is neither a string nor null,
        # a message on an entry that is not a message entry, a label target that is not a
        # string.
        if not isinstance(entry.get("type"), str):
            return None
        if "parent_id" in entry and entry["parent_id"] is not None \
                and not isinstance(entry["parent_id"], str):
            return None
        if "message" in entry and entry["type"] != "message":
            return None
        if entry["type"] == "label" and not isinstance(entry.get("target_id"), str):
            return None
        if entry["id"] in by_id:
            return None
        by_id[entry["id"]] = entry
        last = entry["id"]
    walked, seen, current = [], set(), last
    while current is not None:
        if current in seen or not isinstance(current, str) or current not in by_id:
            return None
        seen.add(current)
        entry = by_id[current]
        if "parent_id" not in entry:
            return None
        walked.append(entry)
        current = entry["parent_id"]
    walked.reverse()
    messages = [entry.get("message") for entry in walked if entry.get("type") == "message"]
    # A message without the wire shape (a key damaged, say) is refused like any other damage.
    return None if any(shape_problem(m) is not None for m in messages) else messages


# A session is written by SessionLog itself from a list of steps.
steps = st.lists(st.one_of(
    st.tuples(st.just("say"), st.text(max_size=30)),
    st.tuples(st.just("back"), st.integers(min_value=0)),
    st.tuples(st.just("label"), st.integers(min_value=0)),
), min_size=1, max_size=25)

# Damage is applied to the bytes (or the lines) of that file.
damage = st.lists(st.one_of(
    st.tuples(st.just("truncate"), st.integers(min_value=0)),
    st.tuples(st.just("byte"), st.integers(min_value=0), st.integers(0, 255)),
    st.tuples(st.just("drop_line"), st.integers(min_value=0)),
    st.tuples(st.just("copy_line"), st.integers(min_value=0)),
    st.tuples(st.just("swap_lines"), st.integers(min_value=0), st.integers(min_value=0)),
    st.tuples(st.just("insert"), st.integers(min_value=0),
              st.sampled_from([b"", b"{}", b"[]", b"null", b"garbage", b'{"id": "e1"}',
                               b'{"id": "e99", "type": "message", "parent_id": null, '
                               b'"message": {"role": "user", "content": "x"}}'])),
    st.tuples(st.just("reparent"), st.integers(min_value=0),
              st.sampled_from(["e1", "e2", "e3", "e99", None, "drop", 7])),
    # Fields of the wrong JSON type: ids, parents, types and label targets that are lists,
    # objects, numbers, booleans or missing; a message moved onto a non-message entry.
    st.tuples(st.just("retype"), st.integers(min_value=0),
              st.sampled_from(["id", "parent_id", "type", "target_id"]),
              st.sampled_from([[], ["e1"], {}, {"id": "e1"}, 7, 1.5, True, None, "drop",
                               "messagf", "label", "e1"])),
    st.tuples(st.just("message_on"), st.integers(min_value=0),
              st.sampled_from(["label", "messagf", "branch", "drop"])),
), min_size=1, max_size=3)


def write_session(file: Path, plan: list[tuple[Any, ...]]) -> None:
    log = SessionLog(file, fsync=False)
    for step in plan:
        ids = [entry["id"] for entry in log.entries()]
        if step[0] == "say" or not ids:
            log.append_message({"role": "user", "content": str(step[-1])})
        elif step[0] == "back":
            log.branch_to(ids[step[1] % len(ids)])
        else:
            log.append_label(ids[step[1] % len(ids)], "mark")


def damaged(data: bytes, harm: list[tuple[Any, ...]]) -> bytes:
    for kind, *args in harm:
        lines = data.split(b"\n")
        if kind == "truncate":
            data = data[: args[0] % (len(data) + 1)]
        elif kind == "byte" and data:
            at = args[0] % len(data)
            data = data[:at] + bytes([args[1]]) + data[at + 1:]
        elif kind == "drop_line" and len(lines) > 1:
            del lines[args[0] % (len(lines) - 1)]
            data = b"\n".join(lines)
        elif kind == "copy_line" and len(lines) > 1:
            at = args[0] % (len(lines) - 1)
            lines.insert(at, lines[at])
            data = b"\n".join(lines)
        elif kind == "swap_lines" and len(lines) > 1:
            i, j = args[0] % (len(lines) - 1), args[1] % (len(lines) - 1)
            lines[i], lines[j] = lines[j], lines[i]
            data = b"\n".join(lines)
        elif kind == "insert":
            lines.insert(args[0] % len(lines), args[1])
            data = b"\n".join(lines)
        elif kind in ("retype", "message_on") and len(lines) > 1:
            at = args[0] % (len(lines) - 1)
            try:
                entry = orjson.loads(lines[at])
            except orjson.JSONDecodeError:
                continue
            if not isinstance(entry, dict):
                continue
            key, value = ("type", args[1]) if kind == "message_on" else (args[1], args[2])
            if kind == "message_on":
                entry.setdefault("message", {"role": "user", "content": "moved"})
            if value == "drop":
                entry.pop(key, None)
            else:
                entry[key] = value
            lines[at] = orjson.dumps(entry)
            data = b"\n".join(lines)
        elif kind == "reparent" and len(lines) > 1:
            at = args[0] % (len(lines) - 1)
            try:
                entry = orjson.loads(lines[at])
            except orjson.JSONDecodeError:
                continue
            if isinstance(entry, dict):
                if args[1] == "drop":
                    entry.pop("parent_id", None)
                else:
                    entry["parent_id"] = args[1]
                lines[at] = orjson.dumps(entry)
                data = b"\n".join(lines)
    return data


def outcome(log: SessionLog) -> list[Any] | None:
    try:
        return log.replay()
    except SessionError as refusal:
        assert log.path is not None and os.fspath(log.path) in str(refusal)
        assert refusal.line is not None or refusal.entry_id is not None
        return None


FUZZ = settings(max_examples=300, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(plan=steps, harm=damage)
def test_a_damaged_file_gives_a_named_refusal_or_the_correct_transcript(
        plan: list[tuple[Any, ...]], harm: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        file = Path(folder) / "session.jsonl"
        write_session(file, plan)
        data = damaged(file.read_bytes(), harm)
        file.write_bytes(data)
        expected = reference(data)
        assert outcome(SessionLog(file)) == expected
        if expected is None:
            assert not check(file).ok  # whatever refuses the file, check names it too


@FUZZ
@given(plan=steps, harm=damage)
def test_repair_of_a_damaged_file_never_loses_a_byte(
        plan: list[tuple[Any, ...]], harm: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        file = Path(folder) / "session.jsonl"
        write_session(file, plan)
        data = damaged(file.read_bytes(), harm)
        file.write_bytes(data)
        report = repair(file)
        kept = file.read_bytes()
        if report.completed:  # a whole last entry without its newline: the newline is added
            assert kept == data + b"\n"
        elif report.moved_to is None:
            assert kept == data and data.endswith(b"\n") or not data
        else:
            assert kept + Path(report.moved_to).read_bytes() == data
            assert kept == b"" or kept.endswith(b"\n")
        if report.ok:
            assert outcome(SessionLog(file)) == reference(kept) is not None


@FUZZ
@given(plan=steps, harm=damage)
def test_a_live_log_whose_file_is_replaced_by_a_damaged_one_notices(
        plan: list[tuple[Any, ...]], harm: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        file, other = Path(folder) / "session.jsonl", Path(folder) / "other.jsonl"
        write_session(file, plan)
        log = SessionLog(file)
        assert log.replay() == reference(file.read_bytes())
        data = damaged(file.read_bytes(), harm)
        other.write_bytes(data)
        os.replace(other, file)
        assert outcome(log) == reference(data)


@FUZZ
@given(plan=steps, cut=st.integers(min_value=0), more=steps)
def test_a_live_log_whose_file_shrinks_and_grows_again_reads_what_is_there(
        plan: list[tuple[Any, ...]], cut: int, more: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        file = Path(folder) / "session.jsonl"
        write_session(file, plan)
        log = SessionLog(file)
        log.replay()
        data = file.read_bytes()
        with file.open("r+b") as handle:
            handle.truncate(cut % (len(data) + 1))
        assert outcome(log) == reference(file.read_bytes())
        if reference(file.read_bytes()) is not None:
            write_session(file, more)  # another writer carries on from the cut
            assert outcome(log) == reference(file.read_bytes())
