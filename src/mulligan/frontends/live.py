"""Live terminal rendering of a run: a fold over events onto a rich Console.

Assistant text is written as it streams; a tool call is one dim line (``▸ read main.py``) and
its result a few indented lines, folded past `fold_lines` with a count of the rest; errors are
red, an aborted reply says so. While bash runs, what it prints is kept in `running` (its
`tool_execution_update` events: the REPL's live area draws its last lines), then given up
for the folded result, printed once. A tool's output is shown `printable`: no escape
sequence from a command reaches the terminal. User messages queued during the run
(steering, follow-ups) are shown when the loop takes them. `finish()` says whether the run
ended well. Never touches the transcript or the session file.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.text import Text

from mulligan.brief import arguments_text
from mulligan.frontends.terminal.running import RunningOutput, printable
from mulligan.frontends.terminal.stream import MarkdownStream
from mulligan.messages import content_text, text_of


def compaction_line(event: Mapping[str, Any]) -> str:
    """What a compaction_end event says, in a line."""
    if event.get("error"):
        return f"not compacted: {event['error']}"
    return (f"compacted: {event.get('tokens_before')} → {event.get('tokens_after')} tokens "
            "(the summary is the session's newest compaction entry)")


class LiveRenderer:
    """render(event) for each event of one run, then finish() -> True unless the last assistant
    message failed. `show_prompt` echoes the run's first user message (the REPL does not: the
    user just typed it)."""

    def __init__(self, console: Console, *, fold_lines: int = 4, show_prompt: bool = False,
                 line_buffered: bool = False, markdown: bool = False):
        self.console = console
        # The REPL on a terminal: a reply's finished blocks are printed rendered as Markdown
        # as they end; the block being written shows raw in the live area under the prompt.
        self.markdown = markdown
        self.reply = MarkdownStream(console)  # the streamed reply (markdown mode)
        self.thinking = ""  # the thinking streamed so far (markdown mode: folded)
        self.folded: list[str] = []  # the last folded thinking or output, whole (Ctrl-O)
        self.phase = "starting"  # what the run is doing: for the toolbar's spinner
        self.since = time.monotonic()  # when that began
        self.streamed = 0  # characters the model has sent in this run
        # Under a live prompt (patch_stdout) a partial line is overwritten when the prompt is
        # redrawn, so the REPL streams whole lines; a plain terminal gets every delta.
        self.line_buffered = line_buffered
        self._pending = ""
        self._pending_style: str | None = None
        self.fold_lines = fold_lines
        self.show_prompt = show_prompt
        # The REPL's: the real diff a write or edit would make (Permissions.preview), and
        # whether the call is about to be asked about (its diff is then shown once, with the
        # question, not here too).
        self.diff_of: Callable[[str, Mapping[str, Any]], list[str]] | None = None
        self.asked: Callable[[str, Mapping[str, Any]], bool] | None = None
        self.last: dict[str, Any] | None = None
        # The running tool call's output so far (None between calls): for the live area.
        self.running: RunningOutput | None = None
        self._midline = False
        self._streamed = False
        self._users_seen = 0

    def _write(self, text: str, style: str | None = None) -> None:
        if not text:
            return
        if self.line_buffered:
            if style != self._pending_style:
                self._flush_pending()
                self._pending_style = style
            self._pending += text
            if "\n" not in self._pending:
                return
            head, _, self._pending = self._pending.rpartition("\n")
            text = head + "\n"
        self.console.print(Text(text, style=style or ""), end="", soft_wrap=True)
        self._midline = not text.endswith("\n")

    def _flush_pending(self) -> None:
        # The rest of a line, and its end, in one write: a partial line would be redrawn over.
        pending, self._pending = self._pending, ""
        if pending:
            self.console.print(Text(pending, style=self._pending_style or ""), soft_wrap=True)
            self._midline = False

    def _line(self, text: str | Text, style: str | None = None) -> None:
        self._flush_pending()
        if self._midline:
            self.console.print()
            self._midline = False
        shown = text if isinstance(text, Text) else Text(text, style=style or "")
        self.console.print(shown)  # wrapped by rich, at words: the terminal would cut them

    def _phase(self, phase: str) -> None:
        self.phase, self.since = phase, time.monotonic()

    def partial(self) -> str:
        """The reply's unfinished block so far (markdown mode): what the live area shows,
        raw, until the block ends and is printed rendered."""
        return self.reply.tail()

    def render(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start":
            self._streamed = False
            self._phase("waiting for the model")
        elif kind == "message_update" and self.markdown:
            delta = event.get("delta") or {}
            text = str(delta.get("delta", ""))
            self.streamed += len(text)
            kind_of = {"text": "writing", "thinking": "thinking"}.get(
                str(delta.get("type")), "preparing a tool call")
            if delta.get("type") == "text":
                for line in self.reply.add(text):
                    self._line(line)
            elif delta.get("type") == "thinking":
                self.thinking += text
            if self.phase != kind_of:
                self._phase(kind_of)
        elif kind == "message_update":
            delta = event.get("delta") or {}
            if delta.get("type") == "text":
                self._streamed = True
                self._write(delta.get("delta", ""))
            elif delta.get("type") == "thinking":
                self._streamed = True
                self._write(delta.get("delta", ""), "dim italic")
        elif kind == "message_end":
            self._message_end(event["message"])
        elif kind == "tool_execution_start":
            self._call(str(event.get("tool_name")), event.get("arguments") or {})
            self._phase(f"running {event.get('tool_name')}")
            self.running = RunningOutput(str(event.get("tool_name")), self.since)
        elif kind == "tool_execution_update":
            if self.running is None:  # an update without its start: begin here
                self.running = RunningOutput(str(event.get("tool_name")), self.since)
            self.running.add(str(event.get("output") or ""))
        elif kind == "tool_execution_end":
            self.running = None  # the live lines give way to the result, printed once
            if event.get("tool_name") == "bash":
                self._bash_result(event.get("result") or {}, bool(event.get("is_error")))
            else:
                self._result(event.get("result") or {}, bool(event.get("is_error")))
        elif kind == "retry":  # the provider waits before trying again: say why and how long
            delay = float(event.get("delay") or 0)
            said = (f"{event.get('reason')}; retrying in {delay:.0f} s "
                    f"({event.get('attempt')}/{event.get('of')})")
            self._line(f"↻ {said}", "yellow")
            self._phase(f"retrying in {delay:.0f} s ({event.get('attempt')}/{event.get('of')})")
        elif kind == "compaction_start":
            self._line(f"compacting the conversation ({event.get('tokens_before')} tokens, "
                       f"{event.get('reason')})…", "yellow")
        elif kind == "compaction_end":
            self._line(compaction_line(event), "yellow" if not event.get("error") else "red")
        elif kind in ("hook", "mcp"):  # a hook that ran, an MCP server that is not ready
            bad = event.get("outcome") in ("blocked", "failed") or kind == "mcp"
            self._line(str(event.get("line", kind)), "yellow" if bad else "dim")

    def _message_end(self, message: dict[str, Any]) -> None:
        role = message.get("role")
        if role == "user":
            self._users_seen += 1
            if self._users_seen > 1 or self.show_prompt:
                self._line(Text("› ", style="bold green")
                           + Text(content_text(message.get("content"))))
            return
        if role != "assistant":
            return
        self.last = message
        if self.markdown:
            self._markdown_end(message)
        elif not self._streamed:
            words = text_of(message)  # type: ignore[arg-type]
            if words:
                self._line(words)
        else:
            self._flush_pending()
            if self._midline:
                self.console.print()
                self._midline = False
        self._streamed = False
        self._stopped(message)

    def _stopped(self, message: Mapping[str, Any]) -> None:
        """The line a reply that did not end normally gets, in either mode."""
        reason = message.get("stop_reason")
        if reason == "error":
            # Not "Error: ...": a reply may begin so; this line is Mulligan's own.
            self._line(f"✗ the run stopped: {message.get('error_message', 'it failed')}",
                       "bold red")
        elif reason == "aborted":
            self._line("(aborted)", "yellow")

    def _markdown_end(self, message: Mapping[str, Any]) -> None:
        """Markdown mode: the finished reply, rendered (code highlighted, words wrapped),
        with its thinking folded into a line."""
        if self.thinking:
            self._fold(self.thinking.splitlines())
            self._line(f"· thought for {len(self.thinking)} characters (Ctrl-O shows it)",
                       "dim italic")
        streamed = self.reply.text
        for line in self.reply.end():
            self._line(line)
        words = text_of(message)  # type: ignore[arg-type]
        if words.strip() and not streamed.strip():  # a reply that came whole, not streamed
            stream = MarkdownStream(self.console)
            for line in [*stream.add(words), *stream.end()]:
                self._line(line)
        self.thinking = ""
        self._phase("waiting for the model")

    def _fold(self, lines: list[str]) -> None:
        self.folded = lines

    @property
    def _expand(self) -> str:
        return " (Ctrl-O shows them)" if self.markdown else ""

    def _call(self, name: str, arguments: Any) -> None:
        """One line for a tool call, readable: bash's command, a write's or an edit's file
        with the lines it puts in (green) and takes out (red); others' arguments in brief."""
        head = Text("▸ ", style="cyan")
        if not isinstance(arguments, Mapping) or name not in ("bash", "write", "edit"):
            self._line(head + Text(f"{name} {arguments_text(arguments, room=100)}",
                                   style="dim"))
            return
        if name == "bash":
            command = str(arguments.get("command", ""))
            first, _, more = command.partition("\n")
            self._line(head + Text("bash ", style="dim") + Text(f"$ {printable(first)}",
                                                                style="bold")
                       + Text(" …" if more else "", style="dim"))
            return
        path = str(arguments.get("path", ""))
        if self.diff_of is not None:
            self._real_diff(head, name, path, self.diff_of(name, arguments),
                            self.asked is not None and self.asked(name, arguments))
            return
        removed = str(arguments.get("old_text", "")).splitlines() if name == "edit" else []
        added = str(arguments.get("new_text" if name == "edit" else "content", "")).splitlines()
        self._line(head + Text(f"{name} ", style="dim") + Text(path, style="bold")
                   + Text(f"  -{len(removed)} +{len(added)}", style="dim"))
        for sign, lines, style in (("-", removed, "red"), ("+", added, "green")):
            for line in lines[: self.fold_lines]:
                self._line(Text(f"  {sign} {line}", style=style))
            if len(lines) > self.fold_lines:
                self._line(Text(f"  {sign} … {len(lines) - self.fold_lines} more", style=style))

    def _real_diff(self, head: Text, name: str, path: str, diff: list[str],
                   asked: bool) -> None:
        """A write or edit as the diff it makes to the file as it is now (a write over an
        existing file is its real change, not every line added); nothing but the header
        line when the permission question will show the diff."""
        body = [line for line in diff if not line.startswith(("---", "+++"))]
        removed = sum(1 for line in body if line.startswith("-"))
        added = sum(1 for line in body if line.startswith("+"))
        self._line(head + Text(f"{name} ", style="dim") + Text(path, style="bold")
                   + Text(f"  -{removed} +{added}", style="dim"))
        if asked:
            return
        changed = [line for line in body if not line.startswith("@@")]
        for line in changed[: self.fold_lines * 2]:
            style = "green" if line.startswith("+") else "red" if line.startswith("-") \
                else "dim"
            self._line(Text(f"  {line}", style=style))
        if len(changed) > self.fold_lines * 2:
            self._fold(body)
            self._line(Text(f"  … {len(changed) - self.fold_lines * 2} more lines"
                            f"{self._expand}", style="dim"))

    def _bash_result(self, result: dict[str, Any], is_error: bool) -> None:
        """bash's output from its end, where the verdict is, and a red exit code."""
        lines = printable(content_text(result.get("content"))).splitlines() or ["(no output)"]
        verdict = lines[-1] if lines[-1].startswith("[exit code ") or lines[-1].startswith(
            "[Timed out") or lines[-1].startswith("[killed by signal") else None
        if verdict is not None:
            lines = lines[:-1]
        hidden = len(lines) - self.fold_lines
        if hidden > 0:
            self._fold(lines)
            self._line(Text(f"  │ … {hidden} earlier line{'s' if hidden > 1 else ''}"
                            f"{self._expand}", style="cyan dim"))
        for line in lines[-self.fold_lines:]:
            self._line(Text("  │ ", style="cyan") + Text(line, style="red" if is_error
                                                          else "dim"))
        if verdict is not None:
            code = verdict.removeprefix("[exit code ").rstrip("]")
            shown = f"exit {code}" if verdict.startswith("[exit code ") else verdict.strip("[]")
            self._line(Text(f"  └ {shown}", style="bold red"))

    def _result(self, result: dict[str, Any], is_error: bool) -> None:
        lines = printable(content_text(result.get("content"))).splitlines() or ["(no output)"]
        style = "red" if is_error else "dim"
        for line in lines[: self.fold_lines]:
            self._line(Text("  │ ", style="cyan") + Text(line, style=style))
        hidden = len(lines) - self.fold_lines
        if hidden > 0:
            self._fold(lines)
            self._line(Text(f"  │ … {hidden} more line{'s' if hidden > 1 else ''}"
                            f"{self._expand}", style="cyan dim"))

    def replay(self, messages: Sequence[Mapping[str, Any]]) -> None:
        """Show finished messages as the run showed them (what resuming prints): the user's
        words after `› `, replies rendered as Markdown, tool calls and results as their
        lines, thinking folded into a line, an aborted or failed reply marked."""
        for message in messages:
            role = message.get("role")
            if role == "user":
                self._line(Text("› ", style="bold green")
                           + Text(content_text(message.get("content"))))
            elif role == "toolResult":
                result = {"content": message.get("content")}
                if message.get("tool_name") == "bash":
                    self._bash_result(result, bool(message.get("is_error")))
                else:
                    self._result(result, bool(message.get("is_error")))
            elif role == "assistant":
                self._replay_reply(message)

    def _replay_reply(self, message: Mapping[str, Any]) -> None:
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        for block in blocks:
            if not isinstance(block, Mapping):
                continue
            kind = block.get("type")
            if kind == "text" and str(block.get("text") or "").strip():
                stream = MarkdownStream(self.console)
                for line in [*stream.add(str(block["text"])), *stream.end()]:
                    self._line(line)
            elif kind == "thinking" and block.get("thinking"):
                self._line(f"· thought for {len(str(block['thinking']))} characters",
                           "dim italic")
            elif kind == "toolCall":
                self._call(str(block.get("name")), block.get("arguments") or {})
        self._stopped(message)

    def finish(self) -> bool:
        self._flush_pending()
        if self._midline:
            self.console.print()
            self._midline = False
        return self.last is not None and self.last.get("stop_reason") not in ("error", "aborted")


def show_recap(console: Console, messages: Sequence[Mapping[str, Any]],
               exchanges: int = 3) -> None:
    """Where a resumed branch left off: its last `exchanges` exchanges as the run showed
    them (`LiveRenderer.replay`), after a line counting the earlier messages."""
    users = [at for at, m in enumerate(messages) if m.get("role") == "user"]
    start = users[-exchanges] if len(users) >= exchanges else 0
    if start > 0:
        console.print(Text(f"… {start} earlier messages", style="dim"))
    LiveRenderer(console, markdown=True).replay(messages[start:])
