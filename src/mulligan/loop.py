"""The agent loop: put a prompt to a model and keep going until it stops asking for tools.

`run_agent` is a free function and a generator of events; it holds no state between runs (the
`Harness` does that). `context_for_model` and `repair_tool_history` turn the record -- every
message that happened -- into the view a provider accepts, without ever changing the record.

Event order of a run whose model asks for one tool and then answers (non-streaming model):

    agent_start
      turn_start
        message_end (user prompt)
        message_end (assistant, one toolCall)
        tool_execution_start
          message_end (toolResult)
        tool_execution_end
      turn_end
      turn_start
        message_end (assistant, the answer)
      turn_end
    agent_end

A streaming model adds message_start and message_update events before each assistant
message_end; a streaming tool (bash), tool_execution_update events (`tools.running`) before
its result's message_end: never recorded. The one ordering rule is *mutate, then announce*:
a message is appended to the record before its message_end is yielded.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Generator, Iterable, Sequence
from typing import Any, cast

from mulligan.boundary import call_model
from mulligan.messages import (
    ABORTED,
    AssistantMessage,
    Block,
    Content,
    Message,
    ToolCallBlock,
    ToolResultMessage,
    UserMessage,
    error_message,
    is_failed,
    tool_calls,
    user_message,
)
from mulligan.tools import Tool, tool_specs
from mulligan.tools.running import ToolRun
from mulligan.wire import (
    Event,
    MessageEnd,
    Model,
)

__all__ = ["ABORTED", "INTERRUPTED", "Abort", "Compactor", "Event", "View", "context_for_model",
           "is_overflow", "repair_tool_history", "run_agent"]
# What get_steering / get_follow_ups return: texts (or ready user messages), often none.
GetUserMessages = Callable[[], Iterable[str | UserMessage]]
# compact(record, overflow, abort=...): may shorten the record in place; yields events; True
# if it did. `abort` is the run's: a summary request it makes stops with the run.
Compactor = Callable[..., Generator[Event, None, bool]]
# How providers word a request over the context window (Anthropic, OpenAI and compatible
# servers, the embedded model).
_OVERFLOW = re.compile(r"context (length|window)|prompt is too long|too many tokens|"
                       r"maximum context|context_length_exceeded", re.IGNORECASE)


def is_overflow(reply: AssistantMessage) -> bool:
    """True for a failed reply that says the request was over the model's context window."""
    return is_failed(reply) and bool(_OVERFLOW.search(reply.get("error_message", "")))

INTERRUPTED = ("Interrupted: this tool call was never answered. It may not have run, or may "
               "have run in part; check before repeating it.")


class Abort(threading.Event):
    """A run's abort: a threading.Event (what models and tools are handed) that may carry why
    (`stop(reason)`); the first reason given is kept. No reason: ``ABORTED``."""

    def __init__(self) -> None:
        super().__init__()
        self.reason: str | None = None

    def stop(self, reason: str | None = None) -> None:
        if reason and self.reason is None and not self.is_set():
            self.reason = reason
        self.set()


def _why(reply: AssistantMessage, abort: threading.Event | None) -> AssistantMessage:
    """An aborted reply with the reason its `Abort` carries (a hang-up is not the user's
    doing), in place of the provider's ``ABORTED``; any other reply as it is."""
    reason = getattr(abort, "reason", None)
    if reply.get("stop_reason") != "aborted" or not reason:
        return reply
    return cast(AssistantMessage, {**reply, "error_message": reason})


