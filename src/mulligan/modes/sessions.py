"""`mulligan sessions ...` and `mulligan gc`: listing, showing, drawing, exporting, checking,
repairing, migrating, going back, pushing and pulling sessions.

In: the parsed arguments and stdout. Out: an exit status -- 0 done, 1 the command could not be
done (the reason on stderr or stdout as each command says).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from mulligan.app.sessions.catalog import find_session_file
from mulligan.modes.common import (
    UsageError,
    checkpoints_for,
    home_of,
    sessions_of,
    store_of,
    working_folder,
)

if TYPE_CHECKING:
    from mulligan.app.rewind.back import Back, Files
    from mulligan.app.workspace.checkpoints import Checkpoints
    from mulligan.session import SessionLog
    from mulligan.session.entries import Entry


def sessions_ls(args: argparse.Namespace, out: TextIO) -> int:
    """This folder's sessions (--all: every folder's, and with a database store every
    machine's), from the store sessions go to."""
    from mulligan.frontends.commands import format_sessions

    every = bool(args.all)
    found = sessions_of(home_of()).listing(None if every else working_folder(args))
    for line in format_sessions(found, show_folder=every):
        print(line, file=out)
    return 0


def open_named(args: argparse.Namespace) -> SessionLog:
    """The SessionLog `args.file` names: a file (a path, or the start of a name among this
    folder's sessions), or with a database store a session id there."""
    return sessions_of(home_of()).named(args.file, working_folder(args))


def _entries_and_leaf(args: argparse.Namespace
                      ) -> tuple[SessionLog, list[Entry], str | None]:
    from mulligan.session import SessionLog

    log = open_named(args)
    if log.storage.file is not None:
        # An export reads the file whole, once: keeping its line index (the sidecar) in step
        # as it reads is work only a later lazy read uses (issue 29: half of the read).
        log = SessionLog(log.storage.file, sidecar=False)
    entries = list(log.entries())
    leaf = args.leaf if getattr(args, "leaf", None) else log.tip()
    if leaf is not None:
        log.branch(leaf)  # names an unknown leaf, and a broken walk by file, line and entry
    return log, entries, leaf


def sessions_show(args: argparse.Namespace, out: TextIO) -> int:
    from mulligan.app.exports.linear import to_text

    log = open_named(args)  # only the branch shown is read (through the sidecar index)
    leaf = args.leaf if getattr(args, "leaf", None) else log.tip()
    out.write(to_text(log.branch(leaf), leaf))
    return 0


def sessions_tree(args: argparse.Namespace, out: TextIO) -> int:
    """The tree is a diagnostic: every entry it can draw is drawn (an orphan's subtree and a
    circle's entries too, marked), and then a walk problem is named and the exit is 1."""
    from mulligan.session.index import paused_gc

    # The entries read, drawn and checked live to the end: the cyclic collector re-scanning
    # them as the lines are made was a third of a 100k-entry `tree --all` (issue 29).
    with paused_gc():
        return _tree(args, out)


def _tree(args: argparse.Namespace, out: TextIO) -> int:
    from mulligan.frontends.tree import render_tree
    from mulligan.session import maintenance

    log = open_named(args)
    leaf = args.leaf if getattr(args, "leaf", None) else log.tip()
    folded = not args.all and leaf == log.tip()
    # Folded at the tip, the tree draws whole only the branch and the labels: through the
    # index that is all that is parsed, and a file with a valid index was read whole once.
    entries, sketched = log.sketch() if folded else (list(log.entries()), False)
    if sketched:  # what labels the attempts, read whole
        from mulligan.session.branches import with_attempts

        entries = with_attempts(entries, log.entry)
    width = args.width or _terminal_width(out)
    lines = render_tree(entries, leaf, fold=not args.all, width=width)
    out.write("\n".join(lines) + "\n" if lines else "")
    if sketched:
        return 0
    file = log.storage.file
    if file is None:
        log.branch(leaf)  # a database session: the walk is the check
        return 0
    # the lines drawn, and the table their read built, not made again; only the problems
    report = maintenance.check(file, entries=entries, table=log.table(), count=False)
    if report.problems:
        out.flush()
        for problem in report.problems[:10]:
            print(f"mulligan: {file}: {problem}", file=sys.stderr)
        if len(report.problems) > 10:
            print(f"mulligan: ... and {len(report.problems) - 10} more "
                  "('mulligan session check FILE' lists them all)", file=sys.stderr)
        return 1
    return 0


