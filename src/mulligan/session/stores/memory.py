"""`MemoryStorage`: a session's lines held in memory, never written anywhere.

For a session that saves nothing (--no-session) but still wants what the log computes --
compaction entries and the transcript they stand for. In: lines appended through the log.
Out: the same bytes back, as `Storage` promises. Never touches the disk; the lease is a
no-op (one process, one holder); `file` is None.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["MemoryStorage"]


class _NoLease:
    def release(self) -> None:
        pass


class MemoryStorage:
    """The `Storage` protocol over a bytearray (see `mulligan.session.stores.storage`)."""

    file: Path | None = None

    def __init__(self, name: str = "(not saved)") -> None:
        self.name = name
        self.short = name
        self._data = bytearray()
        self._accepted = 0
        self._lock = threading.Lock()

    def whole(self) -> bytes:
        return bytes(self._data)

    def fetch(self) -> tuple[bool, bytes]:
        return False, bytes(self._data[self._accepted:])

    def accept(self, data: bytes | Any, used: int) -> None:
        self._accepted += used

    def forget(self) -> None:
        self._accepted = 0

    @contextlib.contextmanager
    def appending(self, create: bool) -> Iterator[Any]:
        with self._lock:
            if not self._data and not create:
                yield None
                return
            yield _Writer(self)

    def exists(self) -> bool:
        return bool(self._data)

    def lease(self) -> _NoLease:
        return _NoLease()


class _Writer:
    def __init__(self, storage: MemoryStorage) -> None:
        self._storage = storage

    def fetch(self) -> tuple[bool, bytes]:
        return self._storage.fetch()

    def write(self, line: bytes, entry: dict[str, Any]) -> None:
        self._storage._data.extend(line)
