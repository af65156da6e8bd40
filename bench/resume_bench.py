"""Resuming at the floor: fresh processes against a fresh process that parses every line.

    .venv/bin/python bench/resume_bench.py [--size 100000] [--runs 3] [--sessions 50]

Generates (session_bench's realistic conversation) a session of --size entries where about
two thirds of the lines are on abandoned attempts, and one with none abandoned, and times
whole processes, best of --runs, each against the floor process measured in the same run
(`python -c` reading the file and orjson-parsing every line):

- replay: a fresh process opening the session and replaying it (SessionLog(f).replay());
  for the none-abandoned file also its first open, which builds the sidecar index;
- `mulligan -c -p` with a scripted model on each (a resume, one reply, three appends, exit);
- `mulligan sessions tree` on the abandoned-heavy one (reported: every attempt folded);
- `mulligan sessions tree --all` and `mulligan sessions check` on it, against the floor
  process in --runs interleaved rounds (floor, tree, check, floor, ...): the best wall time
  against the floor's best, each round's wall and CPU ratios, the median CPU ratio, and peak
  memory against the floor's, all from the kernel's accounting of each child (wait4); each
  is judged on the worse of the best wall ratio and the median CPU ratio (each must parse
  the file once);
- `mulligan sessions ls` over --sessions sessions of 10,000 entries, against one floor
  process parsing them all.

Goals (ratios to the floor): abandoned-heavy replay <= 0.7x; none-abandoned replay <= 1.2x,
first open <= 1.3x; `-c -p` <= 1.3x; `sessions ls` <= 0.2x; `tree --all` and `check`
<= 1.5x (time). Exits 1 if one is missed. `--part tree-check` runs only those two.

mulligan's processes run with a bytecode cache of their own in the bench's folder
(PYTHONPYCACHEPREFIX; PYTHONDONTWRITEBYTECODE dropped), filled by an untimed first run, as
an installed mulligan has one: without it every run compiled mulligan's modules again (about
50 ms of CPU a command).

Measured (issue 29, stop 24; `--part tree-check`, 3 interleaved rounds a run, 2 shared cores;
the figures are `tree --all`'s, judged on the worse of the two), 3 runs at each load:
1.29x / 1.22x / 1.24x (load 1.7-2.5), 1.32x / 1.57x / 1.29x (2.8-3.3), 1.22x / 1.35x / 1.32x
(3.4-4.2), 1.42x / 1.27x / 1.46x (4.1-4.6); 5 rounds at load 1.6-2.4: 1.19x (wall best
1.10x, CPU median 1.19x); peak memory 1.00x the floor's in every run. The same bench at the
start of the stop (load 1.2-2.0, 5 rounds): 1.52x. `check` in those runs: 1.24-1.69x (2 of 12
runs over 1.5x by the wall best, in bursts of load).

Stop 25 (`branches.links`, the one walker of a tree's links, replacing tree.py's own pass),
alternated with the code before (3 rounds a run, load 2.8-6.0): `tree --all` judged 1.32x /
1.31x / 1.17x before, 1.36x / 1.24x / 1.11x after (CPU medians 1.32x / 1.31x / 1.14x before,
1.10x / 1.18x / 1.11x after): not slower; in process, the tree's links, labels and marks at
100k entries: median 273 ms before, 264 ms after (best 254 / 253; 9 alternated rounds);
`children_of` 250 -> 136 ms (one pass, not two).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mulligan.app.sessions.catalog import folder_dir
from mulligan.session import SessionLog
from mulligan.session.sidecar import sidecar_path
from session_bench import conversation

PYTHON = sys.executable
FLOOR = ("import sys, orjson\n"
         "for name in sys.argv[1:]:\n"
         "    with open(name, 'rb') as f:\n"
         "        rows = [orjson.loads(line) for line in f.read().splitlines()]\n")
REPLAY = "import sys\nfrom mulligan.session import SessionLog\nSessionLog(sys.argv[1]).replay()\n"


def generate(file: Path, size: int, abandoned: bool, seed: int = 7) -> None:
    """`size` entries. Abandoned: every 30 entries the session goes back 20 (two thirds of
    the lines end up on attempts that were left); else one straight line."""
    rnd = random.Random(seed)
    messages = conversation(rnd)
    log = SessionLog(file, fsync=False, sidecar=False)
    since = 0
    for number in range(1, size + 1):
        if abandoned and since == 30:
            log.branch_to(f"e{number - 21}")
            since = 0
        else:
            log.append_message(next(messages))
            since += 1


def timed(argv: list[str], runs: int, env: dict[str, str] | None = None,
          before: object = None, cwd: Path | None = None) -> float:
    best = float("inf")
    for _ in range(runs):
        if callable(before):
            before()
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env, cwd=cwd)
        best = min(best, time.perf_counter() - start)
    return best


def measured(argv: list[str], env: dict[str, str] | None = None,
             cwd: Path | None = None) -> tuple[float, float, float]:
    """One run of `argv`: (wall seconds, CPU seconds user + system, peak resident MB), the
    CPU and the peak from the kernel's accounting of that child alone (wait4)."""
    start = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, env=env, cwd=cwd)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise subprocess.CalledProcessError(child.returncode, argv)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def tree_and_check(file: Path, runs: int, env: dict[str, str], cwd: Path,
                   results: list[tuple[str, float, float, float | None]]) -> None:
    """`sessions tree --all` and `sessions check` on `file` against the floor process, in
    --runs interleaved rounds (floor, tree, check, floor, ...: a burst of load falls on all
    three alike): the ratio of the best wall times, the median of each round's wall and CPU
    ratios, and peak memory against the floor's, printed. The goal (1.5x) is judged on the
    best wall ratio and the median CPU ratio, both."""
    floor_argv = [PYTHON, "-c", FLOOR, str(file)]
    commands = {f"mulligan sessions {' '.join(w for w in what if w != str(file))}":
                [PYTHON, "-m", "mulligan", "sessions", *what]
                for what in (["tree", str(file), "--all"], ["check", str(file)])}
    for argv in commands.values():  # untimed: fills the bytecode cache
        measured(argv, env=env, cwd=cwd)
    rounds: list[dict[str, tuple[float, float, float]]] = []
    for _ in range(runs):
        done = {"floor": measured(floor_argv)}
        for label, argv in commands.items():
            done[label] = measured(argv, env=env, cwd=cwd)
        rounds.append(done)
    floor_wall = min(r["floor"][0] for r in rounds)
    floor_mb = max(r["floor"][2] for r in rounds)
    print(f"floor process: wall best {floor_wall * 1e3:.0f} ms, CPU median "
          f"{statistics.median(r['floor'][1] for r in rounds) * 1e3:.0f} ms, peak "
          f"{floor_mb:.0f} MB ({runs} interleaved rounds)", flush=True)
    for label in commands:
        wall = min(r[label][0] for r in rounds)
        walls = [r[label][0] / r["floor"][0] for r in rounds]
        cpus = [r[label][1] / r["floor"][1] for r in rounds]
        mb = max(r[label][2] for r in rounds)
        print(f"{label}: wall best {wall / floor_wall:.2f}x (each round "
              f"{' '.join(f'{w:.2f}' for w in walls)}; median {statistics.median(walls):.2f}x),"
              f" CPU median {statistics.median(cpus):.2f}x (each round "
              f"{' '.join(f'{c:.2f}' for c in cpus)}), peak {mb:.0f} MB "
              f"{mb / floor_mb:.2f}x the floor's", flush=True)
        # judged on the worse of the two robust figures
        judged = max(wall / floor_wall, statistics.median(cpus))
        results.append((f"{label} (the worse of the two)", judged * floor_wall, floor_wall,
                        1.5))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--part", choices=["all", "tree-check"], default="all")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="mulligan-resume-bench-"))
    results: list[tuple[str, float, float, float | None]] = []
    try:
        home, work = folder / "home", folder / "work"
        work.mkdir()
        script = folder / "script.json"
        # mulligan's processes with a bytecode cache of their own, filled by their first run,
        # as an installed mulligan has (with PYTHONDONTWRITEBYTECODE set, every run compiled
        # its modules again: ~50 ms of CPU a command)
        env = {**os.environ, "MULLIGAN_HOME": str(home),
               "PYTHONPYCACHEPREFIX": str(folder / "pycache")}
        env.pop("MULLIGAN_STORE", None)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        for abandoned, label in ((True, "2/3 abandoned"), (False, "none abandoned")):
            sessions = folder_dir(home, work)
            shutil.rmtree(sessions, ignore_errors=True)
            sessions.mkdir(parents=True)
            file = sessions / f"2026-12-01T00-00-0{int(abandoned)}_bench.jsonl"
            generate(file, args.size, abandoned)
            mb = file.stat().st_size / 1e6
            replayed = len(SessionLog(file, sidecar=False).replay())
            print(f"{label}: {args.size:,} entries, {mb:.0f} MB, {replayed:,} messages on "
                  "the branch", flush=True)
            if args.part == "tree-check":
                SessionLog(file).tip()  # its index, as any session has one
                tree_and_check(file, args.runs, env, work, results)
                break
            floor = timed([PYTHON, "-c", FLOOR, str(file)], args.runs)
            print(f"floor process {floor * 1e3:.0f} ms", flush=True)
            if not abandoned:
                first = timed([PYTHON, "-c", REPLAY, str(file)], args.runs,
                              before=lambda f=file: Path(sidecar_path(str(f))).unlink(
                                  missing_ok=True))
                results.append((f"{label}: first open (builds the index)", first, floor, 1.3))
            else:
                subprocess.run([PYTHON, "-c", REPLAY, str(file)], check=True)
            replay = timed([PYTHON, "-c", REPLAY, str(file)], args.runs)
            results.append((f"{label}: replay", replay, floor, 0.7 if abandoned else 1.2))
            script.write_text(json.dumps(["ok"] * (args.runs + 1)))
            resume = timed([PYTHON, "-m", "mulligan", "-c", "-p", "go on", "--model",
                            f"scripted:{script}"], args.runs, env=env, cwd=work)
            results.append((f"{label}: mulligan -c -p", resume, floor, 1.3))
            if abandoned:  # the tree folds every attempt left: reported, no goal
                tree = timed([PYTHON, "-m", "mulligan", "sessions", "tree", str(file)],
                             args.runs, env=env, cwd=work)
                results.append((f"{label}: mulligan sessions tree", tree, floor, None))
                tree_and_check(file, args.runs, env, work, results)
        if args.part == "tree-check":
            return _report(results)
        many = folder / "many"
        many_home = many / "home"
        listed = folder_dir(many_home, work)
        listed.mkdir(parents=True)
        template = listed / "2026-12-01T00-00-00_000000.jsonl"
        generate(template, 10_000, True)
        for n in range(1, args.sessions):
            shutil.copy(template, listed / f"2026-12-01T00-00-{n:02d}_{n:06d}.jsonl")
        files = sorted(str(f) for f in listed.glob("*.jsonl"))
        for name in files:  # their first open builds each one's index
            SessionLog(name).tip()
        floor = timed([PYTHON, "-c", FLOOR, *files], args.runs)
        ls = timed([PYTHON, "-m", "mulligan", "sessions", "ls"], args.runs,
                   env={**env, "MULLIGAN_HOME": str(many_home)}, cwd=work)
        results.append((f"sessions ls, {args.sessions} x 10,000 entries", ls, floor, 0.2))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return _report(results)


def _report(results: list[tuple[str, float, float, float | None]]) -> int:
    ok = True
    print()
    for what, took, floor, goal in results:
        ratio = took / floor
        ok = ok and (goal is None or ratio <= goal)
        judged = "reported" if goal is None else \
            f"goal <= {goal}x  {'met' if ratio <= goal else 'MISSED'}"
        print(f"{what:<48} {took * 1e3:8.0f} ms  {ratio:5.2f}x the floor "
              f"({floor * 1e3:.0f} ms)  {judged}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
