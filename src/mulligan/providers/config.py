"""The provider part of ``$MULLIGAN_HOME/config.toml``: the default model, API keys, base URLs
and a few per-provider settings.

    model = "anthropic/claude-sonnet-4-6"          # optional default
    [providers.anthropic]  api_key = "..."  base_url = "..."  max_tokens = 16000
                           thinking_budget = 4000  timeout = 600  max_retries = 4
                           idle_timeout = 120  deadline = 600   (seconds; see streaming.py)
                           context_window = 200000   (tokens; else providers/facts.py)
    [providers.openai]     api_key = "..."  base_url = "..."  max_tokens = 4096
                           timeout = 600  max_retries = 4
                           openai_api = "responses" | "chat"  (default: the Responses API
                           against OpenAI's endpoint, Chat Completions with a base URL)
    [providers.google]     api_key = "..."  base_url = "..."  max_tokens = 8192
                           thinking_budget = 4000  timeout = 600  max_retries = 4
    [local]                n_ctx = 4096  n_threads = 2  max_tokens = 512
    [checkpoints]          enabled = true  max_file_mb = 20  max_snapshot_mb = 1024
    [compaction]           auto = true  keep_tokens = 20000  reserve_tokens = 16000
                           model = "anthropic/claude-haiku-4-5"   (optional)
    [tools]                hide_env = ["GITHUB_TOKEN"]  bash_timeout = 120
                           bash_timeout_max = 1800
    [mcp_servers.NAME]     command, args, env, cwd | url, headers; timeout   (app/extensions)
    [[hooks.EVENT]]        command, matcher, timeout                         (app/extensions)

In: the home folder and the environment. Out: plain dicts and strings. Never writes anything,
never creates the folder, and never puts a key into an error message. A file that is not TOML,
or a setting that is unknown or of the wrong type, is a `ConfigError` naming the file.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, MutableMapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mulligan.providers.errors import ConfigError

CONFIG_NAME = "config.toml"
KEY_VARIABLES = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY",
                 "google": "GEMINI_API_KEY"}
# A provider's other key variables, read when its first is not set (Google's SDK reads both).
OTHER_KEY_VARIABLES = {"google": ("GOOGLE_API_KEY",)}
ALL_KEY_VARIABLES = (*KEY_VARIABLES.values(), *(v for vs in OTHER_KEY_VARIABLES.values()
                                                for v in vs))
URL_VARIABLES = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL",
                 "google": "GOOGLE_GEMINI_BASE_URL"}
# The file's top level: the default model, the providers' tables ([local] is checked by the
# local provider, when a local model is resolved) and the coding session's settings (read by
# mulligan.app; checked here, so a typo is named at once).
_TOP_LEVEL = ("model", "providers", "local", "tools", "checkpoints", "summarize_on_back",
              "permission_mode", "compaction", "store", "attempts", "mcp_servers", "hooks")
_SETTINGS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "anthropic": {"api_key": str, "base_url": str, "max_tokens": int, "thinking_budget": int,
                  "timeout": (int, float), "max_retries": int, "idle_timeout": (int, float),
                  "deadline": (int, float), "context_window": int},
    "openai": {"api_key": str, "base_url": str, "max_tokens": int, "timeout": (int, float),
               "max_retries": int, "idle_timeout": (int, float), "deadline": (int, float),
               "openai_api": str, "context_window": int},
    "google": {"api_key": str, "base_url": str, "max_tokens": int, "thinking_budget": int,
               "timeout": (int, float), "max_retries": int, "idle_timeout": (int, float),
               "deadline": (int, float), "context_window": int},
}


# The provider keys taken out of the environment at start-up (`withhold_keys`): held here,
# in memory only, so no process this one starts inherits them.
_WITHHELD: dict[str, str] = {}


def withhold_keys(environ: MutableMapping[str, str],
                  names: Iterable[str] = ALL_KEY_VARIABLES) -> None:
    """Move the variables `names` (the provider keys) out of `environ` into memory, where
    `environment()` and `api_key(..., os.environ)` still find them."""
    for name in names:
        value = environ.pop(name, None)
        if value is not None:
            _WITHHELD[name] = value


def environment() -> dict[str, str]:
    """The environment Mulligan started with: os.environ and the keys withheld from it."""
    return {**os.environ, **_WITHHELD}


def config_path(home: Path) -> Path:
    return home / CONFIG_NAME


def load_config(home: Path) -> dict[str, Any]:
    """The parsed config file, or {} when there is none."""
    path = config_path(home)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it: {exc.strerror}") from None
    import tomllib  # only for a file there is (not on the way to the first prompt without)

    try:
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    unknown = sorted(set(config) - set(_TOP_LEVEL))
    if unknown:
        raise ConfigError(f"{path}: {', '.join(unknown)}: unknown setting; known: "
                          f"{', '.join(_TOP_LEVEL)}")
    if "store" in config and not isinstance(config["store"], str):
        raise ConfigError(f"{path}: store must be a string: \"file\" or a postgresql:// URL")
    if "model" in config and not isinstance(config["model"], str):
        raise ConfigError(f"{path}: model must be a string like \"anthropic/claude-sonnet-4-6\"")
    providers = config.get("providers", {})
    if not isinstance(providers, dict):
        raise ConfigError(f"{path}: [providers] must be a table")
    for provider, table in providers.items():
        _check_table(path, provider, table)
    local = config.get("local", {})
    if not isinstance(local, dict):
        raise ConfigError(f"{path}: [local] must be a table")
    for key, allowed in (("summarize_on_back", ("ask", "always", "never")),
                         ("permission_mode", ("ask", "edits", "auto", "plan"))):
        if key in config and config[key] not in allowed:
            raise ConfigError(f"{path}: {key} = {_shown(config[key])}: one of "
                              f"{', '.join(allowed)}")
    _check_fields(path, "checkpoints", config.get("checkpoints", {}),
                  {"enabled": bool, "max_file_mb": (int, float), "max_snapshot_mb": (int, float)})
    _check_fields(path, "compaction", config.get("compaction", {}),
                  {"auto": bool, "keep_tokens": int, "reserve_tokens": int, "model": str})
    _check_fields(path, "attempts", config.get("attempts", {}), {"share": list})
    tools = config.get("tools", {})
    _check_fields(path, "tools", tools, {"hide_env": list, "bash_timeout": (int, float),
                                         "bash_timeout_max": (int, float),
                                         "fetch_allow": list})
    for key, value in tools.items():
        if key == "hide_env" and not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{path}: [tools] hide_env = {_shown(value)}: expected a list "
                              "of variable names")
        if key == "fetch_allow" and not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{path}: [tools] fetch_allow = {_shown(value)}: expected a "
                              "list of domains")
        if key not in ("hide_env", "fetch_allow") and value <= 0:
            raise ConfigError(f"{path}: [tools] {key} = {value!r}: expected a number of "
                              "seconds above 0")
    return config


def _check_fields(path: Path, name: str, table: object,
                  fields: dict[str, type | tuple[type, ...]],
                  hidden: frozenset[str] | set[str] = frozenset()) -> None:
    """A [name] table whose every setting is one of `fields`, of its type (true and false
    are not numbers here, whatever Python says). The value of a `hidden` setting (a key) is
    never shown in the error."""
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [{name}] must be a table")
    for key, value in table.items():
        if key not in fields:
            raise ConfigError(f"{path}: [{name}] {key}: unknown setting; known: "
                              f"{', '.join(fields)}")
        wanted = fields[key]
        if not isinstance(value, wanted) or (isinstance(value, bool) and wanted is not bool):
            shown = "(hidden)" if key in hidden else _shown(value)
            raise ConfigError(f"{path}: [{name}] {key} = {shown} has the wrong type")


def _shown(value: object) -> str:
    """A setting's value as an error may show it: a number or a truth value as it is; a
    string, list or table only by its kind -- a key pasted into the wrong setting is never
    echoed."""
    if isinstance(value, bool | int | float):
        return repr(value)
    kinds: dict[type, str] = {str: "a string", list: "a list", dict: "a table"}
    kind = kinds.get(type(value), "a value")
    return f"({kind})"


def _check_table(path: Path, provider: str, table: object) -> None:
    known = _SETTINGS.get(provider)
    if known is None:
        raise ConfigError(f"{path}: [providers.{provider}]: unknown provider; known: "
                          f"{', '.join(_SETTINGS)}")
    _check_fields(path, f"providers.{provider}", table, known, hidden={"api_key"})
    api = table.get("openai_api") if isinstance(table, dict) else None
    if api is not None and api not in ("responses", "chat"):
        raise ConfigError(f"{path}: [providers.openai] openai_api = {api!r}: \"responses\" "
                          "(OpenAI's Responses API) or \"chat\" (Chat Completions)")


def provider_settings(config: Mapping[str, Any], provider: str) -> dict[str, Any]:
    """The [providers.<provider>] table (possibly empty)."""
    return dict(config.get("providers", {}).get(provider, {}))


def api_key(provider: str, config: Mapping[str, Any], env: Mapping[str, str]) -> str | None:
    """The key for `provider`: its environment variable if set and non-empty, else the
    config file's api_key, else None."""
    for variable in (KEY_VARIABLES.get(provider), *OTHER_KEY_VARIABLES.get(provider, ())):
        from_env = env.get(variable, "").strip() if variable else ""
        if variable and not from_env and env is os.environ:  # withheld at start-up
            from_env = _WITHHELD.get(variable, "").strip()
        if from_env:
            return from_env
    configured = provider_settings(config, provider).get("api_key", "").strip()
    return configured or None


def base_url(provider: str, config: Mapping[str, Any], env: Mapping[str, str]) -> str | None:
    """The endpoint for `provider`: its environment variable (ANTHROPIC_BASE_URL,
    OPENAI_BASE_URL, which the SDKs also read) if set, else the config file's base_url, else
    None (the provider's own endpoint)."""
    variable = URL_VARIABLES.get(provider)
    from_env = env.get(variable, "").strip() if variable else ""
    if from_env:
        return from_env
    configured = provider_settings(config, provider).get("base_url", "").strip()
    return configured or None


def is_openai_itself(url: str | None) -> bool:
    """True when an openai/... model talks to OpenAI's own API: no base URL, or one on
    api.openai.com (as OPENAI_BASE_URL is sometimes set). Any other URL is an
    OpenAI-compatible server."""
    return url is None or urlsplit(url.strip()).hostname == "api.openai.com"
