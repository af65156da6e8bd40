"""What the session spent (issue 24 item 3), on a real Controller over a real session file with
scripted models whose replies record usage and the model that made them: parallel `/try`
attempts are counted, each call is priced at its own model, going back never makes the total
drop, and the total is kept as entries are appended, not re-read at each status-line draw."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mulligan.app import Controller
from mulligan.app.attempts.session import start_attempts
from mulligan.app.permissions import Permissions
from mulligan.app.settings import Settings
from mulligan.app.workspace.checkpoints import Checkpoints
from mulligan.app.workspace.store.snapshots import Store
from mulligan.frontends.status import status_line, usage_lines
from mulligan.session import SessionLog
from mulligan.testing import ScriptedModel, reply
from mulligan.tools import coding_tools

SONNET = "anthropic/claude-sonnet-4-6"  # $3 in, $15 out per million: 1000 + 1000 is $0.018
HAIKU = "anthropic/claude-haiku-4-5"    # $1 in, $5 out per million: 1000 + 1000 is $0.006
USED = {"input": 1000, "output": 1000, "cache_read": 0, "cache_write": 0}


def answer(text: str, model: str) -> dict[str, Any]:
    return reply(text, usage=dict(USED), model=model)


def named(name: str, *replies: Any) -> ScriptedModel:
    model = ScriptedModel(list(replies))
    model.name = name  # type: ignore[attr-defined]
    return model


def controller(tmp_path: Path, main: ScriptedModel, models: dict[str, Any]) -> Controller:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir(exist_ok=True)
    return Controller(main, coding_tools(work), Settings(cwd=work, home=home),
                      tmp_path / "s.jsonl", checkpoints=Checkpoints(Store(home), work),
                      resolver=models.__getitem__,
                      tools_for=lambda folder: Permissions("auto", folder).guard(
                          coding_tools(folder)))


def test_a_try_of_two_attempts_is_in_the_status_line_and_usage_total(tmp_path: Path) -> None:
    models = {"a": named(SONNET, answer("attempt one", SONNET)),
              "b": named(SONNET, answer("attempt two", SONNET))}
    c = controller(tmp_path, named(SONNET, answer("first", SONNET)), models)
    list(c.run_prompt("one"))
    assert c.spent().cost == pytest.approx(0.018)  # the total is running (the REPL's draw)
    attempts = start_attempts(c, "try it", 2, ["a", "b"])
    assert attempts.wait(timeout=60)
    c.reload()
    spent = c.spent()
    assert (spent.tokens_in, spent.tokens_out) == (3000, 3000)
    assert spent.cost == pytest.approx(0.054)
    assert "$0.05 (branch $0.02)" in status_line(c, 200)
    words = " ".join(usage_lines(c.usage(), spent))
    assert "the whole session, every attempt: 3000 in, 3000 out, cost $0.0540" in words
    # The same as a fresh read of the file.
    c.close()
    again = controller(tmp_path, named(SONNET), {})
    assert again.spent().cost == pytest.approx(0.054) and again.spent().tokens_in == 3000
    again.close()


def test_each_call_is_priced_at_the_model_that_made_it(tmp_path: Path) -> None:
    haiku = named(HAIKU, answer("cheaper", HAIKU))
    c = controller(tmp_path, named(SONNET, answer("dear", SONNET)), {"haiku": haiku})
    list(c.run_prompt("one"))
    assert c.spent().cost == pytest.approx(0.018)
    c.set_model("haiku")
    list(c.run_prompt("two"))
    # $0.018 for sonnet's reply and $0.006 for haiku's, not both at haiku's price.
    assert c.spent().cost == pytest.approx(0.024)
    assert c.usage().cost == pytest.approx(0.024)  # the branch: each turn at its own model
    assert [t.cost for t in c.usage().turns] == [pytest.approx(0.018), pytest.approx(0.006)]
    c.close()
    again = controller(tmp_path, named(HAIKU), {})
    assert again.spent().cost == pytest.approx(0.024)
    again.close()


def test_going_back_never_makes_the_total_drop(tmp_path: Path) -> None:
    c = controller(tmp_path, named(SONNET, answer("first", SONNET), answer("second", SONNET)),
                   {})
    list(c.run_prompt("one"))
    list(c.run_prompt("two"))
    before = c.spent().cost
    assert before == pytest.approx(0.036)
    c.back("e3")  # after the first answer
    assert c.spent().cost == pytest.approx(0.036) and c.usage().cost == pytest.approx(0.018)
    c.close()


def test_summaries_and_compactions_are_counted_as_appended_not_re_read(
        tmp_path: Path) -> None:
    c = controller(tmp_path, named(SONNET, answer("first", SONNET)), {})
    list(c.run_prompt("one"))
    log = c.log
    assert log is not None and c.spent().tokens_in == 1000
    log.append_entry("compaction", summary="s", first_kept_entry_id="e2", tokens_before=9,
                     usage={**USED, "model": HAIKU})
    assert c.spent().tokens_in == 2000 and c.spent().cost == pytest.approx(0.024)
    # Another writer's line (none while the lease is held) is not seen: each draw reads
    # nothing, it only reads the running total.
    SessionLog(tmp_path / "s.jsonl").append_entry("compaction", summary="t",
                                                   first_kept_entry_id="e2",
                                                   tokens_before=9, usage=dict(USED))
    for _ in range(3):
        status_line(c, 200)
    assert c.spent().tokens_in == 2000
    c.close()


def test_a_log_watch_hands_over_what_is_there_then_each_append_once(tmp_path: Path) -> None:
    import threading

    from mulligan.testing import user

    log = SessionLog(tmp_path / "w.jsonl")
    log.append_message(user("before"))
    log.append_entry("label_like", note="not watched")
    seen: list[str] = []
    started = threading.Event()

    def append_many() -> None:
        started.set()
        for n in range(50):
            log.append_message(user(f"m{n}"))

    writer = threading.Thread(target=append_many)
    writer.start()
    started.wait()
    undo = log.watch(["message"], lambda entry: seen.append(entry["id"]))
    writer.join()
    assert sorted(seen, key=lambda i: int(i[1:])) == [f"e{n}" for n in range(1, 53) if n != 2]
    undo()
    log.append_message(user("after"))
    assert len(seen) == 51
