"""What is known about models by name, in one place: the default models, context windows,
prices, default reply lengths.

In: a model name ("anthropic/claude-sonnet-4-6", "openai/gpt-5.5", ...). Out: plain numbers.
Never a guess presented as a fact: a window not known is `DEFAULT_WINDOW` (small, so that a
session compacts early rather than overflows), a price not known is None (no cost is shown).
A model object may carry its own `context_window` (the embedded model knows its n_ctx, a
config file may set one): `window_of` prefers it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DEFAULT_WINDOW", "HOSTED_DEFAULTS", "LOCAL_DEFAULT", "MAX_TOKENS", "PRICES",
           "PRICES_AS_OF", "WINDOWS", "cost_of", "price_of", "window_for", "window_of"]

LOCAL_DEFAULT = "local/smollm2-135m"
# Current, not-deprecated models as the installed SDKs list them (anthropic 2.14, openai 3.57).
HOSTED_DEFAULTS = {"anthropic": "anthropic/claude-sonnet-4-6", "openai": "openai/gpt-5.5",
                   "google": "google/gemini-2.5-pro"}
# A reply's default max_tokens, by provider (the local model's is in providers/local/model.py,
# with the rest of what it knows about its own context).
MAX_TOKENS = {"anthropic": 16_000}

# Tokens, by name prefix; the first prefix that matches wins.
WINDOWS = {"anthropic/": 200_000, "openai/gpt-5": 400_000, "openai/": 128_000,
           "google/": 1_000_000}
DEFAULT_WINDOW = 32_000  # tokens, for a model whose window is not known

PRICES_AS_OF = "2026-11"
# (input, output, cache read, cache write) in dollars per million tokens.
PRICES: dict[str, tuple[float, float, float, float]] = {
    "anthropic/claude-sonnet-4": (3.00, 15.00, 0.30, 3.75),
    "anthropic/claude-haiku-4": (1.00, 5.00, 0.10, 1.25),
    "anthropic/claude-opus-4-5": (5.00, 25.00, 0.50, 6.25),
}


def window_for(name: str) -> int:
    """The context window of the model called `name`, in tokens (see the module docstring)."""
    return next((size for prefix, size in WINDOWS.items() if name.startswith(prefix)),
                DEFAULT_WINDOW)


def window_of(model: Any) -> int:
    """A model object's context window: its own `context_window` if it says, else by name."""
    own = getattr(model, "context_window", None)
    if isinstance(own, int) and not isinstance(own, bool) and own > 0:
        return own
    return window_for(str(getattr(model, "name", "")))


def price_of(name: str) -> tuple[float, float, float, float] | None:
    """(input, output, cache read, cache write) dollars per million tokens, or None."""
    return next((p for prefix, p in PRICES.items() if name.startswith(prefix)), None)


def cost_of(name: str, tokens: tuple[int, int, int, int]) -> float | None:
    """Dollars for one call's (input, output, cache read, cache write) tokens at the price
    of the model called `name`; None when its price is not known."""
    price = price_of(name)
    if price is None:
        return None
    return sum(count * each for count, each in zip(tokens, price, strict=True)) / 1e6
