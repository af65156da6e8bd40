"""The llama.cpp engine behind the local model: load a GGUF file once, run one chat request.

In: a model path and its load settings; a request dict in llama.cpp's OpenAI-style shape.
Out: a loaded engine (shared by everyone in the process asking for the same file and
settings), and an iterator of the engine's stream chunks (plain dicts).
What never happens: xllamacpp is imported anywhere but inside these functions (it is an
optional extra); a request blocks its consumer after an abort; the engine writes its own logs
to the terminal (verbosity is turned off; the one line we print is ours).
"""

from __future__ import annotations

import atexit
import os
import queue
import secrets
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO


class ModelLoadFailed(RuntimeError):
    """llama.cpp would not load the file (not a GGUF model, or an unknown architecture)."""


_engines: dict[tuple[str, int, int], Any] = {}
_lock = threading.Lock()
# Engine calls still running, each with the event that tells it to stop. After an abort (or an
# interrupt) the caller stops waiting before the call returns; at exit such calls are stopped
# and waited for, because a thread still inside llama.cpp when the interpreter shuts down is
# killed mid-C++ and takes the process with it ("FATAL: exception not rethrown", status 134).
_running: dict[threading.Thread, threading.Event] = {}
_running_lock = threading.Lock()
_EXIT_WAIT = 60.0  # seconds: a call stops at its next token, after reading its prompt


def _size_text(path: Path) -> str:
    size = path.stat().st_size
    return f"{size / 2**30:.1f} GB" if size >= 2**30 else f"{size / 2**20:.0f} MB"


def load_engine(path: Path, *, n_ctx: int, n_threads: int,
                progress: TextIO | None = None) -> Any:
    """The `xllamacpp.Server` for `path` with these settings, loading it on first use and
    writing one progress line ("loading model X (93 MB)... done in 0.4 s") to `progress`
    (default: stderr). Later calls return the same engine without printing.
    Raises ModelLoadFailed (or ImportError when xllamacpp is missing)."""
    key = (str(path), n_ctx, n_threads)
    with _lock:
        engine = _engines.get(key)
        if engine is not None:
            return engine
        import xllamacpp

        out = progress if progress is not None else sys.stderr
        out.write(f"loading model {path.name} ({_size_text(path)})... ")
        out.flush()
        started = time.monotonic()
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_ctx = n_ctx
        params.n_parallel = 1
        params.cpuparams.n_threads = n_threads
        params.cpuparams_batch.n_threads = n_threads
        params.verbosity = -1
        # The engine also listens on a 127.0.0.1 port; a random key keeps other local
        # processes from using it. Our own calls go in-process and need no key.
        params.api_keys = [secrets.token_hex(16)]
        try:
            engine = xllamacpp.Server(params)
        except RuntimeError as exc:
            out.write("failed\n")
            out.flush()
            raise ModelLoadFailed(
                f"llama.cpp could not load {path} ({exc}); is it a GGUF model file "
                "of an architecture this xllamacpp build supports?") from exc
        out.write(f"done in {time.monotonic() - started:.1f} s\n")
        out.flush()
        if not _engines:
            atexit.register(stop_running_calls)
        _engines[key] = engine
        return engine


def stop_running_calls(wait: float = _EXIT_WAIT) -> None:
    """Tell every engine call still running to stop at its next token, and wait (up to `wait`
    seconds in all) until they have returned. Registered to run at exit once an engine is
    loaded."""
    with _running_lock:
        running = list(_running.items())
    for _, stop in running:
        stop.set()
    deadline = time.monotonic() + wait
    for worker, _ in running:
        worker.join(max(0.0, deadline - time.monotonic()))


def default_threads() -> int:
    return os.cpu_count() or 1


_END = object()


def run_chat(engine: Any, request: dict[str, Any],
             abort: threading.Event | None = None) -> Iterator[dict[str, Any]]:
    """Stream one chat-completions request: yields the engine's chunks as they come.

    The engine's call blocks and reports through a callback, so it runs on a worker thread
    that hands chunks over a queue. The callback answers "stop" once `abort` is set or the
    consumer has gone away (generator closed). When `abort` is set this iterator returns
    promptly even if the engine is still reading the prompt (which no callback interrupts);
    the worker then stops at its first token (and at exit `stop_running_calls` waits for it).
    A failure in the engine call arrives as a chunk {"error": {"message": ...}}. Never
    raises."""
    chunks: queue.Queue[Any] = queue.Queue()
    gone = threading.Event()

    def on_chunk(chunk: dict[str, Any]) -> bool:
        chunks.put(chunk)
        return gone.is_set() or (abort is not None and abort.is_set())

    def work() -> None:
        try:
            result = engine.handle_chat_completions({**request, "stream": True}, on_chunk)
            if isinstance(result, dict) and "error" in result:
                chunks.put(result)
        except Exception as exc:  # reported to the consumer as data, never raised
            chunks.put({"error": {"message": f"{type(exc).__name__}: {exc}"}})
        finally:
            chunks.put(_END)
            with _running_lock:
                _running.pop(threading.current_thread(), None)

    worker = threading.Thread(target=work, name="mulligan-local-model", daemon=True)
    with _running_lock:
        _running[worker] = gone
    worker.start()
    try:
        while True:
            try:
                # Wakes only to look at `abort` while the engine reads the prompt; rarely, so
                # as not to take CPU from llama.cpp's threads.
                item = chunks.get(timeout=0.2) if abort is not None else chunks.get()
            except queue.Empty:
                if abort is not None and abort.is_set():
                    return
                continue
            if item is _END or (abort is not None and abort.is_set()):
                return
            yield item
    finally:
        gone.set()
