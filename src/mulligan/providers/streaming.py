"""One streamed reply from a hosted provider: attempts, retries, abort, and the final message.

Both SDK adapters (`anthropic`, `openai.chat`) hand `stream_reply` a `Call`: how to open the
SDK stream, how to fold its events into our deltas (a fresh `Fold` per attempt), and how to
describe an SDK exception as a `Failure`. `stream_reply` then owns the rules every provider
shares:

- a transient fault is retried with backoff only while nothing has been yielded to the caller;
  after the first delta, a fault ends the reply as an error that keeps the partial content;
- `abort` is honoured promptly even while the server is silent: the SDK stream is read on a
  helper thread, and the caller's side waits on a queue, looking at `abort` every few
  milliseconds; on abort the stream is closed and the reply ends with stop_reason "aborted";
- every wait is bounded: a stream that sends nothing for `idle_timeout` seconds (default
  120: after the headers, or after some text) is a stall, and so is an SDK read that timed
  out; stalls are retried at most twice in all (whatever `max_retries` says), and only while
  nothing has been yielded; and one request's attempts and waits together never pass
  `deadline` seconds (default 600). The reason is the reply's error message;
- before each wait for another attempt it yields one ``{"type": "retry", "reason",
  "attempt", "of", "delay"}`` (the attempt about to be made, 1-based, of at most `of`; the
  wait in seconds), so that the user sees what the wait is;
- it yields deltas and then exactly one ``{"type": "done"}``, and never raises.
"""

from __future__ import annotations

import contextlib
import json
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from mulligan.messages import ABORTED, AssistantMessage, Block, Usage, error_message
from mulligan.providers.errors import Failure, redact
from mulligan.providers.facts import window_for
from mulligan.providers.retry import Backoff
from mulligan.wire import StreamDelta

# How often a waiting reader looks at the abort event while the server says nothing.
_POLL = 0.02
IDLE_TIMEOUT = 120.0  # seconds a stream may send nothing before it counts as stalled
DEADLINE = 600.0  # seconds one request may take, every attempt and wait included
STALL_RETRIES = 2  # a stalled stream is tried again at most this many times


class Fold(Protocol):
    """Folds one attempt's SDK stream events into our deltas and, at the end, a message."""

    def feed(self, event: Any) -> list[StreamDelta]:
        """The deltas one event adds (often none)."""
        ...

    def finished(self) -> bool:
        """True once the provider has said the message is complete."""
        ...

    def partial(self) -> list[Block]:
        """The content so far, without tool calls whose arguments are incomplete."""
        ...

    def message(self) -> AssistantMessage:
        """The complete message (only after `finished()`)."""
        ...

    def usage(self) -> Usage | None:
        """Token counts reported so far, if any."""
        ...


class Closable(Iterable[Any], Protocol):
    def close(self) -> None: ...


@dataclass
class Call:
    """What an adapter tells the driver about one request."""

    provider: str                                  # "anthropic", "openai": prefixes every error
    model: str                                     # recorded on the final message
    open: Callable[[], Closable]                   # makes the request; returns the SDK stream
    fold: Callable[[], Fold]                       # a fresh fold for each attempt
    describe: Callable[[BaseException], Failure]   # an SDK exception, described


def stream_reply(
    call: Call, *, backoff: Backoff, sleep: Callable[[float], None] | None,
    abort: threading.Event | None, idle_timeout: float = IDLE_TIMEOUT,
    deadline: float = DEADLINE,
) -> Iterator[StreamDelta]:
    """Yield the reply's deltas, then one done message. Never raises.

    `sleep` waits between attempts; None waits on `abort` (so an abort cuts the wait short).
    `idle_timeout` and `deadline` bound the waits (see the module docstring).
    """
    attempt = stalls = 0
    give_up_at = time.monotonic() + deadline
    while True:
        if abort is not None and abort.is_set():
            yield _done(call, error_message(ABORTED, stop_reason="aborted"), None)
            return
        fold = call.fold()
        streamed = False
        pump = _Pump(call.open)
        failure: Failure | None = None
        try:
            for kind, value in pump.items(abort, idle=idle_timeout, until=give_up_at):
                if kind == "stalled":
                    stalls += 1
                    failure = Failure(f"the server sent nothing for {idle_timeout:g} s",
                                      retryable=stalls <= STALL_RETRIES, stall=True)
                    break
                if kind == "overdue":
                    failure = Failure(f"no complete reply within {deadline:g} s",
                                      retryable=False)
                    break
                if kind == "event":
                    for delta in fold.feed(value):
                        streamed = True
                        yield delta
                elif kind == "aborted":
                    yield _done(call, error_message(ABORTED, stop_reason="aborted",
                                                    content=fold.partial()), fold)
                    return
                elif kind == "raised":
                    if fold.finished():  # a fault after the provider said "complete"
                        yield _done(call, fold.message(), fold)
                        return
                    failure = call.describe(value)
                    if failure.stall:  # the SDK's read timed out first: a stall all the same
                        stalls += 1
                        failure = Failure(failure.text, stalls <= STALL_RETRIES and
                                          failure.retryable, failure.retry_after, stall=True)
                    break
            else:
                if fold.finished():
                    yield _done(call, fold.message(), fold)
                    return
                failure = Failure("the stream ended before the reply was complete",
                                  retryable=True)
        finally:
            pump.stop()
        assert failure is not None
        reason = _give_up_reason(failure, streamed, attempt, backoff)
        if reason is not None:
            yield _done(call, error_message(f"{call.provider}: {reason}",
                                            content=fold.partial()), fold)
            return
        delay = backoff.delay(attempt, failure.retry_after)
        if time.monotonic() + delay >= give_up_at:
            yield _done(call, error_message(
                f"{call.provider}: {failure.text}; no time is left to try again within "
                f"{deadline:g} s", content=fold.partial()), fold)
            return
        attempt += 1
        yield {"type": "retry", "reason": failure.text, "attempt": attempt + 1,
               "of": backoff.max_retries + 1, "delay": round(delay, 3)}
        if sleep is not None:
            sleep(delay)
        elif abort is not None:
            abort.wait(delay)
        else:
            threading.Event().wait(delay)


