"""The instant prompt: the REPL's first prompt on the screen before prompt_toolkit and the rest
of the REPL are imported, the keys typed meanwhile kept for the real prompt -- as
powerlevel10k's instant prompt does for zsh (it draws the last prompt at once, leaves the
keys unread in the terminal while the shell starts, and lets the real prompt draw over it in
the same place).

In: the terminal on stdin and stdout (`hold`: None unless both are the same terminal and it
is not a dumb one, where prompt_toolkit draws no prompt of its own); the prompt's text, once
the lines before it are printed (`Held.prompt`). Out: nothing but the terminal's state:

- `hold()` turns the terminal's echo and canonical mode off, and the input translations
  prompt_toolkit's raw mode turns off (IEXTEN, IXON/IXOFF, ICRNL/INLCR/IGNCR), so a key typed
  from then on is neither echoed nor changed by the terminal: it waits, byte for byte, for the
  real prompt, which reads it as if typed at it. ISIG stays on: until prompt_toolkit reads the
  keys, Ctrl-C still stops a start (KeyboardInterrupt) and Ctrl-Z suspends it.
- `Held.prompt(text)` draws `text` at the start of the cursor's line, a line kept free under
  it (prompt_toolkit's status line goes there: the prompt does not move when it is drawn),
  and turns bracketed paste on (as prompt_toolkit does), so a paste made meanwhile stays one
  paste.
- `Held.hand_over()` (prompt_toolkit's `pre_run` of the first prompt, called right before it
  enters its raw mode): the cursor back to the start of the prompt's line, where
  prompt_toolkit draws the same prompt over this one, and the modes as they were.
- `Held.release()` (every other way out: an exception, Ctrl-C, a start that fails, the end):
  when the real prompt never took over, the drawn prompt erased and bracketed paste off; the
  modes as they were. SIGTERM, SIGHUP and SIGQUIT while held release, then end the process by
  the same signal as before; SIGTSTP releases, stops, and holds again once continued.

Never: flushes the input queue (every mode change is TCSANOW, never TCSAFLUSH: the keys typed
meanwhile are the real prompt's), draws anything after `hand_over` or `release`, leaves the
terminal's modes changed on any way out but SIGKILL, imports prompt_toolkit (it is what this
does not wait for). A terminal that refuses a mode change (termios.error, OSError) is left
as it is.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import termios
from types import FrameType
from typing import Any

__all__ = ["Held", "hold"]

_LFLAG, _IFLAG, _CC = 3, 0, 6  # indexes in tcgetattr's list
_ENDING = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
_PASTE_ON, _PASTE_OFF = b"\x1b[?2004h", b"\x1b[?2004l"


def hold() -> Held | None:
    """The terminal held for an instant prompt, or None (no terminal on both stdin and stdout,
    or a dumb one): see the module docstring."""
    if os.environ.get("TERM", "").lower() in ("dumb", "unknown"):
        return None
    try:
        if not (os.isatty(0) and os.isatty(1)) or os.fstat(0).st_rdev != os.fstat(1).st_rdev:
            return None
        before = termios.tcgetattr(0)
    except (OSError, termios.error):
        return None
    return Held(before)


class Held:
    """A terminal held for the instant prompt (`hold`). `before`: its modes, as tcgetattr
    gave them."""

    def __init__(self, before: list[Any]) -> None:
        self._before = before
        quiet = [*before[:_CC], list(before[_CC])]
        quiet[_LFLAG] &= ~(termios.ECHO | termios.ICANON | termios.IEXTEN)
        quiet[_IFLAG] &= ~(termios.IXON | termios.IXOFF | termios.ICRNL | termios.INLCR
                           | termios.IGNCR)
        quiet[_CC][termios.VMIN] = 1
        self._quiet = quiet
        self._shown = ""        # the prompt drawn, until handed over or released
        self._handlers: dict[int, object] = {}
        self._holding = True
        for number in (*_ENDING, signal.SIGTSTP):  # first: no moment held without them
            self._handlers[number] = signal.signal(number, self._signalled)
        self._set(self._quiet)

    def prompt(self, text: str) -> None:
        """Draw `text` (the first prompt, one line) at the start of the cursor's line, with a
        free line kept under it; the cursor after it."""
        if not self._holding:
            return
        sys.stdout.flush()  # what was printed before comes first
        self._shown = text
        self._write(b"\r\n\x1b[A" + text.encode() + _PASTE_ON)

    def hand_over(self) -> None:
        """The real prompt is about to be drawn and read: the cursor at the start of the
        prompt's line, the modes as they were; the keys typed meanwhile stay queued."""
        if not self._holding:
            return
        self._holding = False
        if self._shown:
            self._write(b"\r")
        self._let_go()

    def release(self) -> None:
        """The terminal as it was (the drawn prompt erased) when the real prompt never took
        over; nothing after `hand_over`. Safe to call more than once."""
        if not self._holding:
            return
        self._holding = False
        if self._shown:
            self._write(b"\r\x1b[K" + _PASTE_OFF)
        self._let_go()

    def _let_go(self) -> None:
        self._set(self._before)
        for number, previous in self._handlers.items():
            if signal.getsignal(number) == self._signalled:  # unless replaced since (asyncio)
                signal.signal(number, previous)  # type: ignore[arg-type]
        self._handlers.clear()

    def _signalled(self, number: int, frame: FrameType | None) -> None:
        if number == signal.SIGTSTP:  # suspended: the terminal as it was while stopped
            self._set(self._before)
            signal.signal(number, signal.SIG_DFL)
            os.kill(os.getpid(), number)  # stops here until continued (fg)
            signal.signal(number, self._signalled)
            self._set(self._quiet)
            if self._shown:  # the shell has written over the screen: the prompt again
                self._write(b"\r\n\x1b[A" + self._shown.encode())
            return
        previous = self._handlers.get(number)
        self.release()
        # As it would have ended without us: by the handler that was there (the default,
        # mostly: the process ends by this signal).
        signal.signal(number, signal.SIG_DFL if previous is None
                      else previous)  # type: ignore[arg-type]
        os.kill(os.getpid(), number)

    @staticmethod
    def _set(modes: list[Any]) -> None:
        with contextlib.suppress(OSError, termios.error):  # a terminal gone (SIGHUP)
            termios.tcsetattr(0, termios.TCSANOW, modes)

    @staticmethod
    def _write(data: bytes) -> None:
        with contextlib.suppress(OSError):
            os.write(1, data)
