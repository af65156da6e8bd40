"""config.toml's newer tables are checked like the providers': an unknown setting or a value
of the wrong type is a ConfigError naming the file and the setting."""

from __future__ import annotations

import pytest

from mulligan.providers.config import load_config
from mulligan.providers.errors import ConfigError


@pytest.mark.parametrize("text, named", [
    ("[compaction]\nkeep_tokens = true\n", "[compaction] keep_tokens"),
    ("[compaction]\nevery = 3\n", "[compaction] every: unknown setting"),
    ("[checkpoints]\nenabled = \"yes\"\n", "[checkpoints] enabled"),
    ("[tools]\nhide_env = \"TOKEN\"\n", "[tools] hide_env"),
    ("[tools]\nbash_timeout_max = 0\n", "[tools] bash_timeout_max"),
    ("summarize_on_back = \"sometimes\"\n", "summarize_on_back"),
    ("permission_mode = \"yolo\"\n", "permission_mode"),
])
def test_a_bad_setting_is_named_with_the_file(tmp_path, text, named):
    (tmp_path / "config.toml").write_text(text)
    with pytest.raises(ConfigError, match=named.replace("[", r"\[").replace("]", r"\]")) as err:
        load_config(tmp_path)
    assert str(tmp_path / "config.toml") in str(err.value)


def test_good_settings_load(tmp_path):
    (tmp_path / "config.toml").write_text(
        'permission_mode = "edits"\nsummarize_on_back = "never"\n[compaction]\nauto = false\n'
        'keep_tokens = 1000\n[checkpoints]\nmax_file_mb = 5\n[tools]\nhide_env = ["X"]\n')
    config = load_config(tmp_path)
    assert config["compaction"]["keep_tokens"] == 1000 and config["tools"]["hide_env"] == ["X"]