def _give_up_reason(
    failure: Failure, streamed: bool, attempt: int, backoff: Backoff
) -> str | None:
    """Why this failure ends the reply, or None to try again."""
    if not failure.retryable:
        return f"{failure.text} (not retried)"
    if streamed:
        return f"{failure.text} (part of the reply had already arrived; not retried)"
    if attempt >= backoff.max_retries:
        if attempt == 0:
            return f"{failure.text} (retries are off)"
        return f"gave up after {attempt + 1} attempts: {failure.text}"
    if failure.retry_after is not None and failure.retry_after > backoff.max_wait:
        return (f"{failure.text} (the server asked to wait {failure.retry_after:.0f} s, "
                f"longer than {backoff.max_wait:.0f} s; not retried)")
    return None


def _done(call: Call, message: AssistantMessage, fold: Fold | None) -> StreamDelta:
    usage = fold.usage() if fold is not None else None
    if usage:
        message["usage"] = usage
    message["model"] = call.model
    return {"type": "done", "message": message}


class _Pieces(list[str]):
    """A text a fold is still receiving: its pieces, joined once, by `settled`."""


def append_text(block: Any, key: str, piece: str) -> None:
    """``block[key] += piece`` for a fold, in time that does not grow with the text: the
    pieces are kept and joined once when the fold reads the block (`settled`). Appending to
    a str held in a dict copies it every time: 1 MB streamed in small pieces took seconds."""
    value = block[key]
    if not isinstance(value, _Pieces):
        value = block[key] = _Pieces([value])
    value.append(piece)


def settled(block: Any) -> dict[str, Any]:
    """A copy of a fold's `block` with every text `append_text` grew joined."""
    return {key: "".join(value) if isinstance(value, _Pieces) else value
            for key, value in block.items()}


def merge_turn(turns: list[dict[str, Any]], role: str, items: list[dict[str, Any]],
               key: str) -> None:
    """Append `items` as a `role` turn of `turns`, into the last turn when it has the same
    role (providers whose roles must alternate: tool results, then the user's words, in one
    user turn); `key` names the turn's list ("content" for Anthropic, "parts" for Gemini).
    Nothing is appended for no items."""
    if not items:
        return
    if turns and turns[-1]["role"] == role:
        turns[-1][key].extend(items)
    else:
        turns.append({"role": role, key: items})


