"""Custom commands and skills from all three places, a clash with a built-in refused, the REPL
sending a command's text, the system prompt listing skills, `read` reaching skill folders
(and nothing else) outside the working folder, and CLAUDE.md where there is no AGENTS.md."""

from __future__ import annotations

from pathlib import Path

from prompt_toolkit.document import Document

from mulligan.app import Controller
from mulligan.app.extensions.commands import command_folders, expand, load_commands
from mulligan.app.extensions.setup import Extensions
from mulligan.app.extensions.skills import load_skills, skill_folders
from mulligan.app.settings import Settings
from mulligan.frontends.slash import commands, run_command
from mulligan.frontends.terminal.pickers import SlashCompleter
from mulligan.prompts import system_prompt
from mulligan.session import SessionLog
from mulligan.testing import ScriptedModel, say
from mulligan.tools import coding_tools, run_tool
from test_repl import controller, repl_on


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def places(tmp_path: Path) -> tuple[Path, Path]:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir(exist_ok=True)
    home.mkdir(exist_ok=True)
    return work, home


def builtins() -> set[str]:
    return set(commands())


def test_commands_come_from_all_three_places_the_first_of_a_name_winning(tmp_path):
    work, home = places(tmp_path)
    write(work / ".mulligan/commands/review.md",
          "---\ndescription: Review a file\nmodel: anthropic/claude-x\n---\nReview $1.\n")
    write(home / "commands/review.md", "the user's review: never used\n")
    write(home / "commands/standup.md", "# Write my standup\nFrom git log.\n")
    write(work / ".claude/commands/fix-issue.md", "Fix issue $ARGUMENTS now.\n")
    found, problems = load_commands(command_folders(work, home), builtins())
    assert problems == []
    by_name = {c.name: c for c in found}
    assert sorted(by_name) == ["fix-issue", "review", "standup"]
    assert by_name["review"].path == work / ".mulligan/commands/review.md"
    assert (by_name["review"].description, by_name["review"].model) == (
        "Review a file", "anthropic/claude-x")
    assert by_name["standup"].description == "Write my standup"  # no front matter: 1st line
    assert by_name["fix-issue"].path.parent == work / ".claude/commands"


def test_a_command_named_like_a_built_in_is_refused_at_load_by_name(tmp_path):
    work, home = places(tmp_path)
    clash = write(work / ".claude/commands/help.md", "not the help\n")
    write(home / "commands/Back.md", "not back either\n")
    found, problems = load_commands(command_folders(work, home), builtins())
    assert found == []
    assert f"{clash}: /help is a built-in command; not loaded (rename the file)" in problems
    assert any("/Back is a built-in command" in p for p in problems)


def test_arguments_fill_the_text(tmp_path):
    work, home = places(tmp_path)
    write(work / ".mulligan/commands/a.md", "Review $1 for $2. All: $ARGUMENTS. None: $3.\n")
    write(work / ".mulligan/commands/b.md", "Plain text.\n")
    (a, b), _ = load_commands(command_folders(work, home), builtins())
    assert expand(a, 'main.py "error handling"') == \
        'Review main.py for error handling. All: main.py "error handling". None: .\n'
    assert expand(b, "extra words") == "Plain text.\n\nextra words\n"
    assert expand(b, "") == "Plain text.\n"


def with_setup(tmp_path: Path, model: ScriptedModel, session: Path | None = None) -> Controller:
    work, home = places(tmp_path)
    found = Extensions.load({}, home, work, builtins=builtins)
    tools = coding_tools(work, read_roots=found.read_roots())
    return Controller(model, tools, Settings(cwd=work, home=home), session,
                      extensions=found)


def test_the_repl_sends_a_custom_commands_text_and_its_menu_lists_it(tmp_path):
    work, home = places(tmp_path)
    write(home / "commands/explain.md", "---\ndescription: Explain a file\n---\n"
          "Explain $ARGUMENTS in two sentences.\n")
    model = ScriptedModel([say("It prints hello.")])
    session = tmp_path / "s.jsonl"
    c = with_setup(tmp_path, model, session)
    menu = SlashCompleter(lambda: [(x.name, x.description) for x in c.extensions.commands])
    (shown,) = menu.get_completions(Document("/expl"), None)
    assert (shown.text, shown.display_meta_text) == ("/explain", "Explain a file")
    with repl_on(c) as repl:
        assert "It prints hello." in repl.type("/explain greet.py\r")
    assert SessionLog(session).replay()[0]["content"] == \
        "Explain greet.py in two sentences.\n"
    assert model.calls[0].messages[-1]["content"] == "Explain greet.py in two sentences.\n"


