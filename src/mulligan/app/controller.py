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

from mulligan.app.models import model_label, model_parts, runnable, session_model
from mulligan.app.permissions import MODES
from mulligan.app.session_host import Refused, SessionHost, scratch, thinking_of
from mulligan.app.sessions.catalog import SessionSummary
from mulligan.app.usage import Usage, usage_of
from mulligan.messages import Content, content_text
from mulligan.prompts import system_prompt
from mulligan.providers.thinking import LEVELS as THINKING_LEVELS
from mulligan.providers.thinking import set_thinking
from mulligan.session import SessionLog
from mulligan.session.branches import message_of, user_messages_on_path, with_attempts
from mulligan.session.entries import Entry
from mulligan.tools import Tool
from mulligan.wire import Event, Model

if TYPE_CHECKING:
    from mulligan.app.rewind.back import Back, Files
    from mulligan.app.workspace.restore import Plan

# Exports, going back, compaction and diffs (Markdown, snapshots, restores) are imported by the
# commands that use them, not here: the REPL's first prompt does not wait for them.

__all__ = ["Controller", "Refused"]


class Controller(SessionHost):
    """One interactive (or print-mode) coding session: the commands a frontend calls on the
    session `SessionHost` holds open (see the module docstring; the constructor is
    SessionHost's)."""

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
        from mulligan.app.rewind.back import go_back

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
        from mulligan.app.rewind.back import back_plan

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
        from mulligan.app.workspace.diffs import diff_span, snapshot_diff

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
        from mulligan.app.exports.export import origin_of
        from mulligan.app.exports.linear import write_linear

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
        from mulligan.app.exports.export import KINDS, Kind, export

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
        if self._log is not None and self.started and thinking_of(self._log) != level:
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
        from mulligan.app.rewind.compaction import Compaction

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
            self._scratch = scratch()
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
