"""read, write and edit over real files in a temporary workspace."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from mulligan.messages import ToolCallBlock, ToolResultMessage
from mulligan.testing import call
from mulligan.tools import Tool, ToolError, coding_tools, edit_tool, read_tool, run_tool, write_tool


def read(root: Path, **arguments: object) -> str:
    return read_tool(root)["execute"](arguments)


def test_read_returns_a_small_file_as_it_is(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\ny = 2\n")
    assert read(tmp_path, path="a.py") == "x = 1\ny = 2\n"


def test_read_of_a_big_file_stops_at_the_line_budget_and_says_how_to_continue(
    tmp_path: Path,
) -> None:
    (tmp_path / "big.txt").write_text("".join(f"line {n}\n" for n in range(1, 5001)))
    out = read(tmp_path, path="big.txt")
    assert out.startswith("line 1\n")
    assert "line 2000\n" in out and "line 2001\n" not in out
    assert out.endswith("[Showing lines 1-2000 of 5000. Use offset=2001 to continue.]")


def test_read_continued_with_offset_reaches_the_end_with_every_line_once(tmp_path: Path) -> None:
    lines = [f"line {n} " + "é" * (n % 40) + "\n" for n in range(1, 5001)]
    (tmp_path / "big.txt").write_text("".join(lines))
    seen, offset, calls = [], 1, 0
    while True:
        out = read(tmp_path, path="big.txt", offset=offset)
        calls += 1
        body, _, hint = out.rpartition("[Showing lines")
        if not hint.startswith(" "):  # the last call: no hint, all of it is the file
            seen.append(out)
            break
        assert len(body.encode()) <= 50_000
        seen.append(body)
        offset = int(hint.split("offset=")[1].split(" ")[0])
    assert "".join(seen) == "".join(lines)
    assert calls > 3  # the byte budget, not only the line budget, cut these reads


def test_read_with_offset_and_limit_shows_that_window_and_where_to_go_on(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("".join(f"{n}\n" for n in range(1, 11)))
    out = read(tmp_path, path="f.txt", offset=3, limit=2)
    assert out == "3\n4\n[Showing lines 3-4 of 10. Use offset=5 to continue.]"


def test_read_past_the_end_is_refused_with_the_line_count(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("a\nb\n")
    with pytest.raises(ToolError, match="offset 9 is past the end of f.txt, which has 2 lines"):
        read(tmp_path, path="f.txt", offset=9)


def test_read_of_a_line_bigger_than_the_budget_shows_its_start_and_says_so(
    tmp_path: Path,
) -> None:
    (tmp_path / "min.js").write_text("é" * 40_000 + "\nnext\n")  # 80,001 bytes on line 1
    out = read(tmp_path, path="min.js")
    start, _, note = out.partition("\n[")
    assert start == "é" * 25_000
    assert note.startswith("Line 1 of min.js is 80001 bytes, over the 50000-byte budget")
    assert "Use offset=2 to continue after it." in note


def test_read_refuses_a_binary_file_clearly(tmp_path: Path) -> None:
    (tmp_path / "tool.bin").write_bytes(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0")
    with pytest.raises(ToolError, match=r"tool.bin is a binary file \(16 bytes\)"):
        read(tmp_path, path="tool.bin")


def test_read_decodes_non_utf8_text_with_replacement_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "latin.txt").write_bytes("café\n".encode("latin-1"))
    out = read(tmp_path, path="latin.txt")
    assert out == ("[latin.txt is not valid UTF-8: bytes that could not be decoded are shown "
                   "as \ufffd.]\ncaf\ufffd\n")


def test_read_of_a_missing_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="File not found: nope.py"):
        read(tmp_path, path="nope.py")


def test_read_of_a_folder_says_to_use_ls(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    with pytest.raises(ToolError, match="src is a folder, not a file. Use ls"):
        read(tmp_path, path="src")


def test_read_of_an_empty_file_says_it_is_empty(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_text("")
    assert read(tmp_path, path="empty.txt") == "[empty.txt is empty.]"


def test_write_creates_missing_parent_folders_and_reports_bytes(tmp_path: Path) -> None:
    out = write_tool(tmp_path)["execute"]({"path": "a/b/c.txt", "content": "héllo\n"})
    assert (tmp_path / "a" / "b" / "c.txt").read_text() == "héllo\n"
    assert out == "Wrote 7 bytes to a/b/c.txt (created)."


def test_write_replaces_an_existing_file_whole(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("old old old\n")
    out = write_tool(tmp_path)["execute"]({"path": "f.txt", "content": "new\n"})
    assert (tmp_path / "f.txt").read_text() == "new\n"
    assert out == "Wrote 4 bytes to f.txt (replaced)."


def test_write_to_a_folder_path_is_refused(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    with pytest.raises(ToolError, match="d is a folder"):
        write_tool(tmp_path)["execute"]({"path": "d", "content": "x"})


def test_edit_replaces_one_unique_occurrence(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("def f():\n    return 1\n\ndef g():\n    return 2\n")
    out = edit_tool(tmp_path)["execute"](
        {"path": "m.py", "old_text": "    return 2\n", "new_text": "    return 3\n    # ok\n"})
    assert (tmp_path / "m.py").read_text() == (
        "def f():\n    return 1\n\ndef g():\n    return 3\n    # ok\n")
    assert out == "Edited m.py: replaced 1 line(s) at line 5 with 2 line(s)."


def test_edit_with_no_match_is_refused_and_leaves_the_file_alone(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("x = 1\n")
    with pytest.raises(ToolError, match="old_text was not found in m.py. It must match"):
        edit_tool(tmp_path)["execute"]({"path": "m.py", "old_text": "x = 2", "new_text": "y"})
    assert (tmp_path / "m.py").read_text() == "x = 1\n"


def test_edit_with_several_matches_is_refused_with_their_count_and_lines(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("a = 0\nb = 0\na = 0\n\na = 0\n")
    with pytest.raises(ToolError, match=r"occurs 3 times in m.py \(at lines 1, 3, 5\)"):
        edit_tool(tmp_path)["execute"]({"path": "m.py", "old_text": "a = 0", "new_text": "a=1"})
    assert (tmp_path / "m.py").read_text() == "a = 0\nb = 0\na = 0\n\na = 0\n"


def test_edit_counts_overlapping_matches_as_several(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("aaa\n")
    with pytest.raises(ToolError, match="occurs 2 times"):
        edit_tool(tmp_path)["execute"]({"path": "f.txt", "old_text": "aa", "new_text": "b"})


def test_edit_matches_lines_in_a_crlf_file_and_keeps_its_line_endings(tmp_path: Path) -> None:
    (tmp_path / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    edit_tool(tmp_path)["execute"]({"path": "w.txt", "old_text": "one\ntwo",
                                    "new_text": "1\n2"})
    assert (tmp_path / "w.txt").read_bytes() == b"1\r\n2\r\nthree\r\n"


def test_edit_refuses_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "latin.txt").write_bytes("café\n".encode("latin-1"))
    with pytest.raises(ToolError, match="not valid UTF-8"):
        edit_tool(tmp_path)["execute"]({"path": "latin.txt", "old_text": "caf",
                                        "new_text": "tea"})


def test_edit_with_identical_texts_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("x\n")
    with pytest.raises(ToolError, match="the same"):
        edit_tool(tmp_path)["execute"]({"path": "f.txt", "old_text": "x", "new_text": "x"})


def test_a_file_tool_failure_through_run_tool_is_one_error_result(tmp_path: Path) -> None:
    result = run_tool(coding_tools(tmp_path), call("read", {"path": "gone.txt"}, id="r1"))
    assert (result["tool_call_id"], result["is_error"]) == ("r1", True)
    assert result["content"].startswith("File not found: gone.txt.")


@pytest.mark.parametrize("ending", ["\n", ""])
@pytest.mark.parametrize(("offset", "limit"), [(1, 1), (2, 3), (5, 1)])
def test_read_counts_every_line_of_the_file_in_its_hint(
    tmp_path: Path, ending: str, offset: int, limit: int
) -> None:
    (tmp_path / "f.txt").write_text("\n".join(f"l{n}" for n in range(1, 7)) + ending)
    out = read(tmp_path, path="f.txt", offset=offset, limit=limit)
    last = offset + limit - 1
    assert out.endswith(f"[Showing lines {offset}-{last} of 6. Use offset={last + 1} to continue.]")


def test_read_of_the_last_line_without_a_newline_has_no_hint(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("a\nb\nc")
    assert read(tmp_path, path="f.txt", offset=3) == "c"


def _result_within_5_s(tools: list[Tool], made: ToolCallBlock) -> ToolResultMessage:
    """run_tool's answer to `made`, failing the test if it is not there within 5 s (a hang)."""
    outcome: list[ToolResultMessage] = []
    worker = threading.Thread(target=lambda: outcome.append(run_tool(tools, made)), daemon=True)
    worker.start()
    worker.join(5)
    assert outcome, f"{made['name']} still waiting after 5 s"
    return outcome[0]


