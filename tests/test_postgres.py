"""Sessions in PostgreSQL, on a real throwaway server (tests/pg_server.py; conftest.pg_url).

The same SessionLog cases run on a file and on a database session, and the same damage gives
the same refusal on both. Then what only the database has: the INSERT-only trigger, 4
processes appending to one session, a killed lease holder, a connection dropped mid-append.
Then the commands: push and pull byte for byte, ls --all, a session carried on from a second
MULLIGAN_HOME, the folder per host."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import pytest

import pg_server
from mulligan.app.settings import Settings
from mulligan.session import (
    BadEntry,
    CircularParent,
    MissingLine,
    MissingParent,
    NoParentKey,
    NotAnObject,
    SessionError,
    SessionLog,
    UnknownEntry,
)
from mulligan.session.stores.lease import LeaseHeld
from mulligan.testing import say as said
from mulligan.testing import user

psycopg = pytest.importorskip("psycopg")
from mulligan.session.stores.postgres import Database, StoreUnavailable  # noqa: E402
from test_cli import script  # noqa: E402  (the one scripted-model file writer)

PYTHON = sys.executable
SRC = str(Path(__file__).resolve().parent.parent / "src")


@pytest.fixture(params=["file", "postgres"])
def new_log(request, tmp_path):
    """A function giving a fresh, empty log of the kind under test (each call: another one
    on the same session)."""
    if request.param == "file":
        path = tmp_path / "s.jsonl"
        return lambda: SessionLog(path)
    database = Database(request.getfixturevalue("pg_url"))
    return lambda: database.log("s1")


# ---- the same API on both -------------------------------------------------------------


def test_a_new_log_is_empty_and_creates_nothing_until_the_first_append(new_log):
    log = new_log()
    assert log.tip() is None and log.entries() == [] and log.replay() == []
    assert not log.storage.exists()
    with pytest.raises(UnknownEntry, match="'e9'"):
        log.branch_to("e9")
    assert not log.storage.exists()
    assert log.append_message(user("hi")) == "e1"
    assert log.storage.exists()


def test_appends_branches_and_replay_behave_the_same(new_log):
    log = new_log()
    log.append_session_info(cwd="/w", name="demo")
    log.append_message(user("Make it faster."))
    log.append_message(said("Use a global?"))
    assert log.branch_to("e2") == "e4"
    log.append_message(user("No global, please."))
    assert log.tip() == "e5"
    assert log.replay() == [user("Make it faster."), user("No global, please.")]
    assert [e["id"] for e in log.branch("e3")] == ["e1", "e2", "e3"]
    other = new_log()  # a second reader sees every line, then only the new ones
    assert [e["id"] for e in other.entries()] == ["e1", "e2", "e3", "e4", "e5"]
    log.append_message(said("Then a cache."))
    assert other.tip() == "e6" and other.replay()[-1] == said("Then a cache.")
    assert other.append_label("e3", "the global") == "e7"
    with pytest.raises(UnknownEntry):
        other.append_label("nope", "x")
    assert log.tip() == "e7"


def test_branch_summaries_and_compactions_replay_the_same(new_log):
    log = new_log()
    for text in ("one", "two", "three"):
        log.append_message(user(text))
    log.branch_summary_to("e1", from_id="e3", summary="tried two and three")
    log.append_message(user("four"))
    log.append_entry("compaction", summary="all of it", first_kept_entry_id="e5")
    log.append_message(user("five"))
    replay = log.replay()
    assert "all of it" in replay[0]["content"] and replay[1:] == [user("four"), user("five")]
    assert [row[0] for row in log.rows()][1:] == ["e5", "e7"]


DAMAGE = [
    ("not an object", b"[1, 2]", NotAnObject),
    ("an id of the wrong type", b'{"id": 7, "type": "message", "parent_id": "e1"}', BadEntry),
    ("no parent key", b'{"id": "e2", "type": "model_change"}', NoParentKey),
    ("a missing parent", b'{"id": "e2", "type": "branch", "parent_id": "e99"}', MissingParent),
    ("a message on a label", b'{"id": "e2", "type": "label", "parent_id": "e1", '
                             b'"message": {"role": "user", "content": "x"}}', BadEntry),
]


def _refusal(log: SessionLog) -> SessionError:
    with pytest.raises(SessionError) as caught:
        log.replay()
    return caught.value


def _insert_raw(url: str, session: str, seq: int, line: bytes) -> None:
    """A line put in by hand, past the log (as a hand-edited file would be)."""
    with psycopg.connect(url, autocommit=True) as conn:
        try:
            parsed = orjson.loads(line)
        except orjson.JSONDecodeError:
            parsed = None
        entry = parsed if isinstance(parsed, dict) else {}
        conn.execute("INSERT INTO mulligan_entries (session, seq, id, parent_id, type, entry, "
                     "line) VALUES (%s, %s, %s, %s, %s, '{}'::jsonb, %s)",
                     (session, seq, str(entry.get("id", f"x{seq}")), None,
                      str(entry.get("type", "?")), line))


@pytest.mark.parametrize(("what", "line", "error"), DAMAGE, ids=[d[0] for d in DAMAGE])
def test_the_same_damage_is_the_same_refusal_on_both(tmp_path, pg_url, what, line, error):
    file_log = SessionLog(tmp_path / "s.jsonl")
    file_log.append_message(user("hi"))
    with open(file_log.path, "ab") as handle:
        handle.write(line + b"\n")
    database = Database(pg_url)
    database.log("s1").append_message(user("hi"))
    _insert_raw(pg_url, "s1", 2, line)
    on_file, on_db = _refusal(SessionLog(file_log.path)), _refusal(database.log("s1"))
    assert type(on_file) is type(on_db) is error
    assert (on_file.line, on_file.entry_id, on_file.problem) == \
        (on_db.line, on_db.entry_id, on_db.problem)
    assert str(on_db).startswith(f"{database.name} session s1")
    outcomes = []  # appending after it: refused (a bad line) or not (a bad walk), alike
    for log in (SessionLog(file_log.path), database.log("s1")):
        try:
            outcomes.append(log.append_message(user("more")))
        except SessionError as exc:
            outcomes.append(type(exc).__name__)
    assert outcomes[0] == outcomes[1]


def test_a_circle_is_refused_by_name_on_both(tmp_path, pg_url):
    lines = [b'{"id": "e1", "type": "branch", "parent_id": "e2"}',
             b'{"id": "e2", "type": "branch", "parent_id": "e1"}']
    (tmp_path / "c.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    database = Database(pg_url)
    database.connect().close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO mulligan_sessions (id, entries) VALUES ('c', 2)")
    for seq, line in enumerate(lines, 1):
        _insert_raw(pg_url, "c", seq, line)
    on_file = _refusal(SessionLog(tmp_path / "c.jsonl"))
    on_db = _refusal(database.log("c"))
    assert type(on_file) is type(on_db) is CircularParent
    assert on_file.problem == on_db.problem


def test_the_database_refuses_a_second_line_with_an_id_the_session_has(pg_url):
    log = Database(pg_url).log("s1")
    log.append_message(user("hi"))
    with pytest.raises(psycopg.errors.UniqueViolation):
        _insert_raw(pg_url, "s1", 2, b'{"id": "e1", "type": "branch", "parent_id": null}')


# ---- what only the database has -------------------------------------------------------


@pytest.mark.parametrize("statement", [
    "UPDATE mulligan_entries SET type = 'x'",
    "DELETE FROM mulligan_entries",
    "TRUNCATE mulligan_entries CASCADE",
])
def test_the_database_keeps_entries_insert_only(pg_url, statement):
    log = Database(pg_url).log("s1")
    log.append_message(user("keep me"))
    with psycopg.connect(pg_url, autocommit=True) as conn, \
            pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
        conn.execute(statement)
    assert Database(pg_url).log("s1").replay() == [user("keep me")]


def test_four_processes_appending_150_each_give_600_distinct_ids(pg_url):
    code = ("import sys; sys.path.insert(0, sys.argv[2])\n"
            "from mulligan.session.stores.postgres import Database\n"
            "log = Database(sys.argv[1]).log('busy')\n"
            "for i in range(150):\n"
            "    log.append_message({'role': 'user', 'content': sys.argv[3] + str(i)})\n")
    writers = [subprocess.Popen([PYTHON, "-c", code, pg_url, SRC, f"w{n}-"])
               for n in range(4)]
    assert [w.wait(timeout=120) for w in writers] == [0, 0, 0, 0]
    entries = Database(pg_url).log("busy").entries()
    ids = [e["id"] for e in entries]
    assert len(ids) == len(set(ids)) == 600 and ids == [f"e{n}" for n in range(1, 601)]
    known = set(ids)
    assert all(e["parent_id"] is None or e["parent_id"] in known for e in entries)
    contents = sorted(e["message"]["content"] for e in entries)
    assert contents == sorted(f"w{n}-{i}" for n in range(4) for i in range(150))


def test_a_killed_lease_holder_loses_the_lease_to_the_next(pg_url):
    code = ("import sys, time; sys.path.insert(0, sys.argv[2])\n"
            "from mulligan.session.stores.postgres import Database\n"
            "lease = Database(sys.argv[1]).log('s1').lease()\n"
            "print('held', flush=True); time.sleep(60)\n")
    holder = subprocess.Popen([PYTHON, "-c", code, pg_url, SRC], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        log = Database(pg_url).log("s1")
        with pytest.raises(LeaseHeld, match=f"pid {holder.pid} "):
            log.lease()
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        lease = log.lease()  # waited for while the server notices the holder is gone
        lease.release()
    finally:
        holder.kill()
        holder.wait()


def test_a_connection_dropped_mid_append_leaves_the_entry_or_nothing(pg_url):
    database = Database(pg_url)
    log = database.log("s1")
    log.append_message(user("before"))
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                      "PERFORM pg_sleep(30); RETURN NEW; END $$")
        admin.execute("CREATE TRIGGER slow BEFORE INSERT ON mulligan_entries FOR EACH ROW "
                      "EXECUTE FUNCTION slow()")
        failed: list[BaseException] = []

        def append() -> None:
            try:
                log.append_message(user("during"))
            except BaseException as exc:  # noqa: BLE001 -- what the append raised is the point
                failed.append(exc)

        writer = threading.Thread(target=append)
        writer.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            row = admin.execute("SELECT pid FROM pg_stat_activity WHERE query LIKE "
                                "'INSERT INTO mulligan_entries%%'").fetchone()
            if row:
                admin.execute("SELECT pg_terminate_backend(%s)", (row[0],))
                break
            time.sleep(0.02)
        writer.join(timeout=30)
        admin.execute("DROP TRIGGER slow ON mulligan_entries")
    assert len(failed) == 1 and isinstance(failed[0], StoreUnavailable)
    assert database.name in str(failed[0])
    assert database.log("s1").replay() == [user("before")]  # nothing half-written
    assert log.append_message(user("after")) == "e2"  # a new connection, the right id
    assert database.log("s1").replay() == [user("before"), user("after")]


def test_a_lease_holder_whose_connection_dropped_stops_writing_until_it_holds_it_again():
    """A server restart drops every connection and with them the lease's advisory lock; a
    second writer takes the lease. The first one's next append is refused (LeaseHeld naming
    the second), nothing written; once the second lets go, the first takes the lease back
    and writes again. Its own server: the restart must not touch the other tests'."""
    pg_server.require()
    server = pg_server.Server().start()
    try:
        first = Database(server.url).log("s1")
        first.lease()
        assert first.append_message(user("first, before the restart")) == "e1"
        server.restart()
        code = ("import sys, time; sys.path.insert(0, sys.argv[2])\n"
                "from mulligan.session.stores.postgres import Database\n"
                "log = Database(sys.argv[1]).log('s1')\n"
                "lease = log.lease()\n"
                "log.append_message({'role': 'user', 'content': 'second'})\n"
                "print('held', flush=True); sys.stdin.readline()\n")
        second = subprocess.Popen([PYTHON, "-c", code, server.url, SRC], text=True,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            assert second.stdout is not None and second.stdout.readline().strip() == "held"
            # its own connection went with the restart: said as before, nothing written
            with pytest.raises(StoreUnavailable):
                first.append_message(user("first, after the restart"))
            with pytest.raises(LeaseHeld, match=f"pid {second.pid} "):
                first.append_message(user("first, after the restart"))
            assert second.stdin is not None
            second.stdin.write("\n")
            second.stdin.close()
            assert second.wait(timeout=30) == 0
        finally:
            second.kill()
            second.wait()
        assert first.append_message(user("first, holding it again")) == "e3"
        assert [m["content"] for m in Database(server.url).log("s1").replay()] == [
            "first, before the restart", "second", "first, holding it again"]
    finally:
        server.stop()


@pytest.mark.parametrize("lines", [3, 2500])  # read at once; read streamed, past a chunk
def test_a_gap_in_the_database_lines_is_refused_naming_the_missing_line(pg_url, lines):
    database = Database(pg_url)
    log = database.log("s1")
    for n in range(lines):
        log.append_message(user(f"m{n}"))
    missing = lines + 1
    _insert_raw(pg_url, "s1", lines + 2, orjson.dumps(
        {"id": f"e{lines + 2}", "type": "message", "parent_id": f"e{lines}",
         "timestamp": "2026-12-01T00:00:00.000Z", "message": user("past a gap")}))
    for reader in (database.log("s1"), log):  # a fresh read, and one catching up
        with pytest.raises(MissingLine) as refused:
            reader.replay()
        assert refused.value.line == missing and f"line {missing}" in str(refused.value)
        with pytest.raises(MissingLine):
            reader.append_message(user("more"))


# ---- the commands ---------------------------------------------------------------------


def mulligan(home: Path, work: Path, *args: str, store: str | None,
             ) -> subprocess.CompletedProcess[str]:
    work.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items()
           if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "MULLIGAN_STORE")}
    env["MULLIGAN_HOME"] = str(home)
    if store is not None:
        env["MULLIGAN_STORE"] = store
    return subprocess.run([PYTHON, "-m", "mulligan", *args], cwd=work, env=env,
                          capture_output=True, text=True, timeout=60)


