"""-p: one run, its final answer as text or every event as JSON lines.

In: the parsed arguments and the output streams. Out: the exit status (0 done, 1 the run
failed, 128 + N when signal N ended it).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from types import FrameType
from typing import TextIO

from mulligan.modes.common import (
    UsageError,
    begin,
    build_controller,
    with_images,
)


def run_print(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """-p: one run; only the final answer (text) or every event as JSON lines (json). The
    session's lease is held for the run. Ctrl-C aborts the run (the transcript stays valid);
    SIGTERM and SIGHUP abort it the same way and exit 128 + the signal's number."""
    from mulligan.frontends.final_text import FinalTextRenderer
    from mulligan.frontends.json_lines import JsonRenderer
    from mulligan.messages import HUNG_UP, TERMINATED

    task = sys.stdin.read() if args.print == "-" else args.print
    piped = _piped_stdin() if args.print != "-" else ""
    if piped.strip():  # `cat log | mulligan -p "why does it fail?"`, as claude -p does
        task = f"{task}\n\n{piped}"
    if getattr(args, "attempts", None) is not None:
        from mulligan.modes.attempts import run_attempts

        return run_attempts(args, task, out, err)
    if getattr(args, "check", None) or getattr(args, "adopt", False):
        raise UsageError("--check and --adopt go with --attempts N")
    content = with_images(task, args.image or [])  # before anything is started or written
    controller = build_controller(args, err)
    begin(controller)
    try:
        if controller.notice:  # a database session carried on here from another machine
            print(f"mulligan: {controller.notice}", file=err)
        controller.hold_lease()
        renderer: JsonRenderer | FinalTextRenderer = FinalTextRenderer(out, err)
        if args.mode == "json":
            renderer = JsonRenderer(out, scrub=controller.secrets.scrubber()
                                    if controller.secrets is not None else None)
            renderer.session(controller.where, str(controller.cwd))

        pressed: list[int] = []
        ended_by: list[int] = []

        def on_interrupt(signum: int, frame: FrameType | None) -> None:
            # The first Ctrl-C aborts the run cleanly; a second one stops waiting for it.
            pressed.append(signum)
            if len(pressed) > 1:
                raise KeyboardInterrupt
            controller.abort()

        def on_end(signum: int, frame: FrameType | None) -> None:
            # SIGTERM, or SIGHUP (the terminal closed): like Ctrl-C -- the running command's
            # process group is killed, its result recorded -- and then we exit.
            ended_by.append(signum)
            controller.abort(HUNG_UP if signum == signal.SIGHUP else TERMINATED)

        previous = {signal.SIGINT: signal.signal(signal.SIGINT, on_interrupt),
                    signal.SIGTERM: signal.signal(signal.SIGTERM, on_end),
                    signal.SIGHUP: signal.signal(signal.SIGHUP, on_end)}
        try:
            for event in controller.run_prompt(content):
                renderer(event)
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)
        return 128 + ended_by[0] if ended_by else int(renderer.status)
    finally:
        controller.close()


def _piped_stdin(wait: float = 1.0) -> str:
    """What a pipe or a file on stdin holds ("" for a terminal, /dev/null, a closed stdin, or a
    pipe that says nothing within `wait` seconds: a script's idle stdin must not hang -p)."""
    import select
    import stat

    try:
        mode = os.fstat(0).st_mode
    except OSError:
        return ""
    if stat.S_ISREG(mode) or (stat.S_ISFIFO(mode) and select.select([0], [], [], wait)[0]):
        return sys.stdin.read() if sys.stdin is not None else ""
    return ""

