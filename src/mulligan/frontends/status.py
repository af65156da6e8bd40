"""The REPL's status line and /usage, as text: model, context used of the window, tokens in
and out, cost where the price is known, the permission mode, the session's name.

In: the Controller (read once, when the REPL comes to rest: the status line is cached, not
recomputed on every redraw). Out: strings. Draws nothing itself.
"""

from __future__ import annotations

from mulligan.app import Controller, model_label
from mulligan.app.spent import Spent
from mulligan.app.usage import PRICES_AS_OF, Usage
from mulligan.brief import cut

__all__ = ["status_line", "usage_lines"]


def _k(count: int) -> str:
    return f"{count / 1000:.1f}k" if count >= 1000 else str(count)


def status_line(c: Controller, width: int = 200) -> str:
    """One line of at most `width` characters: `model · mode · sandbox · context 12.3k/200k
    (6%) · in 40.0k out 2.1k · $0.15 (branch $0.05) · thinking high · name` -- the cost
    is the whole session's, every model call of every attempt (`Controller.spent`), with the
    branch's share beside it when they differ; tokens are the branch's. The model and the permission
    mode stay whatever the width; the rest is shortened first (tokens, then the context's
    figures, the name, thinking, the cost)."""
    used = c.usage()
    head = [model_label(c.model)]
    if c.permissions is not None:
        head.append(c.permissions.mode)
        if c.permissions.sandbox:
            head.append("sandbox")
    percent = f"{used.context / used.window:.0%}" if used.window else "?"
    context = f"context {_k(used.context)}/{_k(used.window)} ({percent})" if used.window \
        else "context ?"
    tokens = f"in {_k(used.tokens_in)} out {_k(used.tokens_out)}"
    spent = c.spent()  # the whole session's, every attempt; the branch's share beside it
    cost = None if spent.cost is None else f"${spent.cost:.2f}" + (
        f" (branch ${used.cost:.2f})" if used.cost is not None
        and f"{used.cost:.2f}" != f"{spent.cost:.2f}" else "")
    thinking = f"thinking {c.thinking}" if c.thinking is not None else None
    name = c.session_name() or None
    short = f"ctx {percent}"
    # From the fullest line to the barest, the first that fits.
    for rest in ([context, tokens, cost, thinking, name], [context, cost, thinking, name],
                 [short, cost, thinking, name], [short, cost, thinking], [short, cost],
                 [short], []):
        line = " · ".join([*head, *(part for part in rest if part)])
        if len(line) <= width:
            return line
    return cut(" · ".join(head[::-1]), width)  # the mode first: the model's name is cut


def usage_lines(used: Usage, spent: Spent | None = None) -> list[str]:
    """/usage: a line per model reply on this branch, then the totals, then (given `spent`)
    the whole session's: every model call of every attempt."""
    whole = [] if spent is None else [
        f"the whole session, every attempt: {spent.tokens_in} in, {spent.tokens_out} out, "
        f"cost " + (f"${spent.cost:.4f}" if spent.cost is not None else "unknown")
        + (f" (not counted: {spent.unpriced} call(s) of models with no known price)"
           if spent.unpriced and spent.cost is not None else "")]
    if not used.turns:
        return ["no model reply on this branch has reported its usage yet", *whole]
    lines = [f"{'turn':>4}  {'input':>8} {'cache read':>10} {'cache write':>11} {'output':>8}"
             f"  {'cost':>8}"]
    for turn in used.turns:
        cost = f"${turn.cost:.4f}" if turn.cost is not None else "?"
        lines.append(f"{turn.number:>4}  {turn.input:>8} {turn.cache_read:>10} "
                     f"{turn.cache_write:>11} {turn.output:>8}  {cost:>8}")
    total = f"${used.cost:.4f}" if used.cost is not None else \
        "unknown (no price for this model)"
    lines.append(f"this branch: {used.tokens_in} in, {used.tokens_out} out, cost {total} (prices "
                 f"as of {PRICES_AS_OF}); the next request carries about {used.context} of "
                 f"the window's {used.window} tokens")
    return [*lines, *whole]
