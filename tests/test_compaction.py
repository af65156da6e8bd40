"""Compaction with a scripted model that declares a small context window and records what it
was sent: automatic compaction at the right point, an overflow compacted and retried once, a
second compaction updating the first summary, and going back above a compaction."""

from __future__ import annotations

from pathlib import Path

from mulligan.app import Controller
from mulligan.app.rewind.compaction import SYSTEM, UPDATE
from mulligan.app.rewind.compaction import Settings as CompactionSettings
from mulligan.app.sessions.catalog import new_session_path
from mulligan.app.settings import Settings
from mulligan.messages import error_message
from mulligan.session import SessionLog
from mulligan.session.view import COMPACTION_PREAMBLE
from mulligan.testing import ScriptedModel, say

LONG = "word " * 240  # about 300 tokens by the estimate


def session(tmp_path: Path, script, window: int = 1000,
            auto: bool = True) -> tuple[Controller, ScriptedModel]:
    model = ScriptedModel(script)
    model.context_window = window  # type: ignore[attr-defined]
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir(exist_ok=True)
    c = Controller(model, [], Settings(cwd=work, home=home, compaction=CompactionSettings(
        auto=auto, keep_tokens=300, reserve_tokens=200)), new_session_path(home, work))
    return c, model


def summaries(model: ScriptedModel) -> list[int]:
    return [n for n, request in enumerate(model.calls) if request.system == SYSTEM]


def test_a_long_session_compacts_before_the_request_that_would_not_fit(tmp_path):
    c, model = session(tmp_path, [say(f"one {LONG}"), say("two"), say("Request: three."),
                                  say("three done")])
    # The window leaves 800 tokens past the system prompt before the 200-token reserve: the
    # second request (about 640 of them) fits, the third (about 970) does not.
    model.context_window = len(c.harness.system) // 4 + 1000  # type: ignore[attr-defined]
    list(c.run_prompt("first question"))
    list(c.run_prompt(f"second {LONG}"))
    assert summaries(model) == []  # everything still fits
    events = list(c.run_prompt(f"third {LONG}"))
    assert summaries(model) == [2]  # before the third answer's request
    kinds = [e["type"] for e in events]
    assert kinds.index("compaction_start") < kinds.index("compaction_end")
    end = next(e for e in events if e["type"] == "compaction_end")
    assert end["tokens_after"] < end["tokens_before"]
    asked = model.calls[2].text
    assert "first question" in asked and "third word" not in asked
    sent = model.calls[3].messages
    assert sent[0]["content"] == COMPACTION_PREAMBLE + "Request: three."
    assert sent[1] == {"role": "user", "content": f"third {LONG}"}  # the latest request
    assert len(sent) == 2
    entry = next(e for e in SessionLog(c.session_file).entries() if e["type"] == "compaction")
    assert entry["first_kept_entry_id"] and entry["tokens_before"] == end["tokens_before"]


def test_a_context_overflow_is_compacted_and_the_call_retried_once(tmp_path):
    c, model = session(tmp_path, [say("one"), say("two"),
                                  error_message("prompt is too long: 250000 tokens > 200000"),
                                  say("Request: summary."), say("answered after all")],
                       window=100_000)
    list(c.run_prompt("first"))
    list(c.run_prompt("second"))
    list(c.run_prompt("third"))
    assert summaries(model) == [3]
    assert model.calls[4].messages[0]["content"] == COMPACTION_PREAMBLE + "Request: summary."
    assert c.harness.messages[-1]["content"][0]["text"] == "answered after all"


def test_a_second_compaction_updates_the_previous_summary(tmp_path):
    c, model = session(tmp_path, [say("a"), say("b"), say("SUMMARY ONE"), say("c"),
                                  say("d"), say("SUMMARY TWO")], auto=False)
    for text in (f"first {LONG}", f"second {LONG}"):
        list(c.run_prompt(text))
    assert c.compact()
    for text in (f"third {LONG}", f"fourth {LONG}"):
        list(c.run_prompt(text))
    assert c.compact()
    second = model.calls[summaries(model)[1]].text
    assert UPDATE.split("\n")[0] in second and "SUMMARY ONE" in second
    assert "first word" not in second  # the summarised part is not sent again
    assert c.harness.messages[0]["content"] == COMPACTION_PREAMBLE + "SUMMARY TWO"


def test_going_back_before_a_compaction_brings_the_full_history_back(tmp_path):
    c, model = session(tmp_path, [say("a"), say("b"), say("SUMMARY")], auto=False)
    list(c.run_prompt(f"first {LONG}"))
    list(c.run_prompt(f"second {LONG}"))
    assert c.compact()
    assert c.harness.messages[0]["content"].startswith(COMPACTION_PREAMBLE)
    c.back("e3")
    assert [m["role"] for m in c.harness.messages] == ["user", "assistant"]
    assert c.harness.messages[0]["content"].startswith("first")


def test_a_failing_summariser_still_compacts_from_the_entries(tmp_path):
    c, model = session(tmp_path, [say("a"), say("b"), RuntimeError("offline")], auto=False)
    list(c.run_prompt(f"first {LONG}"))
    list(c.run_prompt(f"second {LONG}"))
    assert c.compact()
    summary = c.harness.messages[0]["content"]
    assert "not by the model" in summary and "first" in summary


def test_json_mode_shows_the_compaction_events_of_an_overflow(tmp_path):
    import json
    import os
    import subprocess
    import sys

    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "MULLIGAN_HOME": str(tmp_path / "home")}
    first, second = tmp_path / "one.json", tmp_path / "two.json"
    first.write_text(json.dumps(["an answer"]))
    second.write_text(json.dumps([
        {"role": "assistant", "content": [], "stop_reason": "error",
         "error_message": "prompt is too long: 210000 tokens > 200000 maximum"},
        "Request: the second question.", "answered after compacting"]))
    run = [sys.executable, "-m", "mulligan", "-p"]
    subprocess.run([*run, "first", "--model", f"scripted:{first}"], cwd=work, env=env,
                   check=True, capture_output=True)
    done = subprocess.run([*run, "second", "-c", "--mode", "json", "--model",
                           f"scripted:{second}"], cwd=work, env=env, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = [e["type"] for e in events]
    assert "compaction_start" in kinds and "compaction_end" in kinds
    start = next(e for e in events if e["type"] == "compaction_start")
    assert start["reason"] == "overflow"
    last = [e for e in events if e["type"] == "message_end"][-1]["message"]
    assert last["content"] == [{"type": "text", "text": "answered after compacting"}]


def test_a_compactions_model_call_is_recorded_in_its_entry_and_counted(tmp_path):
    """Issue 24 item 3: what the summary cost is on the compaction entry (free metadata) and
    in what the session spent."""
    from mulligan.testing import reply

    used = {"input": 500, "output": 50, "cache_read": 0, "cache_write": 0}
    c, model = session(tmp_path, [say(f"one {LONG}"), say("two"),
                                  reply("Request: three.", usage=used), say("three done")])
    model.context_window = len(c.harness.system) // 4 + 1000  # type: ignore[attr-defined]
    for prompt in ("first question", f"second {LONG}", f"third {LONG}"):
        list(c.run_prompt(prompt))
    entry = next(e for e in SessionLog(c.session_file).entries() if e["type"] == "compaction")
    assert entry["usage"] == used
    assert c.spent().tokens_in == 500 and c.spent().tokens_out == 50
    c.close()