def test_push_then_pull_gives_back_the_file_byte_for_byte(tmp_path, pg_url):
    file = tmp_path / "s.jsonl"
    log = SessionLog(file)
    log.append_session_info(cwd=str(tmp_path), name="bytes")
    log.append_message(user("naïve — ünïcode, a NUL \x00 and \"quotes\"\n"))
    log.append_message(said("ok"))
    log.branch_summary_to("e2", from_id="e3", summary="said ok")
    log.append_message(user("again"))
    log.append_label("e3", "first")
    push = mulligan(tmp_path / "home", tmp_path, "sessions", "push", str(file), store=pg_url)
    assert push.returncode == 0, push.stderr
    session_id = push.stdout.strip().splitlines()[-1]
    pull = mulligan(tmp_path / "home", tmp_path, "sessions", "pull", session_id, "-o",
                    str(tmp_path / "back.jsonl"), store=pg_url)
    assert pull.returncode == 0, pull.stderr
    assert (tmp_path / "back.jsonl").read_bytes() == file.read_bytes()
    again = mulligan(tmp_path / "home", tmp_path, "sessions", "pull", session_id, "-o",
                     str(tmp_path / "back.jsonl"), store=pg_url)
    assert again.returncode == 1 and "already exists" in again.stderr


def test_push_refuses_a_damaged_file_by_line_and_stores_nothing(tmp_path, pg_url):
    file = tmp_path / "s.jsonl"
    SessionLog(file).append_message(user("hi"))
    with open(file, "ab") as handle:
        handle.write(b'{"id": "e2", "type": "branch", "parent_id": "e9"}\n')
    push = mulligan(tmp_path / "home", tmp_path, "sessions", "push", str(file), store=pg_url)
    assert push.returncode == 2 and "line 2" in push.stderr and "Traceback" not in push.stderr
    assert Database(pg_url).sessions() == []


