"""The core (messages, tools, loop, harness, session) imports no frontend, CLI or provider SDK.

Read with `ast`, so an import inside a function counts as much as one at the top of a file."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "mulligan"
CORE = ["messages.py", "tools", "loop.py", "harness.py", "session"]
FORBIDDEN = ["mulligan.frontends", "mulligan.cli", "mulligan.providers", "anthropic", "openai",
             "xllamacpp", "rich", "prompt_toolkit"]
ALLOWED = ["mulligan.providers.base"]


def core_files() -> list[Path]:
    files: list[Path] = []
    for name in CORE:
        target = PACKAGE / name
        files.extend(sorted(target.rglob("*.py")) if target.is_dir() else [target])
    return [f for f in files if f.exists()]


def module_of(file: Path) -> str:
    parts = list(file.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(source: str, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, module) for every import in `source`, the text of `module`, relative imports made
    absolute; for ``from package import name`` both the package and package.name are listed,
    so that ``from mulligan import frontends`` is seen for what it is."""
    here = module.split(".")
    if not is_package:
        here = here[:-1]  # a module's relative imports start from its package
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here[:len(here) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.append((node.lineno, base))
            found.extend((node.lineno, f"{base}.{alias.name}") for alias in node.names)
    return found


def imports_of(file: Path) -> list[tuple[int, str]]:
    return imported_names(file.read_text(encoding="utf-8"), module_of(file),
                          file.name == "__init__.py")


def is_forbidden(module: str) -> bool:
    if any(module == ok or module.startswith(ok + ".") for ok in ALLOWED):
        return False
    if module == "mulligan.providers":
        return False  # the package itself; what is taken from it is checked as package.name
    return any(module == bad or module.startswith(bad + ".") for bad in FORBIDDEN)


def test_the_core_files_exist_to_be_scanned() -> None:
    names = {f.relative_to(PACKAGE).as_posix() for f in core_files()}
    assert {"messages.py", "loop.py", "harness.py"} <= names


@pytest.mark.parametrize("file", core_files(), ids=lambda f: f.relative_to(PACKAGE).as_posix())
def test_a_core_module_imports_no_frontend_cli_provider_or_sdk(file: Path) -> None:
    bad = [f"line {line}: {module}" for line, module in imports_of(file)
           if is_forbidden(module)]
    assert bad == [], f"{file.relative_to(SRC)} imports {bad}"


def test_the_scanner_sees_relative_lazy_and_from_package_imports() -> None:
    source = ("from ..frontends import live\n"
              "from mulligan import cli\n"
              "def later():\n    import rich.console\n"
              "from mulligan.providers import base, registry\n"
              "from . import tree\n")
    flagged = sorted(m for _, m in imported_names(source, "mulligan.session.probe")
                     if is_forbidden(m))
    assert flagged == ["mulligan.cli", "mulligan.frontends", "mulligan.frontends.live",
                       "mulligan.providers.registry", "rich.console"]


def test_importing_the_core_loads_no_frontend_cli_provider_or_sdk() -> None:
    modules = ["mulligan.messages", "mulligan.tools", "mulligan.loop", "mulligan.harness",
               "mulligan.session"]
    code = (f"import sys\nfor m in {modules!r}: __import__(m)\n"
            f"bad = sorted(m for m in sys.modules if any(m == b or m.startswith(b + '.') "
            f"for b in {FORBIDDEN!r}) and m not in {ALLOWED!r} and m != 'mulligan.providers')\n"
            f"print(bad)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"