def run_agent(
    model: Model,
    system: str,
    messages: list[Message],
    tools: Sequence[Tool],
    prompt: Content,
    *,
    max_turns: int | None = None,
    get_steering: GetUserMessages | None = None,
    get_follow_ups: GetUserMessages | None = None,
    abort: threading.Event | None = None,
    redact: Callable[[Message], Message] | None = None,
    compact: Compactor | None = None,
    view: View | None = None,
) -> Generator[Event, None, None]:
    """Put `prompt` to `model` and keep going until it stops asking for tools. A generator of
    events (plain dicts with a "type"); `messages` is the record, a list this appends to.

    In: a model (``complete``, optionally ``stream``), the system prompt, the record so far, the
    tools, and the user's prompt. Every model call is sent ``context_for_model(messages)`` and
    ``tool_specs(tools)``.

    Out: events, in balanced pairs on every exit the consumer sees -- agent_start ... agent_end
    around the run, turn_start ... turn_end around each model call and its tool calls.
    *Mutate, then announce*: each message (the prompt, steering and follow-up messages,
    assistant replies including failures, tool results) is appended to `messages` before its
    message_end is yielded. agent_end's "messages" are the messages this run appended.

    A turn is: the user messages waiting to open it, one model call, then the reply's tool
    calls, run one at a time in order, each answered by exactly one result. A tool that
    streams (bash) runs on a worker thread while this generator yields its
    ``tool_execution_update`` events (`tool_call_id`, `tool_name`, `output`: what it printed
    since the last one, `elapsed`: seconds), at most ten a second, coalesced; they are a view,
    never recorded: the record gets the one result, exactly as `run_tool` makes it.
    The run stops when
    - the model answers without tool calls and nobody has more to say (see below);
    - a reply fails: the model raised, or returned stop_reason "error" or "aborted". The reply
      is recorded as it is and nothing in it is acted on: its tool calls are never run;
    - `max_turns` model calls have been made and another is due: an error message naming
      max_turns is recorded instead of the call (checked before each call, never after);
    - `abort` is set. It is checked before each model call (an aborted message with reason
      ``ABORTED`` is recorded instead of the call) and before each tool call (that call and the
      rest of the reply's calls get an ``INTERRUPTED`` result, is_error True). It is also passed
      to ``model.stream`` and to ``run_tool``; an aborted stream's message is recorded as is,
      but for its reason: when `abort` is an `Abort` carrying one (a hang-up), that is the
      aborted reply's error_message instead of ``ABORTED``.

    The user speaks only where a user message keeps the transcript valid -- at the top of a
    turn. `get_steering()` is asked once a turn's whole tool batch is answered, and also when
    the model stops without tool calls, before deciding to end (and once at the start, so that
    steering queued while idle goes in with the prompt). `get_follow_ups()` is asked only when
    the run would otherwise end. Neither is asked after a failed reply or once `abort` is set.
    Each returns texts (or user messages); each becomes one user message opening the next turn.

    `redact`, when given, is applied to every message just before it is recorded (the app
    uses it to keep known secrets out of the record); what it returns is what is recorded
    and announced.

    `compact(messages, overflow)`, when given, is a generator run before every model call
    (overflow False) and once after a reply that failed because the context overflowed
    (overflow True). It may replace the record's contents, in place, with a shorter
    transcript (the app appends a compaction entry and puts the file's transcript there) and
    yields its own events (compaction_start / compaction_end); it returns True when it
    compacted. After an overflow it compacted, the model is called again, once. It is called
    with the run's `abort` as a keyword, so the summary request it makes stops with the run.

    `view`, when given, is the `View` that computes ``context_for_model(messages)`` from
    what was appended since its last call (the Harness keeps one for its record, so a turn
    costs the same at turn 1,000 as at turn 10); else the run makes its own.

    Never raised: a model's exception (it becomes an error message) or a tool's (run_tool makes
    it a result). Raised: whatever `get_steering` / `get_follow_ups` raise.

    Closed early (the consumer calls ``close()`` or drops the generator): a closed generator
    cannot yield, so no further events are delivered -- not even the closing pairs -- and
    nothing more runs: no model call, no tool. The record is still left valid: every tool call
    of the current reply not yet answered gets an ``INTERRUPTED`` result, appended without an
    event -- but for a tool closed while it ran (at one of its updates): the abort is set (the
    run's, or the call's own when none was given), the tool stopped as on any abort, and the
    result it then gives recorded. The same close-out happens when an exception escapes
    (a second Ctrl-C's KeyboardInterrupt while bash runs: bash is killed, its result kept).
    (`Harness` does better: it finishes a closed run with the abort set, so its listeners
    still hear balanced events.)
    """
    toolbox = list(tools)
    specs = tool_specs(toolbox)
    seen = view if view is not None else View()  # context_for_model, kept up to date
    new: list[Message] = []
    # The calls of the current reply that have no result yet: what a close-out must answer.
    unanswered: list[ToolCallBlock] = []
    running: ToolRun | None = None  # the first of them, while it runs (it may stream)

    def record(message: Message) -> MessageEnd:
        """Append `message` to the record, then make the event that announces it."""
        if redact is not None:
            message = redact(message)
        messages.append(message)
        new.append(message)
        return {"type": "message_end", "message": message}

    def aborted() -> bool:
        return abort is not None and abort.is_set()

    try:
        yield {"type": "agent_start"}
        pending = [user_message(prompt), *_ask(get_steering)]
        calls_made = 0
        retried = False  # the one retry after a context overflow has been used
        while True:
            yield {"type": "turn_start"}
            for message in pending:
                yield record(message)
            reply: AssistantMessage
            if aborted():
                reply = error_message(ABORTED, stop_reason="aborted")
                reply = _why(reply, abort)
            elif max_turns is not None and calls_made >= max_turns:
                reply = error_message(f"Stopped: max_turns={max_turns} reached; the model was "
                                      f"called {calls_made} times in this run.")
            else:
                if compact is not None:
                    yield from compact(messages, False, abort=abort)
                calls_made += 1
                sent = seen(messages, max_result_chars=_result_limit(model))
                reply = yield from call_model(model, system, sent, specs, abort)
                reply = _why(reply, abort)
            failed = is_failed(reply)
            calls = [] if failed else tool_calls(reply)
            unanswered = list(calls)  # set before the reply is announced: a close there answers
            yield record(reply)
            results: list[ToolResultMessage] = []
            while unanswered:
                call = unanswered[0]
                if aborted():
                    result = _interrupted(call)
                    del unanswered[0]
                    ended = record(result)
                    results.append(ended["message"])  # type: ignore[arg-type]
                    yield ended
                    continue
                yield {"type": "tool_execution_start", "tool_call_id": call["id"],
                       "tool_name": call["name"], "arguments": call["arguments"]}
                # Checked again: whoever heard the start may have aborted (Harness does, to
                # finish a run its consumer closed), and then the tool must not run.
                if aborted():
                    result = _interrupted(call)
                else:
                    running = ToolRun(toolbox, call, abort=abort)
                    yield from running.updates()  # what bash prints, while it runs
                    result, running = running.result(), None
                del unanswered[0]  # no yield between the tool returning and its record
                ended = record(result)
                result = ended["message"]  # type: ignore[assignment]
                results.append(result)
                yield ended
                yield {"type": "tool_execution_end", "tool_call_id": call["id"],
                       "tool_name": call["name"], "result": result,
                       "is_error": result["is_error"]}
            yield {"type": "turn_end", "message": reply, "tool_results": results}
            if failed and compact is not None and not retried and not aborted() \
                    and is_overflow(reply):
                retried = True
                if (yield from compact(messages, True, abort=abort)):
                    pending = []  # the next turn asks the model again, on the shorter context
                    continue
            if failed:
                break
            if aborted():
                if not calls:
                    break  # the model had finished; nothing was cut short
                pending = []  # the next turn records the abort in place of the model call
                continue
            pending = _ask(get_steering)
            if calls or pending:
                continue
            pending = _ask(get_follow_ups)
            if not pending:
                break
        yield {"type": "agent_end", "messages": new}
    finally:
        # Only reached with calls unanswered when the run was closed or an exception escaped.
        for call in unanswered:
            if running is not None:  # closed while it ran: stopped, and its result kept
                result = running.result(stop=True)
                result = cast(ToolResultMessage, redact(result)) if redact else result
                running = None
            else:
                result = _interrupted(call)
            messages.append(result)
            new.append(result)


