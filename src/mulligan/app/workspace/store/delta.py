"""Line deltas: the ops that make one version of a file from another, found in O(n).

In: two byte strings (the base, the new version). Out: ops -- b"c" + offset + length (copy
that range of the base) and b"i" + length + bytes (insert them), little-endian 64-bit -- that
`apply_delta` turns back into exactly the new version. Lines are split as `bytes.splitlines`
splits them (LF, CRLF, CR), kept whole, so any bytes round-trip. Never: a quadratic
path (no difflib: its matching is quadratic on repeated lines), a copy outside the base
(`apply_delta` refuses one, so crafted ops cannot read past it).
"""

from __future__ import annotations

import struct
from itertools import accumulate

__all__ = ["apply_delta", "make_delta"]

_COPY, _INSERT = 0x63, 0x69  # op tags: b"c" offset, length; b"i" length, bytes
_Q = struct.Struct("<Q")
_QQ = struct.Struct("<QQ")


def make_delta(base: bytes, data: bytes, *, limit: int) -> bytes | None:
    """Ops that make `data` from `base`, or None when they would insert more than `limit`
    literal bytes. O(n): the lines of `base` that occur once in it are anchors (dicts), and
    a repeated line is looked for where the last copy stopped (or one line on); a match is
    extended forward line by line and backward over the literal lines just before it."""
    lines = base.splitlines(keepends=True)
    offsets = [0, *accumulate(map(len, lines))]
    total = len(lines)
    last = dict(zip(lines, range(total), strict=True))  # in C: no Python loop
    first = dict(zip(reversed(lines), range(total - 1, -1, -1), strict=True))
    out = bytearray()
    literal: list[bytes] = []
    literal_size = 0
    start = at = -1  # the copy under way: base lines [start, at)

    def copy() -> None:
        if start >= 0:
            out.append(_COPY)
            out.extend(_QQ.pack(offsets[start], offsets[at] - offsets[start]))

    def insert() -> None:
        if literal:
            joined = b"".join(literal)
            out.append(_INSERT)
            out.extend(_Q.pack(len(joined)))
            out.extend(joined)
            literal.clear()

    resume = 0  # where the last copy stopped: a repeated line is looked for there
    for line in data.splitlines(keepends=True):
        if start >= 0 and at < total and lines[at] == line:
            at += 1
            continue
        if start >= 0:
            copy()
            resume, start = at, -1
        found = last.get(line)
        if found is not None and first[line] != found:  # repeated: not an anchor, but
            found = resume if resume < total and lines[resume] == line else \
                resume + 1 if resume + 1 < total and lines[resume + 1] == line else None
        if found is None:  # it goes on after an insert, a removal or a replaced line
            literal.append(line)
            literal_size += len(line)
            if literal_size > limit:
                return None
            continue
        start, at = found, found + 1
        while literal and start > 0 and lines[start - 1] == literal[-1]:
            literal_size -= len(literal.pop())  # the lines just before match too: copied
            start -= 1
        insert()
    copy()
    insert()
    return bytes(out)


def apply_delta(base: bytes, ops: bytes) -> bytes:
    """The bytes `ops` (from `make_delta`) make from `base`; ValueError when they do not
    fit it (a copy beyond its end, an unknown op, a cut-short op)."""
    parts: list[bytes | memoryview] = []
    view, stream = memoryview(base), memoryview(ops)
    at, end = 0, len(ops)
    while at < end:
        tag = ops[at]
        if tag == _COPY and at + 1 + _QQ.size <= end:
            offset, length = _QQ.unpack_from(ops, at + 1)
            if offset + length > len(base):
                raise ValueError(f"a copy of {length} bytes at {offset} beyond the base's "
                                 f"{len(base)}")
            parts.append(view[offset:offset + length])
            at += 1 + _QQ.size
        elif tag == _INSERT and at + 1 + _Q.size <= end:
            (length,) = _Q.unpack_from(ops, at + 1)
            at += 1 + _Q.size
            if at + length > end:
                raise ValueError("an insert cut short")
            parts.append(stream[at:at + length])
            at += length
        else:
            raise ValueError(f"op {tag} at {at} is not an op")
    return b"".join(parts)
