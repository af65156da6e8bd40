"""The wiring of a run, with no UI: model, tools, system prompt, session file, lease, harness.

`Controller` is what every frontend drives -- the REPL, print mode, tests. It holds one
`Harness` whose transcript is always computed from the session file (`log.replay()`), one
`SessionLog`, and the lease on that file. Methods either succeed or raise: `Refused` (the
command cannot be done now), `LeaseHeld` (another process has the session), or a
`SessionError` naming what is wrong in the file; each message says why in words a user can
act on. Nothing here prints.

No session file is written until the first message of a new session ends: then its lease is
taken (print mode takes it before the run), the file created (0600), and a session_info entry
(cwd, created, model) written before the message. From then on every message is appended as
it ends.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from mulligan.harness import Harness
from mulligan.prompts import system_prompt
from mulligan.session import SessionLog
from mulligan.session.branches import user_messages_on_path
from mulligan.session.export import write_linear
from mulligan.session.lease import Lease, acquire
from mulligan.session.store import (
    SessionSummary,
    create_file,
    list_sessions,
    new_session_path,
    now_iso,
)

FALLBACK_NOTICE = ("No provider configured: using the embedded local/smollm2-135m (offline, "
                   "small). Set ANTHROPIC_API_KEY or OPENAI_API_KEY, or --model, for a real model.")
SCRIPTED_PREFIX = "scripted:"


class Refused(ValueError):
    """A command that cannot be done now; the message says why."""


def scripted_model(script_file: Path) -> Any:
    """A testing aid: ``--model scripted:FILE`` answers from FILE, a JSON list whose items are
    assistant messages (dicts) or plain strings (a text reply each). Replies stream a word at a
    time. Past the end of the list every request fails (the run ends in an error)."""
    from mulligan.testing import StreamingScriptedModel, say

    try:
        items = json.loads(Path(script_file).read_text(encoding="utf-8"))
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise ValueError(f"{script_file}: not a JSON list of replies ({exc})") from None
    if not isinstance(items, list):
        raise ValueError(f"{script_file}: a scripted model file must hold a JSON list")
    script = [say(item) if isinstance(item, str) else item for item in items]
    model = StreamingScriptedModel(script)
    model.name = f"scripted/{Path(script_file).name}"  # type: ignore[attr-defined]
    return model


def resolve(name: str | None, *, base_url: str | None, home: Path,
            err: TextIO | None = None) -> Any:
    """The model called `name` (None: the configured default). Prints the one-line notice to
    `err` (stderr) when the embedded fallback is chosen because nothing is configured. Raises
    the registry's named errors (MissingApiKey, UnknownModel) for the caller to report."""
    if name and name.startswith(SCRIPTED_PREFIX):
        return scripted_model(Path(name[len(SCRIPTED_PREFIX):]))
    from mulligan.providers.registry import default_model_name, resolve_model

    if name is None:
        _, is_fallback = default_model_name(home=home)
        if is_fallback:
            print(FALLBACK_NOTICE, file=err or sys.stderr)
    return resolve_model(name, base_url=base_url, home=home)


def model_label(model: Any) -> str:
    """The name a model goes by in session files: its `name`, else its class name."""
    return str(getattr(model, "name", None) or type(model).__name__)


def split_model_name(name: str) -> tuple[str, str]:
    """("anthropic", "claude-x") from "anthropic/claude-x"; ("local", path) from "local:path"."""
    for separator in ("/", ":"):
        if separator in name:
            provider, _, rest = name.partition(separator)
            return provider, rest
    return "", name