def sessions_export(args: argparse.Namespace, out: TextIO) -> int:
    """`mulligan sessions export FILE --format md|jsonl|html [--leaf ID] [-o OUT]`: the
    export workflow the REPL's /export uses (`app.exports.export`); Markdown without -o, and
    md or html with `-o -`, go to stdout; html without -o to `$MULLIGAN_HOME/exports`; the
    page carries the system prompt as the session's folder would give it now (when that
    folder is here), its checkpoints' diffs, keys redacted."""
    from mulligan.app.exports.export import export, render
    from mulligan.app.secrets import Secrets
    from mulligan.prompts import system_prompt
    from mulligan.providers.config import environment, load_config

    log, entries, leaf = _entries_and_leaf(args)
    home = home_of()
    if args.output == "-" and args.format == "jsonl":
        print("mulligan: sessions export: -o - takes md or html; a jsonl export is a new "
              "session file", file=sys.stderr)
        return 2
    system = None
    if args.format == "html":
        folder = sessions_of(home).folder_of(log, entries)
        system = system_prompt(None, folder) if folder is not None and folder.is_dir() \
            else None
    redact = Secrets.of(environment(), load_config(home)).redact_text
    # The store only when a tool call changed files: opening it imports the snapshot
    # machinery (gitignore matching), a tenth of a 100k-entry export (issue 29).
    store = store_of(home) if any(e.get("workspace") for e in entries) else None
    if args.format != "jsonl" and args.output in (None, "-") and (
            args.output == "-" or args.format == "md"):
        out.write(render(log, args.format, leaf, system=system, store=store, redact=redact))
        return 0
    target = export(log, args.format, Path(args.output) if args.output else None, home=home,
                    cwd=working_folder(args), leaf=leaf, system=system, store=store,
                    redact=redact)
    print(f"wrote {target}", file=out)
    return 0


def session_check(args: argparse.Namespace, out: TextIO) -> int:
    from mulligan.session import maintenance

    report = maintenance.check(find_session_file(args.file, home_of(), working_folder(args)))
    print(report.format(), file=out)
    return 1 if report.problems else 0


def session_repair(args: argparse.Namespace, out: TextIO) -> int:
    from mulligan.session import maintenance

    report = maintenance.repair(find_session_file(args.file, home_of(), working_folder(args)))
    print(report.format(), file=out)
    return 0 if report.ok else 1


def session_migrate(args: argparse.Namespace, out: TextIO) -> int:
    from mulligan.session import maintenance

    written = maintenance.migrate(Path(args.old), Path(args.new))
    print(f"wrote {written} entries to {args.new}", file=out)
    return 0


def sessions_back(args: argparse.Namespace, out: TextIO) -> int:
    """`mulligan sessions back FILE ID [--files]`: what /back ID does, from the shell. The
    session's lease is held while it works (refused while a REPL has the session)."""
    from mulligan.app.rewind.back import describe, go_back
    from mulligan.app.settings import Settings
    from mulligan.providers.config import load_config

    home = home_of()
    sessions = sessions_of(home)
    log = sessions.named(args.file, working_folder(args))
    file = log.path
    lease = log.lease()
    try:
        entries = log.entries()
        log.branch(log.tip())  # a damaged session is refused before anything is done
        checkpoints = None
        if args.files:
            folder = sessions.folder_of(log, entries)
            if folder is None or not folder.is_dir():
                raise UsageError(f"{file}: the session's working folder {folder} is not "
                                 "here; --files cannot restore it")
            checkpoints = checkpoints_for(Settings.build(load_config(home), cwd=folder,
                                                         home=home))
        files: Files | None = None if not args.files else "overwrite" if args.overwrite \
            else "keep-mine" if args.keep_mine else "merge" if args.merge else "restore"
        log.entry(args.id)  # UnknownEntry before any model call
        done = back_summarised(args, log, home, checkpoints, files) if args.summarize else \
            go_back(log, checkpoints, args.id, files=files)
    finally:
        lease.release()
    for line in describe(done):
        print(line, file=out)
    if args.files and not (done.restored or done.kept):
        print("no file to put back: the folder already is as it was at "
              f"{args.id} (or the session has no file checkpoints)", file=out)
    return 0


