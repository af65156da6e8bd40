"""The user's setup for one session: MCP servers, hooks, custom commands and skills, read
from config.toml, `--mcp-config` files and -- when the user trusts the folder -- the folder's
own `.mcp.json` and `.claude/settings.json`.

`Extensions.load(...)` reads everything and starts nothing; `start()` connects the MCP
servers in the background (the `mcp` SDK is imported only when one is configured).
`wrap(tools)` puts the hooks around tools (pre_tool_use, then the tool, then post_tool_use);
`run(harness, text)` is one prompt's events: the session_start and user_prompt_submit hooks,
the MCP tools of the servers ready by then, the run itself, the stop hooks -- with every hook
that ran, and every server that failed, as an event in the stream.

Never: a hook or a server failure raised into the run (each is an event, or the call's
error result); a project's `.mcp.json` or `.claude/settings.json` hooks used in a folder the
user has not trusted.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mulligan.app.extensions.commands import Custom, command_folders, load_commands
from mulligan.app.extensions.hooks import Hook, Hooks, Ran, hooks_from_claude, hooks_from_config
from mulligan.app.extensions.mcp_config import (
    PROJECT_FILE,
    Server,
    servers_from_config,
    servers_from_file,
)
from mulligan.app.extensions.skills import Skill, load_skills, prompt_text, skill_folders
from mulligan.messages import Content
from mulligan.tools import OnOutput, Tool, ToolError, invoke

__all__ = ["Extensions", "project_setup"]

FIRST_PROMPT_WAIT = 15.0  # seconds the first prompt waits for servers still starting
STOP_CONTINUATIONS = 3    # how many times stop hooks may send the agent back to work


def text_of_content(content: Content) -> str:
    """A prompt's words (its text blocks, when it has images too)."""
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text", "")) for b in content if b.get("type") == "text")


def with_text(content: Content, added: str) -> Content:
    """`content` with `added` after it: joined to a string, or one more text block."""
    if isinstance(content, str):
        return f"{content}\n\n{added}"
    return [*content, {"type": "text", "text": added}]


def project_setup(cwd: Path) -> list[str]:
    """What in `cwd` needs the user's trust before it is used: its `.mcp.json` servers and
    `.claude/settings.json` hooks, in words ([] when there is neither)."""
    found = []
    mcp = cwd / PROJECT_FILE
    if mcp.is_file():
        try:
            names = [s.name for s in servers_from_file(mcp)]
            found.append(f"{PROJECT_FILE}: MCP servers {', '.join(names) or '(none)'}")
        except (OSError, ValueError) as exc:
            found.append(f"{PROJECT_FILE}: unreadable ({exc})")
    try:
        hooks = hooks_from_claude(cwd / ".claude" / "settings.json")
    except ValueError:
        hooks = [Hook("stop", "?")]
    if hooks:
        found.append(f".claude/settings.json: {len(hooks)} hook command(s)")
    return found


