"""Mulligan: a coding agent for the terminal whose sessions you can take back.

The public API (pinned in DESIGN.md). Names are imported on first use, so that importing one
small module (``mulligan.messages``) does not load the whole harness.
"""

from __future__ import annotations

import importlib

# Not typing.TYPE_CHECKING: importing typing costs `mulligan --version` more than the rest of it
# together. Type checkers treat any name TYPE_CHECKING as true.
TYPE_CHECKING = False

__version__ = "0.1.0"

_PUBLIC = {
    "Harness": "mulligan.harness",
    "run_agent": "mulligan.loop",
    "context_for_model": "mulligan.loop",
    "repair_tool_history": "mulligan.loop",
    "INTERRUPTED": "mulligan.loop",
    "run_tool": "mulligan.tools",
}

__all__ = [
    "INTERRUPTED",
    "Harness",
    "__version__",
    "context_for_model",
    "repair_tool_history",
    "run_agent",
    "run_tool",
]

if TYPE_CHECKING:
    from mulligan.harness import Harness
    from mulligan.loop import INTERRUPTED, context_for_model, repair_tool_history, run_agent
    from mulligan.tools import run_tool


def __getattr__(name: str) -> object:
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'mulligan' has no attribute {name!r}")
