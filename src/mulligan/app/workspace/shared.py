"""Checkpoints in the shared store: the snapshot store's blobs and manifests, copied into the
PostgreSQL database the sessions live in, so going back with the files, /diff and the HTML
export's diffs work from any machine pointed at it.

In: a `Store` (the local one stays the working copy: snapshots are taken and restores read
there) and a postgresql:// URL. `Shared(url, store)` sets ``store.shared``; the Store then
calls `queued(id)` after each manifest it writes and `fetch(id)` / `fetch_blob(hash)` when
one is not local. Tables (created idempotently, INSERT only -- `gc` alone deletes):

    mulligan_blobs  hash (40 hex), data bytea, created            -- by content, shared
    mulligan_trees  id (40 hex), manifest bytea, blobs text[], created

What goes into `mulligan_blobs` is each file's whole bytes (`Store.read_blob`: a local delta
or compressed copy is read back and checked first): any version of Mulligan can fetch them,
a row never depends on another, and PostgreSQL compresses large values itself (TOAST).

Uploading. `queued` appends the id to ``checkpoints/uploads.queue`` (durable across a kill:
one short O_APPEND write) and wakes the uploader thread; it never waits on the database, so
a tool call pays an append, no more. The uploader sends each manifest in one transaction:
the blobs the database lacks, then the manifest naming them (the blobs it has are locked
FOR KEY SHARE so a concurrent `gc` cannot free them meanwhile), then the commit; only after
it is the id taken off the queue. A kill leaves the transaction rolled back and the id
queued: the next start's `Shared` sees the queue and finishes it. At exit the uploader gets
`DRAIN` seconds to finish; what is left waits for the next start.

Fetching. A manifest read from the database is data: its id and every blob hash are checked
(`check_id`), every path must be relative without "..", each blob's bytes must hash to its
name, and the manifest written locally (`Store.record`, after its blobs) must get the id it
was asked for. Anything else is refused by name (ValueError), and nothing is written.

Never: import psycopg unless a database store is set (this module's callers import it only
then), delay a tool call on the network, reference a blob not in the database.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from mulligan.app.workspace.store.snapshots import FileFacts, Store, check_id, manifest_id
from mulligan.home import private_dirs

__all__ = ["DRAIN", "SCHEMA", "Shared"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS mulligan_blobs (
    hash text PRIMARY KEY CHECK (hash ~ '^[0-9a-f]{40}$'),
    data bytea NOT NULL,
    created timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS mulligan_trees (
    id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{40}$'),
    manifest bytea NOT NULL,
    blobs text[] NOT NULL,
    created timestamptz NOT NULL DEFAULT now()
);
"""
_SCHEMA_LOCK = 0x6D756C73  # "muls": one creator of these tables at a time
DRAIN = 20.0  # seconds the uploader may go on at exit before leaving the rest to next start
_KINDS = {"file", "link", "dir"}


