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
    literal bytes. O(n): the lines both start with and both end with are found by comparing
    bytes (C's memcmp, ~35 us a MB: a big manifest whose one line changed costs no Python
    loop over its lines) and copied; between them, the lines of `base` that occur once in it
    are anchors (dicts), and a repeated line is looked for where the last copy stopped (or
    one line on); a match is extended forward line by line and backward over the literal
    lines just before it."""
    head, tail = _shared(base, data)
    lines = base[head:len(base) - tail].splitlines(keepends=True)
    offsets = list(accumulate(map(len, lines), initial=head))
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

    if head:
        out.append(_COPY)
        out.extend(_QQ.pack(0, head))
    resume = 0  # where the last copy stopped: a repeated line is looked for there
    for line in data[head:len(data) - tail].splitlines(keepends=True):
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
    if tail:
        out.append(_COPY)
        out.extend(_QQ.pack(len(base) - tail, tail))
    return bytes(out)


def _shared(base: bytes, data: bytes) -> tuple[int, int]:
    """(head, tail): how many bytes `base` and `data` both start with, then both end with
    (never overlapping the head in either), each cut back to whole lines -- the head ends,
    and the tail starts, just after a b"\n" -- so the lines between are split as the
    whole's are."""
    most = min(len(base), len(data))
    head = _same(base, data, most, from_end=False)
    head = base.rfind(b"\n", 0, head) + 1
    tail = _same(base, data, most - head, from_end=True)
    if tail:
        newline = base.find(b"\n", len(base) - tail - 1)  # (a line starts there already)
        tail = 0 if newline < 0 else len(base) - newline - 1
    return head, tail


def _same(base: bytes, data: bytes, most: int, *, from_end: bool) -> int:
    """How many bytes (at most `most`) `base` and `data` share at their start (or end):
    slices compared in growing steps, then the first that differs halved (each comparison
    a memcmp; a slice of bytes is a copy, which costs less than a memoryview's compare)."""
    def equal(lo: int, hi: int) -> bool:
        if from_end:
            return base[len(base) - hi:len(base) - lo] == data[len(data) - hi:len(data) - lo]
        return base[lo:hi] == data[lo:hi]

    lo, step = 0, 4096
    while lo < most:
        hi = min(most, lo + step)
        if not equal(lo, hi):
            break
        lo, step = hi, step * 2
    else:
        return most
    while hi - lo > 1:  # the first difference is in [lo, hi)
        middle = (lo + hi) // 2
        if equal(lo, middle):
            lo = middle
        else:
            hi = middle
    return lo


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
