"""The question asked before the REPL starts, when the working folder brings its own setup
(a `.mcp.json`, `.claude/settings.json` hooks) and the user was never asked about it: trust
the folder or not, remembered (`app.extensions.mcp_config.Trust`).

In: the folder, the home, how to ask and how to say (input and print by default). Out: the
folder's answer, None when there is nothing to ask about. Imports none of the slash
commands' machinery: it runs on the REPL's way to its (instant) first prompt.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

__all__ = ["ask_trust"]


def ask_trust(cwd: Path, home: Path, ask: Callable[[str], str] = input,
              say: Callable[[str], None] = print) -> bool | None:
    """Before the REPL starts: when `cwd` has a `.mcp.json` or `.claude/settings.json` hooks
    and the user was never asked about this folder, ask once and remember the answer.
    Returns the folder's answer (None: nothing to ask about)."""
    from mulligan.app.extensions.mcp_config import Trust
    from mulligan.app.extensions.setup import project_setup

    found = project_setup(cwd)
    if not found:
        return None
    trust = Trust(home)
    known = trust.answer(cwd)
    if known is not None:
        return known
    say(f"This folder ({cwd}) brings its own setup, which can run commands on this machine:")
    for line in found:
        say(f"  {line}")
    try:
        answer = ask("Trust this folder and use it? [y/N] ").strip().lower()
    except (EOFError, KeyboardInterrupt):
        answer = ""
    trusted = answer in ("y", "yes")
    trust.remember(cwd, trusted)
    say("trusted: used from now on in this folder" if trusted else
        f"not used (remembered; delete {trust.path} to be asked again)")
    return trusted
