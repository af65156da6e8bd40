"""Model names, keys and config.toml: `resolve_model` and `default_model_name`."""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from fakes import anthropic_server as claude
from fakes import openai_server as gpt
from fakes.http_server import ScriptedServer
from mulligan.providers.anthropic import AnthropicModel
from mulligan.providers.config import is_openai_itself
from mulligan.providers.errors import ConfigError, MissingApiKey, UnknownModel
from mulligan.providers.openai.chat import OpenAIChatModel
from mulligan.providers.registry import Deferred, default_model_name, resolve_model
from mulligan.testing import user


@pytest.fixture
def claude_server() -> Iterator[ScriptedServer]:
    with ScriptedServer([claude.text_reply("ok")]) as server:
        yield server


@pytest.fixture
def openai_server() -> Iterator[ScriptedServer]:
    with ScriptedServer([gpt.text_reply("ok")], base_path="/v1") as server:
        yield server


def write_config(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text)


def sent_key(server: ScriptedServer) -> str:
    headers = server.requests[-1].headers
    return headers.get("x-api-key") or headers["authorization"].removeprefix("Bearer ")


def test_an_anthropic_name_with_a_key_in_the_environment_gives_an_anthropic_model(
        tmp_path: Path) -> None:
    model = resolve_model("anthropic/claude-sonnet-4-6", env={"ANTHROPIC_API_KEY": "sk-ant-1"},
                          home=tmp_path)
    assert isinstance(model, AnthropicModel)
    assert model.name == "anthropic/claude-sonnet-4-6" and model.model_id == "claude-sonnet-4-6"


def test_a_missing_key_names_the_variable_before_any_request(
        tmp_path: Path, claude_server: ScriptedServer) -> None:
    with pytest.raises(MissingApiKey, match="ANTHROPIC_API_KEY") as raised:
        resolve_model("anthropic/claude-sonnet-4-6", base_url=claude_server.url, env={},
                      home=tmp_path)
    assert str(tmp_path / "config.toml") in str(raised.value)
    assert claude_server.requests == []


def test_openai_without_a_base_url_or_a_key_is_missing_openai_api_key(tmp_path: Path) -> None:
    with pytest.raises(MissingApiKey, match="OPENAI_API_KEY"):
        resolve_model("openai/gpt-5.5", env={}, home=tmp_path)


def test_a_key_and_base_url_in_config_toml_are_used(
        tmp_path: Path, claude_server: ScriptedServer) -> None:
    write_config(tmp_path, f'[providers.anthropic]\napi_key = "sk-ant-from-file"\n'
                           f'base_url = "{claude_server.url}"\nmax_tokens = 2000\n')
    model = resolve_model("anthropic/claude-sonnet-4-6", env={}, home=tmp_path)
    assert model.complete("sys", [user("Hi")], [])["stop_reason"] == "stop"
    assert sent_key(claude_server) == "sk-ant-from-file"
    assert claude_server.requests[0].body["max_tokens"] == 2000


def test_the_environment_key_wins_over_the_config_file(
        tmp_path: Path, claude_server: ScriptedServer) -> None:
    write_config(tmp_path, '[providers.anthropic]\napi_key = "sk-ant-from-file"\n')
    model = resolve_model("anthropic/claude-sonnet-4-6", base_url=claude_server.url,
                          env={"ANTHROPIC_API_KEY": "sk-ant-from-env"}, home=tmp_path)
    model.complete("sys", [user("Hi")], [])
    assert sent_key(claude_server) == "sk-ant-from-env"


def test_an_openai_compatible_server_on_a_base_url_needs_no_key(
        tmp_path: Path, openai_server: ScriptedServer) -> None:
    model = resolve_model("openai/qwen2.5-coder", base_url=openai_server.url, env={},
                          home=tmp_path)
    assert isinstance(model, OpenAIChatModel) and model.name == "openai/qwen2.5-coder"
    assert model.complete("sys", [user("Hi")], [])["stop_reason"] == "stop"
    assert sent_key(openai_server) == "not-needed"
    assert openai_server.requests[0].body["model"] == "qwen2.5-coder"


