"""The user's setup in the REPL: `/mcp`, custom commands (`/NAME ARGS`), and the server lines
`/mcp` and `mulligan mcp list` share (the question about a folder's own setup, asked before
the REPL starts, is `frontends.terminal.trust`'s).

In: the Controller (its `extensions`, None when the user has none). Out: `Outcome`s and
lines. Registers `/mcp` when imported (it is in `COMMAND_MODULES`); never raises for a
missing setup.
"""

from __future__ import annotations

from typing import Any

from mulligan.app import Controller
from mulligan.frontends.slash import Outcome, command, fallback

__all__ = ["custom_command", "custom_entries", "server_lines"]


def server_lines(states: list[Any]) -> list[str]:
    """One line per server (name, state and why, transport, where it was set), then its
    tools' names."""
    from mulligan.app.extensions.mcp_client import tool_name

    lines = []
    for state in states:
        server = state.server
        said = f": {state.error}" if state.error else ""
        lines.append(f"{server.name}  {state.state}{said}  ({server.transport}: "
                     f"{server.describe()}; from {server.origin})")
        if state.tools:
            lines.append("  " + ", ".join(tool_name(server.name, str(t["name"]))
                                          for t in state.tools))
    return lines


@command("mcp", "", "the MCP servers: state and tools", most_args=0)
def _mcp(controller: Controller, args: list[str], width: int) -> Outcome:
    extensions = controller.extensions
    if extensions is None or not extensions.servers:
        return Outcome(["no MCP servers (config.toml's [mcp_servers.NAME], --mcp-config "
                        "FILE, or a trusted folder's .mcp.json)"])
    extensions.start()  # typed before the REPL started them: they start now
    return Outcome(server_lines(extensions.mcp.states()))


def custom_entries(controller: Controller) -> list[tuple[str, str]]:
    """(name, description) of each custom command, for the `/` menu and /help."""
    extensions = controller.extensions
    if extensions is None:
        return []
    return [(c.name, c.description or f"(from {c.path})") for c in extensions.commands]


@fallback
def custom_command(controller: Controller, name: str, arguments: str) -> Outcome | None:
    """`/NAME ARGS` for a custom command: the text to send (and the model it names), or None
    when there is no such command."""
    from mulligan.app.extensions.commands import expand

    extensions = controller.extensions
    found = extensions.command(name) if extensions is not None else None
    if found is None:
        return None
    return Outcome(send=expand(found, arguments), model=found.model)

