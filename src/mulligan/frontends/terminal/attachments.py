"""Images the user attaches in the REPL: ``@path/to/shot.png`` in a prompt, or a pasted image
path (a terminal pastes a dragged file as its path, quoted or with escaped spaces, or as a
file:// URL).

In: the typed text and the working folder. Out: the text itself (no image found), or the text
followed by the image blocks; plus a line per image to show. An ``@word`` that is not an
existing image file is left as text (it may be an e-mail address or a decorator); an existing
file with an image's name whose bytes are not an image is refused by name, and nothing is sent.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlsplit

from mulligan.messages import Content, InputBlock
from mulligan.tools.images import EXTENSIONS, NotAnImage, image_from_file

# @path, @"path with spaces" or @'...', ending in an image extension.
_AT = re.compile(r"""@(?:"([^"]+)"|'([^']+)'|(\S+))""")


def image_paths(text: str, cwd: Path) -> list[Path]:
    """The image files `text` names: each ``@path`` with an image extension that exists (relative
    to `cwd`), or the whole text when it is one pasted path to an image. In order, once each."""
    found: list[Path] = []
    for match in _AT.finditer(text):
        name = next(group for group in match.groups() if group is not None)
        name = name.rstrip(".,;:!?)")
        _add(found, cwd, name)
    if not found:
        pasted = _pasted_path(text.strip())
        if pasted is not None:
            _add(found, cwd, pasted)
    return found


def _add(found: list[Path], cwd: Path, name: str) -> None:
    path = (cwd / Path(name).expanduser())
    if path.suffix.lower() in EXTENSIONS and path.is_file() and path not in found:
        found.append(path)


def _pasted_path(text: str) -> str | None:
    """A single pasted path: 'a b.png', "a b.png", a\\ b.png, or file:///a%20b.png."""
    if not text or "\n" in text:
        return None
    if text.startswith("file://"):
        return unquote(urlsplit(text).path)
    try:
        words = shlex.split(text)
    except ValueError:
        return None
    return words[0] if len(words) == 1 else None


def with_attachments(text: str, cwd: Path, say: Callable[[str, str], None]) -> Content | None:
    """`text` with the images it names attached (see the module docstring), saying what was
    attached; None when an image could not be read (said, and nothing is to be sent)."""
    paths = image_paths(text, cwd)
    if not paths:
        return text
    blocks: list[InputBlock] = [{"type": "text", "text": text}]
    for path in paths:
        try:
            block, description = image_from_file(path)
        except (OSError, NotAnImage) as exc:
            say(f"cannot attach {path}: {exc}; nothing was sent", "bold red")
            return None
        blocks.append(block)
        say(f"(attached {description})", "dim")
    return blocks
