"""Tools: the tool dict, `run_tool` (the one catch-all), output budgets, and the coding tools.

`coding_tools(root)` gives the seven tools a coding agent needs over one workspace folder:
read, write, edit, bash, ls, grep, find. Each is a plain dict (`Tool`); its "execute" raises
on failure and `run_tool` turns every outcome into exactly one toolResult message.
"""

from __future__ import annotations

import os
from collections.abc import Collection

from mulligan.tools.base import (
    OnOutput,
    Tool,
    ToolError,
    ToolSpec,
    check_arguments,
    invoke,
    run_tool,
    tool_specs,
)
from mulligan.tools.budget import MAX_BYTES, MAX_LINES, Truncation, truncate_head, truncate_tail
from mulligan.tools.files import edit_tool, read_tool, write_tool
from mulligan.tools.sandbox import Sandbox, sandbox_problem
from mulligan.tools.search import find_tool, grep_tool, ls_tool
from mulligan.tools.shell import CommandTimedOut, bash_tool
from mulligan.tools.workspace import OutsideWorkspace, Workspace

__all__ = [
    "MAX_BYTES", "MAX_LINES", "CommandTimedOut", "OnOutput", "OutsideWorkspace", "Sandbox",
    "Tool",
    "ToolError", "sandbox_problem",
    "ToolSpec", "Truncation", "Workspace", "bash_tool", "check_arguments", "coding_tools",
    "edit_tool", "find_tool", "grep_tool", "invoke", "ls_tool", "read_tool", "run_tool",
    "tool_specs", "truncate_head", "truncate_tail", "write_tool",
]


def coding_tools(root: str | os.PathLike[str] | Workspace, *, bash_timeout: float = 120.0,
                 bash_timeout_max: float = 1800.0, hide_env: Collection[str] = (),
                 sandbox: Sandbox | None = None,
                 read_roots: tuple[str | os.PathLike[str], ...] = (),
                 fetch_allow: tuple[str, ...] | None = None) -> list[Tool]:
    """read, write, edit, bash, ls, grep and find, all confined to the folder `root` (which must
    exist: NotADirectoryError names it otherwise) through one shared `Workspace`.
    `bash_timeout` is bash's default timeout in seconds; the model may ask for another per
    call, up to `bash_timeout_max`. bash's commands run without the variables in `hide_env`,
    and under bubblewrap with `sandbox`. `read` may also open files under `read_roots`
    (skill folders), and nothing else outside the folder. With `fetch_allow` (a tuple, maybe
    empty: the domains that may be private addresses) an eighth tool, `fetch`, reads web
    pages; under a sandbox without network it refuses every fetch."""
    ws = Workspace(root, read_roots) if read_roots and not isinstance(root, Workspace) \
        else Workspace.of(root)
    bash = bash_tool(ws, timeout=bash_timeout, max_timeout=bash_timeout_max, hide_env=hide_env,
                     sandbox=sandbox)
    tools = [read_tool(ws), write_tool(ws), edit_tool(ws), bash, ls_tool(ws), grep_tool(ws),
             find_tool(ws)]
    if fetch_allow is not None:
        from mulligan.tools.fetch import fetch_tool

        tools.append(fetch_tool(allow=fetch_allow,
                                blocked=sandbox is not None and not sandbox.network))
    return tools
