"""Which MCP servers a run may start: config.toml's `[mcp_servers.NAME]`, a `--mcp-config`
file in Claude Code's `.mcp.json` shape, and a folder's own `.mcp.json` once the user has
trusted the folder.

    [mcp_servers.files]                      # stdio: a process spoken to on stdin/stdout
    command = "npx"  args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
    env = {LOG = "1"}  cwd = "/srv"  timeout = 60
    [mcp_servers.remote]                     # streamable HTTP
    url = "https://example.com/mcp"  headers = {Authorization = "Bearer ..."}

    {"mcpServers": {"NAME": {"command": ..., "args": [...], "env": {...}}       (.mcp.json)
                   {"NAME": {"type": "http", "url": ..., "headers": {...}}}}

In: the parsed config, file paths. Out: `Server` values, in the order given. A setting of the
wrong shape is a `ValueError` naming the file and the server; nothing here starts anything.
`${VAR}` and `${VAR:-default}` in a `.mcp.json` are filled from the environment, as Claude
Code does. Trust (`Trust`) is remembered per folder in `$MULLIGAN_HOME/trusted_folders.json`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mulligan.home import create_private

__all__ = ["PROJECT_FILE", "Server", "Trust", "servers_from_config", "servers_from_file"]

PROJECT_FILE = ".mcp.json"
DEFAULT_TIMEOUT = 60.0       # seconds a call may take
NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


@dataclass(frozen=True)
class Server:
    """One MCP server: stdio (`command`, `args`, `env`, `cwd`) or streamable HTTP (`url`,
    `headers`); `timeout` bounds each call and the start; `origin` says where it was set."""

    name: str
    origin: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"

    def describe(self) -> str:
        """`npx -y pkg` or the URL: what a person recognises the server by."""
        if self.url:
            return self.url
        return " ".join([str(self.command), *self.args])


def servers_from_config(config: Mapping[str, Any], origin: str = "config.toml") -> list[Server]:
    """config.toml's `[mcp_servers.NAME]` tables."""
    tables = config.get("mcp_servers", {})
    if not isinstance(tables, Mapping):
        raise ValueError(f"{origin}: mcp_servers must be a table of [mcp_servers.NAME] tables")
    return [_server(name, table, origin) for name, table in tables.items()]


def servers_from_file(path: Path, env: Mapping[str, str] | None = None) -> list[Server]:
    """The servers of a `.mcp.json`-shaped file (`{"mcpServers": {NAME: {...}}}`), with
    `${VAR}` filled from `env` (default: os.environ). OSError when it cannot be read;
    ValueError naming the file when it is not that shape."""
    env = os.environ if env is None else env
    text = Path(path).read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers"), dict):
        raise ValueError(f'{path}: expected {{"mcpServers": {{NAME: {{...}}}}}}')
    return [_server(name, _expand(table, env), str(path))
            for name, table in data["mcpServers"].items()]


def _expand(value: Any, env: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return _VARIABLE.sub(lambda m: env.get(m.group(1), m.group(2) or ""), value)
    if isinstance(value, list):
        return [_expand(item, env) for item in value]
    if isinstance(value, dict):
        return {key: _expand(item, env) for key, item in value.items()}
    return value


def _server(name: str, table: Any, origin: str) -> Server:
    where = f"{origin}: MCP server {name!r}"
    if not NAME.match(str(name)):
        raise ValueError(f"{where}: a name is letters, digits, '_' and '-' (it becomes part of "
                         "each tool's name, mcp__NAME__TOOL)")
    if not isinstance(table, Mapping):
        raise ValueError(f"{where}: expected a table")
    known = {"command", "args", "env", "cwd", "url", "headers", "timeout", "type"}
    unknown = sorted(set(table) - known)
    if unknown:
        raise ValueError(f"{where}: unknown setting {', '.join(unknown)} (known: "
                         f"{', '.join(sorted(known))})")
    kind = table.get("type")
    if kind is not None and kind not in ("stdio", "http", "streamable-http", "streamableHttp"):
        raise ValueError(f"{where}: type {kind!r} is not supported (stdio or http)")
    command, url = table.get("command"), table.get("url")
    if (command is None) == (url is None):
        raise ValueError(f"{where}: give either command (stdio) or url (streamable HTTP)")
    timeout = table.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise ValueError(f"{where}: timeout must be a positive number of seconds")
    return Server(
        name=str(name), origin=origin, timeout=float(timeout),
        command=_text(command, where, "command") if command is not None else None,
        args=tuple(_texts(table.get("args", []), where, "args")),
        env=_mapping(table.get("env", {}), where, "env"),
        cwd=_text(table["cwd"], where, "cwd") if table.get("cwd") is not None else None,
        url=_text(url, where, "url") if url is not None else None,
        headers=_mapping(table.get("headers", {}), where, "headers"))


def _text(value: Any, where: str, key: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where}: {key} must be a non-empty string")
    return value


def _texts(value: Any, where: str, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{where}: {key} must be a list of strings")
    return list(value)


def _mapping(value: Any, where: str, key: str) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
        raise ValueError(f"{where}: {key} must be a table of strings")
    return {str(k): v for k, v in value.items()}


class Trust:
    """Which folders the user has said yes (or no) to: their `.mcp.json` servers and their
    `.claude/settings.json` hooks run only in a folder answered yes. One question per folder,
    remembered in `$MULLIGAN_HOME/trusted_folders.json` (0600)."""

    FILE = "trusted_folders.json"

    def __init__(self, home: Path) -> None:
        self.path = Path(home) / self.FILE

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        folders = data.get("folders") if isinstance(data, dict) else None
        return folders if isinstance(folders, dict) else {}

    def answer(self, folder: Path) -> bool | None:
        """True (trusted), False (refused) or None (never asked)."""
        found = self._read().get(str(Path(folder).resolve()))
        return found if isinstance(found, bool) else None

    def remember(self, folder: Path, trusted: bool) -> None:
        folders = self._read()
        folders[str(Path(folder).resolve())] = trusted
        create_private(self.path)
        temporary = self.path.with_name(self.path.name + ".new")
        create_private(temporary)
        temporary.write_text(json.dumps({"folders": folders}, indent=1) + "\n",
                             encoding="utf-8")
        os.replace(temporary, self.path)
