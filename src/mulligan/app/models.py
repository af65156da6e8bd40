"""Model resolution for the coding session: a name (or the configured default) to a model.

In: a model name as the user typed it (``anthropic/...``, ``local/...``, ``scripted:FILE``) or
None. Out: an object keeping the `mulligan.wire.Model` contract. Raises the registry's named
errors (MissingApiKey, UnknownModel, ConfigError) for the caller to report; prints nothing but
the one-line notice that the embedded fallback was chosen. Hosted SDKs are imported by the
providers on first use, not here.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, TextIO

from mulligan.providers.errors import UnknownModel
from mulligan.providers.registry import (
    default_model_name,
    parse_name,
    resolve_model,
    start_loading,
)
from mulligan.wire import Model

__all__ = ["FALLBACK_NOTICE", "SCRIPTED_PREFIX", "model_label", "model_parts", "resolve",
           "runnable", "scripted_model", "session_model", "start_loading"]

FALLBACK_NOTICE = ("No provider configured: using the embedded local/smollm2-135m (offline, "
                   "small). Set ANTHROPIC_API_KEY or OPENAI_API_KEY, or --model, for a real model.")
SCRIPTED_PREFIX = "scripted:"


def scripted_model(script_file: Path) -> Model:
    """A testing aid: ``--model scripted:FILE`` answers from FILE, a JSON list whose items are
    assistant messages (dicts) or plain strings (a text reply each). Replies stream a word at a
    time. Past the end of the list every request fails (the run ends in an error)."""
    from mulligan.testing import StreamingScriptedModel, say

    try:
        items = json.loads(Path(script_file).read_text(encoding="utf-8"))
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise ValueError(f"{script_file}: not a JSON list of replies ({exc})") from None
    if not isinstance(items, list):
        raise ValueError(f"{script_file}: a scripted model file must hold a JSON list")
    script = [say(item) if isinstance(item, str) else item for item in items]
    model = StreamingScriptedModel(script)
    model.name = f"scripted/{Path(script_file).name}"  # type: ignore[attr-defined]
    return model


def resolve(name: str | None, *, base_url: str | None, home: Path,
            err: TextIO | None = None, defer: bool = False) -> Model:
    """The model called `name` (None: the configured default). Prints the one-line notice to
    `err` (stderr) when the embedded fallback is chosen because nothing is configured.
    `defer`: a hosted model's SDK loads in the background, from `start_loading` (the REPL
    calls it once its first prompt is drawn) or the first call (see
    `providers.registry.Deferred`)."""
    if name and name.startswith(SCRIPTED_PREFIX):
        return scripted_model(Path(name[len(SCRIPTED_PREFIX):]))
    if name is None:
        _, is_fallback = default_model_name(home=home)
        if is_fallback:
            print(FALLBACK_NOTICE, file=err or sys.stderr)
    return resolve_model(name, base_url=base_url, home=home, defer=defer)


def session_model(log: Any) -> str | None:
    """The model a session last used, as a name `resolve` takes: its newest ``model_change``
    (provider/model), else its ``session_info``'s model; None for a session with neither (or
    none yet). `log` is a SessionLog; only those two kinds of entry are read."""
    if log is None or not log.storage.exists():
        return None
    for change in reversed(log.of_type("model_change")):
        provider, model_id = change.get("provider"), change.get("model")
        if isinstance(model_id, str) and model_id:
            return f"{provider}/{model_id}" if isinstance(provider, str) and provider \
                else model_id
    for info in log.of_type("session_info"):
        if isinstance(info.get("model"), str) and info["model"]:
            return str(info["model"])
    return None


def runnable(name: str) -> bool:
    """True when `name` is a model name this program can resolve (a provider it knows); a
    scripted model's label, recorded by a test, is not."""
    try:
        parse_name(name)
    except UnknownModel:
        return False
    return True


def model_label(model: Any) -> str:
    """The name a model goes by in session files: its `name`, else its class name."""
    return str(getattr(model, "name", None) or type(model).__name__)


def model_parts(model: Any) -> tuple[str, str]:
    """(provider, model id) of a model, as a model_change entry records them: the registry's
    reading of its label; a label the registry does not know (a scripted model's) is kept
    whole as the id, with no provider."""
    label = model_label(model)
    try:
        provider, model_id = parse_name(label)
    except UnknownModel:
        return "", label
    if provider == "local":  # the registry keeps local names whole; the entry names the model
        model_id = label[len("local") + 1:]
    return provider, model_id