@dataclass
class Extensions:
    """See the module docstring. `problems`: what was found and not used, one line each."""

    cwd: Path
    servers: list[Server] = field(default_factory=list)
    hooks: Hooks | None = None
    commands: list[Custom] = field(default_factory=list)
    skills: list[Skill] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    mcp: Any = None  # McpServers, once started
    _pending: list[dict[str, Any]] = field(default_factory=list, init=False, repr=False)
    _started: bool = field(default=False, init=False, repr=False)
    _told: set[tuple[str, str]] = field(default_factory=set, init=False, repr=False)

    @classmethod
    def load(cls, config: dict[str, Any], home: Path, cwd: Path, *,
             mcp_files: Sequence[Path] = (), project_servers: bool = False,
             project_hooks: bool = False,
             builtins: Callable[[], Collection[str]] = tuple) -> Extensions:
        """Read the setup. `project_servers` / `project_hooks`: use the folder's `.mcp.json`
        / `.claude/settings.json` hooks (the user trusts it). `builtins()`: the built-in
        command names (asked only when a command file exists). A config.toml or
        `--mcp-config` mistake is a ValueError naming the file (the run should not start on
        half a setup); a project file that cannot be read is a problem line."""
        servers = servers_from_config(config)
        for file in mcp_files:
            servers += servers_from_file(Path(file))
        problems: list[str] = []
        hooks = hooks_from_config(config)
        project = cwd / PROJECT_FILE
        if project_servers and project.is_file() and not any(
                Path(f).resolve() == project.resolve() for f in mcp_files):
            try:
                servers += servers_from_file(project)
            except (OSError, ValueError) as exc:
                problems.append(f"{project}: not used ({exc})")
        if project_hooks:
            try:
                hooks += hooks_from_claude(cwd / ".claude" / "settings.json")
            except ValueError as exc:
                problems.append(f"{exc}; those hooks are not used")
        named: dict[str, Server] = {}
        for server in servers:
            if server.name in named:
                problems.append(f"MCP server {server.name}: set in {named[server.name].origin} "
                                f"and in {server.origin}; the first is used")
                continue
            named[server.name] = server
        folders = command_folders(cwd, home)
        names = {b.lower() for b in builtins()} if any(f.is_dir() for f in folders) else set()
        commands, command_problems = load_commands(folders, names)
        skills, skill_problems = load_skills(skill_folders(cwd, home))
        return cls(cwd, list(named.values()), Hooks(hooks, cwd), commands, skills,
                   problems + command_problems + skill_problems)

    def configured(self) -> bool:
        """Whether there is anything at all: servers, hooks, commands, skills or problems."""
        return bool(self.servers or self.hooks or self.commands or self.skills
                    or self.problems)

    # -- MCP ------------------------------------------------------------------------------

    def start(self) -> Extensions:
        """Connect the MCP servers in the background (nothing, and no import, without any)."""
        if self.servers and self.mcp is None:
            from mulligan.app.extensions.mcp_client import McpServers

            self.mcp = McpServers(self.servers).start()
        return self

    def close(self) -> None:
        if self.mcp is not None:
            self.mcp.close()

    def mcp_tools(self, guard: Callable[[list[Tool]], list[Tool]] | None = None,
                  wait: float = 0.0) -> list[Tool]:
        """The ready servers' tools, through `guard` (the permissions) and the hooks."""
        if self.mcp is None:
            return []
        tools = self.mcp.tools(wait)
        return self.wrap(guard(tools) if guard is not None else tools)

    # -- prompts and skills ---------------------------------------------------------------

    def prompt_text(self) -> str:
        return prompt_text(self.skills)

    def read_roots(self) -> tuple[Path, ...]:
        return tuple(s.folder for s in self.skills)

    def command(self, name: str) -> Custom | None:
        return next((c for c in self.commands if c.name == name), None)

    # -- hooks around tools ----------------------------------------------------------------

    def wrap(self, tools: Sequence[Tool]) -> list[Tool]:
        """`tools` with the pre_tool_use and post_tool_use hooks around each (as is when no
        hook matches it)."""
        hooks = self.hooks
        if hooks is None or not (hooks.has("pre_tool_use") or hooks.has("post_tool_use")):
            return list(tools)
        return [self._hooked(tool, hooks) for tool in tools]

    def _hooked(self, tool: Tool, hooks: Hooks) -> Tool:
        name = tool["name"]

        def hooked(arguments: dict[str, Any], abort: threading.Event | None = None,
                   on_output: OnOutput | None = None) -> Any:
            for ran in self._note(hooks.run("pre_tool_use", tool_name=name,
                                            arguments=arguments)):
                if ran.outcome == "blocked":
                    raise ToolError(ran.stderr.strip() or f"a pre_tool_use hook "
                                    f"({ran.hook.command}) blocked this {name} call")
            result = invoke(tool, arguments, abort=abort, on_output=on_output)
            shown = result if isinstance(result, str) else json.dumps(result)[:100_000]
            for ran in self._note(hooks.run("post_tool_use", tool_name=name,
                                            arguments=arguments, result=shown)):
                if ran.outcome == "blocked":
                    raise ToolError(f"{shown}\n\n[a post_tool_use hook objected: "
                                    f"{ran.stderr.strip()}]")
            return result

        return {**tool, "execute": hooked, "interruptible": True}

    # -- one prompt -------------------------------------------------------------------------

    def _note(self, ran: list[Ran]) -> list[Ran]:
        self._pending.extend(r.event() | {"line": r.line()} for r in ran)
        return ran

    def _drain(self) -> Iterator[dict[str, Any]]:
        while self._pending:
            yield self._pending.pop(0)

    def run(self, harness: Any, text: Content, *, base_tools: Sequence[Tool],
            guard: Callable[[list[Tool]], list[Tool]] | None,
            session_file: str | None) -> Iterator[Any]:
        """The events of one prompt (see the module docstring). A user_prompt_submit hook that
        exits 2 ends it before anything is sent: its event is the last one."""
        self.start()  # a prompt sent before the frontend started the servers
        hooks = self.hooks or Hooks([], self.cwd)
        hooks.session_file = session_file
        added: list[str] = []
        if not self._started:
            self._started = True
            for ran in self._note(hooks.run("session_start")):
                if ran.outcome == "ok" and ran.stdout.strip():
                    added.append(ran.stdout.strip())
        for ran in self._note(hooks.run("user_prompt_submit", prompt=text_of_content(text))):
            if ran.outcome == "blocked":
                yield from self._drain()
                return
            if ran.outcome == "ok" and ran.stdout.strip():
                added.append(ran.stdout.strip())
        if added:  # what the hooks said goes with the prompt, and so into the record
            text = with_text(text, "\n\n".join(added))
        if self.mcp is not None:
            harness.tools = [*base_tools, *self.mcp_tools(guard, wait=FIRST_PROMPT_WAIT)]
            for state in self.mcp.states():
                if state.state != "ready" and (state.server.name, state.state) \
                        not in self._told:
                    self._told.add((state.server.name, state.state))
                    line = f"MCP server {state.server.name}: {state.state}" + (
                        f" ({state.error})" if state.error else "")
                    self._pending.append({"type": "mcp", "server": state.server.name,
                                          "state": state.state, "error": state.error,
                                          "line": line})
        yield from self._drain()
        for turn in range(STOP_CONTINUATIONS + 1):
            for event in harness.prompt(text):
                yield from self._drain()
                yield event
            yield from self._drain()
            stops = self._note(hooks.run("stop", stop_hook_active=turn > 0))
            yield from self._drain()
            blocked = [r for r in stops if r.outcome == "blocked"]
            if not blocked or turn == STOP_CONTINUATIONS:
                return
            text = (f"A stop hook ({blocked[0].hook.command}) asks you to go on: "
                    f"{blocked[0].stderr.strip() or '(no reason given)'}")
