"""bash: real processes in the workspace; exit codes as news; timeouts and aborts kill the group."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from mulligan.testing import call
from mulligan.tools import CommandTimedOut, bash_tool, coding_tools, run_tool


def bash(root: Path, command: str, **extra: object) -> str:
    return bash_tool(root)["execute"]({"command": command, **extra})


def gone(pid: int) -> bool:
    """Whether `pid` has exited and been reaped; polled briefly, since the reaper is not us."""
    for _ in range(200):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_bash_runs_in_the_workspace_folder(tmp_path: Path) -> None:
    assert bash(tmp_path, "pwd") == f"{tmp_path.resolve()}\n"


def test_stdout_and_stderr_come_back_merged_in_order(tmp_path: Path) -> None:
    assert bash(tmp_path, "echo out; echo err >&2; echo out2") == "out\nerr\nout2\n"


def test_a_nonzero_exit_code_is_news_in_the_content_not_a_tool_error(tmp_path: Path) -> None:
    result = run_tool(coding_tools(tmp_path), call("bash", {"command": "echo no; exit 2"}))
    assert result["is_error"] is False
    assert result["content"] == "no\n[exit code 2]"


def test_a_silent_success_says_there_was_no_output(tmp_path: Path) -> None:
    assert bash(tmp_path, "true") == "(no output)"


def test_stdin_is_empty_so_a_reader_gets_eof_at_once(tmp_path: Path) -> None:
    assert bash(tmp_path, "cat; echo done") == "done\n"


def test_long_output_keeps_its_end_and_says_how_to_narrow(tmp_path: Path) -> None:
    out = bash(tmp_path, "seq 1 5000; echo FAILED >&2")
    assert out.startswith("3002\n3003\n")
    assert "4999\n5000\nFAILED\n[Showing the last 2000 of 5001 lines of output." in out
    assert "Narrow the command" in out


def test_output_over_the_byte_budget_is_cut_to_whole_lines_from_the_end(tmp_path: Path) -> None:
    # 1000 lines of 99 "é": 199 bytes each with the newline, so 50_000 bytes hold 251 of them.
    out = bash(tmp_path, "awk 'BEGIN { for (i = 0; i < 1000; i++) { s = \"\"; "
                         "for (j = 0; j < 99; j++) s = s \"é\"; print s } }'")
    body, _, note = out.rpartition("\n[")
    assert len((body + "\n").encode()) <= 50_000
    assert all(line == "é" * 99 for line in body.split("\n"))
    assert note.startswith("Showing the last 251 of 1000 lines")


def test_huge_output_is_handled_without_keeping_it_all(tmp_path: Path) -> None:
    out = bash(tmp_path, "yes abcdefgh | head -n 3000000")  # 27 MB
    assert out.startswith("abcdefgh\n")
    assert out.endswith("[Showing the last 2000 of 3000000 lines of output. Narrow the command "
                        "(grep, head, tail), or redirect the output to a file and read it with "
                        "offset.]")


def test_a_last_line_bigger_than_the_budget_shows_its_end(tmp_path: Path) -> None:
    out = bash(tmp_path, "head -c 80000 /dev/zero | tr '\\0' x")
    text, _, note = out.partition("\n[")
    assert text == "x" * 50_000
    assert note.startswith("Output truncated: its last line is over the 50000-byte budget")


def test_a_last_line_bigger_than_all_the_output_kept_still_shows_its_end(tmp_path: Path) -> None:
    # 200 KB and a newline: more than the 100 KB run_command keeps, so only part of it is there.
    out = bash(tmp_path, "head -c 200000 /dev/zero | tr '\\0' x; echo")
    text, _, note = out.partition("\n[")
    assert text == "x" * 49_999
    assert note.startswith("Output truncated: its last line is over the 50000-byte budget")


def test_a_timeout_kills_the_command_and_every_child_it_started(tmp_path: Path) -> None:
    tool = bash_tool(tmp_path)
    with pytest.raises(CommandTimedOut) as raised:
        tool["execute"]({"command": "echo started; sleep 300 & echo $! > pid; sleep 300",
                         "timeout": 1})
    assert str(raised.value) == (
        "started\n[Timed out after 1 s: the command and every process it started were killed. "
        "Pass a larger timeout, or run it in the background with its output sent to a file.]")
    assert gone(int((tmp_path / "pid").read_text()))


def test_a_timeout_through_run_tool_is_an_error_result_carrying_the_output(
    tmp_path: Path,
) -> None:
    result = run_tool(coding_tools(tmp_path, bash_timeout=0.5),
                      call("bash", {"command": "echo partial; sleep 300"}, id="b1"))
    assert (result["tool_call_id"], result["is_error"]) == ("b1", True)
    assert result["content"].startswith("partial\n[Timed out after 0.5 s")


def test_an_abort_event_set_from_another_thread_kills_the_command_and_its_children(
    tmp_path: Path,
) -> None:
    abort = threading.Event()
    timer = threading.Timer(0.5, abort.set)
    timer.start()
    result = run_tool(coding_tools(tmp_path), call(
        "bash", {"command": "echo begun; sleep 300 & echo $! > pid; wait"}, id="b2"), abort=abort)
    timer.join()
    assert result["tool_call_id"] == "b2"
    assert result["is_error"] is False
    assert result["content"] == (
        "begun\n[Aborted: the command and every process it started were killed.]")
    assert gone(int((tmp_path / "pid").read_text()))


def test_an_abort_already_set_stops_the_command_before_it_gets_far(tmp_path: Path) -> None:
    abort = threading.Event()
    abort.set()
    out = bash_tool(tmp_path)["execute"]({"command": "sleep 300"}, abort=abort)
    assert out.endswith("[Aborted: the command and every process it started were killed.]")


def test_a_background_process_holding_the_output_is_stopped_when_bash_ends(
    tmp_path: Path,
) -> None:
    out = bash(tmp_path, "sleep 300 & echo $! > pid; echo main done")
    assert out.startswith("main done\n[Background processes still had the output open")
    assert gone(int((tmp_path / "pid").read_text()))


def test_a_background_process_with_its_output_redirected_keeps_running(tmp_path: Path) -> None:
    out = bash(tmp_path, "sleep 300 > /dev/null 2>&1 & echo $! > pid")
    pid = int((tmp_path / "pid").read_text())
    try:
        assert out == "(no output)"
        os.kill(pid, 0)  # still alive: raises if it was killed
    finally:
        os.kill(pid, 9)


def test_a_command_killed_by_a_signal_says_which(tmp_path: Path) -> None:
    assert bash(tmp_path, "kill -TERM $$") == "[killed by signal SIGTERM]"


def test_the_model_can_ask_for_its_own_timeout(tmp_path: Path) -> None:
    spec = bash_tool(tmp_path, timeout=7)
    assert spec["interruptible"] is True
    assert "default 7" in spec["description"]
    assert bash(tmp_path, "sleep 0.2; echo late", timeout=30) == "late\n"


def test_a_nan_timeout_is_the_default_and_a_huge_one_is_held_to_the_maximum(
        tmp_path: Path) -> None:
    tool = bash_tool(tmp_path, timeout=5, max_timeout=60)
    assert "used the default, 5 s" in tool["execute"]({"command": "true",
                                                        "timeout": float("nan")})
    assert "held to 60 s" in tool["execute"]({"command": "true", "timeout": 1e308})
    assert "held to 60 s" in tool["execute"]({"command": "true", "timeout": float("inf")})


def test_a_timeout_kills_a_child_that_left_the_process_group_with_setsid(
        tmp_path: Path) -> None:
    with pytest.raises(CommandTimedOut, match="left the command's process group") as raised:
        bash(tmp_path, "setsid sh -c 'echo $$ > escaped.pid; exec sleep 300' & sleep 30",
             timeout=1.5)
    assert "every process it started were killed" in str(raised.value)
    assert gone(int((tmp_path / "escaped.pid").read_text()))


def test_commands_run_without_the_hidden_variables(tmp_path: Path) -> None:
    os.environ["MULLIGAN_TEST_SECRET"] = "visible?"
    try:
        tool = bash_tool(tmp_path, hide_env=["MULLIGAN_TEST_SECRET"])
        assert tool["execute"]({"command": "echo ${MULLIGAN_TEST_SECRET:-hidden}"}) == \
            "hidden\n"
    finally:
        del os.environ["MULLIGAN_TEST_SECRET"]
