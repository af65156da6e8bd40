"""The `bash` tool: run one command line in the workspace and return what it printed.

The command runs as `bash -c` in a session (and process group) of its own, stdin from
/dev/null, stdout and stderr merged into one pipe. A timeout, or the abort event being set,
kills the whole group -- every process the command started, not just bash -- and says so. A
command that exits non-zero has still run: its exit code is news in the content, not a tool
error. Output is held to the budget by keeping its end, where the verdict is; memory stays
bounded however much a command prints.
"""

from __future__ import annotations

import codecs
import contextlib
import math
import os
import signal
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from mulligan.tools.base import Tool, ToolError
from mulligan.tools.budget import MAX_BYTES, MAX_LINES, cut_utf8_tail, truncate_tail
from mulligan.tools.sandbox import Sandbox
from mulligan.tools.workspace import Root, Workspace

if TYPE_CHECKING:  # subprocess and selectors come with the first command, not the tool
    import subprocess

__all__ = ["CommandRun", "CommandTimedOut", "bash_tool", "run_command"]

_POLL = 0.05  # seconds between looks at the abort event and the clock while waiting for output
# Every command's processes inherit MULLIGAN_COMMAND=<a fresh id>: how the ones that leave its
# process group (setsid, daemons) are found again when the command must be killed.
_MARKER = "MULLIGAN_COMMAND"
_GRACE = 0.5  # seconds the output may stay open after bash exits (background processes)


class CommandTimedOut(ToolError):
    """The command outlived its timeout; the message carries what it had printed."""


@dataclass
class CommandRun:
    """How a command went. `output` is the end of what it printed (at most `keep` bytes; a line
    cut at the front is dropped whole unless it is the only one), `total_lines` counts
    everything it printed. `ended` is
    "exited", "timeout" or "aborted"; `exit_code` is None unless it exited. `held_open` is True
    when background processes still held the output after bash exited (they were stopped).
    `escaped` counts the processes that had left the command's process group and were found
    and killed by the marker in their environment."""

    output: str
    total_lines: int
    ended: Literal["exited", "timeout", "aborted"]
    exit_code: int | None
    held_open: bool
    escaped: int = 0  # processes outside the group (setsid) killed by their marker


class _Tail:
    """The last `keep` bytes of a stream, plus a count of its lines; each chunk also handed,
    decoded, to `on_output` (when given) as it is taken."""

    def __init__(self, keep: int, on_output: Callable[[str], None] | None = None) -> None:
        self.keep, self.data, self.size, self.newlines = keep, bytearray(), 0, 0
        self.ends_in_newline = True
        self.on_output = on_output
        # A character split between two reads is decoded whole, with the second.
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def add(self, chunk: bytes) -> None:
        if self.on_output is not None:
            text = self._decoder.decode(chunk)
            if text:
                self.on_output(text)
        self.size += len(chunk)
        self.newlines += chunk.count(b"\n")
        self.ends_in_newline = chunk.endswith(b"\n")
        self.data += chunk
        if len(self.data) > self.keep:
            del self.data[:len(self.data) - self.keep]

    def flush(self) -> None:
        """The output has ended: bytes of a character it never finished go out replaced."""
        if self.on_output is not None:
            text = self._decoder.decode(b"", final=True)
            if text:
                self.on_output(text)

    def text(self) -> tuple[str, int]:
        """(decoded kept text, total lines)."""
        data = bytes(self.data)
        cut = data.find(b"\n")
        if self.size > len(data) and -1 < cut < len(data) - 1:
            # The first kept line is a fragment: drop it rather than show half a line. Unless
            # it is all there is (the last line alone is longer than `keep`): then it stays,
            # and the bash tool shows its end and says the line was cut.
            data = data[cut + 1:]
        total = self.newlines + (0 if self.ends_in_newline or not self.size else 1)
        return data.decode("utf-8", errors="replace"), total