class Shared:
    """The database copy of one local `Store` (attached as ``store.shared``). Thread-safe."""

    _ready: set[str] = set()  # URLs whose tables this process has made sure of

    def __init__(self, url: str, store: Store) -> None:
        from mulligan.session.stores.postgres import Database  # psycopg: only with a database store

        self.database, self.store = Database(url), store
        self.queue_file = store.root / "uploads.queue"
        self._lock = threading.Condition()
        self._pending: list[str] = []  # ids queued in this process, not yet uploaded
        self._known: set[str] = set()  # ids queued, uploaded or fetched here: not again
        self._busy = False
        self._thread: threading.Thread | None = None
        self._reader: Any = None  # the fetching connection (the uploader has its own)
        self._reader_lock = threading.Lock()
        store.shared = self
        if self._queued_ids():  # a run that ended before its uploads did: finish them
            self._start()

    # ---- the store's hooks --------------------------------------------------------------

    def queued(self, tree_id: str) -> None:
        """A manifest was written locally: queue it for upload (durably), wake the uploader.
        Never waits on the database."""
        with self._lock:
            if tree_id in self._known:
                return
            self._known.add(tree_id)
            with self._queue_locked():
                private_dirs(self.store.root)
                fd = os.open(self.queue_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT |
                             os.O_CLOEXEC, 0o600)
                try:
                    os.write(fd, tree_id.encode() + b"\n")  # one short write: whole or none
                finally:
                    os.close(fd)
            self._pending.append(tree_id)
            self._lock.notify_all()
        self._start()

    def fetch(self, tree_id: str) -> bool:
        """Copy manifest `tree_id` and its blobs from the database into the local store
        (blobs first); False when the database has no such manifest. ValueError naming what
        is wrong with a manifest or blob that is not what it claims."""
        check_id(tree_id)
        with self._reading() as conn:
            row = conn.execute("SELECT manifest FROM mulligan_trees WHERE id = %s",
                               (tree_id,)).fetchone()
        if row is None:
            return False
        files, skipped, ignored = _parse(tree_id, bytes(row[0]))
        made = manifest_id(files, skipped, ignored)  # checked before anything is written
        if made != tree_id:
            raise ValueError(f"snapshot {tree_id} in {self.database.name}: its content has id "
                             f"{made}: refused (the manifest was changed)")
        wanted = sorted({e[4] for e in files.values() if e[0] == "file"
                         if not self.store.has_blob(e[4])})
        for start in range(0, len(wanted), 256):  # a query per 256 blobs, not one each
            chunk = wanted[start:start + 256]
            with self._reading() as conn:
                found = dict(conn.execute("SELECT hash, data FROM mulligan_blobs WHERE hash = "
                                          "ANY(%s)", (chunk,)).fetchall())
            for digest in chunk:
                if digest not in found:
                    raise FileNotFoundError(2, f"snapshot {tree_id} names blob {digest}, "
                                               f"which {self.database.name} does not hold "
                                               "(freed by mulligan gc?)", str(self.store.root))
                self._keep(digest, bytes(found[digest]))
        with self._lock:
            self._known.add(tree_id)  # from the database: not to be uploaded back
        self.store.record(Path("."), files, skipped, ignored)
        return True

    def fetch_blob(self, digest: str) -> bool:
        """Copy blob `digest` from the database into the local store; False when it has
        none. ValueError if its bytes do not hash to `digest`."""
        check_id(digest, "blob hash")
        with self._reading() as conn:
            row = conn.execute("SELECT data FROM mulligan_blobs WHERE hash = %s",
                               (digest,)).fetchone()
        if row is None:
            return False
        self._keep(digest, bytes(row[0]))
        return True

    def _keep(self, digest: str, data: bytes) -> None:
        """Put a blob from the database into the local store, if it is what its name says."""
        if hashlib.blake2b(data, digest_size=20).hexdigest() != digest:
            raise ValueError(f"blob {digest} in {self.database.name}: its bytes do not hash "
                             "to its name: refused")
        self.store.keep(data)

    # ---- uploading ----------------------------------------------------------------------

    def drain(self, timeout: float = DRAIN) -> bool:
        """Wait up to `timeout` seconds for every queued upload; whether all are done."""
        with self._lock:
            return self._lock.wait_for(lambda: not self._pending and not self._busy, timeout)

    def _start(self) -> None:
        with self._lock:
            if self._thread is not None:
                return
            self._pending.extend(i for i in self._queued_ids() if i not in self._pending)
            self._known.update(self._pending)
            self._thread = threading.Thread(target=self._upload_loop, daemon=True,
                                            name="mulligan snapshot upload")
            self._thread.start()
        atexit.register(self.drain)

    def _upload_loop(self) -> None:
        import psycopg

        conn = None
        while True:
            with self._lock:
                self._lock.wait_for(lambda: bool(self._pending))
                batch, self._busy = list(self._pending), True
            done: list[str] = []
            try:
                if conn is None or conn.closed or conn.broken:
                    conn = self.database.connect(application_name="mulligan snapshots")
                    self._ensure_schema(conn)
                for tree_id in batch:
                    self._upload(conn, tree_id)
                    done.append(tree_id)
            except (OSError, psycopg.Error):  # the database is away: the queue keeps them
                with self._lock:
                    self._busy = False
                    self._pending = [i for i in self._pending if i not in done]
                    self._lock.notify_all()
                self._forget(done)
                threading.Event().wait(5.0)  # then try again
                continue
            self._forget(done)
            with self._lock:
                self._pending = [i for i in self._pending if i not in done]
                self._busy = False
                self._lock.notify_all()

    def _upload(self, conn: Any, tree_id: str) -> None:
        """Blobs the database lacks, then the manifest, in one transaction."""
        if conn.execute("SELECT 1 FROM mulligan_trees WHERE id = %s", (tree_id,)).fetchone():
            return
        try:
            manifest = self.store.load(tree_id)
        except (FileNotFoundError, ValueError):
            return  # freed locally (gc) before it was sent, or unreadable: nothing to send
        hashes = sorted({e[4] for e in manifest.files.values() if e[0] == "file"})
        if not all(self.store.has_blob(h) for h in hashes):
            return  # a blob freed meanwhile: this manifest can never be sent whole
        body = orjson.dumps({"version": 1, "files": manifest.files,
                             "skipped": manifest.skipped, "ignored": manifest.ignored})
        with conn.transaction():
            held = {row[0] for row in conn.execute(
                "SELECT hash FROM mulligan_blobs WHERE hash = ANY(%s) FOR KEY SHARE",
                (hashes,)).fetchall()}
            with conn.cursor() as cursor:
                for digest in hashes:
                    if digest not in held:
                        cursor.execute("INSERT INTO mulligan_blobs (hash, data) VALUES (%s, %s) "
                                       "ON CONFLICT DO NOTHING",
                                       (digest, self.store.read_blob(digest)))
            conn.execute("INSERT INTO mulligan_trees (id, manifest, blobs) VALUES (%s, %s, %s) "
                         "ON CONFLICT DO NOTHING", (tree_id, body, hashes))

    def _ensure_schema(self, conn: Any) -> None:
        if self.database.url in Shared._ready:
            return
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            conn.execute(SCHEMA)
        Shared._ready.add(self.database.url)

    # ---- the queue file -----------------------------------------------------------------

    @contextlib.contextmanager
    def _queue_locked(self) -> Iterator[None]:
        """The queue file's lock (a file beside it: the queue is replaced by rename)."""
        private_dirs(self.store.root)
        fd = os.open(self.store.root / "uploads.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
                     0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _queued_ids(self) -> list[str]:
        """The ids in the queue file (a torn last line or anything not an id is dropped)."""
        try:
            data = self.queue_file.read_bytes()
        except FileNotFoundError:
            return []
        found = []
        for line in data.decode("ascii", "replace").split("\n")[:-1]:
            with contextlib.suppress(ValueError):
                found.append(check_id(line))
        return list(dict.fromkeys(found))

    def _forget(self, done: list[str]) -> None:
        """Take uploaded ids off the queue file (under its lock: other processes append)."""
        if not done:
            return
        gone = set(done)
        with self._queue_locked():
            left = [i for i in self._queued_ids() if i not in gone]
            temp = self.queue_file.with_name(f".uploads.queue.{os.getpid()}")
            temp.write_bytes("".join(i + "\n" for i in left).encode())
            os.chmod(temp, 0o600)
            os.replace(temp, self.queue_file)

    # ---- reading and freeing ------------------------------------------------------------

    @contextlib.contextmanager
    def _reading(self) -> Iterator[Any]:
        from mulligan.session.stores.postgres import unavailable

        with self._reader_lock:
            if self._reader is None or self._reader.closed or self._reader.broken:
                self._reader = self.database.connect(application_name="mulligan snapshots")
                self._ensure_schema(self._reader)
            with unavailable(self.database.name):
                yield self._reader

    def gc(self, keep: set[str], *, grace: float = 3600.0) -> tuple[int, int, int]:
        """Delete every manifest in the database not in `keep`, then every blob no manifest
        left names; what was written in the last `grace` seconds stays (an upload under
        way). Returns (manifests, blobs, bytes) freed."""
        with self._reading() as conn, conn.transaction():
            trees = conn.execute(
                "DELETE FROM mulligan_trees WHERE NOT (id = ANY(%s)) AND created < now() - "
                "make_interval(secs => %s)", (sorted(keep), grace)).rowcount
            row = conn.execute(
                "WITH gone AS (DELETE FROM mulligan_blobs b WHERE created < now() - "
                "make_interval(secs => %s) AND NOT EXISTS (SELECT 1 FROM mulligan_trees t "
                "WHERE b.hash = ANY(t.blobs)) RETURNING octet_length(data) AS size) "
                "SELECT count(*), coalesce(sum(size), 0) FROM gone", (grace,)).fetchone()
        return trees, int(row[0]), int(row[1])


def _parse(tree_id: str, body: bytes) -> tuple[dict[str, FileFacts], dict[str, str],
                                                list[str]]:
    """A manifest from the database, checked: ValueError naming the first thing wrong."""
    def bad(why: str) -> ValueError:
        return ValueError(f"snapshot {tree_id} in the database: {why}: refused")

    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise bad("not JSON") from None
    if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
        raise bad("not a manifest")
    skipped, ignored = data.get("skipped", {}), data.get("ignored", [])
    if not isinstance(skipped, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in skipped.items()):
        raise bad("its skipped paths are not a table of reasons")
    if not isinstance(ignored, list) or not all(isinstance(p, str) for p in ignored):
        raise bad("its ignored paths are not a list of paths")
    files: dict[str, FileFacts] = {}
    for rel, facts in data["files"].items():
        _check_path(rel, bad)
        if not (isinstance(facts, list) and len(facts) == 5 and facts[0] in _KINDS
                and all(isinstance(n, int) for n in facts[1:4])
                and isinstance(facts[4], str)):
            raise bad(f"path {rel[:80]!r} has facts {str(facts)[:80]}")
        if facts[0] == "file":
            check_id(facts[4], "blob hash")
        files[rel] = (facts[0], facts[1], facts[2], facts[3], facts[4])
    for rel in [*skipped, *ignored]:
        if rel != ".":
            _check_path(rel, bad)
    return files, skipped, ignored


def _check_path(rel: object, bad: Any) -> None:
    if not isinstance(rel, str) or not rel or rel.startswith("/") or "\0" in rel or any(
            part in ("", ".", "..") for part in rel.split("/")):
        raise bad(f"path {str(rel)[:80]!r} is not a plain relative path")
