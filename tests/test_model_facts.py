"""What is known about models lives in one module (`mulligan.providers.facts`), and everything
that needs a window or a price reads it there: compaction and summaries, usage, the loop's
clip of a tool result, the config's `context_window`."""

from __future__ import annotations

from pathlib import Path

from mulligan.app.rewind.summaries import context_window
from mulligan.app.usage import usage_of
from mulligan.providers import facts
from mulligan.providers.registry import HOSTED_DEFAULTS, resolve_model
from mulligan.testing import ScriptedModel, say


class Named(ScriptedModel):
    name = "anthropic/claude-sonnet-4-6"


def test_a_window_is_the_models_own_else_known_by_name_else_the_small_default() -> None:
    own = Named([])
    own.context_window = 5_000  # type: ignore[attr-defined]
    assert facts.window_of(own) == 5_000 == context_window(own)
    assert facts.window_of(Named([])) == 200_000
    assert facts.window_of(ScriptedModel([])) == facts.DEFAULT_WINDOW


def test_usage_prices_come_from_the_facts_table() -> None:
    reply = say("ok")
    reply["usage"] = {"input": 1_000_000, "output": 0}
    used = usage_of([reply], Named([]))
    assert used.cost == facts.price_of("anthropic/claude-sonnet-4-6")[0]  # type: ignore[index]
    assert used.window == 200_000


def test_a_configured_context_window_reaches_the_model_deferred_or_not(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[providers.anthropic]\ncontext_window = 50000\n")
    env = {"ANTHROPIC_API_KEY": "sk-ant-test"}
    for defer in (False, True):
        model = resolve_model("anthropic/claude-sonnet-4-6", env=env, home=tmp_path,
                              defer=defer, base_url="http://127.0.0.1:9")
        assert facts.window_of(model) == 50_000
    plain = resolve_model("anthropic/claude-sonnet-4-6", env=env, home=tmp_path / "none",
                          base_url="http://127.0.0.1:9")
    assert facts.window_of(plain) == 200_000
    assert HOSTED_DEFAULTS is facts.HOSTED_DEFAULTS