def test_push_and_pull_without_a_database_store_say_how_to_set_one(tmp_path):
    file = tmp_path / "s.jsonl"
    SessionLog(file).append_message(user("hi"))
    push = mulligan(tmp_path / "home", tmp_path, "sessions", "push", str(file), store=None)
    assert push.returncode == 2 and "MULLIGAN_STORE" in push.stderr


def test_an_unreachable_database_is_named_without_a_traceback(tmp_path):
    down = "postgresql://nobody:secret@127.0.0.1:1/none"
    done = mulligan(tmp_path / "home", tmp_path / "work", "sessions", "ls", store=down)
    assert done.returncode == 1 and "127.0.0.1:1/none" in done.stderr
    assert "secret" not in done.stderr and "Traceback" not in done.stderr
    bad = mulligan(tmp_path / "home", tmp_path / "work", "sessions", "ls", store="mysql://x")
    assert bad.returncode == 2 and "postgresql://" in bad.stderr


def test_a_file_session_pushed_continued_elsewhere_and_pulled_is_one_tree(tmp_path, pg_url):
    work = tmp_path / "work"
    first = mulligan(tmp_path / "home1", work, "-p", "Make it faster.",
                     "--model", script(tmp_path, "Use a cache."), store=None)
    assert first.returncode == 0, first.stderr
    (file,) = (tmp_path / "home1" / "sessions").glob("*/*.jsonl")
    push = mulligan(tmp_path / "home1", work, "sessions", "push", str(file), store=pg_url)
    session_id = push.stdout.strip().splitlines()[-1]
    # A second MULLIGAN_HOME (another machine's) carries on in the database session.
    second = mulligan(tmp_path / "home2", work, "--session", session_id, "-p", "Which cache?",
                      "--model", script(tmp_path, "An LRU one."), store=pg_url)
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "An LRU one."
    resumed = mulligan(tmp_path / "home2", work, "-c", "-p", "Thanks.", "--mode", "json",
                       "--model", script(tmp_path, "You are welcome."), store=pg_url)
    assert resumed.returncode == 0, resumed.stderr
    first_event = json.loads(resumed.stdout.splitlines()[0])
    assert first_event["file"].endswith(f"session {session_id}")
    listed = mulligan(tmp_path / "home2", tmp_path, "sessions", "ls", "--all", store=pg_url)
    assert session_id in listed.stdout and "Make it faster." in listed.stdout
    pulled = tmp_path / "pulled.jsonl"
    mulligan(tmp_path / "home1", work, "sessions", "pull", session_id, "-o", str(pulled),
             store=pg_url)
    assert pulled.read_bytes().startswith(file.read_bytes())  # the file's part, unchanged
    replay = SessionLog(pulled).replay()
    assert [m["content"] if m["role"] == "user" else m["content"][0]["text"]
            for m in replay] == ["Make it faster.", "Use a cache.", "Which cache?",
                                 "An LRU one.", "Thanks.", "You are welcome."]
    tree = mulligan(tmp_path / "home1", work, "sessions", "tree", session_id, store=pg_url)
    assert tree.returncode == 0 and "Which cache?" in tree.stdout


