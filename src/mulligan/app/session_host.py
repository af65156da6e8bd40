"""The session a frontend holds open: its file (or database session, or nothing), the lease
on it, and the `Harness` whose transcript is always computed from it.

`SessionHost` is the half of the `Controller` that is state, not commands: it takes what the
session runs by (`Settings`) and the objects it is handed, opens the session (leasing an
existing one, refusing a damaged one by name), writes session_info just before the first
message, and builds the Harness with the listeners that save every message and record the
working folder. The `Controller` adds the commands. Nothing here prints, draws or asks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mulligan.app.models import model_label
from mulligan.app.permissions import Permissions
from mulligan.app.rewind.compaction import Compaction
from mulligan.app.secrets import Secrets
from mulligan.app.sessions.stores import FileSessions, Sessions
from mulligan.app.settings import Settings
from mulligan.app.spent import Spent
from mulligan.app.workspace.checkpoints import Checkpoints
from mulligan.harness import Harness
from mulligan.messages import Message
from mulligan.prompts import system_prompt
from mulligan.providers.thinking import LEVELS as THINKING_LEVELS
from mulligan.providers.thinking import set_thinking, set_web_search
from mulligan.session import SessionLog, persist_to
from mulligan.session.entries import timestamp
from mulligan.session.stores.memory import MemoryStorage
from mulligan.session.stores.storage import Releasable
from mulligan.tools import Tool
from mulligan.wire import Model

if TYPE_CHECKING:
    from mulligan.app.extensions.setup import Extensions

__all__ = ["Refused", "SessionHost", "scratch", "thinking_of"]


class Refused(ValueError):
    """A command that cannot be done now; the message says why."""


class SessionHost:
    """One interactive (or print-mode) coding session: see the module docstring.

    `settings` is what the session runs by (`app.settings.Settings`: the folder, home,
    max_turns, compaction, ...). `session_file` None means --no-session: nothing is ever
    written, and commands that need the file (tree, back, edit, label, fork, export) are
    refused. `sessions` is where sessions live (default: files under `settings.home`).
    `resolver` turns a model name into a model for `set_model`. `secrets` redacts every
    message before it is recorded (known keys never reach the file) and exports.
    `checkpoints` records the working folder around every file-changing tool call, so going
    back can restore it.
    `permissions` is the mode the (already guarded) tools ask by; `set_permission_mode`
    switches it.
    """

    def __init__(
        self, model: Model, tools: list[Tool], settings: Settings,
        session_file: Path | SessionLog | None = None, *,
        sessions: Sessions | None = None, checkpoints: Checkpoints | None = None,
        permissions: Permissions | None = None, secrets: Secrets | None = None,
        resolver: Callable[[str], Model] | None = None,
        compaction_model: Model | None = None,
        tools_for: Callable[[Path], list[Tool]] | None = None,
        extensions: Extensions | None = None,
    ) -> None:
        self.settings = settings
        self.permissions = permissions
        self.secrets = secrets  # the keys it redacts; `--mode json` scrubs events with them
        # The run's tools rooted in another folder (parallel attempts), asking nothing.
        self.tools_for = tools_for
        # The user's MCP servers, hooks, commands and skills (app/extensions); None: none.
        self.extensions = extensions
        self._base_tools = list(tools)
        self._compaction_model = compaction_model
        self.summarize_on_back = settings.summarize_on_back
        self.cwd = settings.cwd.resolve()
        self.home = settings.home
        self._redact = secrets.redact if secrets is not None else None
        self._redact_text = secrets.redact_text if secrets is not None else None
        self.checkpoints = checkpoints
        self.place: Sessions = sessions or FileSessions(self.home)
        self._resolver = resolver
        self._log: SessionLog | None = None
        # The session's running total of every model call (`spent`): for which log, and the
        # undo of its watch on that log.
        self._spent: tuple[SessionLog | None, Spent, Callable[[], None]] | None = None
        # --no-session: the transcript kept in memory only, so it can still be compacted.
        self._scratch: SessionLog | None = None if session_file is not None else scratch()
        self._lease: Releasable | None = None
        self._pending_name: str | None = None
        # What a frontend should say about the session opened (a database session carried
        # on on another machine, in this folder); None when there is nothing to say.
        self.notice: str | None = None
        self._summary_abort: threading.Event | None = None
        # Resuming goes on with the session's own model unless one was named (--model).
        self.follow_session_model = True
        self.model_notice: str | None = None  # which model, and why (the banner says it)
        # The thinking level (--thinking, /thinking, a resumed session's thinking_change);
        # None: each model's default. `thinking_note`: why the model ignores it, if it does.
        self.thinking: str | None = None
        self.thinking_note: str | None = None
        self.web_search = False  # --web-search: every model of the session gets it
        self.harness = self._harness(model, tools, settings.max_turns, [])
        if session_file is not None:
            self._open(session_file)

    # -- what the session is --------------------------------------------------------------

    @property
    def model(self) -> Model:
        return self.harness.model

    @property
    def log(self) -> SessionLog | None:
        """The session file's log; None for --no-session."""
        return self._log

    @property
    def session_file(self) -> Path | None:
        """The session's file; None for --no-session and for a database session."""
        return self._log.storage.file if self._log is not None else None

    @property
    def where(self) -> str | None:
        """What names the session for a person: its file, or its database and id."""
        return str(self._log.path) if self._log is not None else None

    @property
    def lease(self) -> Releasable | None:
        return self._lease

    @property
    def started(self) -> bool:
        """True once the session holds an entry."""
        return self._log is not None and self._log.storage.exists()

    @property
    def is_running(self) -> bool:
        return self.harness.is_running

    # -- the session file ---------------------------------------------------------------

    def _open(self, session: Path | SessionLog) -> None:
        """Point at `session` (a file, or any log): an existing one is leased now (LeaseHeld
        if another live process has it); a new one is leased when its first entry is
        written."""
        log = session if isinstance(session, SessionLog) else SessionLog(session)
        notice = self.place.folder_notice(log, self.cwd)  # WrongFolder: another folder's
        lease = log.lease() if log.storage.exists() else None
        try:
            transcript = log.replay()  # a damaged file is refused here, by name
        except BaseException:
            if lease is not None:
                lease.release()
            raise
        if self._lease is not None:
            self._lease.release()
        self._lease, self._log = lease, log
        self.notice = notice
        recorded = thinking_of(log)
        if recorded is not None:  # a resumed session keeps its thinking level
            self.thinking = recorded
        self._rebuild(transcript)
        self._follow()

    def _follow(self) -> None:
        """Tell the checkpoints which branch the session is on now."""
        if self.checkpoints is not None and self._log is not None and self.started:
            self.checkpoints.follow(self._log.branch(self._log.tip()))

    def hold_lease(self) -> None:
        """Take the session's lease now, before any run (print mode: one run, one writer from
        the start). LeaseHeld if another live process has it; nothing to do for --no-session
        or when it is already held."""
        if self._log is not None and self._lease is None:
            self._lease = self._log.lease()

    def _start(self) -> None:
        """Take the lease and write session_info (which creates the file, 0600): just
        before the first message is appended (persist_to's `before_first`)."""
        assert self._log is not None
        self.hold_lease()
        info: dict[str, Any] = {"cwd": str(self.cwd), "created": timestamp(),
                                "model": model_label(self.model)}
        if self.place.shared:
            info["host"] = self.place.host
        if self._pending_name:
            info["name"] = self._pending_name
        if self.checkpoints is not None:
            info.update(self.checkpoints.baseline())
        self._log.append_session_info(**info)
        if self.thinking is not None:
            self._log.append_entry("thinking_change", level=self.thinking)

    def _harness(self, model: Model, tools: list[Tool] | tuple[Tool, ...],
                 max_turns: int | None, messages: list[Message]) -> Harness:
        if self.thinking is not None:
            self.thinking_note = set_thinking(model, self.thinking)
        if self.web_search:
            set_web_search(model)
        system = system_prompt(model, self.cwd, base_file=self.settings.system_prompt_file,
                               extra=self.extensions.prompt_text() if self.extensions else "")
        compact = None
        log = self._log if self._log is not None else self._scratch
        if log is not None:
            compaction = Compaction(log, self.settings.compaction, lambda: self.harness.model,
                                    lambda: self.harness.system, model=self._compaction_model)
            compact = compaction.hook
        harness = Harness(model, system, tools, messages=messages, max_turns=max_turns,
                          redact=self._redact, compact=compact)
        if self._log is None and self._scratch is not None:
            harness.subscribe(persist_to(self._scratch))
        if self._log is not None:
            if self.checkpoints is not None:
                self.checkpoints.attach(self._log.path)
                harness.subscribe(self.checkpoints.listener)
            harness.subscribe(persist_to(
                self._log, before_first=self._start,
                meta=self.checkpoints.meta if self.checkpoints is not None else None))
        return harness

    def spent(self) -> Spent:
        """Every model call of the session -- abandoned and parallel attempts, summaries and
        compactions included -- each priced at its own model (`app.spent`): read from the
        file once (again only for another session), then counted as entries are appended."""
        log = self._log if self._log is not None else self._scratch
        if self._spent is None or self._spent[0] is not log:
            if self._spent is not None:
                self._spent[2]()
            name = str(getattr(self.harness.model, "name", ""))
            self._spent = (log, *Spent.watching(log, name))
        return self._spent[1]

    def _rebuild(self, messages: list[Message], model: Model | None = None) -> None:
        """A fresh harness over `messages` (the transcript read back from the file), keeping
        the tools and max_turns; `model` replaces the model (and so the system prompt)."""
        old = self.harness
        self.harness = self._harness(model or old.model, old.tools, old.max_turns, messages)

    def _need_file(self, what: str) -> SessionLog:
        if self._log is None:
            raise Refused(f"{what}: this session is not saved (--no-session)")
        if not self.started:
            raise Refused(f"{what}: this session has no messages yet")
        return self._log

    def _idle(self, what: str) -> None:
        if self.harness.is_running:
            raise Refused(f"{what} is refused while a run is going on (Ctrl-C aborts it)")

    def close(self) -> None:
        """Give up the lease, stop watching the folder. Idempotent."""
        if self._spent is not None:
            self._spent[2]()
        if self._lease is not None:
            self._lease.release()
        if self.checkpoints is not None:
            self.checkpoints.close()
        if self.extensions is not None:
            self.extensions.close()


def thinking_of(log: SessionLog) -> str | None:
    """The thinking level a session last recorded (its newest thinking_change), or None."""
    if not log.storage.exists():
        return None
    levels = [e.get("level") for e in log.of_type("thinking_change")]
    return next((str(v) for v in reversed(levels) if v in THINKING_LEVELS), None)


def scratch() -> SessionLog:
    """A session log held in memory (--no-session): nothing is written anywhere."""
    return SessionLog(storage=MemoryStorage(), sidecar=False)
