"""Startup benchmark: `mulligan --version`, `--help` and the REPL's first prompt, against a bare
interpreter start and a bare prompt_toolkit prompt measured in the same run.

    .venv/bin/python bench/startup_bench.py [--runs 15]

Prints the median wall time of each command over --runs runs (interleaved, so noise falls on
all alike) and its ratio to `python -c pass`. The REPL is started on a pseudo-terminal with a
hosted model configured (a dummy key and an unreachable loopback base URL: nothing is sent
until a prompt is typed) and timed twice in each run: until its instant prompt is on the
screen (`frontends.terminal.instant`: the banner and "› " drawn before prompt_toolkit is
imported, the terminal holding the keys typed meanwhile), and until prompt_toolkit's own
prompt is drawn over it (it then reads keys: the real prompt). The real prompt's floor is the
same pty running a script that imports prompt_toolkit and draws one prompt (what the REPL
cannot do without); the instant prompt's is the bare interpreter start. For scale, the same
run times importing the anthropic SDK alone (the REPL loads it on a thread once its prompt is
drawn).

The 150 ms goal is judged on the instant prompt: it is what the user sees, and where the user
types -- no key is lost or echoed twice, each shows once the real prompt reads it
(tests/test_repl_instant.py). The real prompt is printed beside it, honestly: its floor alone,
a bare prompt_toolkit prompt, takes more than 150 ms on this machine (227 ms quiet), so the
real prompt cannot meet the goal whatever Mulligan does.

Sources are compiled first, as an installed package's are: PYTHONDONTWRITEBYTECODE is
dropped and every case runs once before the timed runs (with it set, every run compiled
mulligan's sources again: the 293-407 ms measured before were partly that).

Exits 1 if a target is missed: --version and --help under 3x the bare start, and the REPL's
instant prompt at most 150 ms.

Measured on 2 shared cores loaded by 4 other developers (load average 5-7), 3 runs of
--runs 15, before and after alternated, each against the floor from its own run:

- before (the SDK loading on a thread from before the prompt; exports, going back, attempts,
  Markdown and rich imported on the way): 337-499 ms, 17.1-24.2x a bare start, 1.94-3.01x
  the prompt_toolkit floor;
- after (those imports at the seams that use them, the banner printed without rich,
  `frontends.terminal.banner`; the SDK's thread started once the prompt is drawn):
  196-277 ms, 9.6-14.6x a bare start, 1.32-1.95x the prompt_toolkit floor.

The goal, 150 ms, is out of reach on this machine under that load: the floor itself, a bare
prompt_toolkit prompt on the same pty, took 105-180 ms in the same runs.

Also printed: the REPL against its floor round by round (each REPL run right after a floor
run), and the CPU each process had used when its prompt appeared (/proc, 10 ms steps), which
the other load disturbs less. Issue 29, third pass: html.parser (the fetch tool's converter,
now `tools/html_text.py`), difflib, importlib.resources with zipfile (the packaged prompts
are read next to their module) and the sub-commands' 17 argparse parsers (a bare `mulligan`
builds none) are off the way to the prompt: about 12 ms of CPU measured alone under load.
At load 5.7-7.6 (3 runs of --runs 7 each, before and after alternated) the whole REPL took
725-1552 ms before and 655-1050 ms after, 90-150 ms of CPU above the floor's in both: the
cut is inside the noise of such a run. After, at load 2.7 (--runs 11): 222 ms against the
floor's 163 ms, 68 ms above it round by round (1.46x at the median), 60 ms of CPU above it.

Issue 29, stop 24: the instant prompt, and what was on its way taken off it (the checkpoint
store made at the first snapshot, concurrent.futures, tomllib, uuid, subprocess, socket,
secrets, the slash commands, a 2 ms regular expression; the process guard after the
prompt): 223 modules imported before it -> 188, prompt_toolkit and asyncio among none of
them. Three runs of --runs 11 in a row, load 2.8-3.4: the instant prompt 258 / 161 / 159 ms
(CPU 150 / 140 / 140 ms) against a bare prompt_toolkit prompt of 348 / 231 / 236 ms; the real
prompt 516 / 341 / 343 ms, 1.46-1.48x that floor. Rounds of the floor, stop 23's REPL and this
one alternated (15 rounds, load 2.9-3.0): the instant prompt 195 ms (min 103 ms), 0.64x the
floor round by round; stop 23's first prompt 410 ms (1.49x). When the floor is near its quiet
227 ms the instant prompt is about 160 ms: about 10 ms over the goal. Then the cyclic
collector, off while the REPL starts (about 6% of the CPU to the prompt): three runs of
--runs 11 in a row, load 2.1-2.4, the instant prompt 158 / 143 / 147 ms (CPU 140 / 130 / 120
ms) against a floor of 237 / 230 / 224 ms; the real prompt 371 / 314 / 317 ms (1.37-1.57x the
floor, 80-110 ms of CPU above it): the goal met in 2 of 3 runs. Quiet (load 0.5-0.9), three
runs of --runs 11: the instant prompt 126 / 148 / 139 ms (CPU 110 / 130 / 120 ms) against a
floor of 198 / 222 / 238 ms, the real prompt 278 / 319 / 308 ms (1.30-1.44x the floor): the
goal met in 3 of 3 (and 128 / 137 / 153 ms in three more at load 0.6-1.0). Rounds of the
floor, stop 23's REPL and this one alternated, quiet (load 0.3-0.5, 15 rounds): the instant
prompt 130 ms (0.65x the floor), stop 23's first prompt 308 ms, this real prompt 291 ms, the
floor 188 ms. What is left before it
is mostly what building the Controller imports (about 190 modules: the session, the tools,
the extensions, the harness, dataclasses and orjson's datetime/uuid/platform).
"""

