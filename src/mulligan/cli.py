"""`mulligan`: argument parsing and wiring only. What each command does is in `mulligan.modes`.

    mulligan                         the REPL in the current folder
    mulligan -p "task" [--mode json] one run: the final answer, or JSON lines
    mulligan sessions ls|show|tree|export|check|repair|migrate|back|files|push|pull
    mulligan gc                      free checkpoint copies no session refers to

Exit status: 0 done; 1 the run failed or the command could not be done; 2 bad usage.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import os
import sys
from collections.abc import Sequence

from mulligan import __version__

EPILOG = """\
sessions are files under $MULLIGAN_HOME (default ~/.mulligan):
  sessions/<folder>/<timestamp>_<id>.jsonl, one per conversation, written from the first message.
  MULLIGAN_STORE=postgresql://... keeps new sessions in that PostgreSQL database instead.
'mulligan session ...' is an alias of 'mulligan sessions ...'.
testing aid: --model scripted:FILE answers from FILE, a JSON list of replies (no network).
"""


def build_parser(*, commands: bool = True) -> argparse.ArgumentParser:
    """The parser of every flag, and (`commands`) of the sub-commands: sessions, gc, mcp."""
    parser = argparse.ArgumentParser(
        prog="mulligan", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
        description="A coding agent for the terminal whose sessions you can take back. "
                    "Without -p, starts the interactive REPL in the working folder.")
    parser.add_argument("--version", action="version", version=f"mulligan {__version__}")
    parser.add_argument("-p", "--print", metavar="TASK",
                        help="run TASK once, print only the final answer, and exit "
                             "(exit status 1 if the run failed); '-' reads TASK from stdin")
    parser.add_argument("--thinking", choices=("off", "low", "medium", "high"),
                        help="how hard the model thinks (Anthropic's thinking budget, OpenAI's "
                             "reasoning effort, Gemini's thinking budget); kept with the "
                             "session")
    parser.add_argument("--web-search", action="store_true",
                        help="turn on the provider's own web search (Anthropic's, OpenAI's); "
                             "its results are recorded with the reply")
    parser.add_argument("--image", action="append", metavar="FILE",
                        help="with -p: attach this PNG, JPEG, GIF or WebP image to TASK "
                             "(repeatable)")
    parser.add_argument("--mode", choices=("text", "json"), default="text",
                        help="with -p: 'text' prints the final answer (default), 'json' prints "
                             "every event as one JSON object per line")
    parser.add_argument("--model", metavar="NAME", action=_Models,
                        help="provider/model, e.g. anthropic/claude-sonnet-4-6, "
                             "openai/gpt-5.5, local/smollm2-135m, local:/path/model.gguf "
                             "(default: config.toml's model, else a hosted default when "
                             "ANTHROPIC_API_KEY or OPENAI_API_KEY is set, else the embedded "
                             "local model)")
    parser.add_argument("--base-url", metavar="URL",
                        help="talk to this endpoint instead of the provider's default "
                             "(e.g. an OpenAI-compatible server)")
    parser.add_argument("--cwd", metavar="DIR",
                        help="the working folder the tools act in (default: the current one)")
    parser.add_argument("--max-turns", type=int, metavar="N",
                        help="stop a run after N model calls")
    parser.add_argument("--system-prompt-file", metavar="FILE",
                        help="use FILE instead of the built-in base system prompt (the working "
                             "folder and AGENTS.md are still added)")
    parser.add_argument("--permission-mode", choices=("ask", "edits", "auto", "plan"),
                        help="ask: ask before every bash command and file change (the REPL's "
                             "default); edits: file changes go through, bash asks; auto: "
                             "nothing asks (the default for -p, where nobody is there to ask; "
                             "under ask or edits, -p refuses what would ask); plan: read-only "
                             "tools only, every change and command refused")
    parser.add_argument("--sandbox", action="store_true",
                        help="run bash under bubblewrap: only the working folder and a private "
                             "/tmp writable, no network")
    parser.add_argument("--sandbox-network", action="store_true",
                        help="with --sandbox: let bash reach the network")
    parser.add_argument("--attempts", type=int, metavar="N",
                        help="with -p: N attempts at once, each in its own copy of the folder "
                             "(--model repeated: the models in turn); a table compares them")
    parser.add_argument("--check", metavar="CMD",
                        help="with --attempts: run CMD in each attempt's folder when it ends")
    parser.add_argument("--adopt", action="store_true",
                        help="with --attempts: put the passing attempt with the fewest changed "
                             "lines into the working folder")
    parser.add_argument("--mcp-config", action="append", metavar="FILE",
                        help="start the MCP servers of FILE, in Claude Code's .mcp.json shape "
                             "(repeatable; -p uses a folder's own .mcp.json only this way)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("-c", "--continue", dest="continue_", action="store_true",
                       help="continue the newest session of this folder")
    which.add_argument("-r", "--resume", action="store_true",
                       help="pick one of this folder's sessions to continue")
    which.add_argument("--session", metavar="FILE",
                       help="use this session file (created at the first message if missing)")
    which.add_argument("--no-session", action="store_true",
                       help="save nothing (no /tree, /back or /edit)")
    if commands:
        _add_commands(parser)
    else:
        parser.set_defaults(command=None)
    return parser


def _add_commands(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="command", metavar="{sessions,session,gc,mcp}")
    sessions = commands.add_parser(
        "sessions", aliases=["session"], help="list, show, export and check session files",
        description="Session files. FILE is a path, or the start of a file name among this "
                    "folder's sessions. 'session' is an alias of 'sessions'.")
    actions = sessions.add_subparsers(dest="action", required=True, metavar="ACTION")

    def with_file(name: str, about: str) -> argparse.ArgumentParser:
        sub = actions.add_parser(name, help=about, description=about)
        sub.add_argument("file", metavar="FILE")
        return sub

    ls = actions.add_parser("ls", help="this folder's sessions, newest first: name, entries, "
                                       "branches, last activity")
    ls.add_argument("--all", action="store_true", help="every folder's sessions")
    show = with_file("show", "the transcript of a branch (default: the one ending at the tip)")
    show.add_argument("--leaf", metavar="ID", help="the branch ending at entry ID")
    tree = with_file("tree", "the session as a tree; abandoned attempts are folded")
    tree.add_argument("--all", action="store_true", help="unfold abandoned attempts")
    tree.add_argument("--width", type=int, help="line width (default: the terminal's)")
    export = with_file("export", "a branch as Markdown or a new linear session file, or the "
                                 "whole session as one HTML page")
    export.add_argument("--format", choices=("md", "jsonl", "html"), default="md",
                        help="md: a Markdown transcript of the branch (default); jsonl: a new "
                             "session file holding only that branch; html: one self-contained "
                             "page holding every attempt of the session")
    export.add_argument("--leaf", metavar="ID", help="the branch ending at entry ID")
    export.add_argument("-o", "--output", metavar="OUT",
                        help="where to write, - for stdout (md default: stdout; jsonl default: a "
                             "new session file of this folder; html default: "
                             "$MULLIGAN_HOME/exports/mulligan-<session>.html); never over an "
                             "existing file")
    with_file("check", "report problems in a session file (exit status 1 if any)")
    with_file("repair", "set a torn last line aside (into a file of its own, never deleted) so the "
                        "session can be read and appended to again; exit status 1 if other "
                        "damage is left")
    migrate = actions.add_parser("migrate", help="rewrite a session file from before parents "
                                                 "existed into the current format")
    migrate.add_argument("old", metavar="OLD")
    migrate.add_argument("new", metavar="NEW")
    back = with_file("back", "go back to entry ID, as /back ID does (one branch line); with "
                             "--files the session's working folder is put back as it was there")
    back.add_argument("id", metavar="ID")
    back.add_argument("--files", action="store_true",
                      help="restore the working folder as it was at ID; refused, changing "
                           "nothing, if a file was changed outside the agent (exit 1)")
    mine = back.add_mutually_exclusive_group()
    mine.add_argument("--keep-mine", action="store_true",
                      help="with --files: leave files changed outside the agent as they are")
    mine.add_argument("--overwrite", action="store_true",
                      help="with --files: restore those too (a safety snapshot keeps them)")
    mine.add_argument("--merge", action="store_true",
                      help="with --files: in a file you edited that the agent also changed, "
                           "take the agent's change out and keep yours (as git revert does); "
                           "refused, naming the file, where the two touch the same lines")
    back.add_argument("--summarize", action="store_true",
                      help="summarise the attempt left into a branch_summary entry")
    back.add_argument("--model", dest="back_model", metavar="NAME",
                      help="the model that writes the summary (default: as for a run)")
    diff = with_file("diff", "two entries' branches side by side: their files as one diff "
                             "between the final trees, and each transcript from the fork "
                             "(A, B: entry ids, or attempt numbers of the newest attempts)")
    diff.add_argument("a", metavar="A")
    diff.add_argument("b", metavar="B")
    files = with_file("files", "the files each entry of a branch changed (from its checkpoints)")
    files.add_argument("--leaf", metavar="ID", help="the branch ending at entry ID")
    imports = actions.add_parser(
        "import", help="a new Mulligan session from another agent's session file, its tree "
                       "kept; the new session's path (or id) is the last line printed")
    imports.add_argument("file", metavar="FILE", nargs="?",
                         help="a Claude Code transcript, Codex rollout, pi or Tau session")
    imports.add_argument("--from", dest="source", default="auto",
                         choices=("auto", "claude-code", "codex", "pi", "tau"),
                         help="the tool that wrote FILE (default: told from its first lines)")
    imports.add_argument("-o", "--output", metavar="OUT",
                         help="the new session file (default: a new session of this folder, "
                              "or of the database store); never over an existing file")
    imports.add_argument("--all", dest="all_from", metavar="TOOL",
                         choices=("claude-code", "codex", "pi"),
                         help="import every session that tool keeps for this folder")
    with_file("push", "copy a session file into the database store (MULLIGAN_STORE) as a new "
                      "session; its id is the last line printed")
    pull = actions.add_parser("pull", help="write a database session out as a session file, "
                                           "byte for byte")
    pull.add_argument("id", metavar="ID")
    pull.add_argument("-o", "--output", metavar="OUT", required=True,
                      help="the new session file (never over an existing one)")
    commands.add_parser("gc", help="free checkpoint snapshots and file copies that no session "
                                   "refers to, and report the space used",
                        description="Free what no session under $MULLIGAN_HOME refers to.")
    mcp = commands.add_parser("mcp", help="the MCP servers this folder would use",
                              description="MCP servers: config.toml's [mcp_servers.NAME], "
                                          "--mcp-config files, a trusted folder's .mcp.json.")
    mcp_actions = mcp.add_subparsers(dest="mcp_action", required=True, metavar="ACTION")
    mcp_list = mcp_actions.add_parser("list", help="start each server; print its state and "
                                                   "tools (exit 1 if one failed)")
    mcp_list.add_argument("--mcp-config", action="append", metavar="FILE", dest="mcp_config",
                          help="also the servers of FILE (.mcp.json shape)")


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `argv` (default: sys.argv[1:]) and run the command; returns the exit status.
    --version and --help end inside parse_args, before the agent is imported: they cost
    argparse, not the harness, the tools' schema checker or a provider."""
    argv = sys.argv[1:] if argv is None else list(argv)
    # A bare `mulligan` (the REPL) names no sub-command: their 17 parsers are not built on
    # its way to the first prompt (about half of what argparse cost there).
    parser = build_parser(commands=bool(argv))
    args = parser.parse_args(argv)
    # A REPL's start makes its modules' objects, nearly all for good, and the cyclic collector
    # walked them again and again (about 6% of the CPU to the first prompt): it is off until
    # the first prompt is about to be drawn (`modes.interactive` turns it back on then), or
    # the REPL did not start.
    paused = args.command is None and args.print is None and gc.isenabled()
    if paused:
        gc.disable()
    from mulligan import modes
    out, err = sys.stdout, sys.stderr
    try:
        if args.command in ("sessions", "session"):
            return _ACTIONS[args.action](args, out)
        if args.command == "gc":
            return modes.gc(args, out)
        if args.command == "mcp":
            return modes.mcp_list(args, out)
        if args.mode != "text" and args.print is None:
            raise modes.UsageError("--mode needs -p")
        if args.image and args.print is None:
            raise modes.UsageError("--image needs -p (in the REPL, type @path/to/image.png)")
        if args.max_turns is not None and args.max_turns < 1:
            raise modes.UsageError("--max-turns must be at least 1")
        if args.print is not None:
            if not args.print.strip():
                raise modes.UsageError("-p needs a task: -p \"TASK\", or -p - to read it "
                                       "from stdin")
            if args.resume:
                raise modes.UsageError("-r/--resume picks interactively; use -c or --session "
                                       "with -p")
            return modes.run_print(args, out, err)
        if args.attempts is not None or args.check is not None or args.adopt:
            raise modes.UsageError("--attempts, --check and --adopt go with -p (in the REPL: "
                                   "/try N [--model NAME ...] [--check CMD] TEXT)")
        return modes.run_interactive(args, err)
    except KeyboardInterrupt:
        print(file=err)
        return 130
    except BrokenPipeError:
        # `mulligan sessions show ... | head`: the reader has gone; so do we, quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except modes.UsageError as exc:
        parser.print_usage(err)
        print(f"mulligan: error: {exc}", file=err)
        return 2
    except (ValueError, OSError, RuntimeError) as exc:
        # Named errors from below: MissingApiKey, UnknownModel, LeaseHeld, SessionError, ...
        print(f"mulligan: {_said(exc)}", file=err)
        from mulligan.session import SessionError, TornLine, UnknownEntry

        if isinstance(exc, SessionError) and not isinstance(exc, UnknownEntry) \
                and "migrate" not in exc.problem \
                and getattr(args, "action", None) not in ("check", "repair", "migrate"):
            # Damage, not a mistyped id: say how to see all of it and how to mend it.
            fix = ("'mulligan session repair FILE' mends it" if isinstance(exc, TornLine) else
                   "mend or delete the line it names by hand")
            print(f"mulligan: the session file is damaged: {fix}; 'mulligan session check "
                  "FILE' lists every problem with its line", file=err)
        return 1
    finally:
        if paused:
            gc.enable()


