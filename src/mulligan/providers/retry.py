"""Backoff for transient provider faults: how long to wait before the next attempt, and when to
stop trying.

The SDKs' own retries are switched off (``max_retries=0``) because they cannot know what we
have already shown the user; the streaming driver retries only while nothing has streamed.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with jitter.

    Retry number k (0-based) waits ``min(cap, base * 2**k)`` scaled by a random factor in
    [0.5, 1.0] -- unless the server sent retry-after, which is honoured as given. A retry-after
    longer than `max_wait` is not waited for: the attempt fails with the server's reason.
    `max_retries` counts retries, so at most ``max_retries + 1`` requests are made.
    """

    max_retries: int = 4
    base: float = 1.0
    cap: float = 30.0
    max_wait: float = 120.0
    random: Callable[[], float] = field(default=random.random, compare=False)

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number `retry` (0 for the first retry)."""
        if retry_after is not None:
            return max(0.0, retry_after)
        return min(self.cap, self.base * 2.0 ** retry) * (0.5 + 0.5 * self.random())


def parse_retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """The wait a response asked for, in seconds: ``retry-after-ms`` (milliseconds, sent by
    OpenAI and Anthropic), else ``retry-after`` as seconds or as an HTTP date. None if absent
    or unreadable."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return float(millis) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    parsed = email.utils.parsedate_tz(value)
    if parsed is None:
        return None
    return max(0.0, email.utils.mktime_tz(parsed) - (time.time() if now is None else now))
