"""The Controller the REPL drives: lazy session files, refusals by name, going back."""

from __future__ import annotations

import pytest

from mulligan.app import Controller, Refused
from mulligan.app.sessions.catalog import new_session_path
from mulligan.app.settings import Settings
from mulligan.session import SessionLog
from mulligan.testing import ScriptedModel, say


def make(tmp_path, replies=(), *, saved=True) -> Controller:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    model = ScriptedModel(list(replies))
    model.name = "scripted/test"
    file = new_session_path(tmp_path / "home", work) if saved else None
    return Controller(model, [], Settings(cwd=work, home=tmp_path / "home"), file)


def test_a_name_given_before_the_first_message_goes_into_session_info(tmp_path):
    c = make(tmp_path, [say("ok")])
    c.name("caching")
    assert not c.session_file.exists()
    list(c.run_prompt("hi"))
    first = SessionLog(c.session_file).entries()[0]
    assert (first["type"], first["name"], first["model"]) == ("session_info", "caching",
                                                              "scripted/test")


@pytest.mark.parametrize("command", ["tree", "back", "edit", "label", "fork"])
def test_commands_needing_the_file_are_refused_before_the_first_message(tmp_path, command):
    c = make(tmp_path)
    calls = {"tree": lambda: c.tree(), "back": lambda: c.back("e1"),
             "edit": lambda: c.edit(), "label": lambda: c.label("e1", "x"),
             "fork": lambda: c.fork()}
    with pytest.raises(Refused, match="no messages yet"):
        calls[command]()
    assert not c.session_file.parent.exists()


def test_without_a_session_nothing_is_saved_and_tree_is_refused(tmp_path):
    c = make(tmp_path, [say("ok")], saved=False)
    list(c.run_prompt("hi"))
    with pytest.raises(Refused, match="--no-session"):
        c.tree()
    assert not (tmp_path / "home").exists()


def test_going_back_rebuilds_the_transcript_from_the_file(tmp_path):
    c = make(tmp_path, [say("one"), say("two"), say("three")])
    list(c.run_prompt("first"))
    list(c.run_prompt("second"))
    c.back("e3")
    assert [m["role"] for m in c.harness.messages] == ["user", "assistant"]
    list(c.run_prompt("third"))
    assert c.harness.messages == tuple(SessionLog(c.session_file).replay())


def test_edit_of_something_that_is_not_your_message_is_refused_by_name(tmp_path):
    c = make(tmp_path, [say("one")])
    list(c.run_prompt("first"))
    with pytest.raises(Refused, match="e3 is not one of your messages"):
        c.edit("e3")


def test_back_to_an_unknown_entry_names_it_and_writes_nothing(tmp_path):
    c = make(tmp_path, [say("one")])
    list(c.run_prompt("first"))
    size = c.session_file.stat().st_size
    with pytest.raises(ValueError, match="e42"):
        c.back("e42")
    assert c.session_file.stat().st_size == size


def test_back_is_refused_while_a_run_is_going_on(tmp_path):
    c = make(tmp_path, [say("one"), say("two")])
    list(c.run_prompt("first"))
    run = c.run_prompt("second")
    with pytest.raises(Refused, match="while a run is going on"):
        c.back("e2")
    list(run)


def test_fork_copies_the_branch_into_a_new_file_and_moves_the_lease(tmp_path):
    c = make(tmp_path, [say("one")])
    list(c.run_prompt("first"))
    old = c.session_file
    new = c.fork()
    assert new != old and c.session_file == new and c.lease.session == new
    assert not old.with_name(old.name + ".lease").exists()
    assert SessionLog(new).replay() == SessionLog(old).replay()


def test_no_command_changes_the_entries_the_log_hands_out(tmp_path):
    # SessionLog.entries() and replay() hand out the log's own cached dicts: a command that
    # changed one would change what every later call (and the next run) sees, not the file.
    from mulligan.app.exports.linear import to_markdown, to_text, write_linear
    from mulligan.frontends.slash import run_command

    c = make(tmp_path, [say("one"), say("two"), say("three")])
    list(c.run_prompt("first"))
    list(c.run_prompt("second"))
    log = c.log
    c.label("e3", "kept")
    c.edit()
    list(c.run_prompt("again"))
    entries = log.entries()
    to_markdown(entries, "e5")
    to_text(entries, log.tip())
    write_linear(entries, "e5", tmp_path / "copy.jsonl", origin_file=log.path)
    for line in ("/tree all", "/sessions", "/back", f"/export md {tmp_path / 'x.md'}",
                 f"/export jsonl {tmp_path / 'y.jsonl'}"):
        run_command(c, line)
    c.user_choices()
    assert log.entries() == SessionLog(log.path).entries()
    assert log.replay() == SessionLog(log.path).replay()
    c.fork()
    assert log.entries() == SessionLog(log.path).entries()
    c.close()


def test_export_defaults_to_the_exports_folder_and_never_overwrites(tmp_path):
    from mulligan.app.exports.linear import ExportTargetExists

    c = make(tmp_path, [say("ok")])
    list(c.run_prompt("hi"))
    default = c.export("md")
    assert default == c.home / "exports" / f"mulligan-{c.session_file.stem}.md"
    assert c.export("md", tmp_path.joinpath("x").relative_to(tmp_path)) == c.cwd / "x"
    with pytest.raises(ExportTargetExists):
        c.export("md")
    copy = c.export("jsonl")
    assert SessionLog(copy).replay() == SessionLog(c.session_file).replay()
    with pytest.raises(Refused, match="md, jsonl or html"):
        c.export("pdf")
    c.close()


def test_edit_of_your_message_on_another_branch_goes_back_before_it(tmp_path):
    c = make(tmp_path, [say("one"), say("two")])
    list(c.run_prompt("first attempt"))  # e2, e3
    c.back("e1")
    list(c.run_prompt("second attempt"))  # e5, e6 on a new branch
    assert c.edit("e2") == "first attempt"  # e2 is not on this branch
    tip = SessionLog(c.session_file).entries()[-1]
    assert (tip["type"], tip["parent_id"]) == ("branch", "e1")
    assert c.harness.messages == ()