def _ask(get: GetUserMessages | None) -> list[UserMessage]:
    """The user messages a callable has for us: [] if it has none, or was never passed."""
    if get is None:
        return []
    return [user_message(item) if isinstance(item, str) else item for item in get()]


def _interrupted(call: ToolCallBlock) -> ToolResultMessage:
    return {"role": "toolResult", "tool_call_id": call["id"], "tool_name": call["name"],
            "content": INTERRUPTED, "is_error": True}


def context_for_model(messages: Sequence[Message], *,
                      max_result_chars: int | None = None) -> list[Message]:
    """What the model is sent, built from the record; the record is never changed.

    A failed assistant message (stop_reason "error" or "aborted") keeps its text and thinking
    but loses its tool calls -- they were never run, and a provider would want results for
    them -- and if nothing is left it is left out. Then `repair_tool_history` pairs every call
    with exactly one result. Returns a new list; messages that need no change are the record's
    own objects.

    `max_result_chars`, when given: a tool result whose text is longer is sent clipped --
    its head and its tail, with a note in between saying how much was left out and why --
    rather than whole (one result larger than the model's window would make every later
    request fail). The record keeps it whole.
    """
    return View()(messages, max_result_chars=max_result_chars)


def clip_result(result: ToolResultMessage, limit: int) -> ToolResultMessage:
    """`result` itself when its text fits in `limit` characters; else a copy holding the first
    three quarters and the last quarter of that, and a note between them."""
    content: Any = result["content"]
    if isinstance(content, str):
        return result if len(content) <= limit else {**result, "content": _clipped(content,
                                                                                    limit)}
    blocks = [{**block, "text": _clipped(block["text"], limit)}
              if block.get("type") == "text" and len(block.get("text", "")) > limit else block
              for block in content]  # a list of text and image blocks
    changed = any(new is not old for new, old in zip(blocks, content, strict=True))
    return cast(ToolResultMessage, {**result, "content": blocks}) if changed else result


