"""The built-in slash commands, registered in `mulligan.frontends.slash`: each maps words to a
Controller call and its answer to lines shown back.

In: the Controller and the command's arguments. Out: an `Outcome` (`frontends.slash`).
Session logic lives in the Controller; this only maps words to its methods and its answers to
text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mulligan.app import Controller, SessionSummary, model_label
from mulligan.brief import count
from mulligan.frontends.slash import (
    KeyQuestion,
    ListPick,
    OnEvent,
    Outcome,
    TreeWalk,
    command,
    help_lines,
)
from mulligan.frontends.status import usage_lines
from mulligan.frontends.tree import render_tree
from mulligan.session.branches import labels_of
from mulligan.session.stores.lease import is_free, read_holder

if TYPE_CHECKING:
    from mulligan.app.rewind.back import Files
    from mulligan.app.workspace.restore import Plan

# Going back, restores and exports are imported by the commands that use them: the REPL
# imports this module, and its first prompt does not wait for them.


def format_sessions(found: Sequence[SessionSummary], *, numbered: bool = False,
                    show_folder: bool = False, current: str | None = None) -> list[str]:
    """One line per session: name (or first words), entries, branches, last activity, file
    (or, for a database session, its id and the machines it has a folder on)."""
    if not found:
        return ["(no sessions yet)"]
    lines = []
    for number, s in enumerate(found, 1):
        lead = f"{number:>3}. " if numbered else ""
        when = s.last_activity.replace("T", " ")[:16]
        if s.problem:
            lines.append(f"{lead}{when}  unreadable: {s.problem}  {s.where}")
            continue
        title = s.name or (s.first_message[:40] + ("…" if len(s.first_message) > 40 else ""))
        folder = f"  [{s.cwd}]" if show_folder and s.cwd else ""
        if s.origin:
            folder += f"  (a copy of {Path(s.origin).name})"
        if s.path is None:  # a database session: no lease file to glance at
            if current is not None and current.endswith(f" session {s.session_id}"):
                folder += "  (this session)"
            lines.append(f"{lead}{when}  {s.entries:>4} entries  {title or '(untitled)'}"
                         f"{folder}\n{' ' * len(lead)}      {s.session_id}"
                         f"{f'  (on {s.hosts})' if s.hosts else ''}")
            continue
        if current is not None and s.path.resolve() == Path(current).resolve():
            folder += "  (this session)"
        elif not is_free(s.path):
            folder += f"  (in use by pid {(read_holder(s.path) or {}).get('pid', '?')})"
        lines.append(f"{lead}{when}  {s.entries:>4} entries  {s.branches:>2} branch"
                     f"{'es' if s.branches != 1 else '  '}  {title or '(untitled)'}{folder}"
                     f"\n{' ' * len(lead)}      {s.path}")
    return lines


def _tree(c: Controller, args: list[str], width: int) -> Outcome:
    if args and args[0] not in ("all", "go"):
        return Outcome(["usage: /tree [all|go]"], error=True)
    entries, tip = c.tree(folded=not (args and args[0] == "all"))
    if args and args[0] == "go":  # walk every attempt with the keys, and go where you stop
        every, tip = c.tree(folded=False)
        return Outcome(pick=TreeWalk(
            [dict(e) for e in every], tip, label=lambda entry_id, text: _labelled(c, entry_id,
                                                                            text),
            then=lambda chosen, on_event: going_back(
                c, chosen, f"at {chosen}: your next message follows it",
                on_event=on_event)))
    return Outcome(render_tree(entries, tip, fold=not (args and args[0] == "all"), width=width))


def _back(c: Controller, args: list[str], width: int,
          on_event: Callable[[dict[str, Any]], None] | None = None) -> Outcome:
    args, summarize = _summary_flag(args)
    if len(args) > 1:
        return Outcome(["usage: /back [ID] [--summary]"], error=True)
    if not args:
        choices = c.back_choices()
        if not choices:
            return Outcome(["/back: there is no message of yours on this branch"], error=True)
        return Outcome(pick=ListPick(choices, lambda chosen, _: back_before(c, chosen)))
    return going_back(c, args[0], f"back at {args[0]}: your next message follows it",
                      summarize=summarize, on_event=on_event)


def back_before(c: Controller, entry_id: str) -> Outcome:
    """The /back picker's choice: go back to just before the user message `entry_id`."""
    parent, text = c.edit_target(entry_id)
    words = " ".join(text.split())
    return going_back(c, parent, f"back before {entry_id} ({words[:50]}): your next message "
                                 "replaces it")


