"""JsonRenderer and FinalTextRenderer: folds over the events of a run."""

from __future__ import annotations

import io
import json

from mulligan.frontends.final_text import FinalTextRenderer
from mulligan.frontends.json_lines import JsonRenderer
from mulligan.harness import Harness
from mulligan.testing import ScriptedModel, StreamingScriptedModel, call, reply, say
from test_loop_support import tool


class CountingFlush(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.flushes = 0

    def flush(self) -> None:
        self.flushes += 1
        super().flush()


def test_the_json_renderer_writes_each_event_as_one_flushed_json_line() -> None:
    out = CountingFlush()
    render = JsonRenderer(out)
    h = Harness(ScriptedModel([reply(call("read", id="c1")), say("Done.")]), "system",
                [tool("read")])
    events = []
    for event in h.prompt("go"):
        render(event)
        events.append(event)
    lines = out.getvalue().splitlines()
    assert [json.loads(line) for line in lines] == events
    assert out.flushes == len(events)
    assert render.status == 0


def test_the_json_renderer_writes_a_tool_call_with_a_huge_integer_argument() -> None:
    out = io.StringIO()
    render = JsonRenderer(out)
    h = Harness(ScriptedModel([reply(call("read", {"limit": 10**20}, id="c1")), say("Done.")]),
                "system", [tool("read")])
    events = list(h.prompt("go"))
    for event in events:
        render(event)
    assert [json.loads(line) for line in out.getvalue().splitlines()] == events


def test_the_json_renderer_writes_streamed_updates_too() -> None:
    out = io.StringIO()
    render = JsonRenderer(out)
    h = Harness(StreamingScriptedModel([say("two words")]), "system", [])
    for event in h.prompt("go"):
        render(event)
    types = [json.loads(line)["type"] for line in out.getvalue().splitlines()]
    assert types.count("message_update") == 2


def test_the_json_renderer_status_is_one_when_the_run_failed() -> None:
    render = JsonRenderer(io.StringIO())
    for event in Harness(ScriptedModel([RuntimeError("down")]), "system", []).prompt("go"):
        render(event)
    assert render.status == 1


def test_the_final_text_renderer_prints_only_the_last_answer() -> None:
    out, err = io.StringIO(), io.StringIO()
    render = FinalTextRenderer(out, err)
    h = Harness(ScriptedModel([reply("Looking.", call("read", id="c1")), say("The answer.")]),
                "system", [tool("read")])
    for event in h.prompt("go"):
        render(event)
    assert out.getvalue() == "The answer.\n"
    assert err.getvalue() == ""
    assert render.status == 0


def test_the_final_text_renderer_prints_the_error_to_err_and_fails_a_failed_run() -> None:
    out, err = io.StringIO(), io.StringIO()
    render = FinalTextRenderer(out, err)
    h = Harness(ScriptedModel([reply(call("read", id="c1")), say("never")]), "system",
                [tool("read")], max_turns=1)
    for event in h.prompt("go"):
        render(event)
    assert out.getvalue() == ""
    assert err.getvalue().startswith("Error: ") and "max_turns=1" in err.getvalue()
    assert render.status == 1


def test_the_final_text_renderer_can_be_a_listener_and_starts_afresh_each_run() -> None:
    out, err = io.StringIO(), io.StringIO()
    render = FinalTextRenderer(out, err)
    h = Harness(ScriptedModel([RuntimeError("down"), say("Back up.")]), "system", [])
    h.subscribe(render)
    list(h.prompt("one"))
    assert render.status == 1
    list(h.prompt("two"))
    assert render.status == 0
    assert out.getvalue() == "Back up.\n"
    assert err.getvalue() == "Error: The model failed: RuntimeError: down\n"


def live_screen(tmp_path, *calls) -> str:
    from rich.console import Console

    from mulligan.frontends.live import LiveRenderer
    from mulligan.tools import coding_tools

    out = io.StringIO()
    renderer = LiveRenderer(Console(file=out, width=100, color_system=None))
    script = [reply(c) for c in calls] + [say("done")]
    for event in Harness(ScriptedModel(script), "system", coding_tools(tmp_path)).prompt("go"):
        renderer.render(event)
    return out.getvalue()


def test_the_live_view_shows_bash_as_its_command_its_last_lines_and_a_failing_exit(tmp_path):
    shown = live_screen(tmp_path, call("bash", {"command": "seq 1 9; exit 3"}, id="b1"))
    assert "▸ bash $ seq 1 9; exit 3" in shown
    assert "… 5 earlier lines" in shown and "│ 9" in shown and "│ 1\n" not in shown
    assert "└ exit 3" in shown


def test_the_live_view_shows_an_edit_and_a_write_as_the_lines_they_change(tmp_path):
    (tmp_path / "m.py").write_text("x = 1\n")
    shown = live_screen(tmp_path,
                        call("edit", {"path": "m.py", "old_text": "x = 1", "new_text": "x = 2"},
                             id="e1"),
                        call("write", {"path": "new.py", "content": "a\nb\n"}, id="w1"))
    assert "▸ edit m.py  -1 +1" in shown and "- x = 1" in shown and "+ x = 2" in shown
    assert "▸ write new.py  -0 +2" in shown and "+ a" in shown and "+ b" in shown
    assert '"old_text"' not in shown  # never the escaped JSON