from __future__ import annotations

import argparse
import os
import pty
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

PYTHON = sys.executable
MULLIGAN = str(Path(PYTHON).with_name("mulligan"))


# The floor of the first prompt: prompt_toolkit imported, one prompt drawn, as the REPL's.
FLOOR = ("from prompt_toolkit import PromptSession\n"
         "print('Ctrl-D quits')\n"
         "try:\n"
         "    PromptSession().prompt('\u203a ')\n"
         "except EOFError:\n"
         "    pass\n")


def timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    return time.perf_counter() - started


def cpu_of(pid: int) -> float:
    """The CPU seconds (user + system) process `pid` has used so far, from /proc (clock
    ticks: 10 ms steps)."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


CPU: dict[str, list[float]] = {}  # the CPU seconds each case's process had used at its prompt
INSTANT: list[float] = []  # seconds to the REPL's instant prompt, one per REPL run
INSTANT_CPU: list[float] = []
PROMPT = "\u203a".encode()
INSTANT_BYTES = b"\x1b[A" + PROMPT + b" "  # `frontends.terminal.instant`'s prompt


def first_prompt(env: dict[str, str], cwd: str, command: list[str] | None = None,
                 name: str = "") -> float:
    """Seconds from starting the REPL (or `command`) on a pty until prompt_toolkit's prompt is
    drawn (reading keys: the real prompt); then it is quit. The CPU it had used by then is
    kept in CPU[name]; when an instant prompt came first, its time and CPU are kept in
    INSTANT and INSTANT_CPU."""
    main, child = pty.openpty()
    started = time.perf_counter()
    process = subprocess.Popen(command or [MULLIGAN], cwd=cwd, env=env, stdin=child, stdout=child,
                               stderr=child, close_fds=True)
    os.close(child)
    seen = b""
    instant = None
    try:
        while True:
            after = seen.partition(b"Ctrl-D quits")[2]
            if instant is None and INSTANT_BYTES in after:
                instant = time.perf_counter() - started
                INSTANT.append(instant)
                INSTANT_CPU.append(cpu_of(process.pid))
            # prompt_toolkit's "›": drawn over the instant prompt's when there is one
            if after.count(PROMPT) >= (2 if instant is not None else 1):
                break
            ready, _, _ = select.select([main], [], [], 30)
            if not ready:
                raise RuntimeError(f"no prompt: {seen[-400:]!r}")
            seen += os.read(main, 65536)
        elapsed = time.perf_counter() - started
        CPU.setdefault(name, []).append(cpu_of(process.pid))
        os.write(main, b"\x04")  # Ctrl-D quits
        process.wait(timeout=30)
        return elapsed
    finally:
        if process.poll() is None:
            process.kill()
        os.close(main)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    scratch = Path(tempfile.mkdtemp(prefix="mulligan-startup-"))
    try:
        return _measure(runs, scratch)
    finally:  # the scratch home the REPL wrote its history and sessions under
        shutil.rmtree(scratch, ignore_errors=True)


def _measure(runs: int, scratch: Path) -> int:
    env = {**os.environ, "MULLIGAN_HOME": str(scratch / "home"), "TERM": "xterm",
           "PROMPT_TOOLKIT_NO_CPR": "1", "ANTHROPIC_API_KEY": "bench-dummy",
           "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
    env.pop("OPENAI_API_KEY", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # compiled once, as an installed package is
    cases: dict[str, Callable[[], float]] = {
        "python -c pass": lambda: timed([PYTHON, "-c", "pass"], env),
        "mulligan --version": lambda: timed([MULLIGAN, "--version"], env),
        "mulligan --help": lambda: timed([MULLIGAN, "--help"], env),
        "import anthropic (for scale)": lambda: timed([PYTHON, "-c", "import anthropic"], env),
        "prompt_toolkit prompt (floor)": lambda: first_prompt(env, str(scratch),
                                                              [PYTHON, "-c", FLOOR], "floor"),
        "REPL first prompt (anthropic)": lambda: first_prompt(env, str(scratch), name="repl"),
    }
    for case in cases.values():  # compiles what is not compiled yet
        case()
    CPU.clear()
    INSTANT.clear()
    INSTANT_CPU.clear()
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, case in cases.items():
            times[name].append(case())
    floor = statistics.median(times["python -c pass"])
    repl_name = "REPL first prompt (anthropic)"
    print(f"{'command':<32} {'median':>9} {'x bare':>7}")
    medians = {}
    for name, samples in times.items():
        medians[name] = statistics.median(samples)
        print(f"{name:<32} {medians[name] * 1000:>7.1f}ms {medians[name] / floor:>6.2f}x")
    if len(INSTANT) != runs:
        raise RuntimeError(f"an instant prompt in {len(INSTANT)} of {runs} REPL runs")
    instant = statistics.median(INSTANT)
    print(f"{'REPL instant prompt':<32} {instant * 1000:>7.1f}ms {instant / floor:>6.2f}x")
    repl, floor_prompt = medians[repl_name], medians["prompt_toolkit prompt (floor)"]
    print(f"REPL instant prompt: {instant * 1000:.0f} ms ({min(INSTANT) * 1000:.0f}-"
          f"{max(INSTANT) * 1000:.0f}), {instant / floor:.2f}x a bare start; CPU "
          f"{statistics.median(INSTANT_CPU) * 1000:.0f} ms")
    print(f"REPL real prompt (prompt_toolkit reading keys): {repl * 1000:.0f} ms, "
          f"{repl / floor:.2f}x a bare start, {repl / floor_prompt:.2f}x a bare prompt_toolkit "
          "prompt")
    # Round by round (the REPL right after its floor, so a burst of load falls on both), and
    # in CPU, which the machine's other load disturbs less than wall time.
    rounds = [r / f for r, f in zip(times[repl_name], times["prompt_toolkit prompt (floor)"],
                                    strict=True)]
    above = [(r - f) * 1000 for r, f in zip(times[repl_name],
                                            times["prompt_toolkit prompt (floor)"], strict=True)]
    cpu_repl, cpu_floor = statistics.median(CPU["repl"]), statistics.median(CPU["floor"])
    print(f"round by round: {statistics.median(rounds):.2f}x the prompt_toolkit floor at the "
          f"median ({min(rounds):.2f}-{max(rounds):.2f}x), {statistics.median(above):.0f} ms "
          f"above it; CPU at the real prompt: {cpu_repl * 1000:.0f} ms against the floor's "
          f"{cpu_floor * 1000:.0f} ms ({cpu_repl / cpu_floor:.2f}x, "
          f"{(cpu_repl - cpu_floor) * 1000:.0f} ms above it)")
    # The goal is judged on the instant prompt: it is what the user sees, and it takes keys
    # (they wait in the terminal, none lost, and show once the real prompt reads them).
    print(f"goal (<= 150 ms) judged on the instant prompt: {instant * 1000:.0f} ms, "
          f"{'met' if instant <= 0.150 else 'missed'}; the real prompt {repl * 1000:.0f} ms "
          f"({'under' if repl <= 0.150 else 'over'} 150 ms; a bare prompt_toolkit prompt "
          f"alone takes {floor_prompt * 1000:.0f} ms here)")
    missed = []
    for name in ("mulligan --version", "mulligan --help"):
        if medians[name] / floor >= 3:
            missed.append(f"{name} is {medians[name] / floor:.2f}x a bare start (target < 3x)")
    if instant > 0.150:
        missed.append(f"the REPL's instant prompt took {instant * 1000:.0f} ms "
                      "(target <= 150 ms)")
    for line in missed:
        print(f"MISSED: {line}")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