def _edit(c: Controller, args: list[str], width: int,
          on_event: Callable[[dict[str, Any]], None] | None = None) -> Outcome:
    args, summarize = _summary_flag(args)
    if args == ["--pick"]:  # Esc Esc: pick one of your messages on this branch to edit
        choices = c.back_choices()
        if not choices:
            return Outcome(["/edit: there is no message of yours on this branch"], error=True)
        return Outcome(pick=ListPick(choices, lambda chosen, _: edit_before(c, chosen)))
    if len(args) > 1:
        return Outcome(["usage: /edit [ID] [--summary]"], error=True)
    parent, text = c.edit_target(args[0] if args else None)
    return going_back(c, parent, "edit and press Enter to send again", fill=text,
                      summarize=summarize, on_event=on_event)


def edit_before(c: Controller, entry_id: str) -> Outcome:
    """The edit picker's choice: go back to just before your message `entry_id` and put its
    text in the input box."""
    parent, text = c.edit_target(entry_id)
    return going_back(c, parent, "edit and press Enter to send again", fill=text)


def _summary_flag(args: list[str]) -> tuple[list[str], bool]:
    return [a for a in args if a != "--summary"], "--summary" in args


def going_back(c: Controller, target: str, said: str, *, fill: str | None = None,
               summarize: bool = False,
               on_event: Callable[[dict[str, Any]], None] | None = None) -> Outcome:
    """Go back (or forward) to `target`; when the files differ from what the agent left
    there, first ask, with one key, what to do with them (`files_keys`). `summarize` (or
    summarize_on_back = "always") asks for a summary of the attempt left."""
    summarize = summarize or c.summarize_on_back == "always"
    plan = c.back_plan(target)
    if plan is None:
        return _went_back(c, target, said, files=None, summarize=summarize, fill=fill,
                          on_event=on_event)
    from mulligan.app.rewind.back import plan_lines

    lines = plan_lines(plan)
    lines.append("  (changes outside the folder, and what a background process did after its "
                 "command returned, are not tracked)")

    def then(key: str, on_event: OnEvent | None) -> Outcome:
        files: Files | None = FILES_KEYS.get(key)
        if files is None or (key == "s" and c.summarize_on_back == "never"):
            return Outcome(["cancelled: nothing was changed"], cancelled=True)
        return _went_back(c, target, said, files=files, summarize=summarize or key == "s",
                          fill=fill, on_event=on_event)

    return Outcome(lines, pick=KeyQuestion(files_keys(c, plan), then), fill=fill)


FILES_KEYS: dict[str, Files] = {"enter": "keep-mine", "s": "keep-mine", "k": "keep",
                                "o": "overwrite", "m": "merge"}


def _labelled(c: Controller, entry_id: str, text: str) -> None:
    c.label(entry_id, text)


def files_keys(c: Controller, plan: Plan) -> list[tuple[str, str]]:
    """The keys of the files question, and what each does (worded for going forward when
    the entry gone to is on another attempt)."""
    bring = "bring this attempt's files back" if plan.forward else "restore the files"
    mine = ", keep the ones you changed" if plan.conflicts else ""
    keys = [("enter", f"{bring}{mine}"),
            ("k", "go, keep the files as they are" if plan.forward
             else "go back, keep the files as they are")]
    if plan.conflicts:
        keys.append(("o", "overwrite yours too (a copy is kept)"))
    if plan.merges:
        keys.append(("m", "merge: take the agent's change out of yours"))
    if c.summarize_on_back != "never":
        keys.append(("s", f"{bring}, with a summary of the attempt"))
    keys.append(("c", "cancel"))
    return keys


