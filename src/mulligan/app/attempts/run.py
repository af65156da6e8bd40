"""Running N attempts at once from one entry X of a session, each in its own folder.

In: the session's log (its lease held by the caller), the snapshot store, the working folder,
the entry X, the task, one model per attempt, `setup(model, folder)` giving the system prompt
and the tools of a run in that folder (with their permissions and sandbox), and an optional
check command. Out: `Attempts`, whose `attempts` say, live, what each one is
doing (for the frontends to draw), and, in the session file, each attempt's branch under X:
its first user message entry carries ``"attempt": {"group", "index", "of", "model"}``, its
messages carry workspace checkpoints of its own folder, a `check` entry ends it when a check
was given, and one `branch` line back to X is written when they have all ended.

Never: write into the working folder (the attempts work in copies under
``$MULLIGAN_HOME/attempts/``), or write an attempt's entry anywhere but under its own last
entry. An attempt's failure (a provider error, a tool error, an exception) is its own: it is
recorded and the others go on. `stop(k)` / `stop()` aborts one or all (the transcript stays
valid, as for Ctrl-C).
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mulligan.app.attempts.folders import SHARED, folder_for, make_folder
from mulligan.app.models import model_label
from mulligan.app.workspace.checkpoints import Checkpoints, expected_tree
from mulligan.app.workspace.store.snapshots import Store, changed_paths
from mulligan.brief import call_text
from mulligan.harness import Harness
from mulligan.messages import Message
from mulligan.session import SessionLog
from mulligan.session.view import messages_of
from mulligan.tools import Tool
from mulligan.tools.budget import truncate_tail
from mulligan.wire import Event, Model

__all__ = ["Attempt", "Attempts", "CHECK_TIMEOUT", "run_check"]

CHECK_TIMEOUT = 600.0  # seconds a check may take; then its process group is killed


@dataclass
class Attempt:
    """One attempt, as it goes (read by the frontends; written by its own thread)."""

    index: int
    of: int
    model: Model
    folder: Path
    model_name: str = ""
    doing: str = "starting"
    turns: int = 0
    tokens: int = 0
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None
    error: str | None = None
    check: dict[str, Any] | None = None
    first_id: str | None = None
    last_id: str | None = None
    harness: Harness | None = None

    @property
    def seconds(self) -> float:
        return (self.ended or time.monotonic()) - self.started

    @property
    def passed(self) -> bool:
        """Finished without error, and passed the check if there was one."""
        return self.ended is not None and self.error is None and (
            self.check is None or self.check.get("exit_code") == 0)


class Attempts:
    """N attempts from entry `fork` (see the module docstring). `start()` makes the folders and
    starts one thread per attempt; `wait()` joins them and writes the branch line back to X."""

    def __init__(self, log: SessionLog, store: Store, cwd: Path, home: Path, fork: str,
                 text: str, models: Sequence[Model], *,
                 setup: Callable[[Model, Path], tuple[str, list[Tool]]],
                 check: str | None = None, check_timeout: float = CHECK_TIMEOUT,
                 redact: Callable[[Message], Message] | None = None,
                 share: Sequence[str] = SHARED,
                 on_change: Callable[[Attempt], None] | None = None,
                 on_done: Callable[[Attempts], None] | None = None) -> None:
        if not models:
            raise ValueError("attempts need at least one model")
        self.log, self.store, self.cwd, self.home = log, store, Path(cwd), Path(home)
        self.fork, self.text, self.check = fork, text, check
        self.check_timeout = check_timeout
        self.group = time.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)
        self._setup, self._redact = setup, redact
        self._share, self._on_change, self._on_done = tuple(share), on_change, on_done
        self._closing = threading.Lock()
        self.attempts = [Attempt(k + 1, len(models), m, folder_for(home, self.group, k + 1),
                                 model_name=model_label(m)) for k, m in enumerate(models)]
        self._threads: list[threading.Thread] = []
        self._stopped: set[int] = set()
        self.base: str | None = None
        self.closed: str | None = None  # the branch line back to X, once written

    def start(self) -> None:
        """Snapshot the working folder, make every attempt's folder from it, start them."""
        base = self.store.snapshot(self.cwd)
        self.base = base.id
        branch = self.log.branch(self.fork)  # UnknownEntry naming it
        expected = expected_tree(branch)
        outside: list[str] = []
        if expected is not None and expected != base.id:
            outside = changed_paths(self.store.load(expected).files, base.files)
        transcript = messages_of(branch, file=str(self.log.path))
        for attempt in self.attempts:
            make_folder(self.store, base.id, attempt.folder, source=self.cwd,
                        share=self._share)
        for attempt in self.attempts:
            thread = threading.Thread(target=self._run, args=(attempt, transcript, outside),
                                      name=f"attempt-{attempt.index}", daemon=True)
            self._threads.append(thread)
            thread.start()
        # writes the branch line back to X as soon as the last one ends, then says so
        threading.Thread(target=self._close, name="attempts-close", daemon=True).start()

    def _close(self) -> None:
        try:
            self.wait()
        finally:
            if self._on_done is not None:
                self._on_done(self)

    def stop(self, index: int | None = None) -> None:
        """Abort attempt `index` (1-based), or every one (None)."""
        for attempt in self.attempts:
            if index is None or attempt.index == index:
                self._stopped.add(attempt.index)
                if attempt.harness is not None:
                    attempt.harness.abort()

    @property
    def running(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def wait(self, timeout: float | None = None) -> bool:
        """Join the attempts (False: some still run after `timeout`); once all have ended,
        write the one branch line back to X (once)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self._threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        if self.running:
            return False
        with self._closing:
            if self.closed is None:
                self.closed = self.log.branch_to(self.fork)
        return True

    # ---- one attempt, on its own thread ----------------------------------------------------

    def _run(self, attempt: Attempt, transcript: list[Message], outside: list[str]) -> None:
        meta = {"group": self.group, "index": attempt.index, "of": attempt.of,
                "model": attempt.model_name}
        checkpoints = Checkpoints(self.store, attempt.folder)
        checkpoints.close()  # no inotify watch per attempt: its snapshots walk its folder
        assert self.base is not None
        checkpoints.saw(self.base)
        try:
            system, tools = self._setup(attempt.model, attempt.folder)
            harness = Harness(attempt.model, system, tools, messages=transcript,
                              redact=self._redact)
            attempt.harness = harness
            last = [self.fork]

            def record(event: Event) -> None:
                if event.get("type") == "tool_execution_start":
                    checkpoints.listener(event)
                    return
                if event.get("type") != "message_end":
                    return
                message: Any = event["message"]  # type: ignore[typeddict-item]
                extra: dict[str, Any] = dict(checkpoints.meta(message))
                if attempt.first_id is None:
                    extra = {"attempt": meta,
                             "workspace": {"after": self.base, "outside": outside}}
                new = self.log.append_message(message, parent_id=last[0], **extra)
                last[0] = attempt.last_id = new
                if attempt.first_id is None:
                    attempt.first_id = new

            harness.subscribe(record)
            if attempt.index in self._stopped:
                raise _Stopped
            for event in harness.prompt(self.text):
                self._note(attempt, event)
            final = harness.messages[-1] if harness.messages else None
            if final is not None and final.get("role") == "assistant" and \
                    final.get("stop_reason") in ("error", "aborted"):
                attempt.error = str(final.get("error_message") or final.get("stop_reason"))
            if self.check and attempt.last_id is not None and attempt.error is None:
                attempt.doing = "checking"
                self._changed(attempt)
                attempt.check = run_check(self.check, attempt.folder, self.check_timeout)
                attempt.last_id = self.log.append_entry(
                    "check", parent_id=attempt.last_id, attempt=meta, **attempt.check)
        except _Stopped:
            attempt.error = "stopped"
        except Exception as exc:  # noqa: BLE001 -- one attempt's failure is its own
            attempt.error = f"{type(exc).__name__}: {exc}"
        finally:
            attempt.ended = time.monotonic()
            attempt.doing = "error" if attempt.error else "done"
            self._changed(attempt)

    def _note(self, attempt: Attempt, event: Event) -> None:
        if attempt.index in self._stopped and attempt.harness is not None:
            attempt.harness.abort()  # a stop that came before the run began: now it has
        kind = event.get("type")
        if kind == "turn_start":
            attempt.turns += 1
            attempt.doing = "thinking"
        elif kind == "tool_execution_start":
            block = {"name": event.get("tool_name"), "arguments": event.get("arguments")}
            attempt.doing = call_text(block, room=60)
        elif kind == "message_end":
            message: Mapping[str, Any] = event["message"]  # type: ignore[typeddict-item]
            usage = message.get("usage")
            if message.get("role") == "assistant" and isinstance(usage, Mapping):
                attempt.tokens += sum(int(usage.get(k) or 0) for k in (
                    "input", "output", "cache_read", "cache_write"))
        else:
            return
        self._changed(attempt)

    def _changed(self, attempt: Attempt) -> None:
        if self._on_change is not None:
            self._on_change(attempt)


class _Stopped(Exception):
    """The attempt was stopped before it began."""


def run_check(command: str, folder: Path, timeout: float = CHECK_TIMEOUT) -> dict[str, Any]:
    """Run `command` with bash in `folder`, in a process group of its own, for at most
    `timeout` seconds (then the group is killed; exit code 124, as `timeout` gives). Returns
    the check entry's fields: command, exit_code, output (stdout and stderr, the tail kept),
    duration_ms. Never raises for the command's own failure."""
    started = time.monotonic()
    process = subprocess.Popen(["bash", "-c", command], cwd=folder, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               start_new_session=True)
    try:
        out, _ = process.communicate(timeout=timeout)
        code = process.returncode
        note = ""
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, _ = process.communicate()
        code, note = 124, f"\n[the check timed out after {timeout:g} s and was killed]"
    text = truncate_tail(out.decode("utf-8", "replace"), max_lines=200,
                         max_bytes=8000).text + note
    return {"command": command, "exit_code": code, "output": text,
            "duration_ms": int((time.monotonic() - started) * 1000)}