def test_openais_own_url_as_the_base_url_still_needs_openai_api_key(tmp_path: Path) -> None:
    # Some set OPENAI_BASE_URL to OpenAI's own endpoint: that is no keyless local server.
    with pytest.raises(MissingApiKey, match="OPENAI_API_KEY"):
        resolve_model("openai/gpt-5.5", env={"OPENAI_BASE_URL": "https://api.openai.com/v1"},
                      home=tmp_path)


def test_only_openais_own_host_counts_as_openai_itself() -> None:
    assert is_openai_itself(None) and is_openai_itself("https://api.openai.com/v1")
    assert not is_openai_itself("http://localhost:11434/v1")
    assert not is_openai_itself("https://openrouter.ai/api/v1")


def test_the_base_url_argument_wins_over_the_config_file(
        tmp_path: Path, openai_server: ScriptedServer) -> None:
    write_config(tmp_path, '[providers.openai]\nbase_url = "http://127.0.0.1:9/v1"\n')
    model = resolve_model("openai/qwen2.5-coder", base_url=openai_server.url, env={},
                          home=tmp_path)
    assert model.complete("sys", [user("Hi")], [])["stop_reason"] == "stop"


def test_a_key_is_never_part_of_a_models_repr(tmp_path: Path) -> None:
    model = resolve_model("openai/gpt-5.5", env={"OPENAI_API_KEY": "sk-secret-123"},
                          home=tmp_path)
    assert "sk-secret-123" not in repr(model) and "sk-secret-123" not in str(vars(model).keys())


@pytest.mark.parametrize("name", ["claude-sonnet-4-6", "anthropic/", "/gpt", "gemini/pro",
                                  "local:"])
def test_a_name_that_places_no_model_is_unknown_model(tmp_path: Path, name: str) -> None:
    with pytest.raises(UnknownModel):
        resolve_model(name, env={"ANTHROPIC_API_KEY": "k"}, home=tmp_path)


def test_an_ollama_name_says_to_use_openai_with_a_base_url(tmp_path: Path) -> None:
    with pytest.raises(UnknownModel, match="openai/qwen2.5-coder with --base-url"):
        resolve_model("ollama/qwen2.5-coder", env={}, home=tmp_path)


def test_the_default_is_the_configured_model(tmp_path: Path) -> None:
    write_config(tmp_path, 'model = "openai/qwen2.5-coder"\n')
    assert default_model_name(env={}, home=tmp_path) == ("openai/qwen2.5-coder", False)


def test_without_a_configured_model_the_default_follows_the_keys_there_are(
        tmp_path: Path) -> None:
    assert default_model_name(env={"OPENAI_API_KEY": "k"}, home=tmp_path) == (
        "openai/gpt-5.5", False)
    assert default_model_name(env={"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k"},
                              home=tmp_path) == ("anthropic/claude-sonnet-4-6", False)


def test_with_nothing_configured_the_default_is_the_local_model_as_a_fallback(
        tmp_path: Path) -> None:
    assert default_model_name(env={"ANTHROPIC_API_KEY": "  "}, home=tmp_path) == (
        "local/smollm2-135m", True)


def test_no_name_resolves_the_configured_default(
        tmp_path: Path, openai_server: ScriptedServer) -> None:
    write_config(tmp_path, f'model = "openai/qwen2.5-coder"\n'
                           f'[providers.openai]\nbase_url = "{openai_server.url}"\n')
    model = resolve_model(None, env={}, home=tmp_path)
    assert model.name == "openai/qwen2.5-coder"  # type: ignore[attr-defined]


def test_the_home_folder_comes_from_mulligan_home(tmp_path: Path) -> None:
    write_config(tmp_path / "elsewhere", 'model = "anthropic/claude-opus-5"\n')
    env = {"MULLIGAN_HOME": str(tmp_path / "elsewhere")}
    assert default_model_name(env=env) == ("anthropic/claude-opus-5", False)


@pytest.mark.skipif(importlib.util.find_spec("xllamacpp") is None,
                    reason="the local extras (xllamacpp) are not installed")
def test_a_local_path_is_handed_to_the_local_provider_with_the_local_settings(
        tmp_path: Path) -> None:
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    write_config(tmp_path, "[local]\nn_ctx = 1024\n")
    model = resolve_model(f"local:{gguf}", env={}, home=tmp_path)
    assert model.name == f"local:{gguf}"  # type: ignore[attr-defined]
    assert model.n_ctx == 1024  # type: ignore[attr-defined]
    assert model.compact_prompt is True  # type: ignore[attr-defined]


