"""Exporting one branch: Markdown, plain text, and a new linear session file."""

from __future__ import annotations

import stat

import pytest

from mulligan.app.exports.linear import (
    ExportTargetExists,
    to_markdown,
    to_text,
    write_linear,
    write_new,
)
from mulligan.app.settings import Settings
from mulligan.session import SessionLog
from mulligan.testing import call, reply, say, tool_result, user

READ = call("read", {"path": "main.py"}, id="c1")


def branched(tmp_path):
    log = SessionLog(tmp_path / "s.jsonl", fsync=False)
    log.append_session_info(cwd="/work", model="scripted", name="speedup")
    for message in [user("Make main.py faster."), reply("Reading it.", READ),
                    tool_result(READ, "x = ```\n"), say("Cache it globally?"),
                    user("Do it, then."), say("Done: CACHE added.")]:
        log.append_message(message)
    log.branch_to("e5")
    log.append_message(user("No global, please."))
    log.append_label("e9", "the right answer")
    log.append_message(say("functools.cache it is."))
    return log


def test_markdown_holds_the_branch_at_the_tip_and_not_the_abandoned_attempt(tmp_path):
    log = branched(tmp_path)
    text = to_markdown(log.entries(), log.tip(), title="Session s")
    assert text.startswith("# Session s\n")
    assert "## You (e9) — *the right answer*" in text
    assert "functools.cache it is." in text
    assert "Do it, then." not in text
    assert '"path": "main.py"' in text
    assert "````\nx = ```\n````" in text  # a fence longer than the backticks inside


def test_markdown_of_an_earlier_leaf_is_that_attempt(tmp_path):
    log = branched(tmp_path)
    text = to_markdown(log.entries(), "e7")
    assert "Do it, then." in text and "No global" not in text


def test_text_transcript_names_each_message_by_id(tmp_path):
    log = branched(tmp_path)
    text = to_text(log.entries(), log.tip())
    assert "[e2] you\nMake main.py faster." in text
    assert '[e3] assistant\nReading it.\n→ read({"path": "main.py"})' in text


def test_jsonl_export_is_a_linear_session_naming_its_origin(tmp_path):
    log = branched(tmp_path)
    target = tmp_path / "out.jsonl"
    write_linear(log.entries(), log.tip(), target, origin_file=log.path)
    copy = SessionLog(target)
    entries = copy.entries()
    assert entries[0]["type"] == "session_info"
    assert entries[0]["origin_file"] == str(log.path)
    assert entries[0]["origin_entry"] == log.tip()
    assert entries[0]["name"] == "speedup"
    assert [e["id"] for e in entries] == [f"e{i}" for i in range(1, len(entries) + 1)]
    assert all(e["type"] != "branch" for e in entries)
    assert copy.replay() == log.replay()
    label = next(e for e in entries if e["type"] == "label")
    assert copy.entry(label["target_id"])["message"] == user("No global, please.")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_jsonl_export_never_overwrites(tmp_path):
    log = branched(tmp_path)
    target = tmp_path / "out.jsonl"
    target.write_text("keep me\n")
    with pytest.raises(ExportTargetExists):
        write_linear(log.entries(), log.tip(), target, origin_file=log.path)
    assert target.read_text() == "keep me\n"


def test_a_damaged_message_is_shown_as_damaged_not_a_crash(tmp_path):
    log = SessionLog(tmp_path / "s.jsonl", fsync=False)
    log.append_message(user("hi"))
    log.append_message("oops")  # type: ignore[arg-type]
    log.append_message({"role": "assistant", "content": ["a", 5, {"type": "text", "text": "ok"}],
                        "stop_reason": "stop"})
    log.append_message({"role": "assistant", "content": "not a list", "stop_reason": "stop"})
    entries, tip = log.entries(), log.tip()
    text = to_text(entries, tip)
    assert "[e2] (a message entry without a message object)" in text
    assert "[e3] assistant\nok" in text
    markdown = to_markdown(entries, tip)
    assert "e2: a message entry without a message object" in markdown and "ok" in markdown


def test_a_markdown_export_never_writes_over_an_existing_file(tmp_path):
    taken = tmp_path / "taken.md"
    taken.write_text("x")
    with pytest.raises(ExportTargetExists):
        write_new(taken, "y")
    assert taken.read_text() == "x"


