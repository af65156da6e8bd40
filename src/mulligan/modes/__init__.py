"""What each command line does, once parsed: the REPL (`interactive`), print mode (`print`,
-p, text or JSON), and the `mulligan sessions ...` subcommands (`sessions`); what they share
(`common`).

In: the argparse namespace from `mulligan.cli`, plus the streams to write to. Out: an exit
status -- 0 done, 1 the run failed or the command could not be done (the reason on stderr).
Argument checking that argparse cannot do (conflicting flags) is `UsageError`, exit status 2.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mulligan.modes.common import UsageError
    from mulligan.modes.interactive import run_interactive
    from mulligan.modes.mcp import mcp_list
    from mulligan.modes.print import run_print
    from mulligan.modes.sessions import (
        gc,
        session_check,
        session_migrate,
        session_repair,
        sessions_back,
        sessions_diff,
        sessions_export,
        sessions_files,
        sessions_import,
        sessions_ls,
        sessions_pull,
        sessions_push,
        sessions_show,
        sessions_tree,
    )

__all__ = ["UsageError", "gc", "mcp_list", "run_interactive", "run_print", "session_check",
           "session_migrate", "session_repair", "sessions_back", "sessions_diff",
           "sessions_export", "sessions_files", "sessions_import", "sessions_ls",
           "sessions_pull", "sessions_push", "sessions_show", "sessions_tree"]
# Each command's module is imported when the command is run (PEP 562): `sessions export`
# does not import the REPL, print mode or the Controller (issue 29).
_FROM = {"UsageError": "common", "run_interactive": "interactive", "mcp_list": "mcp",
         "run_print": "print"}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"mulligan.modes.{_FROM.get(name, 'sessions')}"),
                    name)
    globals()[name] = value
    return value
