"""Going back in the real REPL in tmux, against a local server speaking Anthropic's
streaming protocol: the files question answered with one key, and /tree go walking every
attempt (fold, label, search, Enter goes there with the files question)."""

from __future__ import annotations

import json

from fakes import anthropic_server as wire
from fakes.http_server import ScriptedServer
from mulligan.session import SessionLog
from tmux_screen import Screen, needs_tmux

pytestmark = needs_tmux
BUSY = "Esc or Ctrl-C aborts"


def write(path: str, content: str) -> object:
    return wire.reply(wire.tool_use_block(0, "toolu_1", "write", json.dumps(
        {"path": path, "content": content})), stop_reason="tool_use")


def noted(tmp_path, server, width=120):
    """A REPL whose first run wrote notes.md (over "old line")."""
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "notes.md").write_text("old line\n")
    screen = Screen(tmp_path, server.url, "--permission-mode", "auto", width=width, height=40)
    screen.wait_for("›")
    screen.text("take a note")
    screen.keys("Enter")
    screen.settled("wrote it", BUSY)
    return screen


def test_the_files_question_takes_one_key_without_enter(tmp_path):
    script = [write("notes.md", "a note\n"), wire.text_reply("wrote it")]
    with ScriptedServer(script) as server, noted(tmp_path, server) as screen:
        screen.text("/back e1")
        screen.keys("Enter")
        screen.wait_for("c: cancel")
        words = " ".join(screen.wait_for("are not tracked").split())
        assert "the part you are leaving changed 1 file(s) in the working folder: notes.md" \
            in words
        assert "Enter: restore the files · k: go back, keep the files as they are" in words
        screen.keys("c")  # no Enter
        screen.wait_for("cancelled: nothing was changed")
        assert (tmp_path / "work" / "notes.md").read_text() == "a note\n"
        screen.text("/back e1")
        screen.keys("Enter")
        screen.wait_for("c: cancel")
        screen.keys("k")
        screen.wait_for("kept as they are: notes.md")
        assert (tmp_path / "work" / "notes.md").read_text() == "a note\n"


def test_o_overwrites_a_file_you_changed_and_says_what_was_kept(tmp_path):
    script = [write("notes.md", "a note\n"), wire.text_reply("wrote it")]
    with ScriptedServer(script) as server, noted(tmp_path, server) as screen:
        (tmp_path / "work" / "notes.md").write_text("my own words\n")
        screen.text("/back e1")
        screen.keys("Enter")
        asked = screen.wait_for("c: cancel")
        assert "o: overwrite yours too (a copy is kept)" in " ".join(asked.split())
        screen.keys("o")
        done = screen.wait_for("restored 1 file(s): notes.md")
        assert "safety snapshot" in done
        assert (tmp_path / "work" / "notes.md").read_text() == "old line\n"


def test_tree_go_walks_to_an_abandoned_attempt_and_brings_its_files_back(tmp_path):
    script = [write("notes.md", "a note\n"), wire.text_reply("wrote it"),
              wire.text_reply("second try answer")]
    with ScriptedServer(script) as server, noted(tmp_path, server) as screen:
        screen.text("/back e1")
        screen.keys("Enter")
        screen.wait_for("c: cancel")
        screen.keys("Enter")
        screen.wait_for("restored 1 file(s): notes.md")
        assert (tmp_path / "work" / "notes.md").read_text() == "old line\n"
        screen.text("try again")
        screen.keys("Enter")
        screen.settled("second try answer", BUSY)
        screen.text("/tree go")
        screen.keys("Enter")
        tree = screen.wait_for("Esc leave")
        assert "›   e9    ai: second try answer ◀ tip" in tree  # the cursor starts at the tip
        assert "│   e5    ai: wrote it" in tree  # the abandoned attempt, one fork in
        # Search for the old reply, label it, fold its attempt and unfold it again.
        screen.keys("/")
        screen.wait_for("search:")
        screen.text("wrote it")
        screen.keys("Enter")
        assert "› │   e5    ai: wrote it" in screen.wait_for("/wrote it: n next")
        screen.keys("l")
        screen.wait_for("label for e5")
        screen.text("first try")
        screen.keys("Enter")
        assert "e5    ai: wrote it [first try]" in screen.wait_for("[first try]")
        screen.keys("Left")
        folded = screen.wait_for("entries folded")
        assert "› │ ▸ e2    … 4 entries folded (→ unfolds)" in folded
        screen.keys("Right")
        screen.wait_for("│   e4 ")
        for _ in range(3):
            screen.keys("Down")
        assert "› │   e5" in screen.wait_for("› │   e5")
        screen.keys("Enter")  # go forward to the old attempt: its files come back
        screen.wait_for("Enter: bring this attempt's files back")
        screen.keys("Enter")
        # (the first restore's line may still be on the screen: the second one is awaited)
        screen.wait_until(lambda shown: shown.count("restored 1 file(s): notes.md") >= 2,
                          "a second restore", history=True)
    assert (tmp_path / "work" / "notes.md").read_text() == "a note\n"
    (file,) = (tmp_path / "home" / "sessions").glob("*/*.jsonl")
    log = SessionLog(file)
    assert log.entry(log.tip())["type"] == "workspace_restore"
    assert [e["label"] for e in log.entries() if e["type"] == "label"] == ["first try"]


def test_fork_names_the_copy_and_resume_names_a_missing_number(tmp_path):
    with ScriptedServer([wire.text_reply("an answer")]) as server, \
            Screen(tmp_path, server.url, width=120) as screen:
        screen.wait_for("›")
        screen.text("a question")
        screen.keys("Enter")
        screen.settled("an answer", BUSY)
        screen.text("/name tidy-up")
        screen.keys("Enter")
        screen.wait_for("session named")
        screen.text("/fork")
        screen.keys("Enter")
        screen.wait_for("you are in the new session now")
        screen.wait_for("· tidy-up (fork)")  # the status line names the copy
        screen.text("/resume 99")
        screen.keys("Enter")
        assert "/resume: there is no session 99 in this folder (/sessions numbers its 2 " \
            "sessions)" in " ".join(screen.wait_for("no session 99").split())
