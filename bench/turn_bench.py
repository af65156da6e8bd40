"""A turn costs the same at turn 1,000 as at turn 10: per-turn harness time over a long run,
against its floor measured in the same run.

    .venv/bin/python bench/turn_bench.py [--turns 1000] [--tool read|bash|both] [--profile]

One Harness run whose model (a double that costs nothing: it answers at once and records
nothing) asks for one tool call per turn, saved by `persist_to` to a session file with fsync,
for `--turns` turns. A turn's time is from one `turn_start` to the next. The floor is what a
turn cannot avoid: the tool run by `run_tool` plus the two fsynced appends (the reply, the
result) to a session file of the same length. Prints the median of turns 1-40 ("turn 10")
and of the last 40 ("turn 1000"), the floor's last 40, and the ratios; exits 1 when turn
1000 is over 1.2x turn 10 or over 1.5x the floor, in wall time or in CPU time (the
process's: unlike the wall time, not swamped by fsync's jitter on a shared disk).
`--profile` prints where the last 100 turns' time went.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mulligan import Harness
from mulligan.messages import assistant_message
from mulligan.session import SessionLog, persist_to
from mulligan.tools import coding_tools, run_tool

WINDOW = 40  # turns in each median


class Caller:
    """A model that asks for the same tool call every turn (a fresh id each time) and then,
    at `turns`, answers."""

    name = "bench/caller"

    def __init__(self, tool: str, arguments: dict[str, Any], turns: int) -> None:
        self.tool, self.arguments, self.turns, self.made = tool, arguments, turns, 0

    def complete(self, system: str, messages: list[Any], tools: list[Any]) -> Any:
        self.made += 1
        if self.made > self.turns:
            return assistant_message([{"type": "text", "text": "done"}])
        return self.reply(self.made)

    def reply(self, number: int) -> Any:
        return assistant_message([{"type": "toolCall", "id": f"call_{number}",
                                   "name": self.tool, "arguments": dict(self.arguments)}])


def harness_turns(folder: Path, tool: str, arguments: dict[str, Any], turns: int,
                  profile: cProfile.Profile | None) -> tuple[list[float], list[float]]:
    tools = coding_tools(folder)
    log = SessionLog(folder / "run.jsonl")
    h = Harness(Caller(tool, arguments, turns), "system", tools, max_turns=turns + 1)
    h.subscribe(persist_to(log))
    starts: list[float] = []
    cpu: list[float] = []
    for event in h.prompt("go"):
        if event["type"] == "turn_start":
            starts.append(time.perf_counter())
            cpu.append(time.process_time())
            if profile is not None and len(starts) == turns - 100:
                profile.enable()
    if profile is not None:
        profile.disable()
    return ([b - a for a, b in zip(starts, starts[1:], strict=False)][:turns],
            [b - a for a, b in zip(cpu, cpu[1:], strict=False)][:turns])


def floor_turns(folder: Path, tool: str, arguments: dict[str, Any],
                turns: int) -> tuple[list[float], list[float]]:
    """run_tool and two fsynced appends per turn, on a session file growing the same way."""
    tools = coding_tools(folder)
    log = SessionLog(folder / "floor.jsonl")
    log.append_message({"role": "user", "content": "go"})
    model = Caller(tool, arguments, turns)
    took, cpu = [], []
    for number in range(1, turns + 1):
        began, began_cpu = time.perf_counter(), time.process_time()
        reply = model.reply(number)
        log.append_message(reply)
        log.append_message(run_tool(tools, reply["content"][0]))
        took.append(time.perf_counter() - began)
        cpu.append(time.process_time() - began_cpu)
    return took, cpu


def median(values: list[float]) -> float:
    """The median: fsync's jitter on a shared disk swamps a mean of 20 turns."""
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def bench(tool: str, arguments: dict[str, Any], turns: int, profile: bool) -> bool:
    with tempfile.TemporaryDirectory(prefix="mulligan-turn-bench-") as name:
        folder = Path(name)
        (folder / "notes.txt").write_text("".join(f"line {n}\n" for n in range(200)))
        profiler = cProfile.Profile() if profile else None
        ours, ours_cpu = harness_turns(folder, tool, arguments, turns, profiler)
        floor, floor_cpu = floor_turns(folder, tool, arguments, turns)
    good = True
    for what, mine, base_of in (("wall", ours, floor), ("cpu", ours_cpu, floor_cpu)):
        early, late = median(mine[:WINDOW]), median(mine[-WINDOW:])
        base = median(base_of[-WINDOW:])
        growth, over = late / early, late / base
        good &= growth <= 1.2 and over <= 1.5
        print(f"{tool} ({what}): turn 10 {early * 1000:6.2f} ms   turn {turns} "
              f"{late * 1000:6.2f} ms ({growth:.2f}x)   floor {base * 1000:6.2f} ms   "
              f"turn {turns} {over:.2f}x the floor")
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(18)
    return good


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--tool", choices=["read", "bash", "both"], default="both")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    good = True
    if args.tool in ("read", "both"):
        good &= bench("read", {"path": "notes.txt"}, args.turns, args.profile)
    if args.tool in ("bash", "both"):
        good &= bench("bash", {"command": "true"}, args.turns, args.profile)
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
