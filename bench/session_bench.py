"""Session log benchmark: append cost, open-and-replay, and memory, against the floors.

    .venv/bin/python bench/session_bench.py [--sizes 1000,10000,100000] [--folder DIR]

Generates realistic sessions (user text ~100 B; assistant text ~1 KB with tool calls; tool
results 2-6 KB; 40 abandoned branches spread through the file) of each size with fsync off,
then prints, for each size, in one run:

- append: the mean cost of one append_message onto the file at that size, over 200 appends
  with fsync on and 2,000 with fsync off (the appends of all sizes are interleaved in rounds,
  so that noise from other processes falls on every size alike); ratio to the smallest size;
- open+replay: SessionLog(file).replay() in a fresh object, best of several runs;
- the floors on the same file: reading its bytes, and reading it + splitting lines + parsing
  every line with orjson.loads (plainly, and with the cyclic GC paused, which SessionLog
  itself does while it parses); open+replay's ratio to each;
- peak memory (tracemalloc) of open+replay and of the orjson floor.

Exits 1 if a target is missed: open+replay of the largest file within 1.5x of the orjson
floor, and the append cost at the largest size within 1.2x of the smallest (fsync off: with
fsync on, the disk's flush time dominates and is reported, not judged).
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from mulligan.session import SessionLog

BRANCHES = 40
# Appends measured per size: many more with fsync off, where one append is ~0.1 ms and a single
# preemption by another process would otherwise move the mean of a few hundred.
APPENDS = {False: 2000, True: 200}
ROUNDS = 10  # the appends per size and mode are made in this many interleaved rounds

WORDS = [
    "def", "return", "self", "value", "result", "items", "config", "path", "index", "session",
    "entry", "parent", "import", "from", "class", "None", "True", "False", "for", "while", "if",
    "else", "try", "except", "with", "open", "read", "write", "test", "assert", "the", "a", "of",
    "to", "in", "is", "it", "that", "file", "line", "error", "message", "model", "tool", "cache",
    "branch", "append", "check", "repair", "migrate", "json", "orjson", "lock", "fsync", "walk",
]


class Text:
    """Cheap realistic text: slices of one big pseudo-source corpus with newlines, quotes,
    indentation and the odd non-ASCII character, so orjson has escapes to handle."""

    def __init__(self, rnd: random.Random) -> None:
        lines = []
        for _ in range(20_000):
            indent = "    " * rnd.randint(0, 3)
            words = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(2, 10)))
            extra = rnd.choice(["", "", "", ' "quoted"', " # café", "\t(x, y)"])
            lines.append(f"{indent}{words}{extra}")
        self.corpus = "\n".join(lines)
        self.rnd = rnd

    def __call__(self, size: int) -> str:
        start = self.rnd.randrange(0, len(self.corpus) - size - 1)
        return self.corpus[start:start + size]


def conversation(rnd: random.Random) -> Iterator[Any]:
    """An endless agent session: a user ask, tool rounds, a final answer, again."""
    text = Text(rnd)
    call = 0
    while True:
        yield {"role": "user", "content": text(rnd.randint(60, 140))}
        for _ in range(rnd.randint(1, 4)):
            calls = []
            for _ in range(rnd.randint(1, 2)):
                call += 1
                calls.append({"type": "toolCall", "id": f"call_{call}", "name": "read",
                              "arguments": {"path": f"src/module_{call % 97}.py",
                                            "offset": rnd.randint(1, 400)}})
            yield {"role": "assistant", "stop_reason": "toolUse",
                   "content": [{"type": "text", "text": text(rnd.randint(700, 1300))}, *calls],
                   "usage": {"input": rnd.randint(1000, 90000), "output": rnd.randint(50, 900)}}
            for block in calls:
                yield {"role": "toolResult", "tool_call_id": block["id"], "tool_name": "read",
                       "content": text(rnd.randint(2000, 6000)), "is_error": False}
        yield {"role": "assistant", "stop_reason": "stop",
               "content": [{"type": "text", "text": text(rnd.randint(700, 1300))}]}


def generate(file: Path, size: int, seed: int) -> None:
    """`size` entries, with BRANCHES abandoned attempts spread evenly through the file: at
    each, the session goes back a few entries and carries on from there."""
    rnd = random.Random(seed)
    messages = conversation(rnd)
    log = SessionLog(file, fsync=False)
    every = size // (BRANCHES + 1)
    written = 0
    while written < size:
        if written and written % every == 0 and written // every <= BRANCHES:
            back = max(1, written - rnd.randint(3, 12))
            log.branch_to(f"e{back}")
        else:
            log.append_message(next(messages))
        written += 1
    fd = os.open(file, os.O_RDONLY)
    try:
        os.fsync(fd)  # flush the bulk write now, so no later fsync pays for it
    finally:
        os.close(fd)


def best(runs: int, work: Callable[[], Any]) -> float:
    """The fastest of `runs` timed calls, each starting with no garbage pending."""
    times = []
    for _ in range(runs):
        gc.collect()
        start = time.perf_counter()
        result = work()
        times.append(time.perf_counter() - start)
        del result
    return min(times)


def peak(work: Callable[[], Any]) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        result = work()
        _, top = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del result
    return top


def read_floor(file: Path) -> Callable[[], bytes]:
    return file.read_bytes


def parse_floor(file: Path, pause_gc: bool = False) -> Callable[[], list[Any]]:
    def work() -> list[Any]:
        if pause_gc:
            gc.disable()
        try:
            return [orjson.loads(line) for line in file.read_bytes().split(b"\n")[:-1]]
        finally:
            gc.enable()
    return work


def open_and_replay(file: Path) -> Callable[[], list[Any]]:
    return lambda: SessionLog(file).replay()


def append_costs(files: dict[int, Path]) -> dict[tuple[int, bool], float]:
    """Mean seconds per append, for each (size, fsync), over APPENDS[fsync] appends onto logs
    that have already read their file. The appends are made in ROUNDS rounds that visit every size
    in turn (in reverse order every other round), so that noise from other processes on the
    machine falls on every size alike; all fsync-off appends come first, then a sync, so that
    no fsync pays for another mode's unflushed bytes."""
    extra = conversation(random.Random(7))
    spent: dict[tuple[int, bool], list[float]] = {}
    for sync in (False, True):
        to_append = [next(extra) for _ in range(APPENDS[sync] // ROUNDS)]
        logs = {(size, sync): SessionLog(file, fsync=sync) for size, file in files.items()}
        for log in logs.values():
            log.tip()  # the open is not part of an append's cost...
        gc.collect()  # ...nor is the collector's first pass over what the open parsed
        os.sync()
        order = list(logs.items())
        for round_number in range(ROUNDS):
            for key, log in order if round_number % 2 == 0 else order[::-1]:
                for message in to_append:
                    start = time.perf_counter()
                    log.append_message(message)
                    spent.setdefault(key, []).append(time.perf_counter() - start)
    return {key: statistics.fmean(times) for key, times in spent.items()}


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds >= 0.01 else f"{seconds * 1e6:.0f} µs"


def mb(count: float) -> str:
    return f"{count / 1e6:.0f} MB" if count >= 1e7 else f"{count / 1e6:.1f} MB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--folder", help="where to write the sessions (default: a temp dir)")
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(dir=args.folder) as folder:
        files = {}
        for size in sizes:
            files[size] = Path(folder) / f"session-{size}.jsonl"
            started = time.perf_counter()
            generate(files[size], size, seed=size)
            print(f"generated {size} entries, {mb(files[size].stat().st_size)}, in "
                  f"{time.perf_counter() - started:.1f} s", file=sys.stderr)
        rows = []
        for size in sizes:
            file = files[size]
            runs = 5
            opened = best(runs, open_and_replay(file))
            read = best(runs, read_floor(file))
            parsed = best(runs, parse_floor(file))
            parsed_paused = best(runs, parse_floor(file, pause_gc=True))
            memory = peak(open_and_replay(file))
            floor_memory = peak(parse_floor(file))
            transcript = len(SessionLog(file).replay())
            rows.append((size, file.stat().st_size, transcript, opened, read, parsed,
                         parsed_paused, memory, floor_memory))
            print(f"measured {size}", file=sys.stderr)
        appends = append_costs(files)
    small = sizes[0]
    print(f"Session log benchmark, python {sys.version.split()[0]}, orjson {orjson.__version__}"
          f", {os.cpu_count()} CPUs; times are best of 5; append costs are the mean of "
          f"{APPENDS[False]} appends (fsync off) and {APPENDS[True]} (fsync on) per size.")
    print()
    print("| entries | file | replayed | append, fsync off | append, fsync on "
          "| open+replay | read floor | orjson floor | orjson floor, GC paused "
          "| peak memory (floor) |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for size, nbytes, transcript, opened, read, parsed, paused, memory, floor_memory in rows:
        off, on = appends[(size, False)], appends[(size, True)]
        print(f"| {size:,} | {mb(nbytes)} | {transcript:,} "
              f"| {ms(off)} ({off / appends[(small, False)]:.2f}x) "
              f"| {ms(on)} ({on / appends[(small, True)]:.2f}x) "
              f"| {ms(opened)} | {ms(read)} ({opened / read:.1f}x) "
              f"| {ms(parsed)} ({opened / parsed:.2f}x) | {ms(paused)} ({opened / paused:.2f}x) "
              f"| {mb(memory)} ({mb(floor_memory)}, {memory / floor_memory:.2f}x) |")
    print()
    print("append ratios are to the smallest size; open+replay ratios are to each floor; "
          "memory ratio is to the orjson floor's peak.")
    largest = rows[-1]
    open_ratio = largest[3] / largest[5]
    append_ratio = appends[(sizes[-1], False)] / appends[(small, False)]
    fsync_ratio = appends[(sizes[-1], True)] / appends[(small, True)]
    verdicts = [
        (f"open+replay at {sizes[-1]:,} is {open_ratio:.2f}x the orjson floor "
         "(target <= 1.5x)", open_ratio <= 1.5),
        (f"append at {sizes[-1]:,} is {append_ratio:.2f}x the cost at {small:,}, fsync off "
         "(target <= 1.2x)", append_ratio <= 1.2),
        (f"append at {sizes[-1]:,} is {fsync_ratio:.2f}x the cost at {small:,}, fsync on "
         "(reported)", True),
    ]
    print()
    for text, met in verdicts:
        print(f"{'met   ' if met else 'MISSED'} {text}")
    return 0 if all(met for _, met in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