def test_read_edit_and_write_refuse_a_named_pipe_instead_of_waiting_on_it(
    tmp_path: Path,
) -> None:
    os.mkfifo(tmp_path / "pipe")
    tools = coding_tools(tmp_path)
    for name, arguments in [("read", {"path": "pipe"}),
                            ("edit", {"path": "pipe", "old_text": "a", "new_text": "b"}),
                            ("write", {"path": "pipe", "content": "x"})]:
        result = _result_within_5_s(tools, call(name, arguments))
        assert result["is_error"], result
        assert result["content"].startswith("pipe is not a regular file"), result


def test_reading_a_file_that_is_one_huge_line_holds_only_a_few_budgets_in_memory(
        tmp_path: Path) -> None:
    import tracemalloc


    huge = tmp_path / "one-line.txt"
    with huge.open("wb") as out:
        for _ in range(64):
            out.write(b"\xc3\xa9" * (1 << 19))  # 64 MiB of one line of "é"
        out.write(b"\nsecond line\n")
    tracemalloc.start()
    try:
        text = read_tool(tmp_path)["execute"]({"path": "one-line.txt"})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 << 20  # a few budgets and read blocks; it was the whole 64 MiB line, twice
    assert f"Line 1 of one-line.txt is {(64 << 20) + 1} bytes" in text  # newline included
    assert "not valid UTF-8" not in text  # cut on a character boundary
