"""Attempts in a coding session: starting them from the Controller's tip, and adopting one.

In: a `Controller` (its lease held, no run going on). Out: a started `Attempts`
(`start_attempts`), or what adopting did (`adopt`, a `Back`). Adopting attempt K is going
back to K's last entry with its files: the same restore plan, the same refusal by name of a
file changed outside the agent since the attempts started (keep-mine / overwrite as going
back offers), the same workspace_restore entry (`mulligan.app.rewind.back`); then the
group's folders are removed (their final trees are snapshots). Never: a second way to put
files back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mulligan.app.attempts import remember, running
from mulligan.app.attempts.folders import SHARED, remove_group
from mulligan.app.attempts.record import Row, rows_of
from mulligan.app.attempts.run import CHECK_TIMEOUT, Attempt, Attempts
from mulligan.app.controller import Controller, Refused
from mulligan.app.rewind.back import Back, Files

__all__ = ["AUTO_NOTE", "adopt", "running", "start_attempts"]

AUTO_NOTE = ("attempts run in copies of the folder under $MULLIGAN_HOME/attempts with "
             "permission mode auto (nothing asks)")


def start_attempts(controller: Controller, text: str, count: int,
                   model_names: Sequence[str] = (), *, check: str | None = None,
                   check_timeout: float = CHECK_TIMEOUT, share: Sequence[str] = SHARED,
                   on_change: Callable[[Attempt], None] | None = None,
                   on_done: Callable[[Attempts], None] | None = None) -> Attempts:
    """Start `count` attempts of `text` from the session's tip; models are used in turn
    (`model_names` a, b with 4 attempts: a, b, a, b; none: the session's model). Refused
    without a session file, without checkpoints, or for a count under 1."""
    if count < 1:
        raise Refused("/try: the number of attempts must be at least 1")
    going = running(controller)
    if going is not None and going.running:
        raise Refused("/try: attempts are running (/attempts shows them, /stop stops them)")
    if controller.checkpoints is None or not controller.checkpoints.enabled:
        raise Refused("/try: attempts need file checkpoints (they are off for this session)")
    models = [controller.model_named(model_names[k % len(model_names)]) if model_names
              else controller.model for k in range(count)]
    fork = controller.begin()
    log = controller.log
    assert log is not None
    attempts = Attempts(
        log, controller.checkpoints.store, controller.cwd, controller.home, fork, text, models,
        setup=controller.for_folder, check=check, check_timeout=check_timeout,
        redact=controller.harness.redact, share=share, on_change=on_change,
        on_done=on_done)
    remember(controller, attempts)
    attempts.start()
    return attempts


def adopt(controller: Controller, index: int, *, group: str | None = None,
          files: Files = "restore") -> tuple[Row, Back]:
    """Adopt attempt `index` of `group` (default: the newest): see the module docstring.
    `files` "restore" is refused (RestoreRefused, nothing changed) naming every file in the
    way; "keep-mine" or "overwrite" say what to do with them."""
    going = running(controller)
    if going is not None and going.running:
        raise Refused("/adopt: attempts are still running (/stop stops them)")
    rows = rows_of(controller.entries(), None, group)
    row = next((r for r in rows if r.index == index), None)
    if row is None:
        raise Refused(f"/adopt: no attempt {index} in this session's newest attempts")
    done = controller.back(row.last_id, files=files)
    remove_group(controller.home, row.group)
    return row, done
