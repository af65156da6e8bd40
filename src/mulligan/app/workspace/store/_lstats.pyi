"""The stat index's compare in C (`_lstats.c`, built by setup.py; absent where it could not
be compiled)."""

from typing_extensions import Buffer

def differ(dirfd: int, names: Buffer, skip: int, count: int, keys: Buffer, stride: int,
           follow: bool, threads: int, /) -> list[int]:
    """The positions (0..count-1, ascending) of the `count` NUL-separated paths of `names`
    after the first `skip` whose fstatat from `dirfd` (not following a last link, unless
    `follow`) is not the recorded key in `keys` (int64 columns mode, size, mtime_ns,
    ctime_ns, ino: keys[c * stride + i]), or fails; with `follow`, a path that is not a
    regular file has the key (0, 0, 0, 0, 0). ValueError if `names` or `keys` is short."""
