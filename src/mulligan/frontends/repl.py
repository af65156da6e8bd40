"""The interactive REPL: prompt_toolkit for input, rich for output, a Controller underneath.

A run happens on a worker thread so the prompt stays live: during a run Enter queues a
steering message and Alt-Enter a follow-up, and Esc or Ctrl-C aborts the run (the transcript
stays valid: the loop records the aborted reply). The keys are `frontends.terminal.keys`'; the live
area under the input is `frontends.terminal.toolbar`'s. Typing "/" lists the commands.

This layer only moves text between the terminal and the Controller (see
`frontends.commands` for the commands). Tests drive it through prompt_toolkit's pipe input,
and the real program in tmux.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prompt_toolkit import PromptSession
from prompt_toolkit.application.current import create_app_session
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.output import Output
from prompt_toolkit.patch_stdout import patch_stdout
from prompt_toolkit.shortcuts.choice_input import ChoiceInput
from prompt_toolkit.styles import Style

from mulligan.app import Controller, LeaseHeld, Refused
from mulligan.app.models import start_loading
from mulligan.app.permissions import Answer, Question
from mulligan.frontends.attempt_commands import busy, live_lines
from mulligan.frontends.extensions import custom_entries
from mulligan.frontends.slash import KeyQuestion, Outcome, TreeWalk, run_command
from mulligan.frontends.status import status_line
from mulligan.frontends.terminal.attachments import with_attachments
from mulligan.frontends.terminal.keys import bindings
from mulligan.frontends.terminal.pickers import SlashCompleter, one_key
from mulligan.frontends.terminal.toolbar import toolbar
from mulligan.frontends.terminal.tree_walk import walk_tree
from mulligan.home import create_private
from mulligan.messages import HUNG_UP, TERMINATED

if TYPE_CHECKING:  # rich and the run's renderer are imported at the first output, not before
    from rich.console import Console  # the first prompt

    from mulligan.frontends.live import LiveRenderer


class Repl:
    """The REPL over `controller`. `input`/`output` are prompt_toolkit's (None: the terminal);
    `console` is where runs and command answers are printed; `history_file` keeps typed lines
    across runs (None: in memory); `before_first_prompt` is called right before the first
    prompt takes the terminal (the instant prompt's `hand_over`)."""

    def __init__(self, controller: Controller, *, console: Console | None = None,
                 input: Input | None = None, output: Output | None = None,
                 history_file: Path | None = None, width: int | None = None,
                 before_first_prompt: Callable[[], None] | None = None) -> None:
        self.controller = controller
        self._before_first_prompt = before_first_prompt
        self._console = console
        self.width = width
        self._patch_stdout = output is None  # a real terminal: print above the live prompt
        self._ctrl_c = False
        self._kind = "steer"
        self._fill: str | None = None
        self._worker: threading.Thread | None = None
        self._event_loop: asyncio.AbstractEventLoop | None = None
        self._idle = threading.Condition()
        self.idle_count = 0          # how many times the REPL has come to rest; for tests
        self.ended_by: int | None = None  # the signal (SIGTERM, SIGHUP) that ended the REPL
        history: History = InMemoryHistory()
        if history_file is not None:
            create_private(history_file)  # 0600 in 0700 folders: it holds every prompt typed
            history = FileHistory(str(history_file))
        self._renderer: LiveRenderer | None = None
        self._status = ""  # the status line, worked out when the REPL comes to rest
        self.session: PromptSession[str] = PromptSession(
            multiline=True, key_bindings=self._bindings(), history=history,
            completer=SlashCompleter(lambda: custom_entries(self.controller)),
            # Typing "/" opens the command list, narrowed as you type (only for a command's
            # name: a message is never completed while typed).
            complete_while_typing=Condition(self._typing_command),
            input=input, output=output, prompt_continuation=lambda w, n, s: ". ".rjust(w),
            bottom_toolbar=self._toolbar, refresh_interval=0.25, style=STYLE,
        )
        self.session.default_buffer.on_text_changed += self._typed
        self._question: _Pending | None = None  # a permission question waiting for an answer
        if controller.permissions is not None:
            controller.permissions.asker = self.ask_permission

    @property
    def console(self) -> Console:
        if self._console is None:
            from rich.console import Console

            self._console = Console(highlight=False)
        return self._console

    def _typing_command(self) -> bool:
        text = self.session.default_buffer.text
        return text.startswith("/") and " " not in text and "\n" not in text

    def _typed(self, _buffer: Any) -> None:
        self._ctrl_c = False  # "Ctrl-C twice" means twice in a row

    # -- keys -----------------------------------------------------------------------------

    def _bindings(self) -> KeyBindings:
        return bindings(self)

    # -- the loop -------------------------------------------------------------------------

    def _print(self, text: str, style: str | None = None) -> None:
        # Wrapped by rich at words (a word longer than the line is folded), never mid-word by
        # the terminal.
        self.console.print(text, style=style, markup=False, highlight=False)

    def _toolbar(self) -> StyleAndTextTuples:
        size = self.session.output.get_size()
        pending = self._question
        width = self.width or size.columns
        return toolbar(self._renderer, running=self.controller.is_running,
                       asking=pending.question.tool if pending is not None else None,
                       width=width, rows=size.rows, status=self._status,
                       more=live_lines(self.controller, width,  # parallel attempts
                                       on_end=self._refresh_status))  # then count them

    def _refresh_status(self) -> None:
        try:
            width = self.width or self.session.output.get_size().columns
            self._status = status_line(self.controller, width - 1)
        except (ValueError, OSError) as exc:  # a damaged file must not take the prompt down
            self._status = f"(status unavailable: {exc})"

    def _mark_idle(self) -> None:
        self._refresh_status()
        with self._idle:
            self.idle_count += 1
            self._idle.notify_all()

    def wait_idle(self, after: int, timeout: float = 30.0) -> bool:
        """Block until the REPL has come to rest more than `after` times (for tests)."""
        with self._idle:
            return self._idle.wait_for(lambda: self.idle_count > after, timeout)

    def _message(self) -> str:
        pending = self._question
        if pending is not None:
            return (f"allow {pending.question.tool}? y: yes · a: always, this session · "
                    "n [reason]: no › ")
        return "… " if self.controller.is_running else "› "

    def ask_permission(self, question: Question, abort: threading.Event | None) -> Answer:
        """From the worker thread, while a tool call waits: show the command or the diff and
        wait for the answer typed at the prompt (an abort, Ctrl-C, answers no)."""
        pending = _Pending(question)
        # The call's line is just above: a diff is shown here, once; a one-line command
        # is already there in full.
        if question.tool != "bash" or len(question.preview) > 1:
            for line in question.preview:
                self._print(f"  {line}", _diff_style(line) or "dim")
        self._question = pending
        self._redraw_soon()
        try:
            while not pending.done.wait(0.05):
                if abort is not None and abort.is_set():
                    break
        finally:
            self._question = None
            self._redraw_soon()
        return pending.answer or Answer("no", "the run was aborted")

    def _answer(self, text: str) -> bool:
        """`text` as the answer to the question on screen; False if it is not one (then it
        is steering, as any other line during a run)."""
        pending = self._question
        if pending is None:
            return False
        word, _, reason = text.strip().partition(" ")
        choice = {"y": "yes", "yes": "yes", "a": "always", "always": "always", "n": "no",
                  "no": "no"}.get(word.lower())
        if choice is None:
            return False
        pending.answer = Answer(choice, reason.strip())
        pending.done.set()
        return True

    def run(self) -> int:
        """Read and act until the user quits. Returns the exit status: 0, or 128 + the
        signal's number after SIGTERM or SIGHUP."""
        try:
            status = asyncio.run(self._main())
            return 128 + self.ended_by if self.ended_by else status
        finally:
            worker = self._worker
            if worker is not None and worker.is_alive():
                self.controller.abort()
                worker.join()
            self.controller.close()

    async def _main(self) -> int:
        loop = asyncio.get_running_loop()
        for number in (signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(NotImplementedError, RuntimeError):  # not the main thread
                loop.add_signal_handler(number, self._end, number)
        try:
            if not self._patch_stdout:
                return await self._loop()
            with patch_stdout(raw=True):
                return await self._loop()
        finally:
            for number in (signal.SIGTERM, signal.SIGHUP):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.remove_signal_handler(number)

    def _end(self, number: int) -> None:
        """SIGTERM, or SIGHUP (the terminal closed): abort the run as Ctrl-C does -- the
        running command's process group is killed and its result recorded -- and quit;
        `run` then waits for the run to finish being recorded."""
        self.ended_by = number
        self.controller.abort(HUNG_UP if number == signal.SIGHUP else TERMINATED)
        if self.session.app.is_running:
            self.session.app.exit()

    def _redraw_soon(self) -> None:
        """From the worker thread: ask the prompt's event loop to redraw (the "…" prompt turns
        back into "›"). Invalidate is not thread-safe; call_soon_threadsafe is."""
        loop = self._event_loop
        if loop is None or loop.is_closed():
            return

        def redraw() -> None:
            if self.session.app.is_running:
                self.session.app.invalidate()

        with contextlib.suppress(RuntimeError):  # the loop closed between check and call
            loop.call_soon_threadsafe(redraw)

    async def _loop(self) -> int:
        self._event_loop = asyncio.get_running_loop()
        # Once the prompt is drawn the model's SDK loads while you type (earlier, a thread
        # importing it would slow the drawing); later draws find nothing left to start.
        self.session.app.after_render += lambda _app: start_loading()
        if self.controller.extensions is not None:  # MCP servers connect while you type
            self._event_loop.call_later(0.3, self.controller.extensions.start)
        self._mark_idle()
        while True:
            fill, self._fill = self._fill, None
            # pre_run: called after the prompt's setup, right before its raw mode.
            first, self._before_first_prompt = self._before_first_prompt, None
            text = await self.session.prompt_async(self._message, default=fill or "",
                                                   pre_run=first)
            if text is None:  # Ctrl-D, or Ctrl-C twice
                if self.controller.is_running:
                    self.controller.abort()
                return 0
            stripped = text.strip()
            if not stripped:
                if not self.controller.is_running:
                    self._mark_idle()
                continue
            if stripped.startswith("/"):
                if not await self._command(stripped):
                    return 0
                worker = self._worker  # a custom command started a run: it marks idle
                if not self.controller.is_running and not (worker and worker.is_alive()):
                    self._mark_idle()
            elif self._answer(stripped):
                continue
            elif self.controller.is_running:
                self._queue(stripped)
            else:
                self._start_run(text)  # the worker marks the REPL idle when the run ends

    def _queue(self, text: str) -> None:
        if self._kind == "follow_up":
            self.controller.follow_up(text)
            self._print(f"(queued as a follow-up: {text})", "dim")
        else:
            self.controller.steer(text)
            self._print(f"(queued as steering: {text})", "dim")

    def _start_run(self, text: str) -> None:
        if busy(self.controller):
            self._print("attempts are running: wait for them, or /stop (/attempts shows "
                        "them)", "red")
            self._mark_idle()
            return
        content = with_attachments(text, self.controller.cwd, self._print)  # @shot.png
        if content is None:
            self._mark_idle()
            return
        from mulligan.frontends.live import LiveRenderer

        events = self.controller.run_prompt(content)
        renderer = LiveRenderer(self.console, line_buffered=self._patch_stdout,
                                markdown=self._patch_stdout)
        self._renderer = renderer
        if self.controller.permissions is not None:
            renderer.diff_of = self.controller.permissions.preview
            renderer.asked = self.controller.permissions.needs_asking

        def work() -> None:
            try:
                for event in events:
                    renderer.render(event)
                    if event["type"] == "turn_end":  # the status line counts each reply
                        self._refresh_status()
            except Exception as exc:  # a listener (the saver) failed: say so, keep the REPL
                self._print(f"the run stopped: {exc}", "bold red")
            finally:
                renderer.finish()
                self._give_back(self.controller.take_queued())
                self._mark_idle()
                self._redraw_soon()

        self._worker = threading.Thread(target=work, name="mulligan-run", daemon=True)
        self._worker.start()

    def _give_back(self, queued: list[str]) -> None:
        """From the worker thread, when a run has ended: messages queued for it that it never
        took (it was aborted, or failed) go back into the input box, to send, change or clear.
        Sent with the next prompt unasked, they would answer a run that is over."""
        if not queued:
            return
        self._print(f"(not sent, back in the input box: {' / '.join(queued)})", "yellow")
        text = "\n".join(queued)
        loop = self._event_loop

        def refill() -> None:
            if self.session.app.is_running:
                buffer = self.session.default_buffer
                buffer.text = f"{buffer.text}\n{text}" if buffer.text.strip() else text
                buffer.cursor_position = len(buffer.text)
            else:  # between prompts: the next one starts with it
                self._fill = text

        if loop is None or loop.is_closed():
            self._fill = text
            return
        with contextlib.suppress(RuntimeError):  # the loop closed between check and call
            loop.call_soon_threadsafe(refill)

    async def _command(self, line: str) -> bool:
        """Do one slash command; False means quit."""
        width = self.width or self.console.width
        # Off the event loop: /back and /edit may wait for the model to write a summary.
        outcome = await self._while_summarising(
            lambda: run_command(self.controller, line, width=width,
                                on_event=self._summary_event))
        while outcome.pick is not None:  # a picker's choice may open another (files)
            outcome = await self._pick(outcome)
        for shown in outcome.lines:
            self._print(shown, "red" if outcome.error else _diff_style(shown) if outcome.diff
                        else None)
        if outcome.recap:  # /resume: where that branch left off, rendered as it was shown
            from mulligan.frontends.live import show_recap

            show_recap(self.console, outcome.recap)
        if outcome.fill is not None:
            self._fill = outcome.fill
        if outcome.send is not None:  # a custom command: its text is the prompt
            if outcome.model:
                model = str(outcome.model)
                switched = _safely(lambda: Outcome([
                    f"model {self.controller.set_model(model)} (the command's own)"]), width)
                for shown in switched.lines:
                    self._print(shown, "red" if switched.error else "dim")
                if switched.error:
                    return True
            self._start_run(outcome.send)
        return not outcome.quit

    async def _while_summarising(self, action: Callable[[], Outcome]) -> Outcome:
        """Do `action` (which may call the model for a summary) off the event loop, with
        Ctrl-C (SIGINT: no prompt is reading keys meanwhile) aborting the summary."""
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGINT, self.controller.abort)
        try:
            return await asyncio.to_thread(_safely, action, 0)
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signal.SIGINT)

    def _summary_event(self, event: dict[str, Any]) -> None:
        if event.get("type") == "compaction_start":
            self._print(f"compacting the conversation ({event.get('tokens_before')} tokens)… "
                        "(Ctrl-C: the summary is made from the entries instead)", "yellow")
        if event.get("type") == "branch_summary_start":
            self._print(f"summarising the attempt {event.get('from_id')} leaves… (Ctrl-C "
                        "aborts: a plain branch line instead)", "dim")

    async def _pick(self, outcome: Outcome) -> Outcome:
        """Ask what the outcome's picker asks (a list, one key, the tree to walk), then do
        what the answer means, off the event loop (it may call the model for a summary)."""
        for shown in outcome.lines:
            self._print(shown)
        pick, keys_in, screen = outcome.pick, self.session.input, self.session.output
        answer: str | None
        if isinstance(pick, KeyQuestion):
            answer = await one_key(pick.keys, width=self.width or self.console.width,
                                   input=keys_in, output=screen)
        elif isinstance(pick, TreeWalk):
            answer = await self._walk(pick)
        elif pick is not None and pick.choices:
            options = [(value, f"{value if pick.show_values else ''}  "
                               f"{' '.join(words.split())[:90]}".strip())
                       for value, words in pick.choices]
            chooser: ChoiceInput[str] = ChoiceInput(
                message="↑/↓ and Enter to choose, a number to jump, Ctrl-C to cancel:",
                options=options, show_numbers=True)
            try:
                # The picker reads the REPL's own input (a pipe, in tests).
                with create_app_session(input=keys_in, output=screen):
                    answer = await chooser.prompt_async()
            except (KeyboardInterrupt, EOFError):
                answer = None
        else:
            return Outcome()
        if pick is None or answer is None:
            return Outcome(["cancelled"], cancelled=True)
        chosen = answer
        finished = await self._while_summarising(
            lambda: pick.then(chosen, self._summary_event))
        if finished.fill is None and not (finished.error or finished.cancelled):
            finished.fill = outcome.fill  # /edit's text goes into the box once gone back
        return finished

    async def _walk(self, walk: TreeWalk) -> str | None:
        """/tree go: walk the tree until Enter (an entry id) or Esc (None); `l` and `/` ask
        for their words below it and come back to where the cursor was."""
        at, query, folded = None, "", set[str]()
        asker: PromptSession[str] = PromptSession(input=self.session.input,
                                                  output=self.session.output)
        while True:
            chosen = await walk_tree(walk.entries, walk.tip, input=self.session.input,
                                     output=self.session.output, start=at, query=query,
                                     folded=folded)
            if chosen is None:
                return None
            action, at = chosen
            if action == "go":
                return at
            try:
                words = await asker.prompt_async(
                    f"label for {at} (empty: none): " if action == "label" else "search: ")
            except (KeyboardInterrupt, EOFError):
                continue
            if action == "search":
                query = words.strip()
                continue
            try:
                walk.label(at, words.strip())
            except (Refused, ValueError, OSError) as exc:
                self._print(str(exc), "red")
                continue
            walk.entries[:] = [*walk.entries, {"id": f"label:{at}", "type": "label",
                                               "parent_id": None, "target_id": at,
                                               "label": words.strip()}]


# The live area is the reply being written, not a bar: plain, with the status line
# standing out under it.
STYLE = Style.from_dict({"bottom-toolbar": "noreverse", "bottom-toolbar.text": "",
                         "spinner": "fg:ansicyan", "status": "reverse"})


class _Pending:
    """A permission question on screen, and its answer once typed."""

    def __init__(self, question: Question) -> None:
        self.question = question
        self.done = threading.Event()
        self.answer: Answer | None = None


def _diff_style(line: str) -> str | None:
    if line.startswith(("+++", "---")):
        return "bold"
    if line.startswith("@@"):
        return "cyan"
    return "green" if line.startswith("+") else "red" if line.startswith("-") else None


def _safely(action: Callable[[], Outcome], width: int) -> Outcome:
    try:
        result: Outcome = action()
        return result
    except (Refused, LeaseHeld, ValueError, OSError) as exc:
        return Outcome([str(exc)], error=True)
