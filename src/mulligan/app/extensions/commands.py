"""Custom slash commands: Markdown files whose text is sent as the prompt.

Looked for, in this order (the first file of a name wins): `.mulligan/commands/NAME.md` in the
working folder, `$MULLIGAN_HOME/commands/NAME.md`, `.claude/commands/NAME.md` (Claude Code's
project commands). `/NAME ARGS` sends the file's text with `$ARGUMENTS` replaced by ARGS and
`$1`, `$2`, ... by its words. An optional front matter (`---` lines) gives `description`
(shown in the `/` menu) and `model` (the model for that prompt).

In: folders. Out: `Custom` values and the names refused (a clash with a built-in command, a
name that is not a plain word), each with why. Reads files; never writes or runs anything.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Custom", "command_folders", "expand", "front_matter", "load_commands", "read_capped"]

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
MAX_BYTES = 200_000


def read_capped(file: Path, limit: int) -> str:
    """The first `limit` bytes of `file` as text (undecodable bytes replaced); never reads
    more than that, so a huge or endless file costs nothing. Raises OSError."""
    with file.open("rb") as handle:
        return handle.read(limit).decode("utf-8", errors="replace")


@dataclass(frozen=True)
class Custom:
    name: str
    text: str
    description: str
    model: str | None
    path: Path


def command_folders(cwd: Path, home: Path) -> list[Path]:
    """Where commands are looked for, first place first."""
    return [cwd / ".mulligan" / "commands", home / "commands", cwd / ".claude" / "commands"]


def front_matter(text: str) -> tuple[dict[str, str], str]:
    """(the `key: value` lines between a leading `---` and the next `---`, the rest). A file
    without front matter is ({}, text). Values lose surrounding quotes; lists and nesting are
    not read (Claude Code's `allowed-tools` is passed over)."""
    if not text.startswith("---"):
        return {}, text
    lines = text.splitlines(keepends=True)
    for end in range(1, len(lines)):
        if lines[end].strip() == "---":
            fields: dict[str, str] = {}
            for line in lines[1:end]:
                key, colon, value = line.partition(":")
                if colon and key.strip() and not key.startswith((" ", "\t", "-")):
                    fields[key.strip()] = value.strip().strip("\"'")
            return fields, "".join(lines[end + 1:])
    return {}, text


def load_commands(folders: list[Path], builtins: Collection[str]) -> tuple[
        list[Custom], list[str]]:
    """(the commands found, the problems: one line per file refused, naming it)."""
    found: dict[str, Custom] = {}
    problems: list[str] = []
    for folder in folders:
        try:
            files = sorted(folder.glob("*.md"))
        except OSError:
            continue
        for file in files:
            name = file.stem
            if not NAME.match(name):
                problems.append(f"{file}: /{name} is not a command name (letters, digits, "
                                "'_', '-', '.', ':'); not loaded")
                continue
            if name.lower() in builtins:
                problems.append(f"{file}: /{name} is a built-in command; not loaded (rename "
                                "the file)")
                continue
            if name in found:
                continue  # an earlier place has it (project before user before .claude)
            try:
                raw = read_capped(file, MAX_BYTES)
            except OSError as exc:
                problems.append(f"{file}: cannot be read ({exc.strerror}); not loaded")
                continue
            fields, body = front_matter(raw)
            first = next((line.strip("# ").strip() for line in body.splitlines()
                          if line.strip()), "")
            found[name] = Custom(name, body.strip() + "\n", fields.get("description")
                                 or first[:80], fields.get("model") or None, file)
    return list(found.values()), problems


def expand(command: Custom, arguments: str) -> str:
    """The command's text with `$ARGUMENTS` and `$1`...`$9` filled in (missing ones empty).
    When the text uses neither and arguments were given, they are added at the end, so
    nothing typed is lost."""
    try:
        words = shlex.split(arguments)
    except ValueError:
        words = arguments.split()
    text = command.text
    used = "$ARGUMENTS" in text or re.search(r"\$[1-9]", text) is not None
    text = text.replace("$ARGUMENTS", arguments)
    text = re.sub(r"\$([1-9])", lambda m: words[int(m.group(1)) - 1]
                  if int(m.group(1)) <= len(words) else "", text)
    if not used and arguments.strip():
        text = f"{text.rstrip()}\n\n{arguments}\n"
    return text