def test_a_linear_copy_keeps_the_labels_and_name_tree_shows_even_from_an_abandoned_attempt(
        tmp_path):
    log = SessionLog(tmp_path / "s.jsonl", fsync=False)
    log.append_session_info(cwd="/work")
    log.append_message(user("Make it faster."))
    log.append_message(say("Cache it?"))
    log.append_message(user("Do it."))
    log.append_label("e3", "the offer")      # these two hang on the attempt left behind
    log.append_session_info(name="caching")
    log.branch_to("e3")
    log.append_message(user("No global."))
    target = tmp_path / "copy.jsonl"
    write_linear(log.entries(), log.tip(), target, origin_file=log.path)
    copy = SessionLog(target).entries()
    assert copy[0]["name"] == "caching"
    (label,) = [e for e in copy if e["type"] == "label"]
    assert label["label"] == "the offer"
    assert SessionLog(target).entry(label["target_id"])["message"] == say("Cache it?")


HOSTILE = ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "## Assistant (e99)",
           "```\nan unclosed fence swallows the rest", "- a list\n> a quote\n# a heading",
           "`````` six backticks", "&lt; &amp;"]


def test_no_content_in_a_markdown_export_can_make_html_headings_or_fences(tmp_path):
    from markdown_it import MarkdownIt

    log = SessionLog(tmp_path / "s.jsonl", fsync=False)
    log.append_session_info(cwd="/w <b>x</b>", model="m", name="# not a heading")
    evil_call = call("bash<script>", {"command": "<b>" + "`" * 8}, id="c1")
    for text in HOSTILE:
        log.append_message(user(text))
        log.append_message(reply(text, evil_call))
        log.append_message(tool_result(evil_call, text, is_error=True))
    log.append_label("e2", "<i>label</i>\n# heading")
    log.append_message({"role": "assistant", "content": [], "stop_reason": "error",
                        "error_message": "<script>x</script>\n## Error"})
    markdown = to_markdown(log.entries(), log.tip(), title="Session <b> `t`")
    tokens = MarkdownIt("commonmark").parse(markdown)
    flat = [t for t in tokens] + [c for t in tokens for c in (t.children or [])]
    assert not [t for t in flat if t.type in ("html_block", "html_inline")]
    headings = ["".join(c.content for c in tokens[i + 1].children or [])
                for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert headings[0] == "Session <b> `t`"  # the title, read as words
    ours = [h for i, h in enumerate(headings)
            if tokens[[j for j, t in enumerate(tokens) if t.type == "heading_open"][i]].tag
            in ("h1", "h2")]
    # Only the export's own headings are of level 1 or 2; a reply's are demoted below them.
    assert all(h.startswith(("You (e", "Assistant (e")) for h in ours[1:])
    assert len(ours) == 1 + 2 * len(HOSTILE) + 1
    fenced = [t.content for t in tokens if t.type == "fence"]
    for text in HOSTILE:
        assert fenced.count(text + "\n") == 2  # the user's words and the result's
    # The reply's Markdown is Markdown; the export's structure is intact after it.
    words = "".join(c.content for t in tokens for c in (t.children or []))
    assert "<script>alert(1)</script>" in words  # read as words, not as HTML


def test_a_markdown_export_reads_as_markdown(tmp_path):
    """Issue 24 item 9: session facts unescaped, the model's own Markdown not fenced as
    code."""
    log = SessionLog(tmp_path / "s.jsonl", fsync=False)
    log.append_session_info(cwd="/tmp/work", model="m")
    log.append_message(user("plan?"))
    log.append_message(reply("## Plan\n\n1. Read **main.py**.\n\n```py\nx = 1\n```"))
    markdown = to_markdown(log.entries(), log.tip())
    assert "cwd: `/tmp/work`" in markdown and "\\/" not in markdown
    assert "### Plan\n\n1. Read **main.py**.\n\n```py\nx = 1\n```" in markdown


def test_export_html_from_the_controller_holds_every_attempt_and_never_overwrites(tmp_path):
    from html_page import rendered
    from mulligan.app import Controller
    from mulligan.app.sessions.catalog import new_session_path
    from mulligan.testing import ScriptedModel

    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    c = Controller(ScriptedModel([say("first answer"), say("second answer")]), [],
                   Settings(cwd=work, home=home), new_session_path(home, work))
    list(c.run_prompt("one"))
    c.back("e1")
    list(c.run_prompt("two"))
    page = c.export("html")
    cards = " ".join(rendered(page)["cards"].values())  # as Chromium draws them
    assert page.name.endswith(".html") and stat.S_IMODE(page.stat().st_mode) == 0o600
    assert "first answer" in cards and "second answer" in cards
    with pytest.raises(ExportTargetExists):
        c.export("html", page)