def _clipped(text: str, limit: int) -> str:
    head, tail = limit * 3 // 4, limit // 4
    left_out = len(text) - head - tail
    return (f"{text[:head]}\n\n[... {left_out:,} characters of this tool result left out: "
            f"the whole of it ({len(text):,} characters) is more than the model's context "
            f"window can take. It is kept in the session; ask for less (a range, a filter) "
            f"to see the part you need ...]\n\n{text[len(text) - tail:]}")


# Of a model's window, the share one tool result may take in a request (4 characters a token).
RESULT_SHARE = 0.5
CHARS_PER_TOKEN = 4


def _result_limit(model: Model) -> int | None:
    """The longest tool result text `model` is sent whole: None when it does not say its
    `context_window`."""
    window = getattr(model, "context_window", None)
    if not isinstance(window, int) or isinstance(window, bool) or window <= 0:
        return None
    return int(window * RESULT_SHARE * CHARS_PER_TOKEN)


def repair_tool_history(messages: Sequence[Message]) -> list[Message]:
    """A copy of `messages` in which every tool call is followed at once by exactly one result.

    Results are moved to just after the assistant message that made their call, in call
    order; of two results for one call the first wins; a result whose call is nowhere is
    dropped (its call cannot be invented); a call with no result gets one whose content is
    ``INTERRUPTED``, is_error True. A tool call inside a failed assistant message (stop_reason
    "error" or "aborted") was never a request to run anything: it gets no result, and a result
    naming it counts as one without a call.

    Which call a result answers: the one with its id in the latest assistant message before
    it that made a call with that id -- so a provider that hands out the same ids every turn
    ("call_1") is still paired turn by turn -- or, when no message before it did, the first
    one after it.

    Pure and idempotent: the input is never changed, the output is a new list of the input's
    own message objects (plus any INTERRUPTED results), and a valid transcript comes back equal
    to itself.
    """
    return View(for_model=False)(messages)


def _sent(message: Message, limit: int | None) -> Message | None:
    """`message` as context_for_model sends it: a failed reply without its tool calls (None
    when nothing is left), a tool result clipped to `limit`; else the message itself."""
    if message["role"] == "toolResult":
        return clip_result(message, limit) if limit is not None else message
    if message["role"] == "assistant" and is_failed(message):
        kept: list[Block] = [b for b in message["content"] if b["type"] != "toolCall"]
        if not kept:
            return None
        if len(kept) != len(message["content"]):
            return {**message, "content": kept}
    return message