def test_a_database_session_is_refused_in_another_folder_of_the_same_host(tmp_path, pg_url):
    work = tmp_path / "work"
    done = mulligan(tmp_path / "home", work, "-p", "hi", "--model", script(tmp_path, "hello"),
                    store=pg_url)
    assert done.returncode == 0, done.stderr
    (row,) = Database(pg_url).sessions()
    assert row["folders"] == {os.uname().nodename: str(work.resolve())}
    other = mulligan(tmp_path / "home", tmp_path / "other", "--session", row["id"], "-p",
                     "again", "--model", script(tmp_path, "x"), store=pg_url)
    assert other.returncode == 1 and str(work.resolve()) in other.stderr
    assert Database(pg_url).sessions()[0]["entries"] == row["entries"]  # nothing written


def test_a_session_from_another_host_says_where_it_was_and_records_this_folder(
        tmp_path, pg_url):
    file = tmp_path / "s.jsonl"
    log = SessionLog(file)
    log.append_session_info(cwd="/home/ann/project")
    log.append_message(user("Started on Ann's laptop."))
    log.append_message(said("Noted."))
    database = Database(pg_url)
    lines = file.read_bytes().split(b"\n")[:-1]
    session_id = database.push(lines, cwd="/home/ann/project", name=None, host="anns-laptop")
    work = tmp_path / "work"
    done = mulligan(tmp_path / "home", work, "--session", session_id, "-p", "Go on.",
                    "--model", script(tmp_path, "Going on."), store=pg_url)
    assert done.returncode == 0, done.stderr
    assert "/home/ann/project on anns-laptop" in done.stderr and str(work.resolve()) in \
        done.stderr
    assert database.folder(session_id, os.uname().nodename) == str(work.resolve())
    # Going back with the files acts in this machine's folder, not the one it started in.
    back = mulligan(tmp_path / "home", work, "sessions", "back", session_id, "e3", "--files",
                    store=pg_url)
    assert back.returncode == 0, back.stderr


