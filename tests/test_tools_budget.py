"""truncate_head / truncate_tail: whole lines only, sized in UTF-8 bytes and in lines."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mulligan.tools.budget import split_lines, truncate_head, truncate_tail


def test_text_within_the_budget_is_kept_whole() -> None:
    kept = truncate_head("one\ntwo\n", max_lines=5, max_bytes=100)
    assert kept == ("one\ntwo\n", 2, 2)
    assert not kept.truncated


def test_head_keeps_the_first_lines_up_to_the_line_budget() -> None:
    kept = truncate_head("1\n2\n3\n4\n", max_lines=2, max_bytes=100)
    assert (kept.text, kept.shown, kept.total) == ("1\n2\n", 2, 4)
    assert kept.truncated


def test_tail_keeps_the_last_lines_up_to_the_line_budget() -> None:
    kept = truncate_tail("1\n2\n3\n4\n", max_lines=2, max_bytes=100)
    assert (kept.text, kept.shown, kept.total) == ("3\n4\n", 2, 4)


def test_head_counts_bytes_not_characters_in_multibyte_text() -> None:
    # "é\n" is three bytes: two such lines are six, and a seventh byte would split nothing.
    kept = truncate_head("é\né\né\n", max_lines=100, max_bytes=7)
    assert (kept.text, kept.shown) == ("é\né\n", 2)


def test_tail_counts_bytes_not_characters_in_multibyte_text() -> None:
    # Each "日本\n" is seven bytes but three characters; 13 bytes hold one line, not four.
    kept = truncate_tail("日本\n日本\n日本\n", max_lines=100, max_bytes=13)
    assert (kept.text, kept.shown) == ("日本\n", 1)


def test_a_line_that_would_cross_the_byte_budget_is_left_out_whole() -> None:
    kept = truncate_head("short\n" + "x" * 50 + "\n", max_lines=100, max_bytes=20)
    assert kept.text == "short\n"


def test_a_first_line_bigger_than_the_budget_keeps_nothing() -> None:
    assert truncate_head("x" * 100 + "\nshort\n", max_bytes=10) == ("", 0, 2)


def test_a_last_line_without_a_newline_is_still_a_line() -> None:
    assert truncate_tail("a\nb", max_lines=1) == ("b", 1, 2)


def test_only_newline_ends_a_line() -> None:
    assert split_lines("a\x0cb\u2028c\r\nd") == ["a\x0cb\u2028c\r\n", "d"]


@settings(deadline=None)  # a loaded CI machine is not a bug
@given(st.text(), st.integers(1, 20), st.integers(0, 200))
def test_head_is_always_a_prefix_of_whole_lines_within_budget(
    text: str, max_lines: int, max_bytes: int
) -> None:
    kept = truncate_head(text, max_lines, max_bytes)
    assert text.startswith(kept.text)
    assert len(kept.text.encode()) <= max_bytes
    assert kept.shown <= max_lines
    assert kept.text == "".join(split_lines(text)[:kept.shown])


@settings(deadline=None)  # a loaded CI machine is not a bug
@given(st.text(), st.integers(1, 20), st.integers(0, 200))
def test_tail_is_always_a_suffix_of_whole_lines_within_budget(
    text: str, max_lines: int, max_bytes: int
) -> None:
    kept = truncate_tail(text, max_lines, max_bytes)
    assert text.endswith(kept.text)
    assert len(kept.text.encode()) <= max_bytes
    assert kept.shown <= max_lines
    lines = split_lines(text)
    assert kept.text == "".join(lines[len(lines) - kept.shown:])
