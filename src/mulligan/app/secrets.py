"""Secrets kept out of the tools, out of the record, and out of this process's environment.

The tools never see the provider keys Mulligan holds, nor any variable named in config.toml's
``[tools] hide_env``: `Secrets.hidden` is the set of variable names the bash tool leaves out of
its child's environment. Any known key value that still reaches a message about to be
recorded -- a tool result, a model reply quoting it, a prompt it was pasted into, the name of
a tool-call argument -- is replaced by ``[redacted: NAME]`` before it is written
(`Secrets.redact`, the Harness's `redact` hook, so the session file, every export and every
later request hold the marker); `Secrets.scrubber()` does the same for the events `--mode
json` prints, a key streamed over several deltas included.

`guard_process(names)` keeps the keys from a command the agent runs, whatever it reads: the
provider keys and the `hide_env` variables leave this process's environment (held in memory by
`mulligan.providers.config`), their strings in the environment block the kernel shows as
/proc/<pid>/environ are overwritten, and the process is made non-dumpable, so that no process
of the same user can read its environ or its memory or ptrace it; as root, CAP_SYS_PTRACE and
CAP_PERFMON leave the capability bounding set, so the commands Mulligan starts cannot either
(a root command keeps CAP_SYS_ADMIN, which bubblewrap needs, and with it can read the environ
block -- which no longer holds a key -- but not the memory). What this does not cover: a key
written in config.toml can be read from the file by any command of the same user.

In: the environment and the parsed config. Never: print, store or log a secret value.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from mulligan.messages import Message
from mulligan.providers.config import (
    ALL_KEY_VARIABLES,
    KEY_VARIABLES,
    api_key,
    withhold_keys,
)
from mulligan.providers.errors import MIN_SECRET

__all__ = ["MIN_SECRET", "EventScrubber", "Secrets", "guard_process"]


class Secrets:
    """The variable names hidden from tools and the values redacted from the record."""

    def __init__(self, hidden: Sequence[str], values: Mapping[str, str]) -> None:
        self.hidden = frozenset(hidden)
        # Longest first: a key that contains another is replaced whole. A value shorter than
        # MIN_SECRET would redact ordinary words ("x" out of "x-api-key"); no real key is.
        self._values = sorted(((v, name) for name, v in values.items() if len(v) >= MIN_SECRET),
                              key=lambda pair: -len(pair[0]))

    @classmethod
    def of(cls, env: Mapping[str, str], config: Mapping[str, Any]) -> Secrets:
        """The provider keys (environment and config.toml) and `[tools] hide_env`. `env` is
        the environment Mulligan started with (`mulligan.providers.config.environment()`)."""
        hidden = [*ALL_KEY_VARIABLES, *config.get("tools", {}).get("hide_env", [])]
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
        """`message` with every known secret value in any of its strings (dict keys
        included) replaced; the same object when there is none (the common case costs one
        scan of its strings)."""
        if not self._values:
            return message
        cleaned = self.clean(message)
        return message if cleaned is message else cleaned

    def clean(self, value: Any) -> Any:
        """Any JSON-like value with every secret in its strings and dict keys replaced; the
        same object when there is none. Never changes `value` in place."""
        if isinstance(value, str):
            cleaned = self.redact_text(value)
            return value if cleaned == value else cleaned
        if isinstance(value, dict):
            items = {self.clean(k) if isinstance(k, str) else k: self.clean(v)
                     for k, v in value.items()}
            if len(items) == len(value) and all(k in value and items[k] is value[k]
                                                 for k in items):
                return value
            return items
        if isinstance(value, list | tuple):
            elements = [self.clean(v) for v in value]
            changed = any(a is not b for a, b in zip(elements, value, strict=True))
            return (elements if isinstance(value, list) else tuple(elements)) if changed \
                else value
        return value

    def split_safe(self, text: str) -> tuple[str, str]:
        """(what of `text` may be shown now, redacted; its end that could be the start of a
        key, to be held until more text shows whether it is one)."""
        text = self.redact_text(text)
        cut = len(text)
        for value, _ in self._values:
            start = max(0, len(text) - len(value) + 1)
            at = text.find(value[0], start)
            while at != -1 and at < cut:
                if value.startswith(text[at:]):
                    cut = at
                    break
                at = text.find(value[0], at + 1)
        return text[:cut], text[cut:]

    def scrubber(self) -> EventScrubber:
        return EventScrubber(self)


# How a held piece of streamed text is put back into its event (see EventScrubber).
_Put = Callable[[dict[str, Any], str], dict[str, Any]]


class EventScrubber:
    """``scrub(event)`` -> the events to show in its place, every known key value replaced.
    A message_update is shown without its partial `message` (`delta` is what is new, as
    `--mode json` prints it). Streamed text -- a message_update's delta, a running tool's
    tool_execution_update output -- may split a key between two events: the end of one that
    could begin a key is held back until the next piece of the same stream (the same block,
    the same tool call), or the stream's end, says whether it does: a held tail comes out as
    one more event of that stream, before the next event of any other kind or stream.
    Every other event is cleaned whole."""

    def __init__(self, secrets: Secrets) -> None:
        self._secrets = secrets
        # The stream whose end is held back: (which stream, its event without the text,
        # the text held, how to put the text back into the event).
        self._held: tuple[Any, dict[str, Any], str, _Put] | None = None

    def __call__(self, event: Mapping[str, Any]) -> list[dict[str, Any]]:
        kind = event.get("type")
        if kind == "message_update":
            delta = event.get("delta")
            if not isinstance(delta, Mapping) or not isinstance(delta.get("delta"), str):
                return [*self._release(), {"type": "message_update",
                                           "delta": self._secrets.clean(delta)}]
            same = {k: v for k, v in delta.items() if k != "delta"}
            return self._stream(("message_update", same), same, delta["delta"], _put_delta)
        if kind == "tool_execution_update" and isinstance(event.get("output"), str):
            shell = {k: v for k, v in event.items() if k != "output"}
            which = ("tool_execution_update", event.get("tool_call_id"))
            return self._stream(which, shell, event["output"], _put_output)
        return [*self._release(), self._secrets.clean(dict(event))]

    def _stream(self, which: Any, shell: dict[str, Any], text: str,
                put: _Put) -> list[dict[str, Any]]:
        shown: list[dict[str, Any]] = []
        if self._held is not None:
            if self._held[0] == which:
                text = self._held[2] + text
                self._held = None
            else:
                shown = self._release()
        safe, rest = self._secrets.split_safe(text)
        shell = self._secrets.clean(shell)
        if rest:
            self._held = (which, shell, rest, put)
        if safe:
            shown.append(put(shell, safe))
        return shown

    def _release(self) -> list[dict[str, Any]]:
        if self._held is None:
            return []
        (_, shell, text, put), self._held = self._held, None
        return [put(shell, text)]


def _put_delta(shell: dict[str, Any], text: str) -> dict[str, Any]:
    return {"type": "message_update", "delta": {**shell, "delta": text}}


def _put_output(shell: dict[str, Any], text: str) -> dict[str, Any]:
    return {**shell, "output": text}


def guard_process(names: Iterable[str] = ALL_KEY_VARIABLES, environ: Any = None) -> None:
    """Keep the variables `names` (`Secrets.hidden`: the provider keys and `hide_env`) from
    whatever the agent runs (see the module docstring): out of `environ` (default os.environ)
    into memory, overwritten in the kernel's view of the
    initial environment, and this process non-dumpable; as root, CAP_SYS_PTRACE out of the
    bounding set. Linux only; elsewhere only the first step. Never raises.

    Why overwrite the strings in place rather than re-exec: os.environ's changes never reach
    /proc/self/environ (the kernel shows the block the process started with); a re-exec
    would double the start-up and need the keys handed over another way; prctl's
    PR_SET_MM_ENV_* needs CAP_SYS_RESOURCE. The block is checked against /proc/self/environ
    before a byte is written."""
    environ = os.environ if environ is None else environ
    names = frozenset(names)
    withhold_keys(environ, names)
    if not os.path.exists("/proc/self/stat"):
        return
    with contextlib.suppress(Exception):  # best effort: each step is checked by the tests
        _scrub_initial_environment(names)
    with contextlib.suppress(Exception):
        _undumpable()


def _libc() -> Any:
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _scrub_initial_environment(names: frozenset[str]) -> None:
    """Overwrite with NULs every NAME=value string of `names` in the environment block the
    process started with (what /proc/self/environ shows). The libc `environ` array no longer
    points into them: os.environ's deletion unset them first."""
    import ctypes

    with open("/proc/self/stat", "rb") as handle:
        fields = handle.read().rsplit(b")", 1)[1].split()
    start, end = int(fields[47]), int(fields[48])  # env_start, env_end (fields 50 and 51)
    with open("/proc/self/environ", "rb") as handle:
        seen = handle.read()
    if end <= start or ctypes.string_at(start, end - start) != seen[:end - start]:
        return  # not the block we think it is: write nothing
    offset = 0
    for item in seen.split(b"\0"):
        name = item.split(b"=", 1)[0].decode("utf-8", "replace")
        if name in names and b"=" in item:
            ctypes.memset(start + offset, 0, len(item))
        offset += len(item) + 1


_PR_SET_DUMPABLE, _PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 4, 24, 47, 4
# CAP_SYS_PTRACE lets a process read another's memory and ptrace it; CAP_PERFMON (like
# CAP_SYS_ADMIN, which bubblewrap needs as root and so is kept) lets it read its environ.
_DROPPED_CAPS = (19, 38)


def _undumpable() -> None:
    """No process of the same user may read this one's environ or memory, or ptrace it
    (PR_SET_DUMPABLE 0: the files become root's, and only a capability gets past that); and
    no process this one starts gets CAP_SYS_PTRACE or CAP_PERFMON (dropped from the bounding
    set, which a root child's capabilities come from)."""
    libc = _libc()
    libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    with open("/proc/self/status") as handle:
        status = dict(line.split(":", 1) for line in handle if ":" in line)
    bounding = int(status.get("CapBnd", "0").strip(), 16)
    if any(bounding >> cap & 1 for cap in _DROPPED_CAPS):
        libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
        for cap in _DROPPED_CAPS:
            libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
