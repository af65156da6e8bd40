"""Secrets kept out of the tools and out of the record.

The tools never see the provider keys Mulligan holds, nor any variable named in config.toml's
``[tools] hide_env``: `Secrets.hidden` is the set of variable names the bash tool leaves out of
its child's environment. And any known key value that still reaches a message about to be
recorded -- a tool result, a model reply quoting it, a prompt it was pasted into -- is
replaced by ``[redacted: NAME]`` before it is written (`Secrets.redact`, the Harness's
`redact` hook, so the session file, every export and every later request hold the marker).

In: the environment and the parsed config. Never: print, store or log a secret value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mulligan.messages import Message
from mulligan.providers.config import KEY_VARIABLES, api_key

__all__ = ["MIN_SECRET", "Secrets"]

MIN_SECRET = 8  # a shorter value would redact ordinary words; no real key is that short


class Secrets:
    """The variable names hidden from tools and the values redacted from the record."""

    def __init__(self, hidden: Sequence[str], values: Mapping[str, str]) -> None:
        self.hidden = frozenset(hidden)
        # Longest first: a key that contains another is replaced whole.
        self._values = sorted(((v, name) for name, v in values.items() if len(v) >= MIN_SECRET),
                              key=lambda pair: -len(pair[0]))

    @classmethod
    def of(cls, env: Mapping[str, str], config: Mapping[str, Any]) -> Secrets:
        """The provider keys (environment and config.toml) and `[tools] hide_env`."""
        hidden = [*KEY_VARIABLES.values(), *config.get("tools", {}).get("hide_env", [])]
        values = {name: env[name].strip() for name in hidden if env.get(name, "").strip()}
        for provider, variable in KEY_VARIABLES.items():
            key = api_key(provider, config, {})  # the config file's own key, if any
            if key:
                values.setdefault(f"{variable} (config.toml)", key)
        return cls(hidden, values)

    def environment(self, env: Mapping[str, str]) -> dict[str, str]:
        """`env` without the hidden variables: what a tool's child process is given."""
        return {name: value for name, value in env.items() if name not in self.hidden}

    def redact_text(self, text: str) -> str:
        for value, name in self._values:
            if value in text:
                text = text.replace(value, f"[redacted: {name}]")
        return text

    def redact(self, message: Message) -> Message:
        """`message` with every known secret value in any of its strings replaced; the same
        object when there is none (the common case costs one scan of its strings)."""
        if not self._values:
            return message
        cleaned = self._clean(message)
        return message if cleaned is message else cleaned

    def _clean(self, value: Any) -> Any:
        if isinstance(value, str):
            cleaned = self.redact_text(value)
            return value if cleaned == value else cleaned
        if isinstance(value, dict):
            items = {k: self._clean(v) for k, v in value.items()}
            return value if all(items[k] is value[k] for k in value) else items
        if isinstance(value, list):
            elements = [self._clean(v) for v in value]
            changed = any(a is not b for a, b in zip(elements, value, strict=True))
            return elements if changed else value
        return value
