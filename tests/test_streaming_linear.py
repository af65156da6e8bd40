"""Streamed replies are assembled in time linear in their size: each delta costs the same at
the end of a long reply as at its start. Checked by structure -- bounded partial blocks,
parses counted, pieces joined once -- not by timing (bench/stream_bench.py prints the figures
against the SDK alone)."""

from __future__ import annotations

import json
from typing import Any

from mulligan.boundary import PARTIAL_BLOCK, JsonEnd, PartialReply
from mulligan.messages import text_of
from mulligan.providers.streaming import append_text, settled


def test_a_long_text_streams_into_bounded_blocks_that_read_as_one_text() -> None:
    partial = PartialReply()
    pieces = [f"word{n:06d} " for n in range(100_000)]  # 1.1 MB in 11-character deltas
    for piece in pieces:
        partial.add({"type": "text", "delta": piece})
    blocks = partial.message["content"]
    assert PARTIAL_BLOCK <= 8192  # a delta copies at most that much
    assert all(len(b["text"]) <= 8192 for b in blocks)  # type: ignore[typeddict-item]
    assert text_of(partial.message) == "".join(pieces)
    assert partial.words() == [{"type": "text", "text": "".join(pieces)}]


def test_tool_arguments_in_many_fragments_are_parsed_once() -> None:
    arguments = {"path": "big.py", "content": "x = {'a': [1, 2]}  # \"quoted\" \\ \n" * 4000}
    text = json.dumps(arguments)
    partial = PartialReply()
    for at in range(0, len(text), 7):
        partial.add({"type": "toolcall", "id": "c1", "name": "write", "delta": text[at:at + 7]})
    assert partial.message["content"] == [{"type": "toolCall", "id": "c1", "name": "write",
                                           "arguments": arguments}]
    assert partial.parses() == 1  # not once a fragment (30,000 of them)


def test_the_end_of_a_json_object_is_seen_only_when_it_can_be_whole() -> None:
    def parses(*fragments: str) -> list[bool]:
        end = JsonEnd()
        return [end.closes(f) for f in fragments]

    assert parses('{"a": "}"', ', "b": {"c": 1}', "}") == [False, False, True]
    assert parses('{"a": "\\"}', '"}') == [False, True]  # an escaped quote is not the end
    assert parses("{}", " {}") == [True, False]  # something after the object: never whole
    assert parses("[1]", "{}") == [False, False]  # not an object
    assert parses("}", "{}") == [False, False]


def test_a_fold_keeps_a_streamed_text_in_pieces_and_joins_it_once() -> None:
    # What the SDK adapters' folds use: no string is rebuilt per delta.
    block: dict[str, Any] = {"type": "text", "text": "Hel"}
    pieces = [f"piece {n} " for n in range(10_000)]
    for piece in pieces:
        append_text(block, "text", piece)
    assert isinstance(block["text"], list) and len(block["text"]) == 10_001
    assert settled(block) == {"type": "text", "text": "Hel" + "".join(pieces)}