def test_a_long_session_read_in_chunks_refuses_damage_past_the_first_chunk_by_line(
        tmp_path, pg_url):
    file = tmp_path / "long.jsonl"
    log = SessionLog(file, fsync=False)
    for number in range(2500):
        log.append_message(user(f"message {number}"))
    bad = b'["not", "an", "object"]'
    database = Database(pg_url)
    session_id = database.push(file.read_bytes().split(b"\n")[:-1], cwd=None, name=None,
                               host="h")
    assert database.log(session_id).replay() == SessionLog(file).replay()
    with open(file, "ab") as handle:
        handle.write(bad + b"\n")
    _insert_raw(pg_url, session_id, 2501, bad)
    on_file = _refusal(SessionLog(file))
    on_db = _refusal(database.log(session_id))
    assert type(on_db) is type(on_file) is NotAnObject
    assert on_db.problem == on_file.problem and on_db.line == on_file.line == 2501


def test_the_file_store_never_loads_the_database_driver(tmp_path):
    code = ("import sys\nfrom mulligan.cli import main\ntry:\n"
            f"    main(['-p', 'hi', '--model', {script(tmp_path, 'hello')!r}])\n"
            "except SystemExit:\n    pass\n"
            "print('psycopg' in sys.modules, 'mulligan.session.stores.postgres' in sys.modules)\n")
    env = {k: v for k, v in os.environ.items() if k != "MULLIGAN_STORE"}
    env["MULLIGAN_HOME"] = str(tmp_path / "home")
    done = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=60)
    assert done.stdout.strip().splitlines()[-1] == "False False", done.stderr