def test_a_local_path_that_is_not_there_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope.gguf"
    with pytest.raises((ValueError, RuntimeError)) as raised:
        resolve_model(f"local:{missing}", env={}, home=tmp_path)
    if importlib.util.find_spec("xllamacpp") is not None:
        assert str(missing) in str(raised.value)


def test_a_base_url_with_a_local_model_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--base-url"):
        resolve_model("local/smollm2-135m", base_url="http://localhost:8080/v1", env={},
                      home=tmp_path)


def test_a_config_file_that_is_not_toml_is_named(tmp_path: Path) -> None:
    write_config(tmp_path, "model = \n")
    with pytest.raises(ConfigError, match="config.toml: not valid TOML"):
        default_model_name(env={}, home=tmp_path)


def test_an_unknown_provider_setting_is_refused(tmp_path: Path) -> None:
    write_config(tmp_path, '[providers.openai]\napi_kee = "sk-x"\n')
    with pytest.raises(ConfigError, match="api_kee: unknown setting"):
        resolve_model("openai/gpt-5.5", env={}, home=tmp_path)


def test_an_unknown_top_level_setting_is_refused_with_the_files_path(tmp_path: Path) -> None:
    # A misspelt default model must not silently fall back to another one.
    write_config(tmp_path, 'modle = "openai/qwen2.5-coder"\n')
    with pytest.raises(ConfigError, match="modle: unknown setting") as raised:
        default_model_name(env={"ANTHROPIC_API_KEY": "k"}, home=tmp_path)
    assert str(tmp_path / "config.toml") in str(raised.value)


def test_a_bad_local_setting_is_refused_with_the_files_path(tmp_path: Path) -> None:
    write_config(tmp_path, "[local]\nn_gpu = 1\n")
    with pytest.raises(ConfigError, match="n_gpu") as raised:
        resolve_model("local/smollm2-135m", env={}, home=tmp_path)
    assert str(tmp_path / "config.toml") in str(raised.value)


def test_a_key_of_the_wrong_type_is_reported_without_showing_it(tmp_path: Path) -> None:
    write_config(tmp_path, "[providers.anthropic]\napi_key = 12345678\n")
    with pytest.raises(ConfigError) as raised:
        resolve_model("anthropic/claude-sonnet-4-6", env={}, home=tmp_path)
    assert "12345678" not in str(raised.value) and "api_key" in str(raised.value)


def test_openai_base_url_in_the_environment_is_a_server_that_needs_no_key(
        tmp_path: Path, openai_server: ScriptedServer) -> None:
    model = resolve_model("openai/qwen2.5-coder", env={"OPENAI_BASE_URL": openai_server.url},
                          home=tmp_path)
    assert model.complete("sys", [user("Hi")], [])["stop_reason"] == "stop"
    assert sent_key(openai_server) == "not-needed"


def test_a_deferred_hosted_model_is_named_at_once_and_answers_over_the_real_protocol(
        tmp_path: Path, claude_server: ScriptedServer) -> None:
    model = resolve_model("anthropic/claude-sonnet-4-6", base_url=claude_server.url,
                          env={"ANTHROPIC_API_KEY": "sk-ant-1"}, home=tmp_path, defer=True)
    assert isinstance(model, Deferred) and model.name == "anthropic/claude-sonnet-4-6"
    deltas = list(model.stream("system", [user("hi")], []))
    assert deltas[-1]["message"]["content"] == [{"type": "text", "text": "ok"}]
    assert isinstance(model.ready(), AnthropicModel)


def test_a_deferred_model_still_refuses_a_missing_key_before_returning(tmp_path: Path) -> None:
    with pytest.raises(MissingApiKey):
        resolve_model("anthropic/claude-sonnet-4-6", env={}, home=tmp_path, defer=True)


def test_a_deferred_model_waits_for_its_build_and_a_failed_build_raises_from_the_call() -> None:
    gate = threading.Event()

    def build():
        gate.wait(10)
        raise ImportError("no SDK here")

    model = Deferred("anthropic/x", build)
    assert model.name == "anthropic/x"  # returned while the build is still waiting
    gate.set()
    with pytest.raises(ImportError, match="no SDK here"):
        model.complete("system", [user("hi")], [])
