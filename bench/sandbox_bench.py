"""What the bash sandbox costs per command: the bash tool running `true` (and a short
`ls -R` of this repository) with and without bubblewrap, interleaved, in one run.

    .venv/bin/python bench/sandbox_bench.py [--runs 50]

Prints the median time per command for each, and the difference.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from mulligan.tools import Sandbox, bash_tool, sandbox_problem


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    runs = parser.parse_args().runs
    problem = sandbox_problem()
    if problem is not None:
        print(problem)
        return 1
    root = Path(__file__).resolve().parents[1]
    plain, boxed = bash_tool(root), bash_tool(root, sandbox=Sandbox())
    for command in ("true", "ls -R src > /dev/null"):
        times: dict[str, list[float]] = {"plain": [], "sandbox": []}
        for _ in range(runs):
            for name, tool in (("plain", plain), ("sandbox", boxed)):
                started = time.perf_counter()
                tool["execute"]({"command": command})
                times[name].append(time.perf_counter() - started)
        a, b = statistics.median(times["plain"]), statistics.median(times["sandbox"])
        print(f"{command!r:<28} without {a * 1000:6.2f} ms   with --sandbox {b * 1000:6.2f} ms"
              f"   +{(b - a) * 1000:.2f} ms ({b / a:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
