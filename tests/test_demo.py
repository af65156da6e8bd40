"""`make run`: the demo runs the real embedded model end to end and leaves a branched session."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("xllamacpp")


@pytest.mark.slow
def test_make_run_asks_goes_back_asks_again_and_leaves_a_branched_session_file() -> None:
    done = subprocess.run([sys.executable, "-m", "mulligan.demo"], capture_output=True,
                          text=True, timeout=300, stdin=subprocess.DEVNULL)
    out = done.stdout
    scratch = re.search(r"a copy of examples/demo-project in (\S+)", out)
    assert scratch, out
    try:
        assert done.returncode == 0, out + done.stderr
        assert "loading model SmolLM2" in done.stderr
        assert out.index("› What does greet.py print?") < out.index("› /edit") \
            < out.index("› What is the secret word in notes.txt?") < out.index("› /tree all")
        named = re.search(r"session file: (\S+)", out)
        assert named, out
        session_file = Path(named.group(1))
        entries = [json.loads(line) for line in session_file.read_text().splitlines()]
        branches = [e for e in entries if e["type"] == "branch"]
        users = [e["message"]["content"] for e in entries
                 if e["type"] == "message" and e["message"]["role"] == "user"]
        assert entries[0]["type"] == "session_info"
        assert [b["parent_id"] for b in branches] == ["e1"]
        assert users == ["What does greet.py print?", "What is the secret word in notes.txt?"]
        assert "↩ back to e1" in out and "◀ tip" in out
    finally:
        shutil.rmtree(Path(scratch.group(1)).parent, ignore_errors=True)
