"""What `grep` costs in memory on a file that is one huge line: peak RSS of a fresh process
grepping a 1 GiB one-line file, against the floor -- the same process grepping a one-line
file of 1 KiB -- measured in the same run.

    .venv/bin/python bench/grep_bench.py [--mib 1024]

Prints each peak RSS, the growth over the floor, that growth in 1 MiB pieces (the size the
tool reads a line in) and the seconds taken.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

PROBE = """
import resource, sys, time
from mulligan.tools import grep_tool
start = time.perf_counter()
out = grep_tool(sys.argv[1])["execute"]({"pattern": "NEEDLE"})
seconds = time.perf_counter() - start
assert "one.txt:1:" in out, out[:300]
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, seconds)
"""


def peak(folder: Path) -> tuple[int, float]:
    done = subprocess.run([sys.executable, "-c", PROBE, str(folder)], capture_output=True,
                          text=True, check=True)
    kb, seconds = done.stdout.split()
    return int(kb) * 1024, float(seconds)


def one_line_file(folder: Path, size: int) -> None:
    block = b"x" * min(size, 1 << 20)
    with open(folder / "one.txt", "wb") as handle:
        for _ in range(size // len(block) - 1):
            handle.write(block)
        handle.write(block[:-10] + b"NEEDLE" + b"yyyy")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024)
    size = parser.parse_args().mib << 20
    with tempfile.TemporaryDirectory() as small, tempfile.TemporaryDirectory() as big:
        one_line_file(Path(small), 1024)
        one_line_file(Path(big), size)
        floor, _ = peak(Path(small))
        used, seconds = peak(Path(big))
    mib = 1 << 20
    print(f"floor (1 KiB line): peak RSS {floor / mib:.0f} MiB")
    print(f"{size // mib} MiB line: peak RSS {used / mib:.0f} MiB, grep {seconds:.1f} s")
    print(f"growth over the floor: {(used - floor) / mib:.0f} MiB = "
          f"{(used - floor) / mib:.1f} pieces of 1 MiB; {(used - floor) / size:.3f}x the file")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
