"""Path confinement: nothing outside the workspace is read, written or listed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mulligan.testing import call
from mulligan.tools import OutsideWorkspace, Workspace, coding_tools, run_tool


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "secret.txt"
    secret.write_text("password\n")
    (tmp_path / "ws").mkdir()
    return secret


def test_a_relative_path_inside_resolves_under_the_root(tmp_path: Path) -> None:
    assert Workspace(tmp_path).resolve("a/b.txt") == tmp_path.resolve() / "a" / "b.txt"


def test_an_absolute_path_inside_the_workspace_is_allowed(tmp_path: Path) -> None:
    inside = str(tmp_path.resolve() / "x.txt")
    assert Workspace(tmp_path).resolve(inside) == tmp_path.resolve() / "x.txt"


def test_a_dotdot_escape_is_refused(tmp_path: Path, outside: Path) -> None:
    with pytest.raises(OutsideWorkspace, match=r"\.\./secret.txt is outside the workspace"):
        Workspace(tmp_path / "ws").resolve("../secret.txt")


def test_an_absolute_path_elsewhere_is_refused(tmp_path: Path, outside: Path) -> None:
    with pytest.raises(OutsideWorkspace, match="is outside the workspace"):
        Workspace(tmp_path / "ws").resolve(str(outside))


def test_a_symlink_pointing_outside_is_refused_and_named_as_one(
    tmp_path: Path, outside: Path
) -> None:
    os.symlink(outside, tmp_path / "ws" / "link.txt")
    with pytest.raises(OutsideWorkspace, match="link.txt is a symlink to .*secret.txt, outside"):
        Workspace(tmp_path / "ws").resolve("link.txt")


def test_a_symlinked_folder_pointing_outside_is_refused_for_paths_below_it(
    tmp_path: Path, outside: Path
) -> None:
    os.symlink(tmp_path, tmp_path / "ws" / "up")
    with pytest.raises(OutsideWorkspace):
        Workspace(tmp_path / "ws").resolve("up/secret.txt")


def test_a_symlink_loop_is_refused_by_name(tmp_path: Path) -> None:
    os.symlink("loop", tmp_path / "loop")
    result = run_tool(coding_tools(tmp_path), call("read", {"path": "loop"}))
    assert result["is_error"]
    assert result["content"].startswith("loop cannot be used: it is a symlink loop")


def test_a_workspace_that_is_not_a_folder_is_refused_when_made(tmp_path: Path) -> None:
    with pytest.raises(NotADirectoryError, match="not an existing folder"):
        coding_tools(tmp_path / "missing")


@pytest.mark.parametrize(("name", "arguments"), [
    ("read", {"path": "../secret.txt"}),
    ("write", {"path": "../secret.txt", "content": "owned"}),
    ("edit", {"path": "../secret.txt", "old_text": "password", "new_text": "owned"}),
    ("ls", {"path": ".."}),
    ("grep", {"pattern": "password", "path": ".."}),
    ("find", {"pattern": "*", "path": ".."}),
])
def test_every_file_tool_refuses_a_path_outside_the_workspace(
    tmp_path: Path, outside: Path, name: str, arguments: dict[str, object]
) -> None:
    result = run_tool(coding_tools(tmp_path / "ws"), call(name, arguments))
    assert result["is_error"] is True
    assert "outside the workspace" in result["content"]
    assert outside.read_text() == "password\n"


def test_write_through_a_symlink_pointing_outside_is_refused(
    tmp_path: Path, outside: Path
) -> None:
    os.symlink(outside, tmp_path / "ws" / "link.txt")
    result = run_tool(coding_tools(tmp_path / "ws"),
                      call("write", {"path": "link.txt", "content": "owned"}))
    assert result["is_error"] is True
    assert outside.read_text() == "password\n"
