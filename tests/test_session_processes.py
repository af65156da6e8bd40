"""Real processes on one session file: concurrent writers, and a writer killed mid-line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from mulligan.session import SessionLog
from mulligan.session.maintenance import check, repair

WRITER = """
import os, sys, time
from mulligan.session import SessionLog
file, go, who, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
log = SessionLog(file)
while not os.path.exists(go):
    time.sleep(0.001)
for n in range(count):
    log.append_message({"role": "user", "content": f"{who}-{n} " + "x" * (n * 37 % 3000)})
"""

# Appends ever bigger entries (tens of MB) until killed, so that the kill lands in a write.
HUGE_WRITER = """
import sys
from mulligan.session import SessionLog
log = SessionLog(sys.argv[1], fsync=False)
log.append_message({"role": "user", "content": "small first entry"})
print("ready", flush=True)
size = 8 << 20
while True:
    log.append_message({"role": "user", "content": "y" * size})
    size = min(size * 2, 128 << 20)
"""


def test_four_processes_appending_150_entries_each_end_with_600_distinct_ids(
        tmp_path: Path) -> None:
    file, go = tmp_path / "session.jsonl", tmp_path / "go"
    children = [subprocess.Popen([sys.executable, "-c", WRITER, str(file), str(go), str(who),
                                  "150"]) for who in range(4)]
    go.touch()
    assert [child.wait(timeout=120) for child in children] == [0, 0, 0, 0]
    raw = file.read_bytes()
    assert raw.endswith(b"\n")
    entries = [json.loads(line) for line in raw.splitlines()]
    ids = [entry["id"] for entry in entries]
    assert len(set(ids)) == 600 and ids == [f"e{n}" for n in range(1, 601)]
    assert [entry["parent_id"] for entry in entries] == [None] + ids[:-1]
    written = sorted(entry["message"]["content"].split(" ")[0] for entry in entries)
    assert written == sorted(f"{who}-{n}" for who in range(4) for n in range(150))
    assert len(SessionLog(file).replay()) == 600


def torn_by_kill(file: Path) -> bool:
    """Run HUGE_WRITER on `file`, SIGKILL it while the file ends mid-line (or after a few
    seconds), and say whether the kill left a torn line."""
    child = subprocess.Popen([sys.executable, "-c", HUGE_WRITER, str(file)],
                             stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        deadline = time.monotonic() + 10
        with file.open("rb") as handle:
            while time.monotonic() < deadline:
                size = os.fstat(handle.fileno()).st_size
                handle.seek(size - 1)
                if handle.read(1) != b"\n":  # a write is under way: kill it now
                    break
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    return not file.read_bytes().endswith(b"\n")


def test_a_writer_killed_mid_append_leaves_at_most_one_torn_line_which_repair_sets_aside(
        tmp_path: Path) -> None:
    for attempt in range(5):
        file = tmp_path / f"session{attempt}.jsonl"
        torn = torn_by_kill(file)
        report = check(file)
        torn_problems = [p for p in report.problems if "torn write" in p]
        assert len(torn_problems) == int(torn)
        assert [p for p in report.problems if "torn write" not in p] == []
        if torn:
            break
    assert torn, "five kills in a row all landed between writes"
    before = file.read_bytes()
    cut = before.rindex(b"\n") + 1
    repaired = repair(file)
    assert repaired.ok and repaired.moved_to is not None
    assert Path(repaired.moved_to).read_bytes() == before[cut:]
    assert file.read_bytes() == before[:cut]
    log = SessionLog(file)
    assert log.replay()[0]["content"] == "small first entry"
    complete = before[:cut].count(b"\n")
    assert log.append_message({"role": "user", "content": "after the repair"}) == \
        f"e{complete + 1}"


BIG_WRITER = """
import sys
from mulligan.session import SessionLog
log = SessionLog(sys.argv[1], fsync=False)
for n in range(200):
    log.append_message({"role": "user", "content": f"{n} " + "z" * 300_000})
"""


def test_a_reader_never_sees_half_of_a_line_another_process_is_writing(tmp_path: Path) -> None:
    file = tmp_path / "session.jsonl"
    SessionLog(file).append_message({"role": "user", "content": "first"})
    child = subprocess.Popen([sys.executable, "-c", BIG_WRITER, str(file)])
    reader = SessionLog(file)
    seen = []
    while child.poll() is None:
        seen.append(len(reader.replay()))  # a TornLine here would fail the test
    assert child.wait() == 0
    assert seen == sorted(seen)
    assert len(reader.replay()) == 201
