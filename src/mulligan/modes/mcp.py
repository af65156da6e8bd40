"""`mulligan mcp list`: every MCP server this folder would use, started, with its state and
tools.

In: the parsed arguments (`--mcp-config`, `--cwd`). Out: one block per server on `out`; exit
0 when every server came up, 1 when one did not (each named, with why). A folder's own
`.mcp.json` is listed but not started unless the folder is trusted (or it is named with
--mcp-config).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from mulligan.modes.common import UsageError, extensions_for, home_of, working_folder


def mcp_list(args: argparse.Namespace, out: TextIO) -> int:
    from mulligan.app.extensions.mcp_config import PROJECT_FILE, Trust, servers_from_file
    from mulligan.frontends.extensions import server_lines
    from mulligan.providers.config import load_config

    home, cwd = home_of(), working_folder(args)
    config = load_config(home)
    found = extensions_for(args, config, home, cwd, interactive=True)
    servers = found.servers if found is not None else []
    project = cwd / PROJECT_FILE
    named = [Path(f).expanduser().resolve() for f in args.mcp_config or []]
    waiting: list[str] = []
    if project.is_file() and Trust(home).answer(cwd) is not True \
            and project.resolve() not in named:
        try:
            waiting = [s.name for s in servers_from_file(project)]
        except (OSError, ValueError) as exc:
            raise UsageError(str(exc)) from None
    if not servers and not waiting:
        print("no MCP servers: add [mcp_servers.NAME] to config.toml, or use --mcp-config "
              "FILE", file=out)
        return 0
    status = 0
    if found is not None and servers:
        found.start()
        try:
            found.mcp.wait(max(s.timeout for s in servers) + 1)
            for line in server_lines(found.mcp.states()):
                print(line, file=out)
            status = int(any(s.state != "ready" for s in found.mcp.states()))
        finally:
            found.close()
    for name in waiting:
        print(f"{name}  not started: {PROJECT_FILE} of an untrusted folder (the REPL asks; "
              f"or --mcp-config {PROJECT_FILE})", file=out)
    return status
