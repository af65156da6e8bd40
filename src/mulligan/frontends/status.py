"""The REPL's status line and /usage, as text: model, context used of the window, tokens in
and out, cost where the price is known, the permission mode, the session's name.

In: the Controller (read once, when the REPL comes to rest: the status line is cached, not
recomputed on every redraw). Out: strings. Draws nothing itself.
"""

from __future__ import annotations

from mulligan.app import Controller, model_label
from mulligan.app.usage import PRICES_AS_OF, Usage

__all__ = ["status_line", "usage_lines"]


def _k(count: int) -> str:
    return f"{count / 1000:.1f}k" if count >= 1000 else str(count)


def status_line(c: Controller) -> str:
    """One line: `model · context 12.3k/200k (6%) · in 40.0k out 2.1k · $0.15 · ask · name`."""
    used = c.usage()
    parts = [model_label(c.model),
             f"context {_k(used.context)}/{_k(used.window)} "
             f"({used.context / used.window:.0%})" if used.window else "context ?",
             f"in {_k(used.tokens_in)} out {_k(used.tokens_out)}"]
    if used.cost is not None:
        parts.append(f"${used.cost:.2f}")
    if c.thinking is not None:
        parts.append(f"thinking {c.thinking}")
    if c.permissions is not None:
        parts.append(c.permissions.mode)
    name = c.session_name()
    if name:
        parts.append(name)
    return " · ".join(parts)


def usage_lines(used: Usage) -> list[str]:
    """/usage: a line per model reply on this branch, then the totals."""
    if not used.turns:
        return ["no model reply on this branch has reported its usage yet"]
    lines = [f"{'turn':>4}  {'input':>8} {'cache read':>10} {'cache write':>11} {'output':>8}"
             f"  {'cost':>8}"]
    for turn in used.turns:
        cost = f"${turn.cost:.4f}" if turn.cost is not None else "?"
        lines.append(f"{turn.number:>4}  {turn.input:>8} {turn.cache_read:>10} "
                     f"{turn.cache_write:>11} {turn.output:>8}  {cost:>8}")
    total = f"${used.cost:.4f}" if used.cost is not None else \
        "unknown (no price for this model)"
    lines.append(f"in all: {used.tokens_in} in, {used.tokens_out} out, cost {total} (prices "
                 f"as of {PRICES_AS_OF}); the next request carries about {used.context} of "
                 f"the window's {used.window} tokens")
    return lines
