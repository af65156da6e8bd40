"""ls, grep and find over a real folder tree."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from mulligan.tools import ToolError, find_tool, grep_tool, ls_tool
from mulligan.tools.search import glob_matcher


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "core.py").write_text("def main():\n    return 'TODO'\n")
    (tmp_path / "src" / "app.py").write_text("import pkg\n# todo: more\n")
    (tmp_path / "README.md").write_text("# Project\nTODO: write\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("TODO in git internals\n")
    (tmp_path / "blob.bin").write_bytes(b"TODO\0\x01\x02")
    return tmp_path


def ls(root: Path, **arguments: object) -> str:
    return ls_tool(root)["execute"](arguments)


def grep(root: Path, **arguments: object) -> str:
    return grep_tool(root)["execute"](arguments)


def find(root: Path, **arguments: object) -> str:
    return find_tool(root)["execute"](arguments)


def test_ls_lists_entries_sorted_with_folders_marked(tree: Path) -> None:
    assert ls(tree) == ".git/\nREADME.md\nblob.bin\nsrc/\n"


def test_ls_of_a_subfolder(tree: Path) -> None:
    assert ls(tree, path="src") == "app.py\npkg/\n"


def test_ls_of_an_empty_folder_says_so(tmp_path: Path) -> None:
    (tmp_path / "e").mkdir()
    assert ls(tmp_path, path="e") == "(e is empty)"


def test_ls_of_a_file_is_refused(tree: Path) -> None:
    with pytest.raises(ToolError, match="README.md is a file, not a folder"):
        ls(tree, path="README.md")


def test_ls_of_a_huge_folder_stops_at_the_budget_and_says_so(tmp_path: Path) -> None:
    for n in range(2500):
        (tmp_path / f"f{n:04}").touch()
    out = ls(tmp_path)
    assert out.count("\n") == 2000
    assert out.endswith("f1999\n[Showing 2000 of 2500 entries. Use find with a pattern to "
                        "narrow the list.]")


def test_grep_reports_file_line_and_text(tree: Path) -> None:
    assert grep(tree, pattern="TODO") == (
        "README.md:2: TODO: write\nsrc/pkg/core.py:2:     return 'TODO'\n")


def test_grep_skips_git_internals_and_binary_files(tree: Path) -> None:
    out = grep(tree, pattern="TODO")
    assert ".git" not in out
    assert "blob.bin" not in out


def test_grep_can_ignore_case(tree: Path) -> None:
    assert "src/app.py:2: # todo: more" in grep(tree, pattern="todo", ignore_case=True)


def test_grep_narrows_by_glob(tree: Path) -> None:
    assert grep(tree, pattern="TODO", glob="*.py") == "src/pkg/core.py:2:     return 'TODO'\n"


def test_grep_narrows_by_path_to_a_folder_or_a_file(tree: Path) -> None:
    assert grep(tree, pattern="import", path="src") == "src/app.py:1: import pkg\n"
    assert grep(tree, pattern="#", path="README.md") == "README.md:1: # Project\n"


def test_grep_stops_at_the_limit_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "many.txt").write_text("hit\n" * 50)
    out = grep(tmp_path, pattern="hit", limit=3)
    assert out == ("many.txt:1: hit\nmany.txt:2: hit\nmany.txt:3: hit\n"
                   "[Stopped at limit=3 matches; there may be more. Narrow the pattern, path or "
                   "glob, or raise limit.]")


def test_grep_with_no_match_says_so_without_failing(tree: Path) -> None:
    assert grep(tree, pattern="nowhere") == "No matches for 'nowhere' in the workspace."


def test_grep_with_a_broken_regex_names_the_problem(tree: Path) -> None:
    with pytest.raises(ToolError, match=r"Invalid regular expression 'f\(': missing \)"):
        grep(tree, pattern="f(")


def test_grep_shortens_very_long_matching_lines(tmp_path: Path) -> None:
    (tmp_path / "min.js").write_text("x" * 10_000 + "needle\n")
    out = grep(tmp_path, pattern="needle")
    assert out == "min.js:1: " + "x" * 500 + " [...]\n"


def test_grep_searches_inside_non_utf8_text(tmp_path: Path) -> None:
    (tmp_path / "latin.txt").write_bytes("café au lait\n".encode("latin-1"))
    assert grep(tmp_path, pattern="au lait") == "latin.txt:1: caf\ufffd au lait\n"


def test_grep_passes_over_a_symlink_pointing_outside(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("password\n")
    (tmp_path / "ws").mkdir()
    os.symlink(tmp_path / "secret.txt", tmp_path / "ws" / "link.txt")
    out = grep(tmp_path / "ws", pattern="password")
    assert out == "No matches for 'password' in the workspace."


def test_find_matches_a_recursive_glob(tree: Path) -> None:
    assert find(tree, pattern="**/*.py") == "src/app.py\nsrc/pkg/core.py\n"


def test_find_skips_git_internals(tree: Path) -> None:
    assert find(tree, pattern="config") == "No paths match 'config' in the workspace."


def test_find_marks_folders_and_searches_under_a_path(tree: Path) -> None:
    assert find(tree, pattern="*", path="src") == "src/app.py\nsrc/pkg/\nsrc/pkg/core.py\n"


def test_find_of_a_huge_tree_stops_at_the_budget_and_says_so(tmp_path: Path) -> None:
    for n in range(2100):
        (tmp_path / f"m{n:04}.py").touch()
    out = find(tmp_path, pattern="*.py")
    assert out.endswith("m1999.py\n[Showing 2000 of 2100 paths. Use a narrower pattern or path.]")


@pytest.mark.parametrize(("pattern", "path", "expected"), [
    ("*.py", "a/b/c.py", True),
    ("*.py", "c.pyc", False),
    ("**/*.py", "c.py", True),
    ("**/*.py", "a/b/c.py", True),
    ("src/*.py", "src/a/c.py", False),
    ("src/**/*.py", "src/a/c.py", True),
    ("src/**", "src/a/c.py", True),
    ("test_?.py", "test_1.py", True),
    ("[ab].txt", "b.txt", True),
    ("[!ab].txt", "b.txt", False),
    ("*.{ts,tsx}", "x/y.tsx", True),
    ("*.{ts,tsx}", "x/y.js", False),
    ("./a/*.md", "a/r.md", True),
])
def test_glob_matcher_follows_the_usual_rules(pattern: str, path: str, expected: bool) -> None:
    assert glob_matcher(pattern)(path) is expected


def test_grep_passes_over_a_named_pipe_instead_of_waiting_on_it(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("needle\n")
    os.mkfifo(tmp_path / "b.pipe")
    found: list[str] = []
    worker = threading.Thread(target=lambda: found.append(grep(tmp_path, pattern="needle")),
                              daemon=True)
    worker.start()
    worker.join(5)
    assert found == ["a.txt:1: needle\n"]


def test_a_symlink_loop_in_the_tree_does_not_stop_ls_grep_or_find(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("needle\n")
    os.symlink("loop", tmp_path / "loop")
    assert ls(tmp_path) == "a.txt\nloop\n"
    assert grep(tmp_path, pattern="needle") == "a.txt:1: needle\n"
    assert find(tmp_path, pattern="*.txt") == "a.txt\n"


def test_grep_finds_in_a_line_of_many_megabytes_across_its_pieces(tmp_path: Path) -> None:
    piece = 1 << 20
    body = "a" * (piece - 3) + "NEEDLE" + "b" * (2 * piece) + "é" * 1000 + "TAIL"
    (tmp_path / "long.txt").write_text("first line\n" + body + "\nlast line\n")
    assert "long.txt:2: aaaa" in grep(tmp_path, pattern="NEEDLE")  # across two pieces
    assert "long.txt:2:" in grep(tmp_path, pattern="éTAIL$")  # the line's real end
    assert "long.txt:3: last line" in grep(tmp_path, pattern="^last")  # the next line
    # ^ and $ mean the line's ends, never a piece's:
    assert grep(tmp_path, pattern="^b").startswith("No matches")
    assert grep(tmp_path, pattern="a$").startswith("No matches")


GREP_RSS = """
import resource, sys
from mulligan.tools import grep_tool
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
out = grep_tool(sys.argv[1])["execute"]({"pattern": "NEEDLE"})
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(after - before, "found" if "big.txt:1:" in out else out[:200])
"""


def test_grep_of_a_huge_one_line_file_keeps_memory_to_a_few_pieces(tmp_path: Path) -> None:
    size = 256 << 20
    with open(tmp_path / "big.txt", "wb") as handle:
        block = b"x" * (1 << 20)
        for _ in range(size // len(block) - 1):
            handle.write(block)
        handle.write(block[:-10] + b"NEEDLE" + b"yyyy")
    done = subprocess.run([sys.executable, "-c", GREP_RSS, str(tmp_path)], capture_output=True,
                          text=True, check=True, timeout=300)
    grown_kb, verdict = done.stdout.split()
    assert verdict == "found"
    assert int(grown_kb) < 32 * 1024, f"grep grew by {int(grown_kb) // 1024} MB for a " \
        f"{size >> 20} MB line"  # today's pieces: a few MB; reading the line whole: ~2.5x it
