"""Model names to model objects: "anthropic/<id>", "openai/<id>", "local/<name>",
"local:<path.gguf>".

In: a name (or None for the configured default), an optional base URL, the environment and the
Mulligan home. Out: a ready model object (nothing is sent until it is asked to answer).
Raises, before any request: `UnknownModel` for a name we cannot place, `MissingApiKey` naming
the environment variable, `ConfigError` for a broken config file (a bad [local] setting
included, named with the file); the local provider's own named errors for local names.
SDK modules and the local engine are imported only when a name needs them.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from mulligan.home import mulligan_home
from mulligan.messages import AssistantMessage, Message
from mulligan.providers.config import (
    KEY_VARIABLES,
    OTHER_KEY_VARIABLES,
    api_key,
    config_path,
    environment,
    is_openai_itself,
    load_config,
    provider_settings,
)
from mulligan.providers.config import (
    base_url as configured_base_url,
)
from mulligan.providers.errors import ConfigError, MissingApiKey, UnknownModel
from mulligan.providers.facts import HOSTED_DEFAULTS, LOCAL_DEFAULT, window_for
from mulligan.wire import Model, StreamDelta, ToolSpec

__all__ = ["Deferred", "start_loading", "resolve_model", "default_model_name", "parse_name",
           "MissingApiKey", "UnknownModel", "ConfigError", "LOCAL_DEFAULT", "HOSTED_DEFAULTS",
           "NO_KEY_PLACEHOLDER"]

# Sent as the key to an OpenAI-compatible server on a base URL when none is configured: local
# servers (ollama, llama.cpp) check none, and the SDK refuses to start without one.
NO_KEY_PLACEHOLDER = "not-needed"
_EXAMPLES = ("anthropic/claude-sonnet-4-6, openai/gpt-5.5, google/gemini-2.5-pro, "
             "openai/qwen2.5-coder with "
             "--base-url http://localhost:11434/v1, local/smollm2-135m, local:/path/model.gguf")


def parse_name(name: str) -> tuple[str, str]:
    """("anthropic", "claude-sonnet-4-6") from "anthropic/claude-sonnet-4-6";
    ("local", name) for local names. UnknownModel for anything else."""
    if name.startswith("local:"):
        if not name[len("local:"):].strip():
            raise UnknownModel(f"model {name!r}: give the path of a .gguf file after 'local:'")
        return "local", name
    provider, slash, model_id = name.partition("/")
    if provider == "local" and slash and model_id:
        return "local", name
    if not slash or not model_id.strip():
        raise UnknownModel(f"model {name!r} is not of the form provider/model-id "
                           f"(for example {_EXAMPLES})")
    if provider not in KEY_VARIABLES:
        hint = ""
        if provider in ("ollama", "llamacpp", "llama.cpp", "vllm", "lmstudio", "openrouter"):
            hint = (f"; {provider} speaks the OpenAI API: use openai/{model_id} with "
                    "--base-url (see 'Models and providers' in docs/providers.md)")
        raise UnknownModel(f"model {name!r}: unknown provider {provider!r}; known: "
                           f"anthropic, openai, google, local{hint}")
    return provider, model_id


def default_model_name(
    env: Mapping[str, str] | None = None, home: Path | None = None
) -> tuple[str, bool]:
    """(name, is_fallback): config.toml's ``model`` if set; else the default hosted model of
    the first provider with a key (Anthropic, then OpenAI); else the embedded local model, with
    is_fallback True."""
    env = environment() if env is None else env
    config = load_config(mulligan_home(env) if home is None else home)
    if config.get("model"):
        return config["model"], False
    for provider, name in HOSTED_DEFAULTS.items():
        if api_key(provider, config, env):
            return name, False
    return LOCAL_DEFAULT, True


def resolve_model(
    name: str | None, *, base_url: str | None = None, env: Mapping[str, str] | None = None,
    home: Path | None = None, defer: bool = False,
) -> Model:
    """The model called `name` (None: `default_model_name`). For the hosted providers the
    endpoint is `base_url` (--base-url), else $ANTHROPIC_BASE_URL / $OPENAI_BASE_URL, else the
    config file's base_url, else the provider's own. With `defer`, a hosted model's SDK
    (anthropic ~0.8 s, openai ~0.3 s to import) is loaded on a background thread, started by
    `start_loading` or the first call, and the model returned at once (`Deferred`); every
    check above still happens here and now."""
    env = environment() if env is None else env
    home = mulligan_home(env) if home is None else home
    config = load_config(home)
    if name is None:
        name, _ = default_model_name(env, home)
    provider, model_id = parse_name(name)
    if provider == "local":
        if base_url:
            raise ConfigError(f"--base-url does not apply to {name!r}: local models run in "
                              "this process (for a local *server*, use openai/<model> "
                              "--base-url)")
        local = importlib.import_module("mulligan.providers.local.model")
        try:
            return local.resolve_local(name, config.get("local", {}))
        except local.BadLocalSetting as exc:
            raise ConfigError(f"{config_path(home)}: {exc}") from None
    settings = provider_settings(config, provider)
    settings.pop("base_url", None)
    settings.pop("api_key", None)
    url = base_url or configured_base_url(provider, config, env)
    key = api_key(provider, config, env)
    if key is None:
        if provider == "openai" and not is_openai_itself(url):
            key = NO_KEY_PLACEHOLDER
        else:
            variable = " or ".join((KEY_VARIABLES[provider],
                                    *OTHER_KEY_VARIABLES.get(provider, ())))
            raise MissingApiKey(provider, variable, str(config_path(home)))
    if defer:
        return Deferred(name, lambda: _build(provider, model_id, key, url, settings),
                        context_window=settings.get("context_window"))
    return _build(provider, model_id, key, url, settings)


class Deferred:
    """A hosted model whose SDK is imported, and client built, on a background thread, so the
    REPL draws its prompt without waiting for it. `name` is known at once; the thread starts
    at `start()` (the REPL calls `start_loading` once its prompt is on the screen: a thread
    importing an SDK meanwhile would share the interpreter with the drawing and slow it) or
    at the first `complete`/`stream`, which wait for the build (it is long done by the time a
    person has typed a prompt) and then are the real model's. A build that failed raises
    from them, which the loop's provider boundary records as the reply's error."""

    compact_prompt = False  # hosted models get the full system prompt

    def __init__(self, name: str, build: Callable[[], Model], *,
                 context_window: int | None = None) -> None:
        self.name = name
        self.context_window = context_window or window_for(name)
        self._model: Model | None = None
        self._failure: BaseException | None = None
        self.thinking: str | None = None  # a thinking level, set on the model once built
        self.web_search = False  # --web-search, likewise
        self._thread = threading.Thread(target=self._build, args=(build,),
                                        name=f"mulligan-load-{name}", daemon=True)
        self._starting = threading.Lock()
        _WAITING.append(self)

    def start(self) -> None:
        """Start the build on its thread, once (later calls do nothing)."""
        with self._starting:
            if self._thread.ident is None:
                self._thread.start()

    def _build(self, build: Callable[[], Model]) -> None:
        try:
            self._model = build()
        except BaseException as exc:  # kept for the caller's thread, raised from ready()
            self._failure = exc

    def ready(self) -> Model:
        """The real model, once built (starts the build if nothing has, and waits for it)."""
        self.start()
        self._thread.join()
        if self._failure is not None:
            raise self._failure
        assert self._model is not None
        if self.thinking is not None:
            from mulligan.providers.thinking import set_thinking

            set_thinking(self._model, self.thinking)
        if self.web_search:
            from mulligan.providers.thinking import set_web_search

            set_web_search(self._model)
        return self._model

    def complete(self, system: str, messages: list[Message],
                 tools: list[ToolSpec]) -> AssistantMessage:
        return self.ready().complete(system, messages, tools)

    def stream(self, system: str, messages: list[Message], tools: list[ToolSpec],
               abort: threading.Event | None = None) -> Iterator[StreamDelta]:
        model = self.ready()
        stream = getattr(model, "stream", None)
        if stream is None:
            yield {"type": "done", "message": model.complete(system, messages, tools)}
            return
        yield from stream(system, messages, tools, abort=abort)


_WAITING: list[Deferred] = []  # made, not yet handed to `start_loading`


def start_loading() -> None:
    """Start building every `Deferred` model made so far whose build has not started: the
    REPL calls this once its first prompt is drawn, so the SDKs load while the user types."""
    while _WAITING:
        _WAITING.pop().start()


def _build(provider: str, model_id: str, key: str, url: str | None,
           settings: dict[str, Any]) -> Model:
    if provider == "anthropic":
        from mulligan.providers.anthropic import AnthropicModel

        return AnthropicModel(model_id, api_key=key, base_url=url, **settings)
    if provider == "google":
        from mulligan.providers.gemini import GeminiModel

        return GeminiModel(model_id, api_key=key, base_url=url, **settings)
    api = settings.pop("openai_api", None) or ("responses" if is_openai_itself(url) else "chat")
    if api == "responses":
        from mulligan.providers.openai.responses import OpenAIResponsesModel

        return OpenAIResponsesModel(model_id, api_key=key, base_url=url, **settings)
    from mulligan.providers.openai.chat import OpenAIChatModel

    return OpenAIChatModel(model_id, api_key=key, base_url=url, **settings)