def _went_back(c: Controller, target: str, said: str, *, files: Files | None, summarize: bool,
               fill: str | None = None,
               on_event: Callable[[dict[str, Any]], None] | None = None) -> Outcome:
    from mulligan.app.rewind.back import describe

    done = c.back(target, files=files, summarize=summarize, on_event=on_event)
    if summarize and done.summary is None:
        said += " (the summary was aborted: a plain branch line instead)"
    return Outcome([said, *describe(done)[1:]], fill=fill)


def _diff(c: Controller, args: list[str], width: int) -> Outcome:
    if len(args) > 1:
        return Outcome(["usage: /diff [ID]"], error=True)
    return Outcome(c.diff(args[0] if args else None), diff=True)


def _label(c: Controller, args: list[str], width: int) -> Outcome:
    if not args:
        return Outcome(["usage: /label ID TEXT"], error=True)
    if not args[1:] and args[0] not in labels_of(c.labels()):
        c.tree()  # refused like the other commands when there is no file yet
        return Outcome([f"/label: {args[0]} has no label to take off; /label {args[0]} TEXT "
                        "labels it"], error=True)
    c.label(args[0], " ".join(args[1:]))
    return Outcome([f"labelled {args[0]}" if args[1:] else f"label taken off {args[0]}"])


def _name(c: Controller, args: list[str], width: int) -> Outcome:
    if not args:
        return Outcome(["usage: /name TEXT"], error=True)
    c.name(" ".join(args))
    return Outcome([f"session named {' '.join(args)!r}"])


def _fork(c: Controller, args: list[str], width: int) -> Outcome:
    origin = c.session_file
    new = c.fork()
    return Outcome([f"forked {origin} into {new}; you are in the new session now"])


def _sessions(c: Controller, args: list[str], width: int) -> Outcome:
    if args and args[0] != "all":
        return Outcome(["usage: /sessions [all]"], error=True)
    every = bool(args)
    # Numbers are what `/resume N` takes, and it counts this folder's sessions only.
    return Outcome(format_sessions(c.sessions(every_folder=every), numbered=not every,
                                   show_folder=every, current=c.where))


def _resume(c: Controller, args: list[str], width: int) -> Outcome:
    found = c.sessions()
    if not args:
        return Outcome(format_sessions(found, numbered=True, current=c.where),
                       pick=ListPick([(s.where, s.name or s.first_message) for s in found],
                                     lambda chosen, _: resume_to(c, chosen),
                                     show_values=False))
    target = args[0]
    if target.isdigit() and not 0 < int(target) <= len(found):
        return Outcome([f"/resume: there is no session {target} in this folder (/sessions "
                        f"numbers its {count(len(found), 'session')})"], error=True)
    chosen = found[int(target) - 1].where if target.isdigit() else \
        str(Path(target).expanduser())
    return resume_to(c, chosen)


def resume_to(c: Controller, target: str) -> Outcome:
    """The /resume picker's choice (or argument): carry on in session `target` (a file, or
    with a database store, a session id there)."""
    if not c.place.shared and not Path(target).is_file():
        return Outcome([f"/resume: no session file {target}"], error=True)
    try:
        log = c.place.named(target, c.cwd)
    except FileNotFoundError as exc:
        return Outcome([f"/resume: {exc}"], error=True)
    c.resume(log)
    notice = [n for n in (c.model_notice, c.notice) if n]
    return Outcome([*notice, f"resumed {target} ({count(len(c.harness.messages), 'message')} "
                    "on its branch)"], recap=list(c.harness.messages))


def _model(c: Controller, args: list[str], width: int) -> Outcome:
    if not args:
        return Outcome([f"model: {model_label(c.model)}"])
    return Outcome([f"model is now {c.set_model(args[0])}"])