def sessions_diff(args: argparse.Namespace, out: TextIO) -> int:
    """`mulligan sessions diff FILE A B`: two entries' branches side by side (A and B are entry
    ids, or attempt numbers of the newest attempts): the files as one diff between their
    final trees, then each transcript from where they fork."""
    from mulligan.app.attempts.record import compare

    log = open_named(args)
    for line in compare(log, store_of(home_of()), args.a, args.b):
        print(line, file=out)
    return 0


def back_summarised(args: argparse.Namespace, log: SessionLog, home: Path,
                    checkpoints: Checkpoints | None, files: Files | None) -> Back:
    """`sessions back --summarize`: the going back, the attempt left summarised first by
    --model (Ctrl-C meanwhile: a plain branch line instead)."""
    import threading

    from mulligan.app.models import resolve
    from mulligan.app.rewind.back import go_back

    model = resolve(args.back_model, base_url=None, home=home, err=sys.stderr)
    abort = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda signum, frame: abort.set())
    try:
        print("summarising the attempt left... (Ctrl-C: a plain branch line instead)",
              file=sys.stderr)
        return go_back(log, checkpoints, args.id, files=files, summarize_with=model,
                       abort=abort)
    finally:
        signal.signal(signal.SIGINT, previous)


def sessions_files(args: argparse.Namespace, out: TextIO) -> int:
    """`mulligan sessions files FILE [--leaf ID]`: what each entry of the branch changed."""
    from mulligan.app.workspace.checkpoints import workspace_of

    log = open_named(args)
    leaf = args.leaf if getattr(args, "leaf", None) else log.tip()
    shown = 0
    for entry in log.branch(leaf):
        meta = workspace_of(entry)
        for key, label in (("changed", "changed"), ("outside", "changed outside the agent"),
                           ("restored", "restored")):
            paths = meta.get(key) or []
            if paths:
                print(f"{entry['id']:<6} {label}: {', '.join(paths)}", file=out)
                shown += 1
    if not shown:
        print("(no file was changed on this branch, or it has no checkpoints)", file=out)
    return 0


def gc(args: argparse.Namespace, out: TextIO) -> int:
    """`mulligan gc`: free the snapshots and file copies no session refers to -- no session
    file, and with a database store no session in that database (unreachable: nothing is
    freed, the command fails)."""
    from mulligan.app.sessions.catalog import snapshots_in

    home = home_of()
    store = store_of(home)
    # The session files kept outside the home (--session) that recorded into this store too.
    keep = sessions_of(home).referenced() | snapshots_in(store.remembered())
    trees, blobs, freed = store.gc(keep)
    print(f"freed {trees} snapshot(s) and {blobs} file copies, {freed / 1e6:.1f} MB; the "
          f"store holds {store.size() / 1e6:.1f} MB in {store.root}", file=out)
    if store.shared is not None:  # the database's copies: what no session there names
        trees, blobs, freed = store.shared.gc(keep)
        print(f"freed {trees} snapshot(s) and {blobs} file copies, {freed / 1e6:.1f} MB, in "
              f"{store.shared.database.name}", file=out)
    from mulligan.app.attempts.folders import gc_folders

    groups = gc_folders(home)
    if groups:
        print(f"removed the folders of {groups} attempt group(s) over a day old", file=out)
    return 0


