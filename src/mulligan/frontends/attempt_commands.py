"""The parallel-attempt slash commands (/try, /attempts, /compare, /adopt, /stop) and the
REPL's live line per attempt.

In: the Controller and the command's words. Out: an `Outcome` (`frontends.slash`), and for
the REPL's toolbar `live_lines(controller)`: one line per running attempt (model, what it is
doing, turns, tokens, time). `stop_all(controller)` is Ctrl-C's: True when there were
attempts to stop. The work is `mulligan.app.attempts`'s; this maps words to it. Its
machinery is imported by the commands that use it: the REPL imports this module for its
toolbar, and its first prompt does not wait for folders, runs and restores.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

from mulligan.app import Controller
from mulligan.app.attempts import running
from mulligan.app.controller import Refused
from mulligan.brief import cut
from mulligan.frontends.slash import Outcome, command

if TYPE_CHECKING:
    from mulligan.app.attempts.run import Attempt
    from mulligan.app.rewind.back import Files

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
# The sessions whose attempts' lines were drawn last time (`live_lines`' `on_end`).
_SHOWN: weakref.WeakSet[Controller] = weakref.WeakSet()


def live_lines(controller: Controller, width: int = 100,
               on_end: Callable[[], None] | None = None) -> list[str]:
    """One line per attempt while any runs (and [] when none does). `on_end` is called at
    the first call after they have all ended (the REPL's status line then counts what they
    spent)."""
    attempts = running(controller)
    if attempts is None or not attempts.running:
        if controller in _SHOWN:
            _SHOWN.discard(controller)
            if on_end is not None:
                on_end()
        return []
    _SHOWN.add(controller)
    frame = SPINNER[int(time.monotonic() * 8) % len(SPINNER)]
    return [cut(_line(a, frame), width - 1) for a in attempts.attempts] + [
        "Ctrl-C stops them all · /stop K stops one · /attempts compares"]


def _line(attempt: Attempt, frame: str) -> str:
    mark = frame if attempt.ended is None else ("✗" if attempt.error else "✓")
    doing = attempt.error or attempt.doing
    if attempt.check is not None:
        code = attempt.check.get("exit_code")
        doing = "check passed" if code == 0 else f"check failed (exit {code})"
    return (f"{mark} attempt {attempt.index}/{attempt.of} · {attempt.model_name} · {doing} · "
            f"{attempt.turns} turns · {attempt.tokens} tokens · {attempt.seconds:.1f}s")


def stop_all(controller: Controller) -> bool:
    attempts = running(controller)
    if attempts is None or not attempts.running:
        return False
    attempts.stop()
    return True


def busy(controller: Controller) -> bool:
    """True while attempts run (a prompt would not start a run meanwhile)."""
    attempts = running(controller)
    return attempts is not None and attempts.running


@command("try", "N [--model NAME ...] [--check CMD] TEXT",
         "N attempts of TEXT at once, each in its own copy of the folder", most_args=None)
def try_(c: Controller, args: list[str], width: int) -> Outcome:
    if not args or not args[0].isdigit():
        return Outcome(["/try N [--model NAME ...] [--check CMD] TEXT"], error=True)
    count, models, check, words = int(args[0]), [], None, []
    rest = iter(args[1:])
    for word in rest:
        if word in ("--model", "--check"):
            value = next(rest, None)
            if value is None:
                return Outcome([f"/try: {word} needs a value"], error=True)
            if word == "--model":
                models.append(value)
            else:
                check = value
        else:
            words.append(word)
    text = " ".join(words).strip()
    if not text:
        return Outcome(["/try: what should the attempts do? /try N TEXT"], error=True)
    from mulligan.app.attempts.session import AUTO_NOTE, start_attempts

    attempts = start_attempts(c, text, count, models, check=check)
    return Outcome([f"started {count} attempt(s) from {attempts.fork}: {AUTO_NOTE}" + (
        f"; check: {check}" if check else ""),
        "their lines are under the prompt; /attempts compares them, /adopt K keeps one"])


@command("attempts", "", "the attempts side by side: model, turns, tokens, cost, time, "
         "check, files", most_args=0)
def attempts_(c: Controller, args: list[str], width: int) -> Outcome:
    from mulligan.app.attempts.record import rows_of, table_lines

    going = running(c)
    if going is not None and going.running:
        return Outcome([_line(a, "…") for a in going.attempts])
    store = c.checkpoints.store if c.checkpoints is not None else None
    rows = rows_of(c.entries(), store)
    if not rows:
        return Outcome(["no attempts in this session yet: /try N TEXT starts some"])
    return Outcome(table_lines(rows) + ["/compare A B shows two side by side; /adopt K "
                                        "keeps one"])


@command("compare", "A B", "two attempts (or any two entries) side by side: the files as one "
         "diff, the transcripts from the fork", most_args=2)
def compare_(c: Controller, args: list[str], width: int) -> Outcome:
    if len(args) != 2:
        return Outcome(["/compare A B (attempt numbers or entry ids)"], error=True)
    log = c.log
    if log is None or not c.started:
        raise Refused("/compare: this session has no entries yet")
    from mulligan.app.attempts.record import compare

    store = c.checkpoints.store if c.checkpoints is not None else None
    return Outcome(compare(log, store, args[0], args[1]), diff=True)


@command("adopt", "K [keep-mine|overwrite]", "put attempt K's files into the working folder "
         "and go on from it", most_args=2)
def adopt_(c: Controller, args: list[str], width: int) -> Outcome:
    if not args or not args[0].isdigit() or (len(args) > 1 and args[1] not in (
            "keep-mine", "overwrite")):
        return Outcome(["/adopt K [keep-mine|overwrite]"], error=True)
    from mulligan.app.attempts.session import adopt
    from mulligan.app.rewind.back import describe
    from mulligan.app.workspace.checkpoints import RestoreRefused

    files: Files = "restore" if len(args) == 1 else args[1]  # type: ignore[assignment]
    try:
        row, done = adopt(c, int(args[0]), files=files)
    except RestoreRefused as exc:
        k = args[0]
        return Outcome([f"not adopting attempt {k}: {len(exc.conflicts)} file(s) were changed "
                        "outside the agent and would be overwritten; nothing was changed:",
                        *(f"  {path}: {why}" for path, why in exc.conflicts),
                        f"/adopt {k} keep-mine keeps them as they are; /adopt {k} overwrite "
                        "puts the attempt's in (a safety snapshot keeps yours)"], error=True)
    return Outcome([f"adopted attempt {row.index} ({row.model})", *describe(done, c.cwd)])


@command("stop", "[K]", "stop attempt K, or every attempt", most_args=1)
def stop_(c: Controller, args: list[str], width: int) -> Outcome:
    going = running(c)
    if going is None or not going.running:
        return Outcome(["no attempts are running"], error=True)
    if args and not args[0].isdigit():
        return Outcome(["/stop [K]"], error=True)
    going.stop(int(args[0]) if args else None)
    return Outcome([f"stopping attempt {args[0]}" if args else "stopping every attempt"])
