"""The REPL driven as a user would: keys typed into prompt_toolkit's pipe input, output read
from a rich Console writing to a string, a scripted model answering."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from mulligan.app import Controller
from mulligan.app.sessions.catalog import new_session_path, newest_session
from mulligan.app.settings import Settings
from mulligan.frontends.repl import Repl
from mulligan.session import SessionLog
from mulligan.testing import ScriptedModel, StreamingScriptedModel, say


class Driver:
    """A REPL on a thread, with a keyboard (`type`) and a screen (`screen`)."""

    def __init__(self, repl: Repl, pipe, buffer: io.StringIO) -> None:
        self.repl, self.pipe, self.buffer = repl, pipe, buffer
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.status: int | None = None
        self.thread.start()
        assert repl.wait_idle(0)

    def _run(self) -> None:
        self.status = self.repl.run()

    def type(self, keys: str) -> str:
        """Type `keys`, wait until the REPL is at rest again, return what it printed."""
        seen, before = self.repl.idle_count, len(self.buffer.getvalue())
        self.pipe.send_text(keys)
        assert self.repl.wait_idle(seen), f"the REPL did not come back after {keys!r}"
        return self.buffer.getvalue()[before:]

    def quit(self, keys: str = "/quit\r") -> int | None:
        self.pipe.send_text(keys)
        self.thread.join(timeout=30)
        assert not self.thread.is_alive()
        return self.status


def controller(tmp_path: Path, model, session_file: Path | None, resolver=None) -> Controller:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return Controller(model, [], Settings(cwd=work, home=tmp_path / "home"), session_file,
                      resolver=resolver)


@contextmanager
def repl_on(c: Controller) -> Iterator[Driver]:
    buffer = io.StringIO()
    # Wide: the REPL wraps long lines at words, and these tests read whole lines.
    console = Console(file=buffer, width=250, color_system=None, highlight=False)
    with create_pipe_input() as pipe:
        repl = Repl(c, console=console, input=pipe, output=DummyOutput(), width=100)
        driver = Driver(repl, pipe, buffer)
        try:
            yield driver
        finally:
            if driver.thread.is_alive():
                driver.quit()


@pytest.fixture
def new_file(tmp_path: Path) -> Path:
    return new_session_path(tmp_path / "home", (tmp_path / "work"))


def test_a_typed_prompt_is_answered_with_streamed_text_and_saved(tmp_path, new_file):
    c = controller(tmp_path, StreamingScriptedModel([say("Reading it now, carefully.")]),
                   new_file)
    with repl_on(c) as repl:
        shown = repl.type("Make main.py faster.\r")
        assert "Reading it now, carefully." in shown
        assert repl.quit() == 0
    log = SessionLog(new_file)
    assert [e["type"] for e in log.entries()] == ["session_info", "message", "message"]
    assert log.replay()[0]["content"] == "Make main.py faster."


def test_nothing_is_written_when_the_user_quits_before_a_message(tmp_path, new_file):
    c = controller(tmp_path, ScriptedModel([]), new_file)
    with repl_on(c) as repl:
        repl.type("/help\r")
        assert repl.quit("\x04") == 0  # Ctrl-D
    assert not new_file.exists()
    assert not new_file.parent.exists()


def test_tree_back_edit_and_resend_then_reopen_finds_the_same_tree_and_tip(tmp_path, new_file):
    model = ScriptedModel([say("Cache the results in a global dict."),
                           say("Done: main.py now keeps a module-level CACHE."),
                           say("Then functools.cache on slow()."),
                           say("Sure, no globals.")])
    c = controller(tmp_path, model, new_file)
    with repl_on(c) as repl:
        repl.type("Make main.py faster.\r")
        repl.type("Do it, then.\r")
        tree = repl.type("/tree\r")
        assert "e4  you: Do it, then." in tree and "◀ tip" in tree
        shown = repl.type("/edit\r")       # back to just before "Do it, then."
        assert "edit and press Enter" in shown
        # The old text is in the input box: clear it (Ctrl-U... is not bound, so erase) and
        # type the new answer.
        shown = repl.type("\x7f" * len("Do it, then.") + "No global, please.\r")
        assert "Then functools.cache on slow()." in shown
        tree = repl.type("/tree\r")
        assert "… 2 entries on an abandoned attempt (e4..e5)" in tree
        assert "you: No global, please." in tree
        assert repl.quit() == 0
    before = SessionLog(new_file)
    tip, transcript = before.tip(), before.replay()
    assert [m["content"] for m in transcript if m["role"] == "user"] == [
        "Make main.py faster.", "No global, please."]

    reopened = newest_session(tmp_path / "home", tmp_path / "work")
    assert reopened == new_file
    c2 = controller(tmp_path, model, reopened)
    with repl_on(c2) as repl:
        tree_again = repl.type("/tree\r")
        assert tree_again.strip().splitlines() == tree.strip().splitlines()
        assert c2.tip() == tip
        assert list(c2.harness.messages) == transcript


def test_back_survives_a_restart_and_the_next_prompt_follows_the_branch_point(
        tmp_path, new_file):
    model = ScriptedModel([say("one"), say("two"), say("three")])
    c = controller(tmp_path, model, new_file)
    with repl_on(c) as repl:
        repl.type("first\r")
        repl.type("second\r")
        shown = repl.type("/back e3\r")      # e3 is the answer "one"
        assert "back at e3" in shown
        assert repl.quit() == 0              # quit before typing anything

    c2 = controller(tmp_path, model, new_file)
    with repl_on(c2) as repl:
        repl.type("again\r")
    entries = SessionLog(new_file).entries()
    again = next(e for e in entries if e.get("message", {}).get("content") == "again")
    assert SessionLog(new_file).entry(again["parent_id"])["type"] == "branch"
    assert SessionLog(new_file).entry(again["parent_id"])["parent_id"] == "e3"
    assert [m["content"] if m["role"] == "user" else m["content"][0]["text"]
            for m in model.calls[-1].messages] == ["first", "one", "again"]


def test_back_without_an_id_picks_one_of_your_earlier_messages(tmp_path, new_file):
    model = ScriptedModel([say("one"), say("two"), say("three")])
    c = controller(tmp_path, model, new_file)
    with repl_on(c) as repl:
        repl.type("first\r")
        repl.type("second\r")
        repl.pipe.send_text("/back\r")
        shown = repl.type("1\r")             # newest first: 1 is "second"
        assert "back before e4" in shown
        repl.type("other\r")
    assert [m["content"] for m in SessionLog(new_file).replay() if m["role"] == "user"] == [
        "first", "other"]


def test_back_is_refused_before_the_first_message_by_name(tmp_path, new_file):
    c = controller(tmp_path, ScriptedModel([]), new_file)
    with repl_on(c) as repl:
        shown = repl.type("/back e1\r")
    assert "/back: this session has no messages yet" in shown
    assert not new_file.exists()


def test_label_name_and_fork_are_recorded_in_session_files(tmp_path, new_file):
    c = controller(tmp_path, ScriptedModel([say("one")]), new_file)
    with repl_on(c) as repl:
        repl.type("first\r")
        repl.type("/label e3 good answer\r")
        repl.type("/name caching work\r")
        assert "[good answer]" in repl.type("/tree\r")
        shown = repl.type("/fork\r")
        assert "forked" in shown
    forked = c.session_file
    assert forked != new_file
    entries = SessionLog(forked).entries()
    assert entries[0]["type"] == "session_info"
    assert entries[0]["origin_file"] == str(new_file)
    assert entries[0]["name"] == "caching work (fork)"  # the copy told apart by its name
    assert [e["id"] for e in entries] == [f"e{i}" for i in range(1, len(entries) + 1)]
    assert [m["content"] for m in SessionLog(forked).replay() if m["role"] == "user"] == [
        "first"]


def test_ctrl_c_during_a_run_aborts_it_and_the_transcript_stays_valid(tmp_path, new_file):
    def answer(request):
        prompt = request.messages[-1]["content"]
        return say(("a long answer " * 40) if prompt == "go" else f"answer to {prompt}")

    model = StreamingScriptedModel(answer, pause=0.05)
    c = controller(tmp_path, model, new_file)
    with repl_on(c) as repl:
        seen = repl.repl.idle_count
        repl.pipe.send_text("go\r")
        while not c.is_running and c.harness.messages == ():
            pass
        repl.pipe.send_text("\x03")          # Ctrl-C
        assert repl.repl.wait_idle(seen)
        assert "(aborted)" in repl.buffer.getvalue()
        shown = repl.type("next\r")
        assert "answer to next" in shown
    transcript = SessionLog(new_file).replay()
    assert transcript[0] == {"role": "user", "content": "go"}
    assert transcript[1]["stop_reason"] == "aborted"
    assert [m["role"] for m in transcript[2:]] == ["user", "assistant"]


def test_ctrl_c_twice_at_the_prompt_quits(tmp_path, new_file):
    c = controller(tmp_path, ScriptedModel([]), new_file)
    with repl_on(c) as repl:
        repl.pipe.send_text("\x03")
        assert repl.quit("\x03") == 0


def test_slash_commands_complete_with_tab(tmp_path, new_file):
    from prompt_toolkit.document import Document

    from mulligan.frontends.terminal.pickers import SlashCompleter

    found = [c.text for c in SlashCompleter().get_completions(Document("/fo"), None)]
    assert found == ["/fork"]


def wait_for(predicate, timeout: float = 30.0) -> bool:
    done = threading.Event()
    deadline = threading.Timer(timeout, done.set)
    deadline.start()
    try:
        while not done.is_set():
            if predicate():
                return True
            done.wait(0.01)
        return False
    finally:
        deadline.cancel()


def gated_model(gate: threading.Event) -> ScriptedModel:
    """Answers "go" only once `gate` is set, so a test can type while the run is going on."""

    def answer(request):
        prompt = request.messages[-1]["content"]
        if prompt == "go":
            gate.wait(30)
        return say(f"answer to {prompt}")

    return ScriptedModel(answer)


def test_enter_during_a_run_queues_a_steering_message(tmp_path, new_file):
    gate = threading.Event()
    c = controller(tmp_path, gated_model(gate), new_file)
    with repl_on(c) as repl:
        seen = repl.repl.idle_count
        repl.pipe.send_text("go\r")
        assert wait_for(lambda: c.is_running)
        repl.pipe.send_text("use spaces\r")
        assert wait_for(lambda: "(queued as steering: use spaces)" in repl.buffer.getvalue())
        gate.set()
        assert repl.repl.wait_idle(seen)
        assert "answer to use spaces" in repl.buffer.getvalue()
    assert [m["content"] for m in SessionLog(new_file).replay() if m["role"] == "user"] == [
        "go", "use spaces"]


def test_alt_enter_during_a_run_queues_a_follow_up(tmp_path, new_file):
    gate = threading.Event()
    c = controller(tmp_path, gated_model(gate), new_file)
    with repl_on(c) as repl:
        seen = repl.repl.idle_count
        repl.pipe.send_text("go\r")
        assert wait_for(lambda: c.is_running)
        repl.pipe.send_text("now run the tests\x1b\r")  # Alt-Enter is Escape then Enter
        assert wait_for(lambda: "(queued as a follow-up: now run the tests)"
                        in repl.buffer.getvalue())
        gate.set()
        assert repl.repl.wait_idle(seen)
    assert [m["content"] for m in SessionLog(new_file).replay() if m["role"] == "user"] == [
        "go", "now run the tests"]


def test_what_was_queued_for_an_aborted_run_goes_back_to_the_input_box(tmp_path, new_file):
    gate = threading.Event()
    c = controller(tmp_path, gated_model(gate), new_file)
    with repl_on(c) as repl:
        seen = repl.repl.idle_count
        repl.pipe.send_text("go\r")
        assert wait_for(lambda: c.is_running)
        repl.pipe.send_text("use spaces\r")
        repl.pipe.send_text("then test\x1b\r")
        assert wait_for(lambda: "(queued as a follow-up: then test)" in repl.buffer.getvalue())
        repl.pipe.send_text("\x03")  # Ctrl-C: abort the run
        assert wait_for(lambda: "aborting the run" in repl.buffer.getvalue())
        gate.set()
        assert repl.repl.wait_idle(seen)
        assert "back in the input box: use spaces / then test" in repl.buffer.getvalue()
        assert "answer to use spaces\nthen test" in repl.type("\r")  # Enter sends the box
    users = [m["content"] for m in SessionLog(new_file).replay() if m["role"] == "user"]
    assert users == ["go", "use spaces\nthen test"]


def test_alt_enter_at_the_prompt_starts_a_new_line(tmp_path, new_file):
    model = ScriptedModel([say("ok")])
    c = controller(tmp_path, model, new_file)
    with repl_on(c) as repl:
        repl.type("line one\x1b\rline two\r")
    assert model.calls[0].messages[-1]["content"] == "line one\nline two"


def test_tool_results_are_shown_folded_past_a_few_lines(tmp_path, new_file):
    from mulligan.testing import call, reply

    tool = {"name": "count", "description": "count", "parameters": {"type": "object"},
            "execute": lambda arguments: "\n".join(f"line {i}" for i in range(1, 11))}
    model = ScriptedModel([reply(call("count", {}, id="c1")), say("counted")])
    work = tmp_path / "work"
    work.mkdir()
    c = Controller(model, [tool], Settings(cwd=work, home=tmp_path / "home"), new_file)
    with repl_on(c) as repl:
        shown = repl.type("count\r")
    assert "▸ count" in shown
    assert "line 4" in shown and "line 5" not in shown
    assert "… 6 more lines" in shown
    assert "counted" in shown


def test_model_switches_the_model_and_records_a_model_change(tmp_path, new_file):
    second = ScriptedModel([say("from the second model")])
    second.name = "openai/gpt-test"
    c = controller(tmp_path, ScriptedModel([say("from the first")]), new_file,
                   resolver=lambda name: second)
    with repl_on(c) as repl:
        repl.type("hi\r")
        assert "model is now openai/gpt-test" in repl.type("/model openai/gpt-test\r")
        assert "from the second model" in repl.type("again\r")
    change = next(e for e in SessionLog(new_file).entries() if e["type"] == "model_change")
    assert (change["provider"], change["model"]) == ("openai", "gpt-test")


def test_export_writes_the_branch_as_markdown(tmp_path, new_file):
    c = controller(tmp_path, ScriptedModel([say("an answer")]), new_file)
    target = tmp_path / "out.md"
    with repl_on(c) as repl:
        repl.type("a question\r")
        assert f"wrote {target}" in repl.type(f"/export md {target}\r")
    assert "## You (e2)" in target.read_text() and "an answer" in target.read_text()


def test_export_never_writes_over_an_existing_file(tmp_path, new_file):
    c = controller(tmp_path, ScriptedModel([say("an answer")]), new_file)
    target = tmp_path / "notes.md"
    target.write_text("mine")
    with repl_on(c) as repl:
        repl.type("a question\r")
        assert "already exists; exports never overwrite" in repl.type(f"/export md {target}\r")
    assert target.read_text() == "mine"


def test_sessions_lists_this_folders_sessions_and_resume_switches(tmp_path, new_file):
    c = controller(tmp_path, ScriptedModel([say("one"), say("two")]), new_file)
    with repl_on(c) as repl:
        repl.type("first session\r")
        repl.type("/fork\r")
        listed = repl.type("/sessions\r")
        assert listed.count("first session") == 2
        shown = repl.type(f"/resume {new_file}\r")
        assert "resumed" in shown
        assert c.session_file == new_file
        assert c.lease is not None and c.lease.session == new_file


def test_only_this_folders_sessions_are_numbered_since_resume_n_counts_those(tmp_path, new_file):
    elsewhere = Controller(ScriptedModel([say("there")]), [],
                           Settings(cwd=tmp_path, home=tmp_path / "home"),
                           new_session_path(tmp_path / "home", tmp_path))
    list(elsewhere.run_prompt("in another folder"))
    elsewhere.close()
    c = controller(tmp_path, ScriptedModel([say("here")]), new_file)
    with repl_on(c) as repl:
        repl.type("in this folder\r")
        assert "  1. " in repl.type("/sessions\r")
        every = repl.type("/sessions all\r")
        assert "in another folder" in every
        assert not any(line.lstrip()[:2] in ("1.", "2.") for line in every.splitlines())


def test_a_mistyped_id_is_named_in_one_short_line(tmp_path, new_file):
    c = controller(tmp_path, ScriptedModel([say("an answer")]), new_file)
    with repl_on(c) as repl:
        repl.type("a question\r")
        for command in ("/back e99", "/label e99 x", "/edit e99"):
            shown = repl.type(f"{command}\r").strip().splitlines()
            name = command.split()[0]
            assert shown == [f"{name}: no entry has the id 'e99'; /tree shows the ids"]


def test_an_unknown_command_is_named(tmp_path, new_file):
    c = controller(tmp_path, ScriptedModel([]), new_file)
    with repl_on(c) as repl:
        assert "unknown command /frobnicate" in repl.type("/frobnicate\r")


def test_history_is_kept_across_runs(tmp_path, new_file):
    history = tmp_path / "home" / "history"
    model = ScriptedModel([say("one"), say("two")])
    c = controller(tmp_path, model, new_file)
    buffer = io.StringIO()
    with create_pipe_input() as pipe:
        repl = Repl(c, console=Console(file=buffer, width=100), input=pipe,
                    output=DummyOutput(), history_file=history)
        driver = Driver(repl, pipe, buffer)
        driver.type("remember me\r")
        driver.quit()
    c2 = controller(tmp_path, model, new_file)
    with create_pipe_input() as pipe:
        repl = Repl(c2, console=Console(file=buffer, width=100), input=pipe,
                    output=DummyOutput(), history_file=history)
        driver = Driver(repl, pipe, buffer)
        driver.type("\x1b[A\x1b[A\r")  # Up twice (past "/quit"), then Enter
        driver.quit()
    assert model.calls[-1].messages[-1]["content"] == "remember me"


def test_the_history_file_is_private_like_the_sessions(tmp_path, new_file):
    import stat

    history = tmp_path / "home" / "history"
    c = controller(tmp_path, ScriptedModel([say("one")]), new_file)
    buffer = io.StringIO()
    with create_pipe_input() as pipe:
        repl = Repl(c, console=Console(file=buffer, width=100), input=pipe,
                    output=DummyOutput(), history_file=history)
        driver = Driver(repl, pipe, buffer)
        driver.type("my secret plan\r")
        driver.quit()
    assert "my secret plan" in history.read_text()
    assert stat.S_IMODE(history.stat().st_mode) == 0o600


def test_the_banner_and_resume_count_one_message_in_the_singular(tmp_path, new_file):
    from mulligan.frontends.commands import resume_to
    from mulligan.frontends.terminal.banner import banner
    from mulligan.testing import user

    log = SessionLog(new_file)
    new_file.parent.mkdir(parents=True)
    log.append_session_info(cwd=str(tmp_path))
    log.append_message(user("only one"))
    c = controller(tmp_path, ScriptedModel([]), new_file)
    assert banner(c)[1] == f"session: {new_file} (1 message)"
    other = new_file.with_name("other.jsonl")
    SessionLog(other).append_message(user("a"))
    SessionLog(other).append_message(say("b"))
    resumed = resume_to(c, str(other))
    assert resumed.lines == [f"resumed {other} (2 messages on its branch)"]
    assert [m["role"] for m in resumed.recap or []] == ["user", "assistant"]  # shown rendered
    c.close()


def test_a_tool_call_whose_arguments_are_not_an_object_is_shown_not_a_crash():
    from mulligan.frontends.live import LiveRenderer

    buffer = io.StringIO()
    renderer = LiveRenderer(Console(file=buffer, width=100, color_system=None))
    renderer.render({"type": "tool_execution_start", "tool_call_id": "c1", "tool_name": "read",
                     "arguments": ["main.py"]})
    assert '▸ read ["main.py"]' in buffer.getvalue()


def test_extra_arguments_to_a_slash_command_are_refused_not_ignored(tmp_path, new_file):
    c = controller(tmp_path, ScriptedModel([say("ok")]), new_file)
    with repl_on(c) as repl:
        repl.type("hi\r")
        assert "/fork takes no arguments" in repl.type("/fork now please\r")
        assert "usage: /tree [all|go]" in repl.type("/tree everything\r")
        assert "/model takes at most 1 argument" in repl.type("/model a b\r")
        assert not c.session_file.with_name("x").exists()


def test_label_without_text_on_an_unlabelled_entry_says_so(tmp_path, new_file):
    c = controller(tmp_path, ScriptedModel([say("ok")]), new_file)
    with repl_on(c) as repl:
        repl.type("hi\r")
        assert "e2 has no label to take off" in repl.type("/label e2\r")
        repl.type("/label e2 the ask\r")
        assert "label taken off e2" in repl.type("/label e2\r")


def test_the_session_you_are_in_is_not_shown_as_in_use(tmp_path, new_file):
    c = controller(tmp_path, ScriptedModel([say("ok")]), new_file)
    with repl_on(c) as repl:
        repl.type("hi\r")
        shown = repl.type("/sessions\r")
        assert "(this session)" in shown and "in use by pid" not in shown


def test_new_starts_a_fresh_session_in_the_same_folder_leaving_the_old_one(tmp_path, new_file):
    c = controller(tmp_path, ScriptedModel([say("first"), say("second")]), new_file)
    with repl_on(c) as repl:
        repl.type("one\r")
        assert "a new session" in repl.type("/clear\r")
        assert c.harness.messages == ()
        repl.type("two\r")
    assert c.session_file != new_file and len(SessionLog(new_file).replay()) == 2
    assert [m.get("content") for m in SessionLog(c.session_file).replay()][0] == "two"


def test_sessions_say_which_ones_are_copies(tmp_path, new_file):
    c = controller(tmp_path, ScriptedModel([say("ok")]), new_file)
    with repl_on(c) as repl:
        repl.type("hi\r")
        repl.type("/fork\r")
        shown = repl.type("/sessions\r")
    assert f"(a copy of {new_file.name})" in shown