def run() -> None:
    """The `mulligan` command: `main()`, then out at once. Once the output is flushed and the
    exit handlers have run (the lease given back, the saver done), the process ends without
    freeing what it parsed object by object: for a 100k-entry session that teardown was most
    of a second of the exit."""
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (BrokenPipeError, ValueError):
        pass
    atexit._run_exitfuncs()
    os._exit(code)


def _said(exc: BaseException) -> str:
    """An error as a person should read it: an OSError as "<file>: <what went wrong>", not
    "[Errno 2] No such file or directory: '<file>'"."""
    if isinstance(exc, OSError) and exc.strerror:
        where = exc.filename if exc.filename is not None else ""
        return f"{where}: {exc.strerror.lower()}" if where else exc.strerror.lower()
    return str(exc)


class _Models(argparse.Action):
    """--model NAME, repeatable: `model` is the first one given, `models` every one."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        models = [*(getattr(namespace, "models", None) or []), values]
        namespace.models = models
        namespace.model = models[0]


def _action(name: str):  # type: ignore[no-untyped-def]
    def run(args: argparse.Namespace, out) -> int:  # type: ignore[no-untyped-def]
        from mulligan import modes

        result: int = getattr(modes, name)(args, out)
        return result
    return run


_ACTIONS = {"ls": _action("sessions_ls"), "show": _action("sessions_show"),
            "tree": _action("sessions_tree"), "export": _action("sessions_export"),
            "check": _action("session_check"), "repair": _action("session_repair"),
            "migrate": _action("session_migrate"), "back": _action("sessions_back"),
            "files": _action("sessions_files"), "diff": _action("sessions_diff"),
            "push": _action("sessions_push"), "import": _action("sessions_import"),
            "pull": _action("sessions_pull")}
