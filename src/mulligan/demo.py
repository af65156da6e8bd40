"""`make run`: Mulligan's main job on the embedded default model, offline, as a user sees it.

Copies ``examples/demo-project`` to a temporary folder, asks the agent a question there (it
may use real tools; its answer is streamed live), goes back to before that question with
``/edit`` -- one new line in the session file, nothing removed -- asks another, and prints
the session tree and the path of the session file. Everything goes through the same
`Controller` the REPL drives; this module only stages the inputs and prints what happens.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from rich.console import Console

DEMO_MODEL = "local/smollm2-135m"
FIRST = "What does greet.py print?"
SECOND = "What is the secret word in notes.txt?"


def demo_project() -> Path:
    """The example folder shipped in the repository (next to src/)."""
    return Path(__file__).resolve().parents[2] / "examples" / "demo-project"


def main(argv: list[str] | None = None) -> int:
    """Run the demo; 0 when the second run ended well, 1 otherwise (the output says why)."""
    parser = argparse.ArgumentParser(prog="python -m mulligan.demo", description=__doc__)
    parser.add_argument("--model", default=DEMO_MODEL, help=f"model name (default {DEMO_MODEL})")
    args = parser.parse_args(argv)

    from mulligan.app import Controller, resolve
    from mulligan.app.sessions.catalog import new_session_path
    from mulligan.app.settings import Settings
    from mulligan.frontends.live import LiveRenderer
    from mulligan.frontends.tree import render_tree
    from mulligan.testing import shape
    from mulligan.tools import coding_tools

    console = Console(highlight=False)
    scratch = Path(tempfile.mkdtemp(prefix="mulligan-demo-"))
    work, home = scratch / "demo-project", scratch / "home"
    shutil.copytree(demo_project(), work)

    def say(text: str, style: str = "dim") -> None:
        console.print(text, style=style, markup=False, highlight=False, soft_wrap=True)

    def ask(controller: Controller, text: str) -> bool:
        say(f"› {text}", "bold green")
        renderer = LiveRenderer(console)
        for event in controller.run_prompt(text):
            renderer.render(event)
        return renderer.finish()

    say(f"mulligan demo: a copy of examples/demo-project in {work}")
    say(f"model {args.model} (embedded, offline); sessions under {home}")
    model = resolve(args.model, base_url=None, home=home, err=sys.stderr)
    controller = Controller(model, coding_tools(work), Settings(cwd=work, home=home, max_turns=6),
                            new_session_path(home, work))
    try:
        ask(controller, FIRST)
        say("\nTake that question back: go to just before it and ask something else. The model "
            "will be sent only the new branch; the first attempt stays in the file.")
        say("› /edit", "bold green")
        controller.edit()
        say(f"  went back: the session's tip is now {controller.tip()}, a branch line")
        second_ok = ask(controller, SECOND)
        sent = controller.harness.messages
        say(f"\nthe transcript the model is sent now: {shape(sent)} ({len(sent)} messages); "
            f"the file holds {len(controller.entries())} lines, both attempts")
        say("\n› /tree all", "bold green")
        entries, tip = controller.tree()
        for line in render_tree(entries, tip, fold=False, width=console.width):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        session_file = controller.session_file
    finally:
        controller.close()
    say(f"\nsession file: {session_file}", "bold")
    say(f"look again with: .venv/bin/mulligan sessions tree {session_file}")
    say(f"(the folder {scratch} is left for you to look at; delete it when done)")
    return 0 if second_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
