"""The slash-command registry: one `Command` per name (usage, help, argument count, whether it
emits events, handler), registered with `@command(...)` by the modules in `COMMAND_MODULES`.

In: a line that starts with "/" and the Controller. Out: an `Outcome` -- lines to print, text
to put in the input box, whether to quit, or which picker the REPL should open. A refusal or
a bad argument is an Outcome with `error` set; nothing here raises for those. Registering a
name twice is a `ValueError` naming it (at import, never at run time).
"""

from __future__ import annotations

import functools
import importlib
import shlex
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mulligan.app import Controller, LeaseHeld, Refused
from mulligan.session import SessionError, UnknownEntry

# Each module registers its commands when imported; `commands()` imports them on first use.
COMMAND_MODULES = ("mulligan.frontends.commands", "mulligan.frontends.attempt_commands",
                   "mulligan.frontends.extensions", "mulligan.frontends.model_commands")

Handler = Callable[..., "Outcome"]


OnEvent = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class ListPick:
    """Choose one of `choices` ([(value, words)]) with the arrow keys and Enter (or a
    number); `then(value, on_event)` does what the choice means. `show_values`: print each
    value before its words (entry ids; not session files)."""

    choices: list[tuple[str, str]]
    then: Callable[[str, OnEvent | None], Outcome]
    show_values: bool = True


@dataclass(frozen=True)
class KeyQuestion:
    """A question answered with one key, no Enter: `keys` ([(key, what it does)], "enter"
    for Enter) in the order shown; Ctrl-C and Esc answer "c" (cancel). `then(key,
    on_event)` acts on the answer (it may call the model: run off the event loop)."""

    keys: list[tuple[str, str]]
    then: Callable[[str, OnEvent | None], Outcome]


@dataclass(frozen=True)
class TreeWalk:
    """The session's tree to walk with the keys: `then(entry_id, on_event)` goes there;
    `label(entry_id, text)` labels an entry on the way."""

    entries: list[dict[str, Any]]
    tip: str | None
    then: Callable[[str, OnEvent | None], Outcome]
    label: Callable[[str, str], None]


Picker = ListPick | KeyQuestion | TreeWalk


@dataclass
class Outcome:
    """What the REPL should do after a command."""

    lines: list[str] = field(default_factory=list)
    error: bool = False
    fill: str | None = None          # put this text in the input box
    quit: bool = False
    pick: Picker | None = None       # ask the user first, then do what the answer says
    diff: bool = False               # the lines are a unified diff (coloured by the REPL)
    cancelled: bool = False          # the user cancelled: nothing was done
    send: str | None = None          # send this text as a prompt (a custom command)
    model: str | None = None         # ... with this model (its front matter's `model`)
    recap: list[Any] | None = None   # messages to show as the run showed them (/resume)


@dataclass(frozen=True)
class Command:
    """One slash command. `most_args`: the most arguments it takes (None: the rest of the line
    is its text; `--summary` is not counted). `events`: the handler takes `on_event=` (it may
    call the model, and the REPL shows those events). `listed`: shown by /help and the menu
    (aliases are not)."""

    name: str
    usage: str
    help: str
    handler: Handler
    most_args: int | None
    events: bool = False
    listed: bool = True


_REGISTRY: dict[str, Command] = {}


def command(name: str, usage: str, help: str, *, most_args: int | None, events: bool = False,
            aliases: tuple[str, ...] = ()) -> Callable[[Handler], Handler]:
    """Register the decorated `handler(controller, args, width[, on_event=])` as /name (and
    each alias, unlisted)."""

    def register(handler: Handler) -> Handler:
        for each, listed in [(name, True), *((a, False) for a in aliases)]:
            if each in _REGISTRY:
                raise ValueError(f"slash command /{each} is registered twice")
            _REGISTRY[each] = Command(each, usage, help, handler, most_args, events, listed)
        return handler

    return register


