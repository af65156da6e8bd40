"""Parallel attempts: N tries from one entry, each in its own folder; compared, one adopted.

The package's face holds only which attempts each Controller started last (`running`), so
the REPL's toolbar, drawn at every prompt, asks it without importing the attempts' machinery
(folders, runs, restores): that is imported by the first /try.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mulligan.app.attempts.run import Attempts
    from mulligan.app.controller import Controller

__all__ = ["remember", "running"]

# The attempts each Controller started last (the REPL's /attempts, /stop, its live lines).
_LATEST: weakref.WeakKeyDictionary[Controller, Attempts] = weakref.WeakKeyDictionary()


def remember(controller: Controller, attempts: Attempts) -> None:
    """`attempts` are now the ones `controller` started last."""
    _LATEST[controller] = attempts


def running(controller: Controller) -> Attempts | None:
    """The attempts this process started last in `controller`'s session (running or not)."""
    return _LATEST.get(controller)
