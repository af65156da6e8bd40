"""The REPL in the working folder: the banner, the recap of a resumed branch, the prompt loop.

In: the parsed arguments and stderr. Out: the exit status. Refuses (UsageError) when stdin is
not a terminal.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import sys
from typing import TYPE_CHECKING, TextIO

from mulligan.modes.common import (
    UsageError,
    begin,
    build_controller,
    home_of,
    working_folder,
)

if TYPE_CHECKING:
    from mulligan.frontends.terminal import instant


def run_interactive(args: argparse.Namespace, err: TextIO) -> int:
    """The REPL in the working folder. What it prints before its first prompt is printed
    without rich (`frontends.terminal.banner`): rich is imported at the first output after
    it, or here for a resumed branch's recap. On a terminal, a new session's first prompt is
    drawn before prompt_toolkit is imported (`frontends.terminal.instant`), the keys typed
    meanwhile kept for it; a picker (-r), a recap or the trust question comes first without
    one."""
    if not sys.stdin.isatty():
        raise UsageError("stdin is not a terminal: use -p TASK for one run "
                         "(-p - reads the task from stdin)")
    from mulligan.frontends.terminal import instant

    # Held from here (a new session's REPL): the keys typed while it starts are neither
    # echoed nor lost.
    held = None if args.resume or args.continue_ or args.session else instant.hold()
    try:
        from mulligan.frontends.terminal.trust import ask_trust

        def ask(question: str) -> str:  # the question first, as without an instant prompt
            nonlocal held
            if held is not None:
                held.release()
                held = None
            return input(question)

        ask_trust(working_folder(args), home_of(), ask=ask)  # a folder's own .mcp.json, hooks
        return _run(args, err, held)
    finally:
        if held is not None:
            held.release()


def _run(args: argparse.Namespace, err: TextIO, held: instant.Held | None) -> int:
    from mulligan.frontends.terminal.banner import banner, print_lines

    controller = build_controller(args, err, defer=True, interactive=True)
    load = getattr(controller.model, "load", None)
    if callable(load):
        begin(controller, servers=False)  # before the local model's engine starts
        load()  # a local model's "loading model" line, before the prompt can draw over it
    print_lines(banner(controller), "dim")
    print_lines(controller.extensions.problems if controller.extensions else [], "yellow")
    console = None
    if controller.harness.messages:  # resuming: where the branch left off
        if held is not None:
            held.release()  # the recap first, as without an instant prompt
            held = None
        from rich.console import Console

        from mulligan.frontends.live import show_recap

        console = Console(highlight=False)
        show_recap(console, controller.harness.messages)
    if held is not None:
        held.prompt("\u203a ")  # the "›" the REPL's first prompt draws over, in place
    if not callable(load):
        # After the instant prompt (ctypes' import was on its way), before anything runs: the
        # keys out of the environment; the REPL starts the MCP servers after its prompt.
        begin(controller, servers=False)
    from mulligan.frontends.repl import Repl

    # --no-session writes nothing, the input history included.
    history = None if args.no_session else home_of() / "history"
    gc.enable()  # off while the REPL started (`mulligan.cli.main`): on before anything runs
    status = Repl(controller, console=console, history_file=history,
                  before_first_prompt=held.hand_over if held is not None else None).run()
    if controller.started and controller.where is not None:
        with contextlib.suppress(OSError, ValueError):  # the terminal may be gone (SIGHUP)
            print_lines([f"session saved (mulligan -c to continue): {controller.where}"],
                        "dim")
    return status