def test_an_unknown_name_is_still_named_when_there_are_custom_commands(tmp_path):
    work, home = places(tmp_path)
    write(home / "commands/explain.md", "Explain.\n")
    c = with_setup(tmp_path, ScriptedModel([]))
    outcome = run_command(c, "/nosuch x")
    assert outcome.error and outcome.lines == ["unknown command /nosuch; /help lists them"]
    assert run_command(c, "/explain it").send == "Explain.\n\nit\n"


def test_skills_from_all_three_places_are_listed_in_the_system_prompt(tmp_path):
    work, home = places(tmp_path)
    write(work / ".mulligan/skills/deploy/SKILL.md",
          "---\nname: deploy\ndescription: Deploy the service to staging.\n---\nSteps...\n")
    write(home / "skills/notes/SKILL.md",
          "---\nname: release-notes\ndescription: Write release notes.\n---\n...\n")
    write(home / "skills/deploy-too/SKILL.md",
          "---\nname: deploy\ndescription: a second deploy: never listed\n---\n")
    write(work / ".claude/skills/pdf/SKILL.md",
          "---\nname: pdf\ndescription: 'Fill in PDF forms.'\n---\n")
    broken = write(work / ".claude/skills/broken/SKILL.md", "no front matter\n")
    skills, problems = load_skills(skill_folders(work, home))
    assert [s.name for s in skills] == ["deploy", "release-notes", "pdf"]
    assert problems == [f"{broken}: its front matter needs name and description; skill not "
                        "listed"]
    model = ScriptedModel([say("ok")])
    c = with_setup(tmp_path, model)
    prompt = c.harness.system
    assert "- deploy: Deploy the service to staging. (" \
        f"{(work / '.mulligan/skills/deploy/SKILL.md').resolve()})" in prompt
    assert "- release-notes: Write release notes." in prompt
    assert "- pdf: Fill in PDF forms." in prompt and "second deploy" not in prompt
    list(c.run_prompt("hi"))
    assert model.calls[0].system == prompt


def test_read_reaches_a_skill_folder_outside_the_working_folder_and_nothing_else(tmp_path):
    work, home = places(tmp_path)
    write(home / "skills/notes/SKILL.md",
          "---\nname: notes\ndescription: Notes.\n---\nUse the template.\n")
    write(home / "skills/notes/template.md", "TEMPLATE\n")
    write(home / "secret.txt", "not for the model\n")
    c = with_setup(tmp_path, ScriptedModel([]))

    def read(path: str) -> dict:
        return dict(run_tool(list(c.harness.tools), {"type": "toolCall", "id": "r",
                                                     "name": "read",
                                                     "arguments": {"path": path}}))

    assert "TEMPLATE" in read(str(home / "skills/notes/template.md"))["content"]
    assert "Use the template." in read(str(home / "skills/notes/SKILL.md"))["content"]
    refused = read(str(home / "secret.txt"))
    assert refused["is_error"] is True and "outside the workspace" in refused["content"]
    written = run_tool(list(c.harness.tools), {
        "type": "toolCall", "id": "w", "name": "write",
        "arguments": {"path": str(home / "skills/notes/x.md"), "content": "no"}})
    assert written["is_error"] is True and not (home / "skills/notes/x.md").exists()


def test_claude_md_is_read_where_a_folder_has_no_agents_md(tmp_path):
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    write(root / "CLAUDE.md", "root claude rules")
    write(root / "sub/AGENTS.md", "sub agents rules")
    write(root / "sub/CLAUDE.md", "sub claude rules: not read")
    prompt = system_prompt(ScriptedModel([]), root / "sub")
    assert "root claude rules" in prompt and "sub agents rules" in prompt
    assert "sub claude rules" not in prompt


def test_no_setup_means_no_extensions_at_all(tmp_path):
    work, home = places(tmp_path)
    assert not Extensions.load({}, home, work, builtins=builtins).configured()
    c = controller(tmp_path, ScriptedModel([]), None)
    assert c.extensions is None
