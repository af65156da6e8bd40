"""One live writer per session: the lease file."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from mulligan.session.stores.lease import LeaseHeld, acquire, is_free, lease_path, read_holder


def test_the_lease_file_names_this_process_and_goes_away_on_release(tmp_path):
    session = tmp_path / "s.jsonl"
    lease = acquire(session)
    holder = json.loads(lease_path(session).read_text())
    assert holder["pid"] == os.getpid() and holder["host"] and holder["started"]
    lease.release()
    assert not lease_path(session).exists()
    lease.release()  # twice is harmless


def test_a_second_writer_is_refused_with_the_holders_pid(tmp_path):
    session = tmp_path / "s.jsonl"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys,time; from mulligan.session.stores.lease import acquire;"
         f"acquire(__import__('pathlib').Path({str(session)!r})); print('held', flush=True);"
         "sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(LeaseHeld) as refused:
            acquire(session)
        assert f"pid {holder.pid}" in str(refused.value)
    finally:
        holder.stdin.close()
        holder.wait()
    assert not lease_path(session).exists()  # released at the holder's exit


def test_a_lease_whose_process_was_killed_is_taken_over(tmp_path):
    session = tmp_path / "s.jsonl"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys; from mulligan.session.stores.lease import acquire;"
         f"acquire(__import__('pathlib').Path({str(session)!r})); print('held', flush=True);"
         "sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    holder.kill()  # no atexit, no release: the lease file stays behind
    holder.wait()
    assert read_holder(session)["pid"] == holder.pid
    lease = acquire(session)
    assert read_holder(session)["pid"] == os.getpid()
    lease.release()


def test_a_lease_file_naming_a_dead_pid_but_unlocked_is_free(tmp_path):
    session = tmp_path / "s.jsonl"
    lease_path(session).write_text(json.dumps({"pid": 999999, "started": "x", "host": "h"}))
    assert is_free(session)
    acquire(session).release()


def test_this_process_cannot_take_its_own_lease_twice(tmp_path):
    session = tmp_path / "s.jsonl"
    lease = acquire(session)
    with pytest.raises(LeaseHeld):
        acquire(session)
    assert not is_free(session)
    lease.release()
    assert is_free(session)


def test_a_reader_glancing_at_a_stale_lease_does_not_make_a_taker_over_fail(tmp_path):
    # `sessions ls` (is_free) holds a shared lock on a stale lease file for a moment; a
    # `mulligan -c` taking the lease over at that moment must wait it out, not be refused.
    import fcntl
    import socket
    import threading

    session = tmp_path / "s.jsonl"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a holder that was killed: its pid names no process now
    lease_path(session).write_text(json.dumps({"pid": gone.pid, "host": socket.gethostname(),
                                               "started": "then"}))
    glance = os.open(lease_path(session), os.O_RDONLY)
    fcntl.flock(glance, fcntl.LOCK_SH)
    threading.Timer(0.1, os.close, [glance]).start()
    lease = acquire(session)
    assert read_holder(session)["pid"] == os.getpid()
    lease.release()
