"""Checkpoints in the shared store (app/workspace/shared.py), on a real throwaway PostgreSQL
server and real `mulligan` processes with a scripted model: a session run on one
MULLIGAN_HOME is gone back in, files and all, from a second one whose snapshot folder is
empty; an upload killed mid-way is finished at the next start; gc keeps what a database
session names; a manifest changed in the database is refused by name."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

psycopg = pytest.importorskip("psycopg")
from mulligan.app.workspace.shared import SCHEMA, Shared  # noqa: E402
from mulligan.app.workspace.store.snapshots import Store  # noqa: E402
from mulligan.session.stores.postgres import Database  # noqa: E402
from test_cli import script  # noqa: E402
from test_postgres import PYTHON, mulligan  # noqa: E402

BINARY = bytes(range(256)) * 20


def bash(command: str, call_id: str) -> dict:
    return {"role": "assistant", "stop_reason": "toolUse", "content": [
        {"type": "toolCall", "id": call_id, "name": "bash", "arguments": {"command": command}}]}


def session_script(tmp_path: Path) -> str:
    first = ("printf 'one\\n' > a.txt; python3 -c \"import sys; "
             "sys.stdout.buffer.write(bytes(range(256)) * 20)\" > b.bin")
    return script(tmp_path, bash(first, "c1"), bash("printf 'two\\n' > a.txt; rm b.bin", "c2"),
                  "done")


def rows(url: str, query: str) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(query).fetchall()


def named_trees(url: str, session_id: str) -> tuple[set[str], list[dict]]:
    entries = Database(url).log(session_id).entries()
    return {v for e in entries for k, v in (e.get("workspace") or {}).items()
            if k in ("before", "after")}, entries


def test_a_second_home_goes_back_with_the_first_ones_files_byte_for_byte(tmp_path, pg_url):
    home1, home2, work = tmp_path / "home1", tmp_path / "home2", tmp_path / "work"
    run = mulligan(home1, work, "-p", "make files", "--permission-mode", "auto", "--model",
                   session_script(tmp_path), store=pg_url)
    assert run.returncode == 0, run.stderr
    assert (work / "a.txt").read_bytes() == b"two\n" and not (work / "b.bin").exists()
    (row,) = Database(pg_url).sessions()
    trees, entries = named_trees(pg_url, row["id"])
    assert trees and trees <= {r[0] for r in rows(pg_url, "SELECT id FROM mulligan_trees")}
    assert (home1 / "checkpoints" / "uploads.queue").read_bytes() == b""  # all uploaded
    first_result = next(e["id"] for e in entries if (e.get("workspace") or {}).get("after")
                        and "b.bin" in e["workspace"]["changed"])
    # The second machine: its own home, nothing local; the files come from the database.
    assert not (home2 / "checkpoints").exists()
    (work / "a.txt").write_bytes(b"mine\n")  # a change outside the agent: refused by name
    refused = mulligan(home2, work, "sessions", "back", row["id"], first_result, "--files",
                       store=pg_url)
    assert refused.returncode == 1 and "a.txt" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
    assert (work / "a.txt").read_bytes() == b"mine\n" and not (work / "b.bin").exists()
    assert len(Database(pg_url).log(row["id"]).entries()) == len(entries)  # nothing written
    (work / "a.txt").write_bytes(b"two\n")
    back = mulligan(home2, work, "sessions", "back", row["id"], first_result, "--files",
                    store=pg_url)
    assert back.returncode == 0, back.stderr
    assert (work / "a.txt").read_bytes() == b"one\n"
    assert (work / "b.bin").read_bytes() == BINARY
    assert sorted((home2 / "checkpoints" / "trees").glob("*.json"))  # fetched, kept here
    # /diff's and the export's diffs read the same way: a third home, nothing local.
    last_result = next(e["id"] for e in reversed(entries)
                       if (e.get("workspace") or {}).get("after"))
    diff = mulligan(tmp_path / "home3", work, "sessions", "diff", row["id"], first_result,
                    last_result, store=pg_url)
    assert diff.returncode == 0, diff.stderr
    assert "-one" in diff.stdout and "+two" in diff.stdout and "b.bin" in diff.stdout


def test_an_upload_killed_midway_is_finished_at_the_next_start(tmp_path, pg_url):
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    with Database(pg_url).connect() as setup:  # the sessions' tables, and the snapshots'
        setup.execute(SCHEMA)
    blocker = psycopg.connect(pg_url)  # holds the manifests' table: the upload waits
    blocker.execute("LOCK TABLE mulligan_trees IN SHARE MODE")
    env = {k: v for k, v in os.environ.items() if k not in ("MULLIGAN_STORE",)}
    env.update(MULLIGAN_HOME=str(home), MULLIGAN_STORE=pg_url)
    process = subprocess.Popen(
        [PYTHON, "-m", "mulligan", "-p", "make files", "--permission-mode", "auto",
         "--model", session_script(tmp_path)], cwd=work, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        # The turn is over (its last answer recorded), its uploads waiting on the lock.
        while not rows(pg_url, "SELECT 1 FROM mulligan_entries WHERE line LIKE "
                       "'%\"done\"%'::bytea") or not rows(
                pg_url, "SELECT 1 FROM pg_stat_activity WHERE application_name = "
                "'mulligan snapshots' AND wait_event_type = 'Lock'"):
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)  # mid-upload: blobs sent, the manifest waiting
        process.wait()
    finally:
        blocker.rollback()
        blocker.close()
    assert rows(pg_url, "SELECT count(*) FROM mulligan_trees") == [(0,)]
    assert rows(pg_url, "SELECT count(*) FROM mulligan_blobs") == [(0,)]  # rolled back
    (row,) = Database(pg_url).sessions()
    trees, _ = named_trees(pg_url, row["id"])
    assert trees and set((home / "checkpoints" / "uploads.queue").read_text().split()) >= trees
    again = mulligan(home, work, "-p", "hi", "--model", script(tmp_path, "hello"),
                     store=pg_url)  # the next start: no snapshot of its own
    assert again.returncode == 0, again.stderr
    assert trees <= {r[0] for r in rows(pg_url, "SELECT id FROM mulligan_trees")}
    named_blobs = {h for (blobs,) in rows(pg_url, "SELECT blobs FROM mulligan_trees")
                   for h in blobs}
    assert named_blobs <= {r[0] for r in rows(pg_url, "SELECT hash FROM mulligan_blobs")}


def test_gc_keeps_every_blob_a_database_session_names(tmp_path, pg_url):
    home, work = tmp_path / "home", tmp_path / "work"
    run = mulligan(home, work, "-p", "make files", "--permission-mode", "auto", "--model",
                   session_script(tmp_path), store=pg_url)
    assert run.returncode == 0, run.stderr
    (row,) = Database(pg_url).sessions()
    trees, _ = named_trees(pg_url, row["id"])
    kept_blobs = {r[0] for r in rows(pg_url, "SELECT hash FROM mulligan_blobs")}
    # An orphan from a session since deleted: one blob of its own, one shared with the kept.
    shared_blob = next(iter(kept_blobs))
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO mulligan_blobs (hash, data) VALUES (%s, 'x')", ("f" * 40,))
        conn.execute("INSERT INTO mulligan_trees (id, manifest, blobs) VALUES (%s, '{}', %s)",
                     ("e" * 40, ["f" * 40, shared_blob]))
        for table in ("mulligan_blobs", "mulligan_trees"):  # all past gc's grace
            conn.execute(f"UPDATE {table} SET created = now() - interval '2 hours'")
    done = mulligan(home, work, "gc", store=pg_url)
    assert done.returncode == 0, done.stderr
    assert "freed 1 snapshot(s) and 1 file copies" in done.stdout.splitlines()[1]
    assert {r[0] for r in rows(pg_url, "SELECT id FROM mulligan_trees")} == trees
    assert {r[0] for r in rows(pg_url, "SELECT hash FROM mulligan_blobs")} == kept_blobs


def test_a_manifest_changed_in_the_database_is_refused_by_name(tmp_path, pg_url):
    source = Store(tmp_path / "home1")
    Shared(pg_url, source)
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "a.txt").write_text("hello\n")
    tree = source.snapshot(folder)
    assert source.shared.drain(30)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE mulligan_trees SET manifest = convert_to(replace(convert_from("
                     "manifest, 'UTF8'), 'a.txt', '../x.txt'), 'UTF8')")
    reader = Store(tmp_path / "home2")
    Shared(pg_url, reader)
    with pytest.raises(ValueError, match=f"snapshot {tree.id} .*'../x.txt'.* refused"):
        reader.load(tree.id)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE mulligan_trees SET manifest = convert_to(replace(convert_from("
                     "manifest, 'UTF8'), '../x.txt', 'b.txt'), 'UTF8')")
    with pytest.raises(ValueError, match=f"snapshot {tree.id} .*its content has id"):
        reader.load(tree.id)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE mulligan_trees SET manifest = convert_to(replace(convert_from("
                     "manifest, 'UTF8'), 'b.txt', 'a.txt'), 'UTF8')")
        conn.execute("UPDATE mulligan_blobs SET data = 'not hello'")
    with pytest.raises(ValueError, match="blob [0-9a-f]{40} .*do not hash to its name"):
        reader.load(tree.id)
    with pytest.raises(ValueError, match="not 40 hex"):
        reader.load("../../etc")
    assert not (tmp_path / "home2" / "checkpoints" / "blobs").exists()
    assert not (tmp_path / "home2" / "checkpoints" / "trees").exists()


def test_the_database_gets_whole_files_when_the_local_store_keeps_deltas(tmp_path, pg_url):
    source = Store(tmp_path / "home1")
    Shared(pg_url, source)
    folder = tmp_path / "work"
    folder.mkdir()
    lines = [f"line {n} of a file edited one line at a time\n" for n in range(400)]
    versions = []
    for n in range(3):
        lines[n * 100] = f"edited {n}\n"
        (folder / "a.txt").write_text("".join(lines))
        versions.append((source.snapshot(folder, reread=["a.txt"]), "".join(lines).encode()))
    assert source.blobs.base_of(versions[2][0].files["a.txt"][4]) is not None  # a delta here
    assert source.shared.drain(30)
    stored = rows(pg_url, "SELECT hash, data FROM mulligan_blobs")
    assert stored and all(hashlib.blake2b(bytes(data), digest_size=20).hexdigest() == digest
                          for digest, data in stored)  # each whole: any version reads them
    reader = Store(tmp_path / "home2")
    Shared(pg_url, reader)
    for tree, data in versions:
        assert reader.read_blob(reader.load(tree.id).files["a.txt"][4]) == data
