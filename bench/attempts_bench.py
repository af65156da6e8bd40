"""Parallel attempts benchmark: making attempt folders, and the wall time of N attempts.

    .venv/bin/python bench/attempts_bench.py [--files 10000] [--runs 3] [--reply 1.0]

In one run, best of --runs:

- folders: making 4 attempt folders of a generated tree of --files files (1-4 KB each, 100
  folders) from the snapshot store (`mulligan.app.attempts.folders.make_folder`) against
  `cp -a` of the same files 4 times, and against `git worktree add` 4 times (the tree
  committed to a scratch repository); target at most 1.0x `cp -a`. The snapshot of the
  tree is taken before (a session has it: it is the checkpoint of the working folder).
- wall time: 4 attempts against 1 (`mulligan.app.attempts.session.start_attempts`), each a
  scripted model that takes --reply seconds per reply (a write, then an answer: two replies)
  on a small project (examples/demo-project); target at most 1.3x.

Exits 1 if a target is missed.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mulligan.app import Controller
from mulligan.app.attempts.folders import make_folder
from mulligan.app.attempts.session import start_attempts
from mulligan.app.permissions import Permissions
from mulligan.app.workspace.checkpoints import Checkpoints
from mulligan.app.workspace.store.snapshots import Store
from mulligan.testing import Request, ScriptedModel, call, reply, say
from mulligan.tools import coding_tools

GIT = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost",
       "-c", "core.fsmonitor=false", "-c", "gc.auto=0"]
DEMO = Path(__file__).resolve().parent.parent / "examples" / "demo-project"


def generate(root: Path, files: int) -> None:
    rng = random.Random(7)
    for n in range(files):
        folder = root / f"pkg{n % 100:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        size = rng.randint(1024, 4096)
        (folder / f"mod{n}.py").write_bytes(rng.randbytes(size // 2).hex()[:size].encode())


def best(runs: int, setup: Callable[[], None], action: Callable[[], None]) -> float:
    times = []
    for _ in range(runs):
        setup()
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return min(times)


def folders(scratch: Path, files: int, runs: int) -> float:
    tree = scratch / "tree"
    generate(tree, files)
    home = scratch / "home"
    store = Store(home)
    tree_id = store.snapshot(tree).id
    out = scratch / "out"

    def clean() -> None:
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        subprocess.run(["sync"], check=True)

    def ours() -> None:
        for k in range(4):
            make_folder(store, tree_id, out / str(k), source=None)

    def cp() -> None:
        for k in range(4):
            subprocess.run(["cp", "-a", str(tree), str(out / str(k))], check=True)

    repo = scratch / "repo"
    shutil.copytree(tree, repo)
    subprocess.run([*GIT, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*GIT, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*GIT, "commit", "-qm", "tree"], cwd=repo, check=True)

    def clean_worktrees() -> None:
        clean()
        subprocess.run([*GIT, "worktree", "prune"], cwd=repo, check=True)

    def worktrees() -> None:
        for k in range(4):
            subprocess.run([*GIT, "worktree", "add", "-q", "--detach", str(out / f"w{k}")],
                           cwd=repo, check=True)

    made = best(runs, clean, ours)
    copied = best(runs, clean, cp)
    git = best(runs, clean_worktrees, worktrees)
    ratio = made / copied
    print(f"folders, 4 x {files} files: attempt folders {made * 1000:.0f} ms, cp -a "
          f"{copied * 1000:.0f} ms, git worktree add {git * 1000:.0f} ms: {ratio:.2f}x cp -a "
          f"(target <= 1.0x), {made / git:.2f}x git worktree")
    return ratio


def slow_script(k: int, pause: float) -> list[Any]:
    def after(answer: Any) -> Callable[[Request], Any]:
        def slow(_request: Request) -> Any:
            time.sleep(pause)
            return answer
        return slow

    return [after(reply(call("write", {"path": f"note{k}.txt", "content": f"attempt {k}\n"}))),
            after(say(f"attempt {k} done"))]


def wall(scratch: Path, count: int, pause: float) -> float:
    work = scratch / f"work{count}"
    shutil.copytree(DEMO, work)
    home = scratch / f"home{count}"
    models = {f"m{k}": ScriptedModel(slow_script(k, pause)) for k in range(count)}
    controller = Controller(
        ScriptedModel([]), coding_tools(work), work, home, home / "s.jsonl",
        checkpoints=Checkpoints(Store(home), work), resolver=models.__getitem__,
        tools_for=lambda folder: Permissions("auto", folder).guard(coding_tools(folder)))
    home.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    attempts = start_attempts(controller, "Write a note.", count, list(models))
    attempts.wait()
    took = time.perf_counter() - started
    assert all(a.error is None for a in attempts.attempts), [a.error for a in attempts.attempts]
    controller.close()
    return took


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--reply", type=float, default=1.0)
    args = parser.parse_args()
    missed = False
    with tempfile.TemporaryDirectory(prefix="attempts-bench-") as temp:
        scratch = Path(temp)
        missed |= folders(scratch, args.files, args.runs) > 1.0
        one = min(wall(scratch / f"a{r}", 1, args.reply) for r in range(args.runs))
        four = min(wall(scratch / f"b{r}", 4, args.reply) for r in range(args.runs))
        ratio = four / one
        print(f"wall time, replies of {args.reply:g} s: 1 attempt {one:.2f} s, 4 attempts "
              f"{four:.2f} s: {ratio:.2f}x (target <= 1.3x)")
        missed |= ratio > 1.3
    return 1 if missed else 0


if __name__ == "__main__":
    os.environ.setdefault("MULLIGAN_HOME", tempfile.mkdtemp(prefix="attempts-bench-home-"))
    sys.exit(main())
