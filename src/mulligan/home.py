"""Where Mulligan keeps its files: `MULLIGAN_HOME`, default ``~/.mulligan``.

Nothing here creates a folder; callers create what they write into, when they write.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def mulligan_home(env: Mapping[str, str] | None = None) -> Path:
    """The Mulligan home folder: $MULLIGAN_HOME if set and non-empty, else ~/.mulligan."""
    env = os.environ if env is None else env
    configured = env.get("MULLIGAN_HOME", "").strip()
    return Path(configured).expanduser() if configured else Path.home() / ".mulligan"
