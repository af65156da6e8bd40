"""What every command line shares once parsed: the working folder, where sessions live, the
session a run uses, and the Controller built from flags and config.toml.

In: the argparse namespace from `mulligan.cli`. Out: values for the modes; a combination of
flags that makes no sense is `UsageError` (exit status 2).
"""

from __future__ import annotations

import argparse
import gc as collector
from pathlib import Path
from typing import Any, TextIO

from mulligan.app import Controller, resolve
from mulligan.home import mulligan_home
from mulligan.messages import Content


class UsageError(ValueError):
    """A combination of flags that makes no sense; exit status 2."""


def home_of() -> Path:
    return mulligan_home()


def working_folder(args: argparse.Namespace) -> Path:
    cwd = Path(args.cwd).expanduser() if getattr(args, "cwd", None) else Path.cwd()
    if not cwd.is_dir():
        raise UsageError(f"--cwd {cwd}: no such folder")
    return cwd.resolve()


def sessions_of(home: Path) -> Any:
    """Where this machine's sessions live (`mulligan.app.sessions.stores`): files, or the database
    MULLIGAN_STORE / `store` names. A bad store setting is a UsageError."""
    from mulligan.app.sessions.stores import sessions_for
    from mulligan.providers.config import load_config

    try:
        return sessions_for(home, load_config(home))
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def choose_session(args: argparse.Namespace, sessions: Any, cwd: Path) -> Any:
    """The session a run will use (None for --no-session): the app chooses, the REPL's
    picker draws the -r choice."""
    from mulligan.app.sessions.stores import choose_session as choose
    from mulligan.frontends.pickers import pick_session

    return choose(sessions, cwd, no_session=args.no_session, session=args.session,
                  continue_=args.continue_, pick=pick_session if args.resume else None)


def with_images(task: str, files: list[str]) -> Content:
    """`task` with the images of `files` attached after it (a plain string when there are
    none). A file that cannot be read, or is not a PNG, JPEG, GIF or WebP, is refused by name
    (OSError or NotAnImage, a ValueError) before anything runs."""
    if not files:
        return task
    from mulligan.tools.images import image_from_file

    content: list[Any] = [{"type": "text", "text": task}]
    for name in files:
        block, _ = image_from_file(name)
        content.append(block)
    return content


def build_controller(args: argparse.Namespace, err: TextIO, *, defer: bool = False,
                     interactive: bool = False) -> Controller:
    """Resolve the model, the tools and the session for a run (REPL or -p). `defer`: load a
    hosted model's SDK in the background (the REPL). `interactive`: someone is there to be
    asked (the REPL sets the asker); the default permission mode is then "ask", else
    "auto"."""
    from mulligan.app.permissions import Permissions
    from mulligan.app.rewind.compaction import Settings as CompactionSettings
    from mulligan.app.secrets import Secrets, guard_process
    from mulligan.providers.config import environment, load_config
    from mulligan.tools import Sandbox, coding_tools, sandbox_problem

    home = home_of()
    cwd = working_folder(args)
    config = load_config(home)
    if args.sandbox_network and not args.sandbox:
        raise UsageError("--sandbox-network goes with --sandbox")
    sandbox = None
    if args.sandbox:
        problem = sandbox_problem(args.sandbox_network)
        if problem is not None:
            raise UsageError(problem)
        sandbox = Sandbox(network=args.sandbox_network)
    mode = args.permission_mode or (config.get("permission_mode", "ask") if interactive
                                    else "auto")
    model = resolve(args.model, base_url=args.base_url, home=home, err=err, defer=defer)
    sessions = sessions_of(home)
    session_file = choose_session(args, sessions, cwd)
    prompt_file = Path(args.system_prompt_file).expanduser() if args.system_prompt_file \
        else None
    secrets = Secrets.of(environment(), config)
    guard_process(secrets.hidden)  # the keys out of the environment, this process unreadable
    settings = config.get("tools", {})
    extensions = extensions_for(args, config, home, cwd, interactive=interactive)

    def tools_in(folder: Path) -> list[Any]:
        return coding_tools(folder, bash_timeout=settings.get("bash_timeout", 120.0),
                            bash_timeout_max=settings.get("bash_timeout_max", 1800.0),
                            hide_env=secrets.hidden, sandbox=sandbox,
                            read_roots=extensions.read_roots() if extensions else ())

    permissions = Permissions(mode, cwd)
    tools = permissions.guard(tools_in(cwd))
    if extensions is not None:
        tools = extensions.wrap(tools)
    controller = Controller(
        model=model, tools=tools, cwd=cwd, home=home, session_file=session_file,
        max_turns=args.max_turns, system_prompt_file=prompt_file, redact=secrets.redact,
        redact_text=secrets.redact_text, secrets=secrets,
        checkpoints=checkpoints_for(config, home, cwd) if session_file is not None else None,
        summarize_on_back=config.get("summarize_on_back", "ask"), permissions=permissions,
        compaction=CompactionSettings.of(config), sessions=sessions, extensions=extensions,
        compaction_model=resolve(config["compaction"]["model"], base_url=None, home=home,
                                 defer=defer) if config.get("compaction", {}).get("model")
        else None,
        resolver=lambda name: resolve(name, base_url=args.base_url, home=home, err=err),
        tools_for=lambda folder: Permissions("auto", folder).guard(tools_in(folder)))
    if extensions is not None:
        extensions.start()  # MCP servers connect while the user types the first prompt
    # The session just read back lives as long as the run: the cyclic collector need never
    # walk it (a 100k-entry transcript made every full collection a long pause).
    collector.freeze()
    return controller


def extensions_for(args: argparse.Namespace, config: dict[str, Any], home: Path, cwd: Path,
                   *, interactive: bool = False) -> Any:
    """The user's MCP servers, hooks, commands and skills (`app.extensions.setup`), or None
    when there are none. A folder's own `.claude/settings.json` hooks come only when the user
    trusts the folder (the REPL asked: `mulligan.frontends.extensions`), and its `.mcp.json`
    only then in the REPL; `-p` takes a project `.mcp.json` only named with --mcp-config. A
    mistake in config.toml or a --mcp-config file is a UsageError."""
    from mulligan.app.extensions.mcp_config import Trust
    from mulligan.app.extensions.setup import Extensions

    def builtins() -> list[str]:
        from mulligan.frontends.slash import commands

        return list(commands())

    files = [Path(f).expanduser() for f in getattr(args, "mcp_config", None) or []]
    trusted = Trust(home).answer(cwd) is True
    try:
        found = Extensions.load(config, home, cwd, mcp_files=files,
                                project_servers=trusted and interactive,
                                project_hooks=trusted, builtins=builtins)
    except (OSError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    return found if found.configured() else None


def checkpoints_for(config: dict[str, Any], home: Path, cwd: Path) -> Any:
    """The session's file checkpoints, as `[checkpoints]` in config.toml sets them (None when
    switched off)."""
    from mulligan.app.workspace.checkpoints import Checkpoints
    from mulligan.app.workspace.snapshots import Store

    settings = config.get("checkpoints", {})
    if not settings.get("enabled", True):
        return None
    store = Store(home, max_file=int(settings.get("max_file_mb", 20) * (1 << 20)),
                  max_snapshot=int(settings.get("max_snapshot_mb", 1024) * (1 << 20)))
    return Checkpoints(store, cwd)

