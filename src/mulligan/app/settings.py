"""What a session runs by, as one frozen value: config.toml and the command line's flags,
read once (`Settings.build`) in one place.

In: config.toml's table (`providers.config.load_config`) and the flags that override it.
Out: a `Settings`, or ValueError naming the setting or flag that makes no sense (the modes
turn it into a usage error). Building reads nothing but its arguments and changes nothing:
no folder is created, no model loaded, no collector frozen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from mulligan.app.rewind.compaction import Settings as CompactionSettings

__all__ = ["CheckpointSettings", "Settings", "SummarizeOnBack"]

SummarizeOnBack = Literal["ask", "always", "never"]


@dataclass(frozen=True)
class CheckpointSettings:
    """`[checkpoints]`: whether the working folder is snapshotted around file-changing tool
    calls, and the size caps of one file and one snapshot (bytes)."""

    enabled: bool = True
    max_file: int = 20 << 20
    max_snapshot: int = 1024 << 20

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> CheckpointSettings:
        table = config.get("checkpoints", {})
        return cls(bool(table.get("enabled", True)),
                   int(table.get("max_file_mb", 20) * (1 << 20)),
                   int(table.get("max_snapshot_mb", 1024) * (1 << 20)))


@dataclass(frozen=True)
class Settings:
    """Everything a session runs by besides the objects it is handed (model, tools, store).

    `cwd` the working folder (absolute), `home` MULLIGAN_HOME; `model` / `base_url` the
    --model / --base-url asked for (None: config.toml's default); `compaction_model` the
    model named in `[compaction]` for summaries; `permission_mode` ask, edits or auto;
    `summarize_on_back` whether going back summarises the attempt left; `sandbox` and
    `sandbox_network` bash's sandbox; `bash_timeout` / `bash_timeout_max` seconds."""

    cwd: Path
    home: Path
    model: str | None = None
    base_url: str | None = None
    max_turns: int | None = None
    system_prompt_file: Path | None = None
    permission_mode: str = "auto"
    summarize_on_back: SummarizeOnBack = "ask"
    compaction: CompactionSettings = field(default_factory=CompactionSettings)
    compaction_model: str | None = None
    checkpoints: CheckpointSettings = field(default_factory=CheckpointSettings)
    sandbox: bool = False
    sandbox_network: bool = False
    bash_timeout: float = 120.0
    bash_timeout_max: float = 1800.0

    def __post_init__(self) -> None:
        if self.summarize_on_back not in ("ask", "always", "never"):
            raise ValueError(f"summarize_on_back = {self.summarize_on_back!r}: ask, always "
                             "or never")
        if self.sandbox_network and not self.sandbox:
            raise ValueError("--sandbox-network goes with --sandbox")

    @classmethod
    def build(cls, config: Mapping[str, Any], *, cwd: Path, home: Path,
              interactive: bool = False, model: str | None = None,
              base_url: str | None = None, max_turns: int | None = None,
              system_prompt_file: str | None = None, permission_mode: str | None = None,
              sandbox: bool = False, sandbox_network: bool = False) -> Settings:
        """The settings of one run: the flags given (None: not given) over config.toml.
        `interactive`: someone is there to be asked; the default permission mode is then
        config.toml's `permission_mode` (default "ask"), else "auto"."""
        tools = config.get("tools", {})
        mode = permission_mode or (config.get("permission_mode", "ask") if interactive
                                   else "auto")
        return cls(
            cwd=Path(cwd).resolve(), home=Path(home), model=model, base_url=base_url,
            max_turns=max_turns,
            system_prompt_file=Path(system_prompt_file).expanduser() if system_prompt_file
            else None,
            permission_mode=str(mode),
            summarize_on_back=cast(SummarizeOnBack, config.get("summarize_on_back", "ask")),
            compaction=CompactionSettings.of(config),
            compaction_model=config.get("compaction", {}).get("model") or None,
            checkpoints=CheckpointSettings.of(config), sandbox=sandbox,
            sandbox_network=sandbox_network,
            bash_timeout=float(tools.get("bash_timeout", 120.0)),
            bash_timeout_max=float(tools.get("bash_timeout_max", 1800.0)))