def run_command(
    command: str, cwd: str | os.PathLike[str], *, timeout: float,
    abort: threading.Event | None = None, keep: int = 2 * MAX_BYTES,
    env: Mapping[str, str] | None = None, sandbox: Sandbox | None = None,
    on_output: Callable[[str], None] | None = None,
) -> CommandRun:
    """Run `command` with `bash -c` in `cwd` and wait until it ends, times out, or `abort` is
    set; on the last two the whole process group is killed, and so is every process that
    left the group (setsid) but still carries the command's marker in its environment.
    `env` is the child's environment (default: this process's); `sandbox` runs it under
    bubblewrap. Never leaves a child of its own running past a timeout or an abort, except
    one that cleared its own environment.

    `on_output`, when given, is called on this thread with each piece of output as it is
    read (decoded as UTF-8, a bad byte replaced; a character split between reads comes
    whole with the second), everything the command prints, however much: it is for a live
    view. It must return at once and never raise (the reader waits for it); what it is
    handed changes nothing in the `CommandRun` returned."""
    import subprocess
    import uuid  # with the first command, not when the tool is made (uuid imports platform)

    marker = f"{_MARKER}={uuid.uuid4().hex}"
    name, _, value = marker.partition("=")
    argv = sandbox.argv(cwd, command) if sandbox is not None else ["bash", "-c", command]
    proc = subprocess.Popen(
        argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, start_new_session=True,
        env={**(os.environ if env is None else env), name: value})
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    tail = _Tail(keep, on_output)
    deadline = time.monotonic() + timeout
    try:
        ended, held_open = _wait(proc, fd, tail, deadline, abort)
    except BaseException:  # e.g. KeyboardInterrupt: never leave the command running behind us
        _kill_group(proc.pid)
        _kill_marked(marker.encode(), proc.pid)
        proc.wait()
        proc.stdout.close()
        raise
    escaped = 0
    if ended != "exited" or held_open:
        _kill_group(proc.pid)
        escaped = _kill_marked(marker.encode(), proc.pid)
        _drain(fd, tail)
    proc.wait()
    proc.stdout.close()
    tail.flush()
    output, total = tail.text()
    return CommandRun(output, total, ended, proc.returncode if ended == "exited" else None,
                      held_open, escaped)


def _wait(
    proc: subprocess.Popen[bytes], fd: int, tail: _Tail, deadline: float,
    abort: threading.Event | None,
) -> tuple[Literal["exited", "timeout", "aborted"], bool]:
    """Read output into `tail` until bash has exited and the output is closed, the deadline
    passes, or `abort` is set: (how it ended, whether background processes held the output)."""
    import selectors
    import subprocess

    eof, exited_at = False, None
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            if abort is not None and abort.is_set():
                return "aborted", False
            if time.monotonic() >= deadline:
                return "timeout", False
            if not eof:
                if selector.select(_POLL):
                    chunk = _read(fd)
                    if chunk:
                        tail.add(chunk)
                    elif chunk is not None:
                        eof = True
                        selector.unregister(fd)
            else:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(_POLL)
            if proc.poll() is not None:
                if eof:
                    return "exited", False
                exited_at = exited_at or time.monotonic()
                if time.monotonic() - exited_at >= _GRACE:
                    return "exited", True  # background processes still hold our pipe


