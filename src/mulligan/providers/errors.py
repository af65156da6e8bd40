"""Named errors of provider selection, and `Failure`: one failed request, described.

Selection errors (`UnknownModel`, `MissingApiKey`, `ConfigError`) are raised by the registry
*before* any request is made; they are `ValueError`s whose message says what to do.
A failed request never raises out of a provider: each adapter turns the SDK's exception into a
`Failure` (readable text, whether it may be retried, how long the server asked us to wait) and
that into an assistant message. No message built here ever contains an API key.
"""

from __future__ import annotations

from dataclasses import dataclass


class UnknownModel(ValueError):
    """A model name that names no provider we know, or is not of the form provider/model-id."""


class MissingApiKey(ValueError):
    """A hosted provider was chosen but no API key is configured for it; names the variable."""

    def __init__(self, provider: str, variable: str, config_file: str) -> None:
        super().__init__(
            f"no API key for {provider}: set {variable} in the environment, or api_key under "
            f"[providers.{provider}] in {config_file}")
        self.provider = provider
        self.variable = variable


class ConfigError(ValueError):
    """The config file exists but cannot be used (not TOML, or a setting of the wrong type)."""


@dataclass(frozen=True)
class Failure:
    """What went wrong with one request attempt.

    `text` is the readable reason ("401 authentication_error: invalid x-api-key");
    `retryable` says whether the fault is transient (429, 5xx, overloaded, connection reset,
    timeout); `retry_after` is the wait in seconds the server asked for, if it asked.
    `stall` marks a server that went silent (the SDK's read timed out): it is retried only as
    often as a stall the driver saw itself (`streaming.STALL_RETRIES`), not `max_retries` times.
    """

    text: str
    retryable: bool
    retry_after: float | None = None
    stall: bool = False


MIN_SECRET = 8  # a shorter value would redact ordinary words; no real key is that short


def redact(text: str, secret: str | None) -> str:
    """`text` with every occurrence of `secret` replaced, so that an error message that echoes
    the request (some servers quote the key they were sent) cannot leak the key. A `secret`
    shorter than MIN_SECRET is left alone: "x" is no key, and "x-api-key" stays readable."""
    if not secret or len(secret) < MIN_SECRET:
        return text
    return text.replace(secret, "[redacted]")
