"""The REPL's choosers that need no REPL: slash-command completion, the -r session picker
(arrow keys and Enter, or a number), which runs before the REPL starts, and the one-key
question (the files question of going back)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from prompt_toolkit.application import Application
from prompt_toolkit.completion import Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.layout import FormattedTextControl, Layout, Window
from prompt_toolkit.output import Output
from prompt_toolkit.shortcuts.choice_input import ChoiceInput

from mulligan.app import SessionSummary
from mulligan.app.exports.export import KINDS
from mulligan.frontends.slash import listed
from mulligan.frontends.terminal.stream import wrap_words

__all__ = ["SlashCompleter", "one_key", "pick_session"]


class SlashCompleter(Completer):
    """Completes command names after a leading "/" (and "all" after /tree and /sessions);
    `extra()` gives more (name, description) pairs: the user's own commands."""

    def __init__(self, extra: Callable[[], list[tuple[str, str]]] | None = None) -> None:
        self.extra = extra

    def get_completions(self, document: Document, complete_event: Any) -> Iterable[Completion]:
        text = document.text_before_cursor
        if not text.startswith("/") or "\n" in text:
            return
        if " " not in text:
            for found in listed():
                if found.name.startswith(text[1:]):
                    yield Completion("/" + found.name, start_position=-len(text),
                                     display_meta=found.help)
            for name, about in self.extra() if self.extra is not None else []:
                if name.startswith(text[1:]):
                    yield Completion("/" + name, start_position=-len(text), display_meta=about)
            return
        command, _, rest = text.partition(" ")
        if command in ("/tree", "/sessions") and "all".startswith(rest):
            yield Completion("all", start_position=-len(rest))
        elif command == "/export":
            for kind in KINDS:
                if kind.startswith(rest):
                    yield Completion(kind, start_position=-len(rest))


def pick_session(found: list[SessionSummary]) -> str | None:
    """-r/--resume: this folder's sessions, chosen with the arrow keys and Enter (or a
    number). None when there are none or the choice is cancelled."""
    if not found:
        print("no sessions in this folder yet")
        return None
    options = [(s.where, f"{s.last_activity.replace('T', ' ')[:16]}  {s.entries} entries  "
                             f"{s.name or ' '.join(s.first_message.split())[:60]}")
               for s in found]
    try:
        chosen = ChoiceInput(message="↑/↓ and Enter to choose, Ctrl-C to cancel:",
                             options=options, show_numbers=True).prompt()
    except (KeyboardInterrupt, EOFError):
        return None
    return chosen or None


async def one_key(keys: list[tuple[str, str]], *, input: Input, output: Output,
                  width: int) -> str:
    """A question answered with one key, no Enter: `keys` ([(key, what it does)], "enter"
    for Enter) shown wrapped at words; returns the key pressed ("enter" for Enter), "c" for
    Ctrl-C or Esc. Other keys are ignored."""
    shown = " · ".join(f"{'Enter' if key == 'enter' else key}: {words}" for key, words in keys)
    lines = wrap_words(shown, width - 1)
    bindings = KeyBindings()

    def answer(key: str) -> None:
        @bindings.add(key if key != "enter" else "c-m")
        def _(event: KeyPressEvent) -> None:
            event.app.exit(result=key)

    for key, _words in keys:
        answer(key)

    @bindings.add("c-c")
    @bindings.add("escape", eager=True)
    def _cancel(event: KeyPressEvent) -> None:
        event.app.exit(result="c")

    @bindings.add("<any>")
    def _other(event: KeyPressEvent) -> None:
        pass  # a key that answers nothing: wait for one that does

    app: Application[str] = Application(
        layout=Layout(Window(FormattedTextControl([("fg:ansiyellow", "\n".join(lines))]))),
        key_bindings=bindings, input=input, output=output, full_screen=False)
    return await app.run_async()
