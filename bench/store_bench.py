"""The PostgreSQL store against the file store, in one run, on a throwaway local server.

    .venv/bin/python bench/store_bench.py [--size 10000] [--appends 300]

Starts a server from Debian's postgresql binaries (tests/pg_server.py: fsync and
synchronous_commit on, TCP on 127.0.0.1) and measures, for the same realistic conversation
(session_bench's): one append with fsync on, file vs database (the median over --appends
appends to a session of --size entries); and a fresh log's open + replay of the --size-entry
session, file vs database; and a file-changing tool call with checkpoints (the snapshot
before, a 64 KB write, the snapshot after, in a folder of --files files), the file store vs
the database store (whose snapshots are uploaded in the background), interleaved, the median
over --calls calls each. Goals: a database append under 2 ms, its replay within 2x the
file's, the tool call with the database store within 1.2x the file store's. Exits 1 if any is
missed.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import pg_server  # noqa: E402
from mulligan.app.workspace.checkpoints import Checkpoints  # noqa: E402
from mulligan.app.workspace.shared import Shared  # noqa: E402
from mulligan.app.workspace.store.snapshots import Store  # noqa: E402
from mulligan.session import SessionLog  # noqa: E402
from mulligan.session.stores.postgres import Database  # noqa: E402
from session_bench import best, conversation  # noqa: E402


def fill(log: SessionLog, size: int) -> None:
    messages = conversation(random.Random(5))
    for _ in range(size):
        log.append_message(next(messages))


def append_times(log: SessionLog, count: int) -> list[float]:
    times = []
    for number in range(count):
        message = {"role": "user", "content": f"one more thing, number {number}"}
        start = time.perf_counter()
        log.append_message(message)
        times.append(time.perf_counter() - start)
    return times


def tool_calls(url: str, files: int, calls: int) -> tuple[float, float, float]:
    """Median wall time of one write call with checkpoints, file store vs database store,
    and the seconds the uploads took to finish after the last call."""
    base = Path(tempfile.mkdtemp(prefix="mulligan-upload-bench-"))
    recorders = {}
    for kind in ("file", "database"):
        folder = base / kind / "work"
        folder.mkdir(parents=True)
        for number in range(files):
            (folder / f"f{number}.txt").write_text(f"file {number}\n" * 40)
        store = Store(base / kind / "home")
        if kind == "database":
            Shared(url, store)
        recorders[kind] = Checkpoints(store, folder)
    times: dict[str, list[float]] = {"file": [], "database": []}
    rng = random.Random(7)
    for number in range(calls):
        payload = rng.randbytes(48 * 1024).hex()[:64 * 1024]  # new content every call
        order = list(recorders.items())
        for kind, checkpoints in order[::-1] if number % 2 else order:  # neither always first
            target = checkpoints.root / f"f{number % files}.txt"
            started = time.perf_counter()
            checkpoints.listener({"type": "tool_execution_start", "tool_name": "write",
                                  "tool_call_id": f"c{number}",
                                  "arguments": {"path": target.name}})
            target.write_text(payload)
            checkpoints.meta({"role": "toolResult", "tool_call_id": f"c{number}"})
            times[kind].append(time.perf_counter() - started)
    started = time.perf_counter()
    shared = recorders["database"].store.shared
    assert shared is not None and shared.drain(120)
    drained = time.perf_counter() - started
    for checkpoints in recorders.values():
        checkpoints.close()
    return statistics.median(times["file"]), statistics.median(times["database"]), drained


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--appends", type=int, default=300)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=60)
    args = parser.parse_args()
    problem = pg_server.problem()
    if problem is not None:
        print(f"store_bench: {problem}", file=sys.stderr)
        return 2
    server = pg_server.Server().start()
    try:
        database = Database(server.database("bench"))
        file = Path(tempfile.mkdtemp(prefix="mulligan-store-bench-")) / "s.jsonl"
        fill(SessionLog(file, fsync=False), args.size)
        db_log = database.log("bench")
        started = time.perf_counter()
        fill(db_log, args.size)
        filled = time.perf_counter() - started
        file_append = statistics.median(append_times(SessionLog(file), args.appends))
        db_append = statistics.median(append_times(db_log, args.appends))
        size = args.size + args.appends
        file_replay = best(5, lambda: SessionLog(file).replay())
        db_replay = best(5, lambda: database.log("bench").replay())
        file_call, db_call, drained = tool_calls(server.database("bench_uploads"),
                                                 args.files, args.calls)
    finally:
        server.stop()
    print(f"{size:,} entries ({file.stat().st_size / 1e6:.1f} MB); filling the database "
          f"took {filled:.1f} s ({filled / args.size * 1e3:.2f} ms an entry)")
    print(f"append, fsync on:   file {file_append * 1e3:6.3f} ms   database "
          f"{db_append * 1e3:6.3f} ms   ({db_append / file_append:.2f}x the file)")
    print(f"open + replay:      file {file_replay * 1e3:6.1f} ms   database "
          f"{db_replay * 1e3:6.1f} ms   ({db_replay / file_replay:.2f}x the file)")
    print(f"write call + checkpoints ({args.files} files): file store {file_call * 1e3:6.2f} ms"
          f"   database store {db_call * 1e3:6.2f} ms   ({db_call / file_call:.2f}x; the "
          f"uploads finished {drained * 1e3:.0f} ms after the last call)")
    ok = db_append < 0.002 and db_replay <= 2 * file_replay and db_call <= 1.2 * file_call
    print("goals (append < 2 ms, replay <= 2x the file, tool call <= 1.2x the file store's):",
          "met" if ok else "MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