@dataclass
class Controller:
    """One interactive (or print-mode) session: see the module docstring.

    `session_file` None means --no-session: nothing is ever written, and commands that need
    the file (/tree, /back, /edit, /label, /fork) are refused. `resolver` turns a model name
    into a model for /model.
    """

    model: Any
    tools: list[Any]
    cwd: Path
    home: Path
    session_file: Path | None
    max_turns: int | None = None
    system_prompt_file: Path | None = None
    resolver: Callable[[str], Any] | None = None
    log: SessionLog | None = field(init=False, default=None)
    lease: Lease | None = field(init=False, default=None)
    harness: Harness = field(init=False)
    _pending_name: str | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.cwd = Path(self.cwd).resolve()
        if self.session_file is not None:
            self._open(Path(self.session_file))
        else:
            self._rebuild([])

    # -- the session file ---------------------------------------------------------------

    def _open(self, session_file: Path) -> None:
        """Point at `session_file`: an existing one is leased now (LeaseHeld if another live
        process has it); a new one is leased when its first entry is written."""
        lease = acquire(session_file) if _has_entries(session_file) else None
        log = SessionLog(session_file)
        try:
            transcript = log.replay()  # a damaged file is refused here, by name
        except BaseException:
            if lease is not None:
                lease.release()
            raise
        if self.lease is not None:
            self.lease.release()
        self.lease, self.session_file, self.log = lease, session_file, log
        self._rebuild(transcript)

    @property
    def started(self) -> bool:
        """True once the session file holds an entry."""
        return self.session_file is not None and _has_entries(self.session_file)

    def _start(self) -> None:
        """Create the file, take its lease, and write session_info: just before the first
        message is appended."""
        assert self.log is not None and self.session_file is not None
        if self.lease is None:
            self.lease = acquire(self.session_file)
        create_file(self.session_file)
        info: dict[str, Any] = {"cwd": str(self.cwd), "created": now_iso(),
                                "model": model_label(self.model)}
        if self._pending_name:
            info["name"] = self._pending_name
        self.log.append_session_info(**info)

    def _persist(self, event: dict[str, Any]) -> None:
        if event.get("type") != "message_end" or self.log is None:
            return
        if not self.started:
            self._start()
        self.log.append_message(event["message"])

    def _rebuild(self, messages: list[Any]) -> None:
        """A fresh harness over `messages` (the transcript read back from the file)."""
        self.system = system_prompt(self.model, self.cwd, base_file=self.system_prompt_file)
        self.harness = Harness(self.model, self.system, self.tools, messages=messages,
                               max_turns=self.max_turns)
        self.harness.subscribe(self._persist)

    def _need_file(self, what: str) -> SessionLog:
        if self.log is None:
            raise Refused(f"{what}: this session is not saved (--no-session)")
        if not self.started:
            raise Refused(f"{what}: this session has no messages yet")
        return self.log

    def _idle(self, what: str) -> None:
        if self.harness.is_running:
            raise Refused(f"{what} is refused while a run is going on (Ctrl-C aborts it)")

    def close(self) -> None:
        """Give up the lease. Idempotent."""
        if self.lease is not None:
            self.lease.release()

    # -- running --------------------------------------------------------------------------

    @property
    def is_running(self) -> bool:
        return self.harness.is_running

    def run_prompt(self, text: str) -> Iterator[dict[str, Any]]:
        """The events of one run of `text` (a RuntimeError while another run is going on)."""
        return self.harness.prompt(text)

    def steer(self, text: str) -> None:
        self.harness.steer(text)

    def follow_up(self, text: str) -> None:
        self.harness.follow_up(text)

    def abort(self) -> None:
        self.harness.abort()

    def take_queued(self) -> list[str]:
        """Empty the steering and follow-up queues and return their texts, steering first,
        oldest first. A run that was aborted or failed leaves what was queued for it unsent;
        the REPL gives it back to the user rather than let it ride along with the next prompt
        (or vanish at the next /back, which starts a fresh harness)."""
        steering, follow_ups = self.harness.clear_queues()
        return steering + follow_ups

    # -- the tree -------------------------------------------------------------------------

    def entries(self) -> list[dict[str, Any]]:
        """Every entry of the session file ([] before the first message)."""
        return list(self.log.entries()) if self.log is not None and self.started else []

    def tip(self) -> str | None:
        return self.log.tip() if self.log is not None and self.started else None

    def tree_lines(self, *, fold: bool = True, width: int = 80) -> list[str]:
        """The session as a tree (see `frontends.tree.render_tree`)."""
        from mulligan.frontends.tree import render_tree

        self._need_file("/tree")
        return render_tree(self.entries(), self.tip(), fold=fold, width=width)

    def back(self, entry_id: str) -> str:
        """Go back to `entry_id`: the next message follows it. Writes one branch line; the
        harness is rebuilt from the file. Returns the branch line's id."""
        self._idle("/back")
        log = self._need_file("/back")
        new_tip = log.branch_to(entry_id)
        self._rebuild(log.replay())
        return str(new_tip)

    def back_choices(self) -> list[tuple[str, str]]:
        """What the /back picker offers: `user_choices`, refused like /back itself."""
        self._idle("/back")
        self._need_file("/back")
        return self.user_choices()

    def user_choices(self) -> list[tuple[str, str]]:
        """(entry id, text) of each user message on the current branch, newest first: what
        /back without an id and /edit can go back before."""
        found = user_messages_on_path(self.entries(), self.tip())
        return [(e["id"], str(e["message"].get("content", ""))) for e in reversed(found)]

    def edit(self, entry_id: str | None = None) -> str:
        """Go back to just before the user message `entry_id` (the last one on the branch by
        default) and return its text, to be edited and sent again."""
        self._idle("/edit")
        log = self._need_file("/edit")
        choices = dict(self.user_choices())
        if entry_id is None:
            if not choices:
                raise Refused("/edit: there is no message of yours on this branch")
            entry_id = next(iter(choices))
        if entry_id not in choices:
            entry = log.entry(entry_id)  # ValueError naming it when absent
            raise Refused(f"/edit: {entry_id} is not one of your messages on this branch "
                          f"(it is a {entry.get('type')} entry)")
        parent = log.entry(entry_id).get("parent_id")
        if parent is None:
            raise Refused(f"/edit: {entry_id} has nothing before it to go back to")
        log.branch_to(parent)
        self._rebuild(log.replay())
        return choices[entry_id]

    def label(self, entry_id: str, text: str) -> str:
        """Label `entry_id` (an empty text takes its label off)."""
        log = self._need_file("/label")
        log.entry(entry_id)
        return str(log.append_label(entry_id, text))

    def name(self, text: str) -> None:
        """Name the session; before the first message the name waits for session_info."""
        if self.log is None:
            raise Refused("/name: this session is not saved (--no-session)")
        if self.started:
            self.log.append_session_info(name=text)
        else:
            self._pending_name = text

    def fork(self) -> Path:
        """Copy the current branch into a new session file (session_info naming the origin
        file and entry) and carry on in it. Returns the new file."""
        self._idle("/fork")
        log = self._need_file("/fork")
        destination = new_session_path(self.home, self.cwd)
        new_lease = acquire(destination)
        try:
            write_linear(log.entries(), log.tip(), destination, origin_file=str(log.path),
                         info={"model": model_label(self.model)})
        except BaseException:
            new_lease.release()
            raise
        if self.lease is not None:
            self.lease.release()
        self.lease, self.session_file = new_lease, destination
        self.log = SessionLog(destination)
        self._rebuild(self.log.replay())
        return destination

    def export(self, kind: str, target: Path | None = None) -> Path:
        """Write the current branch out: `kind` "md" as Markdown (default
        `mulligan-<session>.md` in the working folder), "jsonl" as a new linear session file
        (default: a new session of this folder). A relative `target` is taken in the working
        folder, where the tools act. Never overwrites (ExportTargetExists). Returns the file."""
        from mulligan.session.export import to_markdown, write_new

        log = self._need_file("/export")
        stem = Path(log.path).stem
        if target is not None:
            target = self.cwd / target
        if kind == "md":
            target = target or self.cwd / f"mulligan-{stem}.md"
            return write_new(target, to_markdown(log.entries(), log.tip(),
                                                 title=f"Session {stem}"))
        if kind != "jsonl":
            raise Refused(f"/export: no format {kind!r}; md or jsonl")
        target = target or new_session_path(self.home, self.cwd)
        return write_linear(log.entries(), log.tip(), target, origin_file=log.path)

    def set_model(self, name: str) -> str:
        """Switch to the model called `name` for the next run; recorded as a model_change
        entry once the session has a file. Returns the model's name."""
        self._idle("/model")
        if self.resolver is None:
            raise Refused("/model: no way to resolve model names here")
        model = self.resolver(name)
        self.model = model
        self._rebuild(list(self.harness.messages))
        label = model_label(model)
        if self.log is not None and self.started:
            provider, model_id = split_model_name(label)
            self.log.append_model_change(provider, model_id)
        return label

    def sessions(self, *, every_folder: bool = False) -> list[SessionSummary]:
        return list_sessions(self.home, None if every_folder else self.cwd)

    def resume(self, session_file: Path) -> None:
        """Carry on in another session file (leased now; LeaseHeld if another process has it)."""
        self._idle("/resume")
        if self.session_file is not None and Path(session_file).resolve() == \
                Path(self.session_file).resolve():
            return
        self._open(Path(session_file))


def _has_entries(session_file: Path) -> bool:
    try:
        return Path(session_file).stat().st_size > 0
    except FileNotFoundError:
        return False
