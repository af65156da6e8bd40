"""The Harness: one transcript, one run at a time, the user's queues, and listeners.

`run_agent` keeps the mechanics and holds no state; the Harness holds the list it appends to,
the settings that stay the same from run to run, and who is listening. Runs are driven by the
consumer iterating what `prompt()` returns -- there is no background thread. Other threads may
call `steer`, `follow_up` and `abort` at any time.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Generator, Iterable, Sequence
from typing import cast

from mulligan.loop import Abort, Compactor, View, run_agent
from mulligan.messages import Content, Message
from mulligan.tools import Tool
from mulligan.wire import Event, Model

Listener = Callable[[Event], None]


class Harness:
    """Owns one transcript and lets one run at a time append to it.

    ``Harness(model, system, tools, messages=(), max_turns=None)`` copies `messages` (e.g.
    ``log.replay()``) into a list of its own; the first run sends the model exactly those
    messages plus its prompt.

    - ``messages``: a tuple, a snapshot of the transcript. Nobody outside can append to it.
      (The message dicts inside are shared, not copied: treat them as read-only.)
    - ``is_running``: True from the call of ``prompt()`` until that run is exhausted, closed or
      dies.
    - ``prompt(text)``: the run, as an iterator of events (see `mulligan.loop.run_agent`).
      While a run is going on it raises RuntimeError on the caller's line, not at the first
      ``next()``. Iterate it to the end, or ``close()`` it.
    - ``steer(text)`` / ``follow_up(text)``: queue a user message. Steering goes in at the next
      gap between turns (after a turn's tool batch is answered, or when the model stops);
      a follow-up only when the run would otherwise end. Thread-safe, callable at any time,
      idle or running. Each text becomes one user message, handed to the loop one per ask (two
      steering texts open two successive turns). Queues outlive runs: what a run did not use
      (it failed, or was aborted) opens the next one.
    - ``subscribe(listener)``: ``listener(event)`` hears every event of every run, after the
      record has changed and before the consumer is handed the event. Returns the function that
      undoes it; undoing twice is harmless.
    - ``clear_queues()``: empty both queues, returning their texts.
    - ``abort()``: thread-safe; stops the current run at the next safe point (see run_agent:
      unanswered tool calls get INTERRUPTED results, no further model call). The events stay
      balanced and the transcript valid. Idle, it does nothing: a later run is not aborted.
    - ``model``, ``system``, ``tools``, ``max_turns`` (and ``set_model(model)``): replaceable
      between runs; replacing one while a run is going on raises RuntimeError.
    - ``redact`` (keyword, optional): applied to every message before it is recorded (see
      `run_agent`); ``redact`` property reads it back. ``compact`` (keyword, optional): the
      compaction hook `run_agent` runs before model calls and after a context overflow.

    Closing early: when the consumer closes the run (or drops it) before its end, the Harness
    sets the abort and drives the run to its end itself. The consumer hears nothing more, but
    the listeners hear every remaining event, so they see balanced pairs and every message the
    record gained (a session log stays the record's copy). A run that was never iterated is
    simply dropped: nothing was recorded.

    A listener that raises ends the run. Listeners are trusted code, and a saver that cannot
    save must not be silent. The event it raised on still goes to the other listeners but not
    to the consumer; the run is then aborted and driven to its end for the listeners still in
    good standing (the one that raised hears nothing more of this run), and the first such
    exception is raised to the consumer from its ``next()``. The listener stays subscribed.
    (If the consumer had closed the run and a listener raises while it is being finished, that
    exception comes out of ``close()``.)
    """

    def __init__(
        self, model: Model, system: str, tools: Iterable[Tool], messages: Iterable[Message] = (),
        max_turns: int | None = None, *, redact: Callable[[Message], Message] | None = None,
        compact: Compactor | None = None,
    ) -> None:
        self._redact = redact
        self._compact = compact
        self._model = model
        self._system = system
        self._tools: list[Tool] = list(tools)
        self._max_turns = max_turns
        self._messages: list[Message] = list(messages)
        self._view = View()  # what the model is sent, kept up to date from run to run
        self._lock = threading.Lock()  # guards _running, _abort and _listeners across threads
        self._running = False
        self._abort = Abort()
        # deque append/popleft are atomic: steer() from any thread, the loop pops.
        self._steering: deque[str] = deque()
        self._follow_ups: deque[str] = deque()
        # One (token, listener) per subscribe(): an undo removes its own subscription, never
        # another one of the same function.
        self._listeners: list[tuple[object, Listener]] = []

    # -- state -------------------------------------------------------------------------------

    @property
    def messages(self) -> tuple[Message, ...]:
        return tuple(self._messages)

    @property
    def is_running(self) -> bool:
        return self._running

    @property
    def model(self) -> Model:
        return self._model

    @model.setter
    def model(self, model: Model) -> None:
        self._idle("model")
        self._model = model

    def set_model(self, model: Model) -> None:
        """Use `model` from the next run on. RuntimeError while a run is going on."""
        self.model = model

    @property
    def system(self) -> str:
        return self._system

    @system.setter
    def system(self, system: str) -> None:
        self._idle("system")
        self._system = system

    @property
    def tools(self) -> tuple[Tool, ...]:
        return tuple(self._tools)

    @tools.setter
    def tools(self, tools: Iterable[Tool]) -> None:
        self._idle("tools")
        self._tools = list(tools)

    @property
    def redact(self) -> Callable[[Message], Message] | None:
        return self._redact

    @property
    def max_turns(self) -> int | None:
        return self._max_turns

    @max_turns.setter
    def max_turns(self, max_turns: int | None) -> None:
        self._idle("max_turns")
        self._max_turns = max_turns

    def _idle(self, what: str) -> None:
        if self._running:
            raise RuntimeError(f"cannot change {what} while a run is going on")

    # -- the user's side -----------------------------------------------------------------------

    def steer(self, text: str) -> None:
        """Queue `text` for the next gap between turns. Thread-safe."""
        self._steering.append(text)

    def follow_up(self, text: str) -> None:
        """Queue `text` for when a run would otherwise end. Thread-safe."""
        self._follow_ups.append(text)

    def clear_queues(self) -> tuple[list[str], list[str]]:
        """Empty both queues; returns what was in them (steering, follow-ups), oldest first --
        e.g. for a frontend to put back in the input box after an abort."""
        steering: list[str] = []
        follow_ups: list[str] = []
        while (text := _take_one(self._steering)):
            steering.extend(text)
        while (text := _take_one(self._follow_ups)):
            follow_ups.extend(text)
        return steering, follow_ups

    def abort(self, reason: str | None = None) -> None:
        """Stop the current run at its next safe point. Thread-safe; idle, it does nothing.
        `reason` (e.g. ``messages.HUNG_UP``) is what the aborted reply records instead of
        ``ABORTED``; the first abort's reason is kept."""
        with self._lock:
            self._abort.stop(reason)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call `listener(event)` for every event of every run; returns its undo. Subscribing
        one function twice makes two subscriptions, each with its own undo."""
        subscription = (object(), listener)
        with self._lock:
            self._listeners.append(subscription)

        def unsubscribe() -> None:
            with self._lock:
                if subscription in self._listeners:  # undoing twice is harmless
                    self._listeners.remove(subscription)

        return unsubscribe

    # -- runs ----------------------------------------------------------------------------------

    def prompt(self, text: Content) -> Generator[Event, None, None]:
        """Start a run with `text` (a string, or text and image blocks); returns its events.
        RuntimeError, raised here and now, if a run is already going on."""
        with self._lock:
            if self._running:
                raise RuntimeError("a run is already going on; use steer() or follow_up(), "
                                   "or abort() it")
            self._running = True
            self._abort = abort = Abort()  # a fresh one: an idle abort() is forgotten
        run = self._run(text, abort)
        next(run)  # primed: the run's finally is live, so dropping it unstarted resets is_running
        return cast(Generator[Event, None, None], run)

    def _run(self, text: Content, abort: threading.Event) -> Generator[Event | None, None, None]:
        loop = run_agent(self._model, self._system, self._messages, self._tools, text,
                         max_turns=self._max_turns,
                         get_steering=lambda: _take_one(self._steering),
                         get_follow_ups=lambda: _take_one(self._follow_ups), abort=abort,
                         redact=self._redact, compact=self._compact, view=self._view)
        fallen: set[object] = set()  # the subscriptions that raised during this run
        failure: Exception | None = None
        started = finished = False
        try:
            yield None
            started = True
            for event in loop:
                failure = self._tell(event, fallen)
                if failure is not None:
                    break
                yield event
            else:
                finished = True
        finally:
            try:
                if started and not finished:
                    # Closed early, or a listener raised: finish the run for the listeners.
                    abort.set()
                    for event in loop:
                        late = self._tell(event, fallen)  # told even when failure is set
                        failure = failure or late
                loop.close()  # a no-op unless something above raised mid-drain
            finally:
                with self._lock:
                    self._running = False
            if failure is not None:
                raise failure

    def _tell(self, event: Event, fallen: set[object]) -> Exception | None:
        """Hand `event` to every listener that has not raised; the first exception, if any.
        Not a swallow: the run is ended and the exception re-raised to the consumer."""
        first: Exception | None = None
        for token, listener in list(self._listeners):  # a copy: one may unsubscribe mid-call
            if token in fallen:
                continue
            try:
                listener(event)
            except Exception as exc:
                fallen.add(token)
                first = first or exc
        return first


def _take_one(queue: deque[str]) -> Sequence[str]:
    """What the loop is handed when it asks: the oldest queued text, one per ask."""
    try:
        return [queue.popleft()]
    except IndexError:
        return []
