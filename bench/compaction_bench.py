"""Replay of a long session compacted every 1,000 entries, against reading and parsing the
file (the floor), and against the same session without compactions, in one run.

    .venv/bin/python bench/compaction_bench.py [--size 100000] [--every 1000]

The session is session_bench's realistic agent conversation; every --every entries a
compaction entry is appended whose first_kept_entry_id is the latest user message. The goal:
replay of the compacted session costs what reading the file costs, not what the compacted
history would (its transcript is ~1k messages, not 100k). Exits 1 if replay of the compacted
file is over 1.5x the orjson parse-every-line floor (session_bench's floor: a plain list
comprehension, the collector on), or over 1.1x the replay of the same session uncompacted.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
from pathlib import Path

from mulligan.session import SessionLog
from session_bench import best, conversation, parse_floor


def generate(file: Path, size: int, every: int, compact: bool) -> None:
    rnd = random.Random(11)
    messages = conversation(rnd)
    log = SessionLog(file, fsync=False)
    last_user = None
    for number in range(1, size + 1):
        if compact and number % every == 0 and last_user is not None:
            log.append_entry("compaction", summary="Request: ... Done: ... Next: ...",
                             first_kept_entry_id=last_user, tokens_before=150_000)
            continue
        message = next(messages)
        entry_id = log.append_message(message)
        if message["role"] == "user":
            last_user = entry_id


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--every", type=int, default=1000)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="mulligan-compaction-bench-"))
    try:
        return measure(folder, args.size, args.every)
    finally:  # the files, and the index beside each, whatever happened
        shutil.rmtree(folder, ignore_errors=True)


def measure(folder: Path, size: int, every: int) -> int:
    plain, compacted = folder / "plain.jsonl", folder / "compacted.jsonl"
    generate(plain, size, every, compact=False)
    generate(compacted, size, every, compact=True)
    floor = best(3, parse_floor(compacted))
    paused = best(3, parse_floor(compacted, pause_gc=True))
    replayed = best(3, lambda: SessionLog(compacted).replay())
    replayed_plain = best(3, lambda: SessionLog(plain).replay())
    length = len(SessionLog(compacted).replay())
    print(f"{size} entries, a compaction every {every} "
          f"({compacted.stat().st_size / 1e6:.0f} MB)")
    print(f"  orjson parse of every line   {floor * 1000:8.1f} ms "
          f"({paused * 1000:.1f} ms with the collector paused)")
    print(f"  replay, compacted            {replayed * 1000:8.1f} ms  {replayed / floor:.2f}x "
          f"the floor; transcript {length} messages")
    print(f"  replay, no compactions       {replayed_plain * 1000:8.1f} ms  "
          f"{replayed_plain / floor:.2f}x the floor")
    if replayed / floor > 1.5 or replayed / replayed_plain > 1.1:
        print("MISSED: replay of the compacted session is over 1.5x the floor or 1.1x the "
              "uncompacted replay")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
