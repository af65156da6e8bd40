"""What every command line shares once parsed: the working folder, where sessions live, the
session a run uses, and the Controller built from flags and config.toml.

In: the argparse namespace from `mulligan.cli`. Out: values for the modes; a combination of
flags that makes no sense is `UsageError` (exit status 2).
"""

from __future__ import annotations

import argparse
import gc as collector
import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from mulligan.home import mulligan_home
from mulligan.messages import Content

if TYPE_CHECKING:
    from mulligan.app.controller import Controller
    from mulligan.app.extensions.setup import Extensions
    from mulligan.app.sessions.stores import Sessions
    from mulligan.app.settings import Settings
    from mulligan.app.workspace.checkpoints import Checkpoints
    from mulligan.app.workspace.store.snapshots import Store
    from mulligan.session import SessionLog
    from mulligan.tools import Tool


class UsageError(ValueError):
    """A combination of flags that makes no sense; exit status 2."""


def home_of() -> Path:
    return mulligan_home()


def working_folder(args: argparse.Namespace) -> Path:
    cwd = Path(args.cwd).expanduser() if getattr(args, "cwd", None) else Path.cwd()
    if not cwd.is_dir():
        raise UsageError(f"--cwd {cwd}: no such folder")
    return cwd.resolve()


def sessions_of(home: Path) -> Sessions:
    """Where this machine's sessions live (`mulligan.app.sessions.stores`): files, or the database
    MULLIGAN_STORE / `store` names. A bad store setting is a UsageError."""
    from mulligan.app.sessions.stores import sessions_for
    from mulligan.providers.config import load_config

    try:
        return sessions_for(home, load_config(home))
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def choose_session(args: argparse.Namespace, sessions: Sessions, cwd: Path
                   ) -> SessionLog | None:
    """The session a run will use (None for --no-session): the app chooses, the REPL's
    picker draws the -r choice."""
    from mulligan.app.sessions.stores import choose_session as choose

    pick = None
    if args.resume:  # only -r draws a picker: -p and -c import no terminal UI
        from mulligan.frontends.terminal.pickers import pick_session

        pick = pick_session
    return choose(sessions, cwd, no_session=args.no_session, session=args.session,
                  continue_=args.continue_, pick=pick)


def own_model(session: SessionLog | Path | None) -> str | None:
    """The model a session being resumed last used (`app.models.session_model`), when this
    program can run it; None for a new session, --no-session, or a label it cannot resolve
    (a test's scripted model)."""
    from mulligan.app.models import runnable, session_model
    from mulligan.session import SessionLog

    if session is None:
        return None
    name = session_model(session if isinstance(session, SessionLog) else SessionLog(session))
    return name if name is not None and runnable(name) else None


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


def settings_of(args: argparse.Namespace, config: dict[str, Any], *,
                interactive: bool) -> Settings:
    """The run's `Settings`: the flags over config.toml, built once (`Settings.build`)."""
    from mulligan.app.settings import Settings

    try:
        return Settings.build(
            config, cwd=working_folder(args), home=home_of(), interactive=interactive,
            model=args.model, base_url=args.base_url, max_turns=args.max_turns,
            system_prompt_file=args.system_prompt_file, permission_mode=args.permission_mode,
            sandbox=args.sandbox, sandbox_network=args.sandbox_network)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def build_controller(args: argparse.Namespace, err: TextIO, *, defer: bool = False,
                     interactive: bool = False) -> Controller:
    """Resolve the model, the tools and the session for a run (REPL or -p). `defer`: load a
    hosted model's SDK in the background (the REPL). `interactive`: someone is there to be
    asked (the REPL sets the asker); the default permission mode is then "ask", else
    "auto". Nothing else starts: the caller calls `begin` (MCP servers, the collector)."""
    from mulligan.app.controller import Controller
    from mulligan.app.models import model_label, resolve
    from mulligan.app.permissions import Permissions
    from mulligan.app.secrets import Secrets
    from mulligan.providers.config import environment, load_config
    from mulligan.tools import Sandbox, coding_tools, sandbox_problem

    config = load_config(home_of())
    settings = settings_of(args, config, interactive=interactive)
    home, cwd = settings.home, settings.cwd
    sandbox = None
    if settings.sandbox:
        problem = sandbox_problem(settings.sandbox_network)
        if problem is not None:
            raise UsageError(problem)
        sandbox = Sandbox(network=settings.sandbox_network)
    sessions = sessions_of(home)
    session_file = choose_session(args, sessions, cwd)
    own = None if settings.model else own_model(session_file)  # resuming: the session's own
    try:
        model = resolve(settings.model or own, base_url=settings.base_url, home=home, err=err,
                        defer=defer)
    except ValueError as exc:
        if own is None:
            raise
        raise ValueError(f"this session goes on with its own model {own}: {exc}; "
                         "--model NAME continues it with another") from None
    secrets = Secrets.of(environment(), config)
    extensions = extensions_for(args, config, home, cwd, interactive=interactive)

    def tools_in(folder: Path, shared: tuple[str, ...] = ()) -> list[Tool]:
        return coding_tools(folder, bash_timeout=settings.bash_timeout,
                            bash_timeout_max=settings.bash_timeout_max,
                            hide_env=secrets.hidden, sandbox=sandbox if sandbox is None
                            or not shared else replace(sandbox, read_only=shared),
                            read_roots=extensions.read_roots() if extensions else (),
                            fetch_allow=None if model_label(model).startswith("local")
                            else fetch_allow)

    fetch_allow = tuple(config.get("tools", {}).get("fetch_allow", ()))
    permissions = Permissions(settings.permission_mode, cwd, sandbox=sandbox is not None)
    permissions.fetch_allow = fetch_allow
    tools = permissions.guard(tools_in(cwd))
    if extensions is not None:
        tools = extensions.wrap(tools)
    controller = Controller(
        model, tools, settings, session_file, sessions=sessions,
        checkpoints=checkpoints_for(settings) if session_file is not None else None,
        permissions=permissions, secrets=secrets, extensions=extensions,
        compaction_model=resolve(settings.compaction_model, base_url=None, home=home,
                                 defer=defer) if settings.compaction_model else None,
        resolver=lambda name: resolve(name, base_url=settings.base_url, home=home, err=err),
        tools_for=lambda folder: Permissions("auto", folder).guard(
            tools_in(folder, shared_targets(folder))))
    controller.follow_session_model = settings.model is None
    if args.thinking is not None:
        note = controller.set_thinking(args.thinking)
        if note:
            print(f"mulligan: {note}", file=err)
    if args.web_search:
        from mulligan.providers.thinking import set_web_search

        controller.web_search = True  # a model chosen later (/model) gets it too
        note = set_web_search(controller.model)
        if note:
            print(f"mulligan: {note}", file=err)
    if own is not None:
        controller.model_notice = f"model {own}: this session's own (--model to change)"
    return controller