def _terminal_width(out: TextIO) -> int:
    try:
        return os.get_terminal_size(out.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 100


def sessions_push(args: argparse.Namespace, out: TextIO) -> int:
    """`mulligan sessions push FILE`: copy a session file, checked whole first, into the
    database store as a new session; the id is the last line printed. The file's lease is
    held meanwhile, so no mulligan appends to it mid-copy. The file is left as it is."""
    from mulligan.app.sessions.catalog import session_folder
    from mulligan.session import SessionLog, maintenance

    home = home_of()
    sessions = sessions_of(home)
    if not sessions.can_push:
        raise UsageError("sessions push needs a database store: set MULLIGAN_STORE (or store "
                         "in config.toml) to a postgresql:// URL")
    file = find_session_file(args.file, home, working_folder(args))
    lease = SessionLog(file).lease()
    try:
        report = maintenance.check(file)
        if report.problems:  # every refusal of a full read, by line; nothing is copied
            raise UsageError(f"{file}: not pushed:\n" + report.format())
        data = file.read_bytes()
        entries = SessionLog(file).entries()
    finally:
        lease.release()
    names = [e["name"] for e in entries if e.get("type") == "session_info" and e.get("name")]
    folder = session_folder(entries)
    lines = data.split(b"\n")[:-1]
    session_id = sessions.push(lines, cwd=str(folder) if folder else None,
                               name=names[-1] if names else None)
    print(f"pushed {file} ({len(lines)} entries) to {sessions.name}; continue it "
          f"with: mulligan --session {session_id}", file=out)
    print(session_id, file=out)
    return 0


NEWLINE = b"\n"


def sessions_pull(args: argparse.Namespace, out: TextIO) -> int:
    """`mulligan sessions pull ID -o OUT`: the database session's lines, byte for byte, as a
    new session file (never over an existing one)."""
    from mulligan.app.exports.linear import write_new
    from mulligan.app.sessions.stores import session_bytes

    sessions = sessions_of(home_of())
    if not sessions.shared:
        raise UsageError("sessions pull needs a database store: set MULLIGAN_STORE (or store "
                         "in config.toml) to a postgresql:// URL")
    log = sessions.named(args.id, working_folder(args))
    data = session_bytes(log)
    target = write_new(Path(args.output), data)
    print(f"wrote {target} ({data.count(NEWLINE)} entries)", file=out)
    return 0


def sessions_import(args: argparse.Namespace, out: TextIO) -> int:
    """`mulligan sessions import FILE [--from TOOL] [-o OUT]` and `--all TOOL`: each source
    file read whole (refused by file and line before anything is written), checked as a
    Mulligan session, then written as a new session: OUT, else a new session of this folder
    in the store sessions go to. The new session's path (or id) is the last line printed;
    with --all, one line per file and exit 1 if any could not be read."""
    from mulligan.app.importers.convert import Unreadable, found_for

    cwd = working_folder(args)
    if args.all_from:
        if args.file or args.output:
            raise UsageError("sessions import --all TOOL takes no FILE and no -o")
        files = found_for(args.all_from, cwd)
        if not files:
            print(f"no {args.all_from} sessions for {cwd}", file=out)
            return 0
        failed = 0
        for file in files:
            try:
                print(_import_one(file, args.all_from, None, cwd), file=out)
            except (Unreadable, OSError) as exc:
                failed += 1
                print(f"not imported: {exc}", file=sys.stderr)
        return 1 if failed else 0
    if not args.file:
        raise UsageError("sessions import needs FILE (or --all claude-code|codex|pi)")
    print(_import_one(Path(args.file).expanduser(), args.source, args.output, cwd), file=out)
    return 0


def _import_one(file: Path, tool: str, output: str | None, cwd: Path) -> str:
    """Import `file`; returns the line saying where it went (ending with its path or id)."""
    import tempfile

    from mulligan.app.exports.linear import write_new
    from mulligan.app.importers.convert import Unreadable, read, to_lines
    from mulligan.app.sessions.catalog import new_session_path
    from mulligan.session import maintenance

    source = read(file, tool)
    lines = to_lines(source, file)
    data = b"".join(line + b"\n" for line in lines)
    with tempfile.TemporaryDirectory() as scratch:  # checked as a session before it is kept
        trial = Path(scratch) / "imported.jsonl"
        trial.write_bytes(data)
        report = maintenance.check(trial)
        if report.problems:
            raise Unreadable(f"{file}: the import would not be a sound session: "
                             f"{report.problems[0]}")
    said = f"imported {file} ({source.tool}, {len(lines)} entries) into"
    if output:
        return f"{said}\n{write_new(Path(output), data)}"
    sessions = sessions_of(home_of())
    if sessions.can_push:
        return f"{said} {sessions.name}\n" + sessions.push(lines, cwd=source.cwd or str(cwd),
                                                           name=source.name)
    return f"{said}\n{write_new(new_session_path(home_of(), cwd), data)}"
