"""Print mode (-p) is no terminal program: it imports neither prompt_toolkit nor rich (the
session picker used to bring prompt_toolkit in)."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def test_print_mode_imports_no_terminal_ui(tmp_path):
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps(["hi there"]))
    (tmp_path / "work").mkdir()
    code = ("import sys\nfrom mulligan.cli import main\ntry:\n"
            f"    main(['-p', 'hi', '--model', 'scripted:{replies}'])\n"
            "except SystemExit:\n    pass\n"
            "print(sorted({m.split('.')[0] for m in sys.modules\n"
            "              if m.split('.')[0] in ('rich', 'prompt_toolkit')}))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path / "work",
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "MULLIGAN_HOME": str(tmp_path / "home")})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["hi there", "[]"]