def bash_tool(
    root: Root, *, timeout: float = 120.0, max_timeout: float = 1800.0,
    max_lines: int = MAX_LINES, max_bytes: int = MAX_BYTES, hide_env: Collection[str] = (),
    sandbox: Sandbox | None = None,
) -> Tool:
    """The `bash` tool over the workspace `root`. `timeout` is the default limit in seconds; the
    model may ask for another per call, up to `max_timeout` (a larger one, infinity included,
    is held to it; NaN is the default). The command runs without the variables named in
    `hide_env` (the app hides the provider keys there); with `sandbox`, under bubblewrap
    (`tools.sandbox`). Interruptible: an abort event kills the command. Streams: its output
    goes to `on_output` as it is printed (`run_command`), the result is the same."""
    ws = Workspace.of(root)
    hidden = frozenset(hide_env)

    def execute(arguments: dict[str, Any], abort: threading.Event | None = None,
                on_output: Callable[[str], None] | None = None) -> str:
        notes = []
        seconds = float(arguments.get("timeout", timeout))
        if math.isnan(seconds):
            notes.append(f"[timeout NaN is no number of seconds: used the default, {timeout:g} "
                         "s]")
            seconds = timeout
        elif seconds > max_timeout:
            notes.append(f"[timeout {seconds:g} s is over the maximum: held to "
                         f"{max_timeout:g} s]")
            seconds = max_timeout
        env = {k: v for k, v in os.environ.items() if k not in hidden}
        run = run_command(arguments["command"], ws.root, timeout=seconds, abort=abort,
                          keep=2 * max_bytes, env=env, sandbox=sandbox, on_output=on_output)
        kept = truncate_tail(run.output, max_lines, max_bytes)
        text = kept.text
        if kept.shown == 0 and run.output:  # the last line alone is over the budget
            text = cut_utf8_tail(run.output, max_bytes)
            notes.append(f"[Output truncated: its last line is over the {max_bytes}-byte "
                         f"budget; only its last {len(text.encode())} bytes are shown. Narrow "
                         "the command, or redirect the output to a file and read parts of it.]")
        elif kept.shown < run.total_lines:
            notes.append(f"[Showing the last {kept.shown} of {run.total_lines} lines of output. "
                         "Narrow the command (grep, head, tail), or redirect the output to a "
                         "file and read it with offset.]")
        if run.escaped:
            notes.append(f"[{run.escaped} process(es) that had left the command's process "
                         "group (setsid) were killed too.]")
        if run.held_open:
            notes.append("[Background processes still had the output open when the command "
                         "ended, so they were stopped. To keep one running, redirect its "
                         "output: `cmd > log.txt 2>&1 &`.]")
        if run.ended == "timeout":
            notes.append(f"[Timed out after {seconds:g} s: the command and every process it "
                         "started were killed. Pass a larger timeout, or run it in the "
                         "background with its output sent to a file.]")
        elif run.ended == "aborted":
            notes.append("[Aborted: the command and every process it started were killed.]")
        elif run.exit_code is not None and run.exit_code < 0:
            notes.append(f"[killed by signal {_signal_name(-run.exit_code)}]")
        elif run.exit_code:
            notes.append(f"[exit code {run.exit_code}]")
        if not text and not notes:
            return "(no output)"
        if text and notes and not text.endswith("\n"):
            text += "\n"
        result = text + "\n".join(notes)
        if run.ended == "timeout":
            raise CommandTimedOut(result)
        return result

    return {
        "name": "bash",
        "description": (
            "Run a shell command with bash in the workspace folder and return its output, "
            "stdout and stderr together. Stdin is empty, so interactive commands fail: pass "
            "flags such as -y. A non-zero exit is reported as '[exit code N]' at the end. Only "
            f"the last {max_lines} lines or {max_bytes} bytes of output come back; for long "
            "output, narrow the command (grep, head, tail) or redirect it to a file and read "
            f"that. The command is killed after `timeout` seconds (default {timeout:g}), along "
            "with every process it started."),
        "parameters": {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command line to run."},
                "timeout": {"type": "number", "exclusiveMinimum": 0,
                            "description": f"Seconds before it is killed. Default {timeout:g}, "
                                           f"at most {max_timeout:g}."},
            },
            "required": ["command"],
            "additionalProperties": False,
        },
        "execute": execute,
        "interruptible": True,
        "streams": True,
    }


def _read(fd: int) -> bytes | None:
    """A chunk from the pipe; b"" at end of output; None when nothing is there after all."""
    try:
        return os.read(fd, 65536)
    except BlockingIOError:
        return None


def _kill_group(pgid: int) -> None:
    """SIGKILL every process in the group; a group that is already gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _kill_marked(marker: bytes, group: int) -> int:
    """SIGKILL every process whose environment holds `marker`; how many of them were outside
    the process group `group` (which the caller has killed already). Looks again a few
    times, since a process may fork once more while the others die."""
    killed: set[int] = set()
    escaped: set[int] = set()
    for _ in range(5):
        found = set()
        try:
            pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
        except OSError:  # no /proc: nothing can be found this way
            return 0
        for pid in pids:
            try:
                with open(f"/proc/{pid}/environ", "rb") as handle:
                    if marker in handle.read().split(b"\0"):
                        found.add(pid)
            except OSError:  # gone, or not ours to read
                continue
        if found <= killed:  # none, or only ones already killed and not yet gone
            break
        for pid in found - killed:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if os.getpgid(pid) != group:
                    escaped.add(pid)
                os.kill(pid, signal.SIGKILL)
        killed |= found
        time.sleep(0.02)
    return len(escaped)


def _drain(fd: int, tail: _Tail) -> None:
    """Collect what the killed processes had already written, without waiting for more than a
    moment: a process outside the group (setsid) may hold the pipe open indefinitely."""
    import selectors

    deadline = time.monotonic() + 1.0
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while time.monotonic() < deadline and selector.select(_POLL):
            chunk = _read(fd)
            if not chunk:
                if chunk is not None:
                    return
                continue
            tail.add(chunk)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)