def shared_targets(folder: Path) -> tuple[str, ...]:
    """What an attempt folder's top-level links point to (the ignored folders it shares with
    the working folder): under the sandbox they are there, read-only."""
    found = []
    for entry in os.scandir(folder):
        if entry.is_symlink() and os.path.isabs(target := os.readlink(entry.path)):
            found.append(target)
    return tuple(found)


def begin(controller: Controller, *, servers: bool = True) -> None:
    """What starts once a run's Controller is built, said here rather than hidden in the
    building, before any tool, hook or server runs: the provider keys leave this process's
    environment and the process becomes unreadable to its children (`secrets.guard_process`);
    the user's MCP servers connect in the background (`servers` False: the REPL starts them
    once its prompt is drawn, so importing the SDK does not slow the drawing); and the cyclic
    collector is frozen over the session just read back (it lives as long as the run; a
    100k-entry transcript made every full collection a long pause)."""
    from mulligan.app.secrets import guard_process

    if controller.secrets is not None:
        guard_process(controller.secrets.hidden)
    if controller.extensions is not None and servers:
        controller.extensions.start()
    collector.freeze()


def extensions_for(args: argparse.Namespace, config: dict[str, Any], home: Path, cwd: Path,
                   *, interactive: bool = False) -> Extensions | None:
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


def checkpoints_for(settings: Settings) -> Checkpoints | None:
    """The session's file checkpoints, as `[checkpoints]` in config.toml sets them (None when
    switched off). The store itself is made at the first snapshot (the store's modules are
    not on the way to the REPL's first prompt); with a database store, now, as before."""
    from mulligan.app.workspace.checkpoints import Checkpoints

    if not settings.checkpoints.enabled:
        return None
    home, limits = settings.home, {"max_file": settings.checkpoints.max_file,
                                   "max_snapshot": settings.checkpoints.max_snapshot}
    if _database_url(home) is not None:
        return Checkpoints(store_of(home, **limits), settings.cwd)
    return Checkpoints(lambda: store_of(home, **limits), settings.cwd)


def _database_url(home: Path) -> str | None:
    """The database store's URL (MULLIGAN_STORE, config.toml's `store`), or None; a bad one
    is a UsageError."""
    from mulligan.app.sessions.stores import store_url
    from mulligan.providers.config import load_config

    try:
        return store_url(load_config(home), os.environ)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def store_of(home: Path, **limits: int) -> Store:
    """The snapshot store under `home`; with a database store, copied there too and read
    from there what is not here (`mulligan.app.workspace.shared`)."""
    from mulligan.app.workspace.store.snapshots import Store

    store = Store(home, **limits)
    url = _database_url(home)
    if url is not None:
        from mulligan.app.workspace.shared import Shared

        Shared(url, store)
    return store
