"""The docs cannot drift from the code: the README's flags table is the parser's, docs/design.md
names every module that exists and no module that does not, and every docs link resolves."""

from __future__ import annotations

import re
from pathlib import Path

from mulligan.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DESIGN = ROOT / "docs" / "design.md"
PACKAGE = ROOT / "src" / "mulligan"


def table_rows(text: str, heading: str) -> list[str]:
    """The first cells of the table under `heading` (a Markdown heading line)."""
    after = text.split(heading + "\n", 1)[1]
    rows = []
    for line in after.splitlines():
        if line.startswith("#"):
            break
        if line.startswith("| ") and not line.startswith("| ---"):
            rows.append(line.split(" | ")[0].removeprefix("| "))
    return rows[1:]  # the header row is not a flag


def test_the_readme_flags_table_lists_exactly_the_parsers_flags() -> None:
    documented = set()
    for cell in table_rows(README.read_text(encoding="utf-8"), "### Flags"):
        documented.update(re.findall(r"`(-{1,2}[a-z][a-z-]*)", cell))
    parser = build_parser()
    actual = {option for action in parser._actions for option in action.option_strings}
    actual.discard("-h")
    assert documented == actual


def test_design_md_names_every_module_and_only_modules_that_exist() -> None:
    named = set(re.findall(r"^\| `([\w/]+\.py)` \|", DESIGN.read_text(encoding="utf-8"), re.M))
    existing = {f.relative_to(PACKAGE).as_posix() for f in PACKAGE.rglob("*.py")}
    assert named - existing == set(), "docs/design.md names modules that do not exist"
    assert existing - named == set(), "modules missing from docs/design.md's table"


def test_the_readme_is_a_front_door_and_its_doc_links_resolve() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    assert text.splitlines()[3].startswith("make run") and text.splitlines()[4].startswith(
        "make test")
    for link in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / link).is_file(), link


DOTTED = re.compile(r"\bmulligan(?:\.[A-Za-z_][A-Za-z0-9_]*)+")


def resolves(name: str) -> bool:
    """`name` is a module, or an attribute (at any depth) of the longest module it starts with."""
    import importlib

    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def test_every_mulligan_name_the_docs_mention_exists() -> None:
    texts = [README, *sorted((ROOT / "docs").glob("*.md"))]
    missing = sorted({f"{doc.name}: {name}" for doc in texts
                      for name in DOTTED.findall(doc.read_text(encoding="utf-8"))
                      if not resolves(name.rstrip("."))})
    assert missing == []


def test_every_section_a_message_points_to_exists() -> None:
    """A message saying "see 'Heading' in README.md" (or a docs/ page) names a heading that
    is there."""
    found = 0
    # The page may start the next string of an implicit concatenation: `in "` `"docs/...`.
    pointer = re.compile(r"""['"]([^'"\n]{3,80})['"] in (?:"\s*")?(README\.md|docs/[\w-]+\.md)""")
    broken = []
    for source in sorted(PACKAGE.rglob("*.py")):
        for heading, page in pointer.findall(source.read_text(encoding="utf-8")):
            target = ROOT / page
            headings = {line.lstrip("#").strip() for line in target.read_text(
                encoding="utf-8").splitlines() if line.startswith("#")} \
                if target.is_file() else set()
            found += 1
            if heading not in headings:
                broken.append(f"{source.relative_to(ROOT)}: '{heading}' in {page}")
    assert broken == [] and found >= 2