# Handlers of a name no command has (a user's own command files), asked in registration
# order; the first that answers with an Outcome wins, None passes.
Fallback = Callable[[Controller, str, str], "Outcome | None"]
_FALLBACKS: list[Fallback] = []


def fallback(handler: Fallback) -> Fallback:
    """Register `handler(controller, name, arguments)` for names no command has."""
    _FALLBACKS.append(handler)
    return handler


@functools.cache
def commands() -> dict[str, Command]:
    """Every registered command by name (aliases included), after importing the modules that
    register them."""
    for module in COMMAND_MODULES:
        importlib.import_module(module)
    return _REGISTRY


def listed() -> list[Command]:
    """The commands /help and the `/` menu show, in `COMMAND_MODULES` order, then registration
    order (not import order: which module a frontend happens to import first must not
    reorder the menu)."""
    def place(c: Command) -> int:
        module = getattr(c.handler, "__module__", "")
        return COMMAND_MODULES.index(module) if module in COMMAND_MODULES else \
            len(COMMAND_MODULES)

    return sorted((c for c in commands().values() if c.listed), key=place)


def help_lines(width: int = 100) -> list[str]:
    """/help: each command, its usage and what it does, then the keys; wrapped at words to
    `width` columns, a command's help hanging under its own column."""
    shown = listed()
    column = max(len(f"/{c.name} {c.usage}") for c in shown)
    room = max(width - column - 5, 20)
    lines = ["Commands:"]
    for c in shown:
        head = f"  {f'/{c.name} {c.usage}'.strip():<{column}}  "
        wrapped = textwrap.wrap(c.help, room) or [""]
        lines += [head + wrapped[0], *(" " * len(head) + more for more in wrapped[1:])]
    for paragraph in KEYS:
        lines += textwrap.wrap(paragraph, width - 1, subsequent_indent="  ")
    return lines


KEYS = ("Keys: Enter sends; Alt-Enter starts a new line; Up on an empty prompt recalls "
        "history; / lists the commands as you type; Shift-Tab cycles the permission modes; "
        "Ctrl-O shows the last folded thinking or output. During a run, Enter queues a "
        "steering message and Alt-Enter a follow-up; Esc or Ctrl-C aborts the run.",
        "A permission question on screen takes y (yes), a (yes from now on for that tool) "
        "or n [reason]; Ctrl-C answers no and aborts the run.",
        "Ctrl-C twice at the prompt, or Ctrl-D, quits.")


def run_command(controller: Controller, line: str, *, width: int = 80,
                on_event: Callable[[dict[str, Any]], None] | None = None) -> Outcome:
    """Do the slash command `line`. A refusal or bad argument is an Outcome with `error` set and
    a line saying why; nothing here raises for those."""
    try:
        words = shlex.split(line[1:])
    except ValueError:
        words = line[1:].split()
    if not words:
        return Outcome(help_lines(width))
    name, args = words[0].lower(), words[1:]
    found = commands().get(name)
    if found is None:
        rest = line[1:].strip()[len(words[0]):].strip()
        for handler in _FALLBACKS:
            answered = handler(controller, words[0], rest)
            if answered is not None:
                return answered
        return Outcome([f"unknown command /{name}; /help lists them"], error=True)
    most = found.most_args
    if most is not None and len([a for a in args if a != "--summary"]) > most:
        usage = f"/{name} {found.usage}".strip()
        return Outcome([f"/{name} takes {'no' if most == 0 else f'at most {most}'} "
                        f"argument{'s' if most != 1 else ''}: {usage}"], error=True)
    handler = functools.partial(found.handler, on_event=on_event) if found.events \
        else found.handler
    try:
        result: Outcome = handler(controller, args, width)
        return result
    except UnknownEntry as exc:  # a mistyped id: the session's path would only be noise
        return Outcome([f"/{name}: {exc.problem}; /tree shows the ids"], error=True)
    except (Refused, SessionError, LeaseHeld, ValueError, OSError) as exc:
        return Outcome([str(exc)], error=True)