def test_store_in_config_toml_selects_the_database(tmp_path, pg_url):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'store = "{pg_url}"\n')
    done = mulligan(home, tmp_path / "work", "-p", "hi", "--model",
                    script(tmp_path, "hello"), store=None)
    assert done.returncode == 0, done.stderr
    assert not (home / "sessions").exists()
    (row,) = Database(pg_url).sessions()
    assert row["entries"] == 3 and row["cwd"] == str((tmp_path / "work").resolve())


def test_gc_keeps_the_snapshots_a_database_session_can_restore(tmp_path, pg_url):
    from mulligan.app.sessions.catalog import referenced_snapshots, snapshot_ids
    from mulligan.app.workspace.store.snapshots import Store

    home, work = tmp_path / "home", tmp_path / "work"
    call = {"role": "assistant", "stop_reason": "toolUse", "content": [
        {"type": "toolCall", "id": "c1", "name": "write",
         "arguments": {"path": "a.txt", "content": "agent\n"}}]}
    done = mulligan(home, work, "-p", "write it", "--permission-mode", "auto", "--model",
                    script(tmp_path, call, "written"), store=pg_url)
    assert done.returncode == 0, done.stderr
    database = Database(pg_url)
    (row,) = database.sessions()
    named = {v for e in database.log(row["id"]).entries()
             for k, v in (e.get("workspace") or {}).items() if k in ("before", "after")}
    in_database = set().union(*map(snapshot_ids, database.workspaces()))
    assert named and in_database == named
    assert referenced_snapshots(home) == set()  # no session file names them
    Store(home).gc(referenced_snapshots(home) | in_database, grace=0)
    back = mulligan(home, work, "sessions", "back", row["id"], "e2", "--files", store=pg_url)
    assert back.returncode == 0, back.stderr
    assert not (work / "a.txt").exists()


