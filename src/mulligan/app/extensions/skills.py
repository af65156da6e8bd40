"""Skills: folders holding a `SKILL.md` whose front matter gives `name` and `description`.

Looked for in `.mulligan/skills/`, `$MULLIGAN_HOME/skills/` and `.claude/skills/` (the first
skill of a name wins). Their names, descriptions and paths are listed in the system prompt;
the model reads a skill's files with `read` when a task calls for it, and `read` may open
files in skill folders even outside the working folder (nothing else outside it).

In: folders. Out: `Skill` values, the problems (a SKILL.md without a name or description),
and the system prompt's paragraph. Reads files; never writes or runs anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mulligan.app.extensions.commands import front_matter, read_capped

__all__ = ["Skill", "load_skills", "prompt_text", "skill_folders"]

MAX_BYTES = 100_000


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    folder: Path

    @property
    def file(self) -> Path:
        return self.folder / "SKILL.md"


def skill_folders(cwd: Path, home: Path) -> list[Path]:
    return [cwd / ".mulligan" / "skills", home / "skills", cwd / ".claude" / "skills"]


def load_skills(folders: list[Path]) -> tuple[list[Skill], list[str]]:
    found: dict[str, Skill] = {}
    problems: list[str] = []
    for root in folders:
        try:
            candidates = sorted(p for p in root.iterdir() if (p / "SKILL.md").is_file())
        except OSError:
            continue
        for folder in candidates:
            file = folder / "SKILL.md"
            try:
                text = read_capped(file, MAX_BYTES)
            except OSError as exc:
                problems.append(f"{file}: cannot be read ({exc.strerror}); skill not listed")
                continue
            fields, _ = front_matter(text)
            name, description = fields.get("name", "").strip(), fields.get(
                "description", "").strip()
            if not name or not description:
                problems.append(f"{file}: its front matter needs name and description; "
                                "skill not listed")
                continue
            found.setdefault(name, Skill(name, " ".join(description.split())[:1024],
                                         folder.resolve()))
    return list(found.values()), problems


def prompt_text(skills: list[Skill]) -> str:
    """The system prompt's paragraph listing `skills` ("" for none)."""
    if not skills:
        return ""
    lines = ["Skills: folders of instructions (and sometimes scripts) for particular tasks. "
             "When a task matches a skill's description, read its SKILL.md with the read tool "
             "first and follow it; read the other files it mentions when you need them."]
    lines += [f"- {s.name}: {s.description} ({s.file})" for s in skills]
    return "\n".join(lines)
