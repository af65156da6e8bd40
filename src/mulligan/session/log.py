"""SessionLog: one session, appended to under mutual exclusion, read incrementally.

In: a file path (or any `Storage`: `mulligan.session.stores.storage`). Out: entries, the tip, the
transcript. Every write is one entry, added while the storage holds the session exclusively,
after catching up with whatever other writers added. Never: rewrite, reorder or truncate a
line; append after a torn or unreadable line; re-read what it has already accepted, unless
the storage says the session is not the one parsed.

The log remembers what it has parsed (an `Index`) and, on every call, reads only what was
appended since -- by itself or by any other writer. The file storage notices a file that was
replaced, shrank or changed at its end, and the log then re-reads it from the start. An edit
in the middle of the file that keeps its size and its last line is not noticed by a live log;
a new one sees it. Parsing and every refusal are here, the same whatever the storage.

The log asks one of two readers (`Reader`), both answering the same questions:
`WholeRead` (`mulligan.session.whole`: every line parsed and validated, the line table kept
in step by it) and `LazyFile` (`mulligan.session.lazy`: a file read through its line table,
`mulligan.session.sidecar`, parsing only the lines a question needs). A new log whose file
has a sidecar that describes it exactly reads lazily; whatever the lazy reader cannot answer
exactly (it raises `Stale`), and `entries()`, are asked of a whole read from then on. A file
without a usable sidecar is read whole and gets a fresh one. Either way the answers and
refusals are those of the full read.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Collection, Mapping
from typing import Any, Protocol, TypeVar

from mulligan.messages import Message
from mulligan.session import sidecar as tables
from mulligan.session.entries import Entry, check_meta
from mulligan.session.entries import timestamp as timestamp  # where callers found it
from mulligan.session.errors import SessionError
from mulligan.session.lazy import LazyFile, Stale
from mulligan.session.stores.storage import FileStorage, Releasable, Storage
from mulligan.session.view import messages_of, transcript
from mulligan.session.whole import WholeRead

T = TypeVar("T")

class SessionLog:
    """A session on disk: one JSON object per line, each naming the entry it follows.

    SessionLog(path, *, fsync=True). Creates nothing until the first append; the folder the
    file goes in must exist (the caller creates it). The file is created with mode 0o600.
    With fsync=True (the default) every entry is flushed and fsynced before its id is
    returned, so a power cut loses at most the entry being written; fsync=False is for bulk
    tools. Thread-safe; any number of SessionLog objects, in any number of processes, may
    share one file. The dicts handed out are the log's own: treat them as read-only.
    SessionLog(storage=...) is the same log over another storage (a database session);
    `path` is then the storage's name. sidecar=False never reads or writes the sidecar
    (every open is a full read: the reference reader the tests compare against).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, fsync: bool = True,
                 storage: Storage | None = None, sidecar: bool = True) -> None:
        if storage is None:
            if path is None:
                raise TypeError("SessionLog needs a path or a storage")
            storage = FileStorage(path, fsync=fsync)
        self.path: str | os.PathLike[str] = path if path is not None else storage.name
        self.fsync = fsync
        self.storage = storage
        self._name = storage.name
        self._mutex = threading.RLock()
        # The file whose line table is used and kept (None: a database, or sidecar=False),
        # and the reader asked: None until the first call (or after a failed append).
        self._file = storage if isinstance(storage, FileStorage) and sidecar else None
        self._reader: Reader | None = None
        # (token, types, listener) per watch(): told of each entry this object appends.
        self._watchers: list[tuple[object, frozenset[str], Callable[[Entry], None]]] = []

    def lease(self) -> Releasable:
        """Take the session's lease for this process (one live writer): LeaseHeld naming the
        holder when another live process has it."""
        return self.storage.lease()

    def __repr__(self) -> str:
        return f"SessionLog({self._name!r})"

    # ---- reading ---------------------------------------------------------------------------

    def entries(self) -> list[Entry]:
        """Every entry, file order, as dicts; [] when there is no file yet. Refuses (TornLine,
        NotAnObject, BadEntry, DuplicateId) a file with a line it cannot trust, naming it."""
        return self._answer(lambda reader: reader.entries())

    def tip(self) -> str | None:
        """The id of the last line of the file, or None when there is no entry yet."""
        return self._answer(lambda reader: reader.tip())

    def entry(self, entry_id: str) -> Entry:
        """The entry with that id; UnknownEntry (a ValueError) naming it if there is none."""
        return self._answer(lambda reader: reader.entry(entry_id))

    def branch(self, leaf_id: str | None) -> list[Entry]:
        """path(entries, leaf_id) over this log, using its index: the entries from the first
        one down to `leaf_id`. Validates the walk like path()."""
        return self._answer(lambda reader: reader.path(leaf_id))

    def of_type(self, type_: str) -> list[Entry]:
        """The entries of one type (session_info, label, ...), file order; through the line
        table when the log reads lazily, without parsing the other lines."""
        return self._answer(lambda reader: reader.of_type(type_))

    def sketch(self) -> tuple[list[Entry], bool]:
        """Every entry, for drawing the tree folded: (entries, sketched). Read lazily, the
        entries on the branch to the tip and the labels are the entries themselves and every
        other is a sketch, {"id", "parent_id", "type"} ("other" for a type the index does
        not name), and `sketched` is True; else it is entries() and False."""
        return self._answer(lambda reader: reader.sketch())

    def table(self) -> tables.Table | None:
        """The file's line table as the log has it now (None: no file, a database session,
        or a file whose ids are not its line numbers). Read-only."""
        return self._answer(lambda reader: reader.table)

    def rows(self) -> list[tuple[str, Message]]:
        """(entry id, message) for every message on the branch that ends at the tip, oldest
        first, by the format's rules (`mulligan.session.view`: a branch summary is a user
        message, the latest compaction stands for what it summarised). Other entries
        (branch, label, ...) are stepped over; the whole walk is validated and every
        refusal names the entry."""
        return transcript(self._tip_branch(), file=self._name)

    def replay(self) -> list[Message]:
        """The transcript on the branch the session is on: for Harness(messages=...)."""
        return messages_of(self._tip_branch(), file=self._name)

    def _tip_branch(self) -> list[Entry]:
        return self._answer(lambda reader: reader.path(reader.tip()))

    def _answer(self, question: Callable[[Reader], T]) -> T:
        """One question, under the log's lock, asked of the reader caught up with the storage;
        if the lazy reader cannot answer it exactly (Stale), of a whole read, from now on."""
        with self._mutex:
            reader = self._current()
            try:
                return question(reader)
            except Stale:
                return question(self._read_whole())

    def watch(self, types: Collection[str],
              listener: Callable[[Entry], None]) -> Callable[[], None]:
        """Hand `listener` every entry of `types` the log holds now (`of_type`, type by
        type), then each entry of those types this log object appends, once it is written:
        none missed and none twice, whichever thread appends. For a running tally (what a
        session spent) that must not re-read the log. Appends by other SessionLog objects or
        processes are not seen. `listener` runs under the log's lock: it must be quick and
        must not raise. Returns its undo."""
        token = object()
        wanted = frozenset(types)
        with self._mutex:
            for type_ in wanted:
                for entry in self.of_type(type_):
                    listener(entry)
            self._watchers.append((token, wanted, listener))

        def unwatch() -> None:
            with self._mutex:
                self._watchers = [w for w in self._watchers if w[0] is not token]

        return unwatch

    # ---- appending ---------------------------------------------------------------------------

    def append_message(self, message: Message, *, parent_id: str | None = None,
                       **meta: Any) -> str:
        """Append one message; its parent is the tip, or entry `parent_id` when given (the
        entries of parallel attempts, each under its own last entry: they interleave in
        the file, and the tip is still the last line). Unknown `parent_id`: UnknownEntry (a
        ValueError) naming it, nothing written. Extra keyword arguments are stored on the
        entry as metadata (never sent to the model). Returns the new entry's id."""
        check_meta(meta)
        return self._append("message", {"message": message, **meta}, parent=parent_id)

    def branch_to(self, entry_id: str) -> str:
        """Go back to `entry_id`: append one `branch` entry whose parent is it, so what comes
        next hangs off it. The attempt left behind stays in the file. Unknown id: UnknownEntry
        naming it, raised before anything is written (also when there is no file)."""
        return self._append("branch", {}, parent=entry_id)

    def branch_summary_to(self, entry_id: str, *, from_id: str, summary: str,
                          details: Mapping[str, Any] | None = None,
                          usage: Mapping[str, Any] | None = None) -> str:
        """Go back to `entry_id` with a summary of the attempt left: append one
        `branch_summary` entry whose parent is it (in place of a plain branch line), naming
        the old tip `from_id`. It replays as one user message holding `summary`; `usage`,
        what writing the summary cost (free metadata, not on the transcript). Unknown id:
        UnknownEntry naming it, nothing written."""
        fields: dict[str, Any] = {"from_id": from_id, "summary": summary}
        if details is not None:
            fields["details"] = dict(details)
        if usage is not None:
            fields["usage"] = dict(usage)
        return self._append("branch_summary", fields, parent=entry_id)

    def append_label(self, target_id: str, label: str) -> str:
        """Append a label naming `target_id`; UnknownEntry, nothing written, if it is absent."""
        return self._append("label", {"target_id": target_id, "label": label}, needs=target_id)

    def append_session_info(self, **fields: Any) -> str:
        """Append facts about the session: name, cwd, created, model, origin_file, ..."""
        return self.append_entry("session_info", **fields)

    def append_model_change(self, provider: str, model: str) -> str:
        """Append a note that the session went on with another model."""
        return self.append_entry("model_change", provider=provider, model=model)

    def append_entry(self, type: str, *, parent_id: str | None = None, **fields: Any) -> str:
        """Append an entry of any other type (session_info, model_change, compaction, ...);
        it hangs on the tree at the tip (or under entry `parent_id`: UnknownEntry naming it,
        nothing written, when absent) and rows() steps over it. "message" and "branch"
        have their own methods, which keep their rules."""
        if type in ("message", "branch", "branch_summary"):
            raise ValueError(f"use append_message, branch_to or branch_summary_to for a "
                             f"{type!r} entry")
        if "message" in fields:  # a reader would refuse the line: a message only on a message
            raise ValueError(f"a {type!r} entry cannot carry a message")
        check_meta(fields)
        return self._append(type, fields, parent=parent_id)

    def _append(self, type_: str, fields: dict[str, Any], *, parent: str | None = None,
                needs: str | None = None) -> str:
        """Write one entry while the storage holds the session exclusively: the reader
        catches up, works out the id (line number) and the parent (the tip, or `parent`),
        checks, then writes. `parent` / `needs` name an entry that must exist: checked first
        without creating the file, then again under the lock."""
        must_exist = parent or needs
        with self._mutex:
            reader = self._current()
            if must_exist is not None:
                reader.position(must_exist)  # fail fast: no file is created for nothing
            try:
                try:
                    new_id = reader.append(type_, fields, parent, must_exist)
                except Stale:  # the table cannot say what the file is: append as a whole read
                    self._reader = reader = WholeRead(self.storage, self._file)
                    new_id = reader.append(type_, fields, parent, must_exist)
            except SessionError:
                raise
            except BaseException:
                # The line may or may not have been kept (a failed fsync, a dropped database
                # connection): forget what was parsed, so the next call reads what is there.
                self._reset()
                raise
            watchers = [w for w in self._watchers if type_ in w[1]]
            if watchers:
                entry = self.entry(new_id)  # just written: the reader has it parsed
                for _, _, listener in watchers:
                    listener(entry)
            return new_id

    # ---- the reader ------------------------------------------------------------------------

    def _reset(self) -> None:
        """Forget everything read: the next call reads the file again (lazily if it can)."""
        self._reader = None
        self.storage.forget()

    def _current(self) -> Reader:
        """The reader, caught up with the storage (a missing file reads as empty): on the first
        call the lazy one if the file's sidecar describes it, else a whole read; a lazy
        reader that finds the file is not what its table says gives way to a whole read."""
        reader = self._reader
        if reader is None:
            lazy = LazyFile.open(self._file) if self._file is not None else None
            if lazy is not None:
                self._reader = lazy
                return lazy  # just opened: it is what the file is now
        else:
            try:
                reader.refresh()
                return reader
            except Stale:  # the table said something the file does not: build it anew
                pass
        return self._read_whole()

    def _read_whole(self) -> WholeRead:
        """From now on the log reads every line, validated (its table built anew)."""
        whole = self._reader = WholeRead(self.storage, self._file)
        whole.refresh()
        return whole


class Reader(Protocol):
    """What the log asks of a reader: the format's questions, answered as the full read
    answers them -- or, for the lazy reader, Stale when it cannot say exactly."""

    @property
    def table(self) -> tables.Table | None: ...

    def refresh(self) -> None: ...
    def entries(self) -> list[Entry]: ...
    def tip(self) -> str | None: ...
    def position(self, entry_id: str) -> int: ...
    def entry(self, entry_id: str) -> Entry: ...
    def path(self, leaf_id: str | None) -> list[Entry]: ...
    def of_type(self, type_: str) -> list[Entry]: ...
    def sketch(self) -> tuple[list[Entry], bool]: ...
    def append(self, type_: str, fields: Mapping[str, Any], parent: str | None,
               must_exist: str | None) -> str: ...