def parse_arguments(text: str) -> dict[str, Any] | None:
    """A streamed tool call's JSON arguments, put together: {} for none; None if they are not
    a JSON object (cut off, or not an object)."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class _Pump:
    """Reads an SDK stream on a helper thread and hands its events over through a queue, so
    that the reader can give up (abort) while the server is silent. Items are ("event", e),
    ("raised", exception), and finally ("end", None); `items` adds ("aborted", None)."""

    def __init__(self, open_stream: Callable[[], Closable]) -> None:
        self._open = open_stream
        self._queue: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._stopped = threading.Event()
        self._stream: Closable | None = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="mulligan-provider-stream",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        stream: Closable | None = None
        try:
            stream = self._open()
            with self._lock:
                self._stream = stream
                # Stopped while the request was being made: `stop` found no stream to hang
                # up, so do not start a read that would block until the server's next byte
                # or the read timeout.
                if self._stopped.is_set():
                    return
            for event in stream:
                if self._stopped.is_set():
                    break
                self._queue.put(("event", event))
            self._queue.put(("end", None))
        except Exception as exc:  # handed to the reader, which describes it
            self._queue.put(("raised", exc))
        finally:
            if stream is not None:
                with contextlib.suppress(Exception):
                    stream.close()

    def items(self, abort: threading.Event | None, *, idle: float = IDLE_TIMEOUT,
              until: float | None = None) -> Iterator[tuple[str, Any]]:
        """The stream's items until it ends or raises; or ("aborted", None) once `abort` is
        set, ("stalled", None) when nothing came for `idle` seconds, ("overdue", None) at the
        monotonic time `until`."""
        quiet_since = time.monotonic()
        while True:
            if abort is not None and abort.is_set():
                yield ("aborted", None)
                return
            now = time.monotonic()
            if until is not None and now >= until:
                yield ("overdue", None)
                return
            if now - quiet_since >= idle:
                yield ("stalled", None)
                return
            try:
                kind, value = self._queue.get(timeout=_POLL)
            except queue.Empty:
                continue
            quiet_since = time.monotonic()
            if kind == "end":
                return
            yield (kind, value)
            if kind == "raised":
                return

    def stop(self) -> None:
        """Tell the helper to stop, and hang up so that a read blocked on a silent server ends
        now rather than at the read timeout. (Closing the response from this thread does not
        wake a blocked read; shutting the socket down does. The helper then closes the
        stream itself.)"""
        self._stopped.set()
        with self._lock:
            stream = self._stream
        if stream is not None and self._thread.is_alive():
            with contextlib.suppress(Exception):
                _hang_up(stream)


def _hang_up(stream: Any) -> None:
    """Shut down the socket under an SDK stream, found through its httpx response's
    documented "network_stream" extension."""
    network = stream.response.extensions.get("network_stream")
    sock = network.get_extra_info("socket") if network is not None else None
    if sock is not None:
        sock.shutdown(socket.SHUT_RDWR)


class SdkModel:
    """What the two SDK adapters share: retries settings, the provider boundary around
    `stream_reply`, and `complete` by consuming `stream`.

    A subclass sets `provider` ("anthropic", "openai") and implements `_params(system,
    messages, tools)` (the request body), `_open(params)` (the SDK call that starts the stream),
    `_fold()` (a fresh Fold for one attempt) and `_describe_error(exc)` (an SDK exception as a
    Failure). `context_window` (tokens) is the config's, else `providers.facts`' by name.
    The key is kept only to redact it from error text; it is never part of a message.
    """

    provider: str
    compact_prompt = False

    def __init__(self, model_id: str, *, api_key: str, max_retries: int | None,
                 backoff: Backoff | None, sleep: Callable[[float], None] | None,
                 idle_timeout: float = IDLE_TIMEOUT, deadline: float = DEADLINE,
                 context_window: int | None = None) -> None:
        self.model_id = model_id
        self.idle_timeout, self.deadline = idle_timeout, deadline
        self.name = f"{self.provider}/{model_id}"
        # Tokens: what compaction fits the session to and the loop clips a result to.
        self.context_window = context_window or window_for(self.name)
        backoff = backoff or Backoff()
        if max_retries is not None:
            backoff = Backoff(max_retries, backoff.base, backoff.cap, backoff.max_wait,
                              backoff.random)
        self.backoff = backoff
        self._sleep = sleep
        self._secret = api_key

    def _params(self, system: str, messages: list[Any], tools: list[Any]) -> dict[str, Any]:
        raise NotImplementedError

    def _open(self, params: dict[str, Any]) -> Closable:
        raise NotImplementedError

    def _fold(self) -> Fold:
        raise NotImplementedError

    def _describe_error(self, exc: BaseException) -> Failure:
        raise NotImplementedError

    def complete(self, system: str, messages: list[Any], tools: list[Any]) -> AssistantMessage:
        """The whole reply, by consuming `stream`."""
        for delta in self.stream(system, messages, tools):
            if delta["type"] == "done":
                return delta["message"]
        return error_message("the stream ended without a final message")

    def stream(
        self, system: str, messages: list[Any], tools: list[Any],
        abort: threading.Event | None = None,
    ) -> Iterator[StreamDelta]:
        """Deltas, then one done message; never raises (see the module docstring)."""
        try:
            params = self._params(system, messages, tools)
            call = Call(self.provider, self.name, open=lambda: self._open(params),
                        fold=self._fold, describe=self._describe)
            yield from stream_reply(call, backoff=self.backoff, sleep=self._sleep, abort=abort,
                                    idle_timeout=self.idle_timeout, deadline=self.deadline)
        except Exception as exc:  # the provider boundary: a bug here is a message, too
            text = redact(f"{self.provider}: internal error: {exc!r}", self._secret)
            message = error_message(text)
            message["model"] = self.name
            yield {"type": "done", "message": message}

    def _describe(self, exc: BaseException) -> Failure:
        failure = self._describe_error(exc)
        return Failure(redact(failure.text, self._secret), failure.retryable,
                       failure.retry_after, failure.stall)
