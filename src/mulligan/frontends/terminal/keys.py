"""The REPL's keys, bound on its prompt.

Enter sends (Ctrl-J too); Alt-Enter starts a new line, or during a run queues a follow-up;
Esc during a run and Ctrl-C abort it; at the prompt Ctrl-C clears the line, twice in a row
quits, Ctrl-D on an empty line quits; Esc Esc on an empty prompt picks a message to edit;
Shift-Tab cycles the permission modes; Ctrl-O shows the last folded thinking or output.

In: the Repl (its controller, its printing, its state). Out: prompt_toolkit KeyBindings.
Never touches the session except through the Controller.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prompt_toolkit.filters import Condition
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

from mulligan.frontends.attempt_commands import stop_all

if TYPE_CHECKING:
    from mulligan.frontends.repl import Repl

__all__ = ["bindings"]


def bindings(repl: Repl) -> KeyBindings:
    kb = KeyBindings()

    # Ctrl-J sends too: keys typed before the prompt takes the terminal arrive through the
    # tty's cooked mode, which turns Enter into Ctrl-J.
    @kb.add("enter")
    @kb.add("c-j")
    def _send(event: KeyPressEvent) -> None:
        repl._ctrl_c = False
        repl._kind = "steer"
        event.current_buffer.validate_and_handle()

    @kb.add("escape", "enter")
    def _alt_enter(event: KeyPressEvent) -> None:
        repl._ctrl_c = False
        if repl.controller.is_running and event.current_buffer.text.strip():
            repl._kind = "follow_up"
            event.current_buffer.validate_and_handle()
        else:
            event.current_buffer.insert_text("\n")

    @kb.add("c-c")
    def _interrupt(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        if stop_all(repl.controller):
            repl._print("stopping every attempt…", "yellow")
        elif repl.controller.is_running:
            repl.controller.abort()
            repl._print("aborting the run…", "yellow")
        elif buffer.text:
            buffer.reset()
            repl._ctrl_c = False
        elif repl._ctrl_c:
            event.app.exit(result=None)
        else:
            repl._ctrl_c = True
            repl._print("(Ctrl-C again, or Ctrl-D, to quit)", "dim")

    @kb.add("escape", filter=Condition(lambda: repl.controller.is_running))
    def _escape(event: KeyPressEvent) -> None:
        # Esc during a run aborts it, as Ctrl-C does (Claude Code's key).
        repl.controller.abort()
        repl._print("aborting the run…", "yellow")

    @kb.add("c-o")
    def _expand(event: KeyPressEvent) -> None:
        # The last folded thinking or tool output, whole.
        renderer = repl._renderer
        folded = renderer.folded if renderer is not None else []
        if not folded:
            repl._print("(nothing folded to show)", "dim")
        for line in folded:
            repl._print(f"  │ {line}", "dim")

    @kb.add("escape", "escape")
    def _edit_picker(event: KeyPressEvent) -> None:
        # Esc Esc on an empty prompt: pick one of your messages to edit (Claude Code's).
        buffer = event.current_buffer
        if not buffer.text and not repl.controller.is_running:
            buffer.text = "/edit --pick"
            buffer.validate_and_handle()

    @kb.add("s-tab")
    def _cycle_mode(event: KeyPressEvent) -> None:
        # Shift-Tab: ask -> edits -> auto -> plan, as Claude Code's modes cycle.
        permissions = repl.controller.permissions
        if permissions is None:
            return
        repl._print(repl.controller.set_permission_mode(permissions.next_mode()),
                    "yellow" if permissions.mode == "plan" else "dim")
        repl._refresh_status()

    @kb.add("c-d")
    def _eof(event: KeyPressEvent) -> None:
        if event.current_buffer.text:
            event.current_buffer.delete()
        else:
            event.app.exit(result=None)

    return kb