def test_the_repl_commands_work_on_a_database_session(tmp_path, pg_url):
    """What the REPL drives, on a database store: /fork, /new, /sessions, /resume ID, /tree,
    going back -- each staying in the database, the leases moving with the session."""
    from mulligan.app import Controller
    from mulligan.app.sessions.stores import DatabaseSessions
    from mulligan.frontends.commands import resume_to
    from mulligan.testing import ScriptedModel, say

    work = tmp_path / "work"
    work.mkdir()
    place = DatabaseSessions(pg_url, tmp_path / "home")
    model = ScriptedModel([say("one"), say("two"), say("three")])
    c = Controller(model, [], Settings(cwd=work, home=tmp_path / "home"), place.new(work),
                   sessions=place)
    list(c.run_prompt("first"))
    first = c.where
    assert c.session_file is None and first is not None and " session " in first
    c.back("e2")
    list(c.run_prompt("again"))
    entries, tip = c.tree()
    assert tip == "e6" and len(entries) == 6
    forked = c.fork()
    assert isinstance(forked, str) and forked != first and c.where == forked
    assert [m["content"] for m in c.harness.messages if m["role"] == "user"] == ["first", "again"]
    listed = c.sessions()
    assert {s.where for s in listed} == {first.rsplit(" ", 1)[-1], forked.rsplit(" ", 1)[-1]}
    assert not (tmp_path / "home" / "sessions").exists()  # nothing went to files
    outcome = resume_to(c, first.rsplit(" ", 1)[-1])
    assert not outcome.error and c.where == first
    c.new_session()
    list(c.run_prompt("third"))
    assert len(Database(pg_url).sessions()) == 3
    c.close()


def test_an_import_with_a_database_store_is_a_database_session_of_the_same_bytes(
        tmp_path, pg_url):
    source = Path(__file__).resolve().parent / "fixtures" / "import" / "pi-branched-v3.jsonl"
    local = tmp_path / "local.jsonl"
    assert mulligan(tmp_path / "home", tmp_path, "sessions", "import", str(source), "-o",
                    str(local), store=None).returncode == 0
    done = mulligan(tmp_path / "home", tmp_path, "sessions", "import", str(source),
                    store=pg_url)
    assert done.returncode == 0, done.stderr
    session_id = done.stdout.strip().splitlines()[-1]
    pull = mulligan(tmp_path / "home", tmp_path, "sessions", "pull", session_id, "-o",
                    str(tmp_path / "pulled.jsonl"), store=pg_url)
    assert pull.returncode == 0, pull.stderr
    assert (tmp_path / "pulled.jsonl").read_bytes() == local.read_bytes()
