"""Backoff arithmetic and retry-after parsing, and the limits of retrying."""

from __future__ import annotations

import email.utils
from collections.abc import Iterator

import pytest

from fakes import anthropic_server as claude
from fakes.http_server import ScriptedServer
from mulligan.providers.anthropic import AnthropicModel
from mulligan.providers.retry import Backoff, parse_retry_after
from mulligan.testing import user


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    limited = claude.error(429, "rate_limit_error", "slow down", {"retry-after": "3600"})
    with ScriptedServer([limited, claude.text_reply("ok")]) as running:
        yield running


def test_the_wait_doubles_from_the_base_up_to_the_cap() -> None:
    backoff = Backoff(base=1.0, cap=5.0, random=lambda: 1.0)
    assert [backoff.delay(k) for k in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_jitter_takes_up_to_half_of_the_wait_away() -> None:
    assert Backoff(base=2.0, random=lambda: 0.0).delay(1) == 2.0
    assert Backoff(base=2.0, random=lambda: 0.5).delay(1) == 3.0


def test_a_retry_after_is_waited_as_given() -> None:
    assert Backoff(base=1.0).delay(3, retry_after=2.5) == 2.5


def test_retry_after_is_read_as_seconds_milliseconds_or_a_date() -> None:
    assert parse_retry_after({"retry-after": "7"}) == 7.0
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    date = email.utils.formatdate(1_000_030, usegmt=True)
    assert parse_retry_after({"retry-after": date}, now=1_000_000) == 30.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def test_a_retry_after_longer_than_max_wait_is_not_waited_for(server: ScriptedServer) -> None:
    sleeps: list[float] = []
    model = AnthropicModel("claude-sonnet-4-6", api_key="k", base_url=server.url, timeout=5.0,
                           backoff=Backoff(max_wait=60.0), sleep=sleeps.append)
    message = model.complete("sys", [user("Hi")], [])
    assert sleeps == [] and len(server.requests) == 1
    assert message["error_message"] == (
        "anthropic: 429 rate_limit_error: slow down (the server asked to wait 3600 s, longer "
        "than 60 s; not retried)")


def test_with_retries_off_a_transient_fault_says_so(server: ScriptedServer) -> None:
    model = AnthropicModel("claude-sonnet-4-6", api_key="k", base_url=server.url, timeout=5.0,
                           max_retries=0, sleep=lambda _: None)
    message = model.complete("sys", [user("Hi")], [])
    assert message["error_message"].endswith("(retries are off)")
    assert len(server.requests) == 1
