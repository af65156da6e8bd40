"""Slash commands about how the model works: /thinking.

In: the Controller and the words after the command. Out: an `Outcome` (lines to show; a
refusal with `error` set). Registered with `@command` (see `frontends.slash`).
"""

from __future__ import annotations

from mulligan.app import Controller, Refused
from mulligan.frontends.slash import Outcome, command
from mulligan.providers.thinking import LEVELS


@command("thinking", f"[{'|'.join(LEVELS)}]",
         "show or set how hard the model thinks (kept with the session)", most_args=1)
def thinking(c: Controller, args: list[str], width: int) -> Outcome:
    if not args:
        level = c.thinking or "the model's default"
        lines = [f"thinking: {level} (/thinking {'|'.join(LEVELS)} to change)"]
        return Outcome(lines + ([c.thinking_note] if c.thinking_note else []))
    try:
        note = c.set_thinking(args[0])
    except Refused as exc:
        return Outcome([str(exc)], error=True)
    return Outcome([f"thinking {args[0]} from the next request on"] + ([note] if note else []))
