"""The coding session, with no UI: model, tools, system prompt, session file, lease, harness.

`Controller` is what every frontend drives -- the REPL, print mode, the demo, tests. It holds
one `Harness` whose transcript is always computed from the session file (`log.replay()`), one
`SessionLog`, and the lease on that file. The Harness owns the model, system prompt, tools and
max_turns; the log owns the file's path. Methods either succeed or raise: `Refused` (the
command cannot be done now), `LeaseHeld` (another process has the session), or a
`SessionError` naming what is wrong in the file; each message says why in words a user can
act on. Nothing here prints, draws or asks.

No session file is written until the first message of a new session ends: then its lease is
taken (print mode takes it before the run, `hold_lease`), the file created (0600), and a
session_info entry (cwd, created, model) written before the message. From then on every
message is appended as it ends, by one listener (`persist_to`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from mulligan.app.exports.export import KINDS, Kind, export, origin_of
from mulligan.app.exports.linear import write_linear
from mulligan.app.models import model_label, model_parts, runnable, session_model
from mulligan.app.permissions import MODES, Permissions
from mulligan.app.rewind.back import Back, Files, back_plan, go_back
from mulligan.app.rewind.compaction import Compaction
from mulligan.app.secrets import Secrets
from mulligan.app.sessions.catalog import SessionSummary
from mulligan.app.sessions.stores import FileSessions, Sessions
from mulligan.app.settings import Settings
from mulligan.app.usage import Usage, usage_of
from mulligan.app.workspace.checkpoints import Checkpoints
from mulligan.app.workspace.diffs import diff_span, snapshot_diff
from mulligan.app.workspace.restore import Plan
from mulligan.harness import Harness
from mulligan.messages import Content, Message, content_text
from mulligan.prompts import system_prompt
from mulligan.providers.thinking import LEVELS as THINKING_LEVELS
from mulligan.providers.thinking import set_thinking, set_web_search
from mulligan.session import SessionLog, persist_to
from mulligan.session.branches import message_of, user_messages_on_path, with_attempts
from mulligan.session.entries import Entry, timestamp
from mulligan.session.stores.memory import MemoryStorage
from mulligan.session.stores.storage import Releasable
from mulligan.tools import Tool
from mulligan.wire import Event, Model

if TYPE_CHECKING:
    from mulligan.app.extensions.setup import Extensions

__all__ = ["Controller", "Refused"]


class Refused(ValueError):
    """A command that cannot be done now; the message says why."""


class Controller:
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
        # --no-session: the transcript kept in memory only, so it can still be compacted.
        self._scratch: SessionLog | None = None if session_file is not None else _scratch()
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
        recorded = _thinking_of(log)
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
        if self._lease is not None:
            self._lease.release()
        if self.checkpoints is not None:
            self.checkpoints.close()
        if self.extensions is not None:
            self.extensions.close()

    # -- running --------------------------------------------------------------------------

    def run_prompt(self, text: Content) -> Iterator[Event]:
        """The events of one run of `text`, a string or text and image blocks (a
        RuntimeError while another run is going on). With extensions, the hooks' and MCP
        servers' events come in the same stream."""
        if self.extensions is None:
            return self.harness.prompt(text)
        guard = self.permissions.guard if self.permissions is not None else None
        return self.extensions.run(self.harness, text, base_tools=self._base_tools,
                                   guard=guard, session_file=self.where)

    def steer(self, text: str) -> None:
        self.harness.steer(text)

    def follow_up(self, text: str) -> None:
        self.harness.follow_up(text)

    def abort(self, reason: str | None = None) -> None:
        """Abort the run going on, or the summary being written; `reason` as
        `Harness.abort`'s (a signal's: the aborted reply says the terminal closed)."""
        self.harness.abort(reason)
        if self._summary_abort is not None:
            self._summary_abort.set()

    def take_queued(self) -> list[str]:
        """Empty the steering and follow-up queues and return their texts, steering first,
        oldest first. A run that was aborted or failed leaves what was queued for it unsent;
        the REPL gives it back to the user rather than let it ride along with the next prompt
        (or vanish at the next /back, which starts a fresh harness)."""
        steering, follow_ups = self.harness.clear_queues()
        return steering + follow_ups

    # -- parallel attempts (mulligan.app.attempts drives them) ---------------------------

    def begin(self) -> str:
        """Write session_info now if the session has no entry yet (attempts start from an
        entry); returns the tip. Refused for --no-session and while a run is going on."""
        self._idle("/try")
        if self._log is None:
            raise Refused("/try: this session is not saved (--no-session)")
        if not self.started:
            self._start()
        return str(self._log.tip())

    def model_named(self, name: str) -> Model:
        """The model called `name`, resolved as /model does (Refused without a resolver)."""
        if self._resolver is None:
            raise Refused(f"{name}: no way to resolve model names here")
        return self._resolver(name)

    def for_folder(self, model: Model, folder: Path) -> tuple[str, list[Tool]]:
        """The system prompt and the tools of a run of `model` in `folder` instead of the
        working folder (Refused when the frontend gave no `tools_for`)."""
        if self.tools_for is None:
            raise Refused("/try: this session cannot make tools for another folder")
        return system_prompt(model, folder, base_file=self.settings.system_prompt_file), \
            self.tools_for(folder)

    def reload(self) -> None:
        """Rebuild the harness from the file, and follow its tip (after attempts wrote)."""
        if self._log is not None and self.started:
            self._rebuild(self._log.replay())
            self._follow()

    # -- the tree -------------------------------------------------------------------------

    def entries(self) -> list[Entry]:
        """Every entry of the session file ([] before the first message)."""
        return list(self._log.entries()) if self._log is not None and self.started else []

    def tip(self) -> str | None:
        return self._log.tip() if self._log is not None and self.started else None

    def labels(self) -> list[Entry]:
        """The label entries, file order (through the index: only they are parsed)."""
        return self._log.of_type("label") if self._log is not None and self.started else []

    def tree(self, *, folded: bool = False) -> tuple[list[Entry], str | None]:
        """(entries, tip) for drawing the tree; refused like the commands that need a file.
        `folded`: only for a tree that folds the attempts off the branch, whose entries may
        be sketches (`SessionLog.sketch`: read through the index, only the branch and the
        labels are parsed)."""
        log = self._need_file("/tree")
        entries = with_attempts(log.sketch()[0], log.entry) if folded else self.entries()
        return entries, self.tip()

    def back(self, entry_id: str, *, files: Files | None = None, summarize: bool = False,
             on_event: Callable[[dict[str, Any]], None] | None = None) -> Back:
        """Go back to `entry_id` (any entry, on this branch or another): the next message
        follows it. Writes one branch line; `files` says what happens to the working folder
        (`app.rewind.back.Files`). `summarize`: the current model summarises the attempt left
        first (its events go to `on_event`), and the going back is a branch_summary entry;
        `abort()` while it writes leaves a plain branch line. The harness is rebuilt from the
        file."""
        self._idle("/back")
        log = self._need_file("/back")
        self._summary_abort = threading.Event()
        try:
            done = go_back(log, self.checkpoints, entry_id, files=files,
                           summarize_with=self.model if summarize else None,
                           abort=self._summary_abort, on_event=on_event)
        finally:
            self._summary_abort = None
        self._rebuild(log.replay())
        return done

    def back_plan(self, entry_id: str) -> Plan | None:
        """What going back to `entry_id` would do to the files (None: nothing to restore)."""
        self._idle("/back")
        return back_plan(self._need_file("/back"), self.checkpoints, entry_id)

    def edit_target(self, entry_id: str | None = None) -> tuple[str, str]:
        """(the entry /edit goes back to, the text of the message edited): the parent of
        your message `entry_id` -- on this branch or any other one in the tree; the last one
        on this branch by default."""
        log = self._need_file("/edit")
        if entry_id is None:
            choices = self.user_choices()
            if not choices:
                raise Refused("/edit: there is no message of yours on this branch")
            entry_id = choices[0][0]
        entry = log.entry(entry_id)  # UnknownEntry naming it when absent
        message = message_of(entry)
        if message is None or message.get("role") != "user":
            raise Refused(f"/edit: {entry_id} is not one of your messages (it is "
                          f"{_kind_of(entry)})")
        parent = entry.get("parent_id")
        if parent is None:
            raise Refused(f"/edit: {entry_id} has nothing before it to go back to")
        return str(parent), content_text(message.get("content"))

    def back_choices(self) -> list[tuple[str, str]]:
        """What the /back picker offers: `user_choices`, refused like /back itself."""
        self._idle("/back")
        self._need_file("/back")
        return self.user_choices()

    def user_choices(self) -> list[tuple[str, str]]:
        """(entry id, text) of each user message on the current branch, newest first: what
        /back without an id and /edit can go back before."""
        tip = self.tip()
        # The branch alone: read through the index it is all that is parsed.
        on_branch = self._log.branch(tip) if self._log is not None and self.started else []
        found = user_messages_on_path(on_branch, tip)
        return [(e["id"], content_text(e["message"].get("content"))) for e in reversed(found)]

    def edit(self, entry_id: str | None = None, *, files: Files | None = None,
             summarize: bool = False) -> str:
        """Go back to just before your message `entry_id` (see `edit_target`) and return its
        text, to be edited and sent again; `files` and `summarize` as for `back`."""
        self._idle("/edit")
        parent, text = self.edit_target(entry_id)
        self.back(parent, files=files, summarize=summarize)
        return text

    def diff(self, entry_id: str | None = None) -> list[str]:
        """What the files went through: by default the last turn on this branch; for a tool
        call's result, that call; for any other entry, from just before it to the end of its
        attempt (this branch's tip when it is on this branch). Plain diff lines."""
        log = self._need_file("/diff")
        if self.checkpoints is None:
            raise Refused("/diff: this session keeps no file checkpoints")
        if entry_id is not None:
            log.entry(entry_id)  # UnknownEntry naming it
        before, after = diff_span(log, entry_id)
        if before is None or after is None:
            raise Refused("/diff: no turn, or no file checkpoints, there")
        return snapshot_diff(self.checkpoints.store, before, after) or [
            "(no file changed there)"]

    def label(self, entry_id: str, text: str) -> str:
        """Label `entry_id` (an empty text takes its label off)."""
        log = self._need_file("/label")
        log.entry(entry_id)
        return str(log.append_label(entry_id, text))

    def name(self, text: str) -> None:
        """Name the session; before the first message the name waits for session_info."""
        if self._log is None:
            raise Refused("/name: this session is not saved (--no-session)")
        if self.started:
            self._log.append_session_info(name=text)
        else:
            self._pending_name = text

    def fork(self) -> Path | str:
        """Copy the current branch into a new session (session_info naming the origin
        and entry) in the same store and carry on in it. Returns what names the new one."""
        self._idle("/fork")
        log = self._need_file("/fork")
        destination = self.place.new(self.cwd)
        new_lease = destination.lease()
        info = {"model": model_label(self.model)}
        if self.session_name():  # the copy is told apart by its name: "NAME (fork)"
            info["name"] = f"{self.session_name()} (fork)"
        try:
            write_linear(log.entries(), log.tip(), destination, origin_file=origin_of(log),
                         info=info)
        except BaseException:
            new_lease.release()
            raise
        if self._lease is not None:
            self._lease.release()
        self._lease, self._log = new_lease, destination
        self._rebuild(self._log.replay())
        self._follow()
        return destination.storage.file or str(destination.path)

    def export(self, kind: str, target: Path | None = None) -> Path:
        """Write the session out (`app.exports.export`): `kind` "md" as Markdown, "jsonl" as
        a new linear session file -- both the current branch -- or "html", one page of every
        attempt. A relative `target` is taken in the working folder, where the tools act;
        none: md and html go to `$MULLIGAN_HOME/exports`. Never overwrites
        (ExportTargetExists). Returns the file."""
        log = self._need_file("/export")
        if kind not in KINDS:
            raise Refused(f"/export: no format {kind!r}; md, jsonl or html")
        return export(log, cast(Kind, kind), self.cwd / target if target is not None else None,
                      home=self.home, cwd=self.cwd,
                      system=self.harness.system,
                      store=self.checkpoints.store if self.checkpoints is not None else None,
                      redact=self._redact_text or (lambda text: text))

    def set_thinking(self, level: str) -> str | None:
        """Think at `level` (off, low, medium, high) from the next request on; recorded as a
        thinking_change entry (once the session has a file), so resuming keeps it. Returns
        why the current model ignores it, or None. Refused for an unknown level."""
        self._idle("/thinking")
        if level not in THINKING_LEVELS:
            raise Refused(f"/thinking: no level {level!r}; one of {', '.join(THINKING_LEVELS)}")
        self.thinking = level
        self.thinking_note = set_thinking(self.model, level)
        if self._log is not None and self.started and _thinking_of(self._log) != level:
            self._log.append_entry("thinking_change", level=level)
        return self.thinking_note

    def set_model(self, name: str) -> str:
        """Switch to the model called `name` for the next run; recorded as a model_change
        entry once the session has a file. Returns the model's name."""
        self._idle("/model")
        if self._resolver is None:
            raise Refused("/model: no way to resolve model names here")
        model = self._resolver(name)
        self._rebuild(list(self.harness.messages), model=model)
        if self._log is not None and self.started:
            self._log.append_model_change(*model_parts(model))
        return model_label(model)

    def compact(self, instructions: str = "",
                on_event: Callable[[Event], None] | None = None) -> bool:
        """Compact the session now (/compact): one compaction entry, the harness rebuilt from
        the file. Its events go to `on_event`; `abort()` meanwhile leaves the model out (the
        summary is then made from the entries). False when there is nothing to compact."""
        self._idle("/compact")
        log = self._scratch if self._log is None and self._scratch is not None \
            else self._need_file("/compact")
        compaction = Compaction(log, self.settings.compaction, lambda: self.harness.model,
                                lambda: self.harness.system, model=self._compaction_model)
        self._summary_abort = compaction.abort = threading.Event()
        run = compaction.run("manual", instructions=instructions)
        try:
            while True:
                event = next(run)
                if on_event is not None:
                    on_event(event)
        except StopIteration as stop:
            done = bool(stop.value)
        finally:
            self._summary_abort = None
        self._rebuild(log.replay())
        return done

    def usage(self) -> Usage:
        """What the branch has used: tokens per turn, context against the window, cost."""
        return usage_of(self.harness.messages, self.model, self.harness.system)

    def session_name(self) -> str:
        """The session's name (the newest one given), or ""."""
        infos = self._log.of_type("session_info") if self._log is not None and self.started \
            else []
        names = [e.get("name") for e in infos]
        given = [str(n) for n in names if n]
        return given[-1] if given else (self._pending_name or "")

    def set_permission_mode(self, mode: str) -> str:
        """Switch the permission mode for the next tool calls; returns its description."""
        if self.permissions is None:
            raise Refused("/permissions: this session's tools do not ask")
        if mode not in MODES:
            raise Refused(f"/permissions: no mode {mode!r}; one of {', '.join(MODES)}")
        self.permissions.mode = mode
        return self.permissions.describe()

    def sessions(self, *, every_folder: bool = False) -> list[SessionSummary]:
        return self.place.listing(None if every_folder else self.cwd)

    def new_session(self) -> str | None:
        """Start a new session in the same folder (/new): the next message opens a new one;
        the current one is left as it is. Returns what names it (None for --no-session)."""
        self._idle("/new")
        self._pending_name = None
        if self._log is None:
            self._scratch = _scratch()
            self._rebuild([])
            return None
        self._open(self.place.new(self.cwd))
        return self.where

    def resume(self, session: Path | SessionLog) -> None:
        """Carry on in another session (leased now; LeaseHeld if another process has it)."""
        self._idle("/resume")
        if self._log is not None and _same(self._log, session):
            return
        self._open(session)
        self._own_model()

    def _own_model(self) -> None:
        """After /resume: go on with the session's own model (its newest model_change, else
        session_info), unless a model was named on the command line or it is this one."""
        name = session_model(self._log)
        if not self.follow_session_model or self._resolver is None or name is None \
                or not runnable(name) or name == model_label(self.model):
            return
        try:
            model = self._resolver(name)
        except ValueError as exc:  # no key for it here, say: go on with this one, and say so
            self.model_notice = (f"this session used {name}, which cannot run here ({exc}); "
                                 f"going on with {model_label(self.model)}")
            return
        self._rebuild(list(self.harness.messages), model=model)
        self.model_notice = f"model {name}: this session's own (/model to change)"


def _thinking_of(log: SessionLog) -> str | None:
    """The thinking level a session last recorded (its newest thinking_change), or None."""
    if not log.storage.exists():
        return None
    levels = [e.get("level") for e in log.of_type("thinking_change")]
    return next((str(v) for v in reversed(levels) if v in THINKING_LEVELS), None)


def _scratch() -> SessionLog:
    """A session log held in memory (--no-session): nothing is written anywhere."""
    return SessionLog(storage=MemoryStorage(), sidecar=False)


def _kind_of(entry: Entry) -> str:
    message = message_of(entry)
    if message is not None:
        role = str(message.get("role"))
        return f"{'an' if role[:1] in 'aeiou' else 'a'} {role} message"
    return f"a {entry.get('type')} entry"


def _same(log: SessionLog, other: Path | SessionLog) -> bool:
    if isinstance(other, SessionLog):
        return str(other.path) == str(log.path)
    return log.storage.file is not None and \
        Path(other).resolve() == log.storage.file.resolve()