class View:
    """`context_for_model` (or, with ``for_model=False``, `repair_tool_history`) of a record
    that grows by appends, kept up to date: a call reads only the messages appended since the
    last one, and rebuilds only the part of the view not yet settled (from the first tool call
    still without a result). So a turn costs the same at turn 1,000 as at turn 10.

    ``view(messages, max_result_chars=None)`` returns what the pure function returns for
    `messages`, as a new list. It sees that the record was not just appended to -- shorter,
    its first or last-read message no longer in its place (a compaction replaced it), another
    `max_result_chars` -- and then starts over from the whole record. One View per record
    (`Harness` keeps one; `run_agent` makes one per run when not given one).

    How results pair with calls (the pure functions' rules): results are moved to just after
    the assistant message that made their call, in call order; of two results for one call
    the first wins; a result whose call is nowhere is dropped; a call with no result gets
    ``INTERRUPTED``. A result answers the call with its id in the latest assistant message
    before it that made one -- or, when none did, the first one after it. Calls in a failed
    message are no requests: they get no result, and a result naming them is an orphan.
    """

    def __init__(self, *, for_model: bool = True) -> None:
        self._for_model = for_model
        self._start(None)

    def _start(self, limit: int | None) -> None:
        self._limit = limit
        self._read = 0  # messages of the record read
        # The first and the last message read: is the record still the one read, grown?
        self._head: Message | None = None
        self._last: Message | None = None
        self._kept: list[Message] = []  # the record as sent, results still where they came
        self._first: list[int] = []  # per kept message, the number of its first live call
        self._answers: dict[int, ToolResultMessage] = {}  # call number -> its result
        self._latest: dict[str, list[int]] = {}  # id -> its calls in the latest message
        self._early: dict[str, list[ToolResultMessage]] = {}  # results before any call
        self._count = 0  # live calls numbered so far
        self._settled: list[Message] = []  # the view of _kept[:_settled_at], final
        self._settled_at = 0

    def __call__(self, messages: Sequence[Message], *,
                 max_result_chars: int | None = None) -> list[Message]:
        if max_result_chars != self._limit or len(messages) < self._read or (self._read and (
                messages[self._read - 1] is not self._last or messages[0] is not self._head)):
            self._start(max_result_chars)
        for message in messages[self._read:]:
            self._take(message)
        self._read = len(messages)
        self._head = messages[0] if messages else None
        self._last = messages[-1] if messages else None
        tail = self._unsettled()  # settles what it can first
        return self._settled + tail

    def _take(self, message: Message) -> None:
        """The first pass of the repair, for one appended message."""
        shown = _sent(message, self._limit) if self._for_model else message
        if shown is None:
            return
        self._kept.append(shown)
        self._first.append(self._count)
        if shown["role"] == "toolResult":
            numbers = self._latest.get(shown["tool_call_id"])
            if numbers is None:
                self._early.setdefault(shown["tool_call_id"], []).append(shown)
            else:
                self._claim(numbers, shown)
        elif shown["role"] == "assistant" and not is_failed(shown):
            made: dict[str, list[int]] = {}
            for call in tool_calls(shown):
                made.setdefault(call["id"], []).append(self._count)
                self._count += 1
            for call_id, numbers in made.items():
                self._latest[call_id] = numbers
                for result in self._early.pop(call_id, ()):  # earlier than any later one
                    self._claim(numbers, result)

    def _claim(self, numbers: list[int], result: ToolResultMessage) -> None:
        number = next((n for n in numbers if n not in self._answers), None)
        if number is not None:  # else every call it could answer already has a result
            self._answers[number] = result

    def _unsettled(self) -> list[Message]:
        """The second pass, from the first message not settled: each message, then its calls'
        results. A prefix whose calls all have results can change no more: settled."""
        out: list[Message] = []
        settling = True
        for at in range(self._settled_at, len(self._kept)):
            message = self._kept[at]
            part: list[Message] = []
            whole = True
            if message["role"] != "toolResult":  # results are put back after their call
                part.append(message)
                if message["role"] == "assistant" and not is_failed(message):
                    for number, call in enumerate(tool_calls(message), self._first[at]):
                        result = self._answers.get(number)
                        whole = whole and result is not None
                        part.append(result or _interrupted(call))
            if settling and whole:
                self._settled.extend(part)
                self._settled_at = at + 1
            else:
                settling = False
                out.extend(part)
        return out