def _export(c: Controller, args: list[str], width: int) -> Outcome:
    from mulligan.app.exports.export import KINDS

    kind = args[0] if args else "md"
    if kind not in KINDS:
        return Outcome(["usage: /export [md|jsonl|html] [FILE]"], error=True)
    target = c.export(kind, Path(args[1]).expanduser() if len(args) > 1 else None)
    return Outcome([f"wrote {target}"])


def _compact(c: Controller, args: list[str], width: int,
             on_event: Callable[[dict[str, Any]], None] | None = None) -> Outcome:
    ended: list[Any] = []

    def seen(event: Any) -> None:
        if event.get("type") == "compaction_end":
            ended.append(event)
        elif on_event is not None:
            on_event(event)

    from mulligan.frontends.live import compaction_line

    c.compact(" ".join(args), on_event=seen)
    return Outcome([compaction_line(ended[-1])] if ended else [], error=bool(
        ended and ended[-1].get("error")))


def _permissions(c: Controller, args: list[str], width: int) -> Outcome:
    if len(args) > 1:
        return Outcome(["usage: /permissions [ask|edits|auto|plan]"], error=True)
    if not args:
        shown = c.permissions.describe() if c.permissions is not None else \
            "this session's tools do not ask"
        return Outcome([shown])
    return Outcome([c.set_permission_mode(args[0])])


def _usage(c: Controller, args: list[str], width: int) -> Outcome:
    return Outcome(usage_lines(c.usage(), c.spent()))


def _new(c: Controller, args: list[str], width: int) -> Outcome:
    file = c.new_session()
    where = f"; it will be {file}" if file is not None else " (not saved)"
    return Outcome([f"a new session{where}, written at the first message"])


def _help(c: Controller, args: list[str], width: int) -> Outcome:
    lines = help_lines(width)
    if c.permissions is not None:
        lines.insert(0, c.permissions.describe())
    return Outcome(lines)


def _quit(c: Controller, args: list[str], width: int) -> Outcome:
    return Outcome(quit=True)


# Registered in the order /help lists them.
command('tree', '[all|go]',
        "the session as a tree; 'all' unfolds abandoned attempts; 'go' picks an entry with "
        "the arrow keys to go back to",
        most_args=1)(_tree)
command('back', '[ID] [--summary]',
        "go back to entry ID (the next message follows it); alone: pick a message; --summary: "
        "summarise the attempt left",
        most_args=1, events=True)(_back)
command('edit', '[ID] [--summary]',
        'go back to just before your message ID (default: the last) and edit it',
        most_args=1, events=True)(_edit)
command('diff', '[ID]',
        "what the files went through: the last turn, or entry ID's call or turn",
        most_args=1)(_diff)
command('label', 'ID TEXT',
        'label an entry (empty TEXT removes the label)',
        most_args=None)(_label)
command('name', 'TEXT',
        'name this session',
        most_args=None)(_name)
command('fork', '',
        'copy the current branch into a new session file and continue there',
        most_args=0)(_fork)
command('sessions', '[all]',
        "this folder's sessions, numbered for /resume, newest first",
        most_args=1)(_sessions)
command('resume', '[N|FILE]',
        'switch to another session (alone: pick one)',
        most_args=1)(_resume)
command('model', '[NAME]',
        'show or change the model (recorded in the session)',
        most_args=1)(_model)
command('export', '[md|jsonl|html] [FILE]',
        'write the current branch as Markdown or a new session, or every attempt as one HTML page',
        most_args=2)(_export)
command('permissions', '[ask|edits|auto|plan]',
        'show or switch the permission mode (Shift-Tab cycles them)',
        most_args=1)(_permissions)
command('compact', '[INSTRUCTIONS]',
        'summarise the older part of the conversation now',
        most_args=None, events=True)(_compact)
command('new', '',
        'start a new session in this folder (alias /clear)',
        most_args=0, aliases=('clear',))(_new)
command('usage', '',
        'tokens and cost of each model reply on this branch',
        most_args=0)(_usage)
command('help', '',
        'this list',
        most_args=0)(_help)
command('quit', '',
        'leave (Ctrl-D, or Ctrl-C twice, also quit)',
        most_args=0, aliases=('exit',))(_quit)
