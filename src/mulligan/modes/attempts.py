"""`-p TASK --attempts N`: N attempts at once, one line per attempt, optionally one adopted.

In: the parsed arguments (`--attempts N`, `--model NAME` repeated, `--check CMD`, `--adopt`)
and the task. Out: the comparison table on stdout (a header, then one line per attempt), what
was adopted; exit 0 when at least one attempt finished without error (and passed the check,
if one was given), 1 otherwise or when the adoption was refused (the files in the way named,
nothing changed). Ctrl-C, SIGTERM and SIGHUP stop every attempt (each transcript stays valid).
"""

from __future__ import annotations

import argparse
import signal
from pathlib import Path
from types import FrameType
from typing import TextIO

from mulligan.modes.common import UsageError, begin, build_controller


def run_attempts(args: argparse.Namespace, task: str, out: TextIO, err: TextIO) -> int:
    from mulligan.app.attempts.record import pick_adopted, rows_of, table_lines
    from mulligan.app.attempts.session import AUTO_NOTE, adopt, start_attempts
    from mulligan.app.rewind.back import describe
    from mulligan.app.workspace.checkpoints import RestoreRefused

    if args.attempts < 1:
        raise UsageError("--attempts must be at least 1")
    if args.mode != "text":
        raise UsageError("--attempts prints a table; --mode json is for one run")
    controller = build_controller(args, err)
    begin(controller)
    try:
        controller.hold_lease()
        models = list(getattr(args, "models", None) or [])
        attempts = start_attempts(controller, task, args.attempts, models, check=args.check,
                                  share=share_setting(controller.home))
        print(f"mulligan: {args.attempts} attempt(s) from {attempts.fork}; {AUTO_NOTE}",
              file=err)
        ended_by: list[int] = []

        def on_signal(signum: int, frame: FrameType | None) -> None:
            ended_by.append(signum)
            attempts.stop()

        previous = {number: signal.signal(number, on_signal)
                    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        try:
            while not attempts.wait(timeout=0.2):
                pass
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)
        controller.reload()
        store = controller.checkpoints.store if controller.checkpoints is not None else None
        rows = rows_of(controller.entries(), store, attempts.group)
        for line in table_lines(rows):
            print(line, file=out)
        if ended_by:
            return 128 + ended_by[0]
        if args.adopt:
            chosen = pick_adopted(rows)
            if chosen is None:
                print("mulligan: no attempt passed: nothing adopted", file=err)
            else:
                try:
                    _, done = adopt(controller, chosen.index, group=attempts.group)
                except RestoreRefused as exc:
                    print(f"mulligan: adopting attempt {chosen.index}: {exc}", file=err)
                    return 1
                print(f"adopted attempt {chosen.index} ({chosen.model})", file=out)
                for line in describe(done, controller.cwd):
                    print(line, file=out)
        else:
            print(f"session {controller.where}; adopt one with: mulligan sessions back "
                  f"{controller.where} ID --files (ID: the attempt's last entry)", file=err)
        return 0 if any(r.passed for r in rows) else 1
    finally:
        controller.close()


def share_setting(home: Path) -> list[str]:
    """`share` under [attempts] in config.toml: the ignored folders attempts link to."""
    from mulligan.app.attempts.folders import SHARED
    from mulligan.providers.config import load_config

    found = load_config(home).get("attempts", {}).get("share", SHARED)
    if not isinstance(found, list | tuple) or not all(isinstance(s, str) for s in found):
        raise UsageError("config.toml: [attempts] share must be a list of folder names")
    return list(found)
