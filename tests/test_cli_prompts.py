"""The system prompt a run sends: base text for the model's size, the working folder, and the
AGENTS.md files from the folder up to the repository root."""

from __future__ import annotations

from pathlib import Path

from mulligan.app import Controller
from mulligan.app.settings import Settings
from mulligan.prompts import instruction_files, system_prompt
from mulligan.testing import ScriptedModel, say


def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "AGENTS.md").write_text("outside the repo: never sent\n")
    (root / "AGENTS.md").write_text("Use tabs.\n")
    (root / "pkg" / "AGENTS.md").write_text("Package rules.\n")
    return root / "pkg" / "sub"


def test_agents_files_are_found_outermost_first_up_to_the_repo_root(tmp_path):
    found = instruction_files(repo(tmp_path))
    assert found == [tmp_path / "repo" / "AGENTS.md", tmp_path / "repo" / "pkg" / "AGENTS.md"]


def test_outside_a_repository_only_the_folder_itself_is_looked_in(tmp_path):
    (tmp_path / "AGENTS.md").write_text("parent\n")
    (tmp_path / "here").mkdir()
    assert instruction_files(tmp_path / "here") == []


def test_the_first_request_carries_the_cwd_and_the_project_instructions(tmp_path):
    cwd = repo(tmp_path)
    model = ScriptedModel([say("ok")])
    c = Controller(model, [], Settings(cwd=cwd, home=tmp_path / "home"))
    list(c.run_prompt("hi"))
    system = model.calls[0].system
    assert f"Working folder: {cwd}" in system
    assert system.index("Use tabs.") < system.index("Package rules.")
    assert "never sent" not in system
    assert "You are Mulligan" in system


def test_a_compact_model_is_not_told_the_absolute_working_folder(tmp_path):
    class Small:
        compact_prompt = True

    text = system_prompt(Small(), repo(tmp_path))
    assert "Working folder" not in text and "Use tabs." in text
    assert '"tool": "read"' in text  # the compact base text, not the hosted one


def test_a_system_prompt_file_replaces_the_base_text_only(tmp_path):
    base = tmp_path / "base.md"
    base.write_text("You are terse.")
    text = system_prompt(object(), repo(tmp_path), base_file=base)
    assert text.startswith("You are terse.") and "Use tabs." in text
    assert "You are Mulligan" not in text


def test_a_compact_model_gets_the_local_prompt_when_there_is_one(tmp_path):
    class Small:
        compact_prompt = True

    from mulligan.prompts import base_prompt

    assert system_prompt(Small(), tmp_path).startswith(base_prompt(compact=True).rstrip())
