"""The layers, in order, and the core's freedom from frontends and SDKs.

messages/wire/home/brief < tools, session, providers, prompts, testing (siblings never import
each other) < loop < harness < app < frontends < cli/modes/demo. A module imports only from
layers below its own, or from its own package. The core (messages, wire, tools, loop,
harness, session) imports no frontend, CLI or provider SDK at all.

Read with `ast`, so an import inside a function counts as much as one at the top of a file."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "mulligan"
CORE = ["messages.py", "wire.py", "tools", "boundary.py", "loop.py", "harness.py", "session"]
FORBIDDEN = ["mulligan.frontends", "mulligan.cli", "mulligan.providers", "anthropic", "openai",
             "xllamacpp", "rich", "prompt_toolkit"]
ALLOWED: list[str] = []
# The order of the layers; a name is a module or package directly under mulligan/.
LAYERS: list[set[str]] = [
    {"messages", "wire", "home", "brief"},
    {"tools", "session", "providers", "prompts", "testing", "boundary"},
    {"loop"},
    {"harness"},
    {"app"},
    {"frontends"},
    {"cli", "modes", "demo", "__main__"},
]
# Layers whose members may import each other (the lowest: plain types; the top: entry points).
OPEN_LAYERS = {0, len(LAYERS) - 1}
# Inside a package, the order of its modules and subpackages, the same way: a name imports only
# from sub-layers below its own or from inside itself (the package's __init__ is its facade
# and may import anything in it).
SUBLAYERS: dict[str, list[set[str]]] = {
    "app": [
        {"models", "permissions", "secrets", "extensions", "importers", "workspace",
         "sessions"},
        {"rewind"},
        {"usage", "spent", "settings", "exports"},
        {"session_host"},
        {"controller"},
        {"attempts"},
    ],
}


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
                       "mulligan.providers.base", "mulligan.providers.registry", "rich.console"]


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


def layer_of(module: str) -> tuple[int, str] | None:
    """(layer number, top-level name) of a mulligan module; None for the package itself and
    for anything outside it."""
    parts = module.split(".")
    if parts[0] != "mulligan" or len(parts) < 2:
        return None
    top = parts[1]
    if top in ("__version__", "__all__"):  # names from the package itself, not modules
        return None
    for number, members in enumerate(LAYERS):
        if top in members:
            return number, top
    raise AssertionError(f"{module}: mulligan.{top} is in no layer of tests/test_layering.py")


def sublayer_of(module: str) -> tuple[int, str] | None:
    """(sub-layer number, name) of a module inside a package that has sub-layers; None for
    the package itself, its facade, and packages without them."""
    parts = module.split(".")
    if len(parts) < 3 or parts[1] not in SUBLAYERS or parts[2] == "__init__":
        return None
    inside = PACKAGE / parts[1]
    if not ((inside / f"{parts[2]}.py").exists() or (inside / parts[2]).is_dir()):
        return None  # a name the package's facade exports, not one of its modules
    for number, members in enumerate(SUBLAYERS[parts[1]]):
        if parts[2] in members:
            return number, parts[2]
    raise AssertionError(f"{module}: mulligan.{parts[1]}.{parts[2]} is in no sub-layer of "
                         "tests/test_layering.py")


def wrong_way(importer: str, imported: str) -> bool:
    """True when `importer` may not import `imported`: a higher layer, or a sibling (inside a
    package with sub-layers, the same between its sub-layers)."""
    source, target = layer_of(importer), layer_of(imported)
    if source is None or target is None:
        return False
    if source[1] == target[1]:
        inner, other = sublayer_of(importer), sublayer_of(imported)
        if inner is None or other is None or inner[1] == other[1]:
            return False
        return other[0] >= inner[0]
    if target[0] == source[0]:
        return source[0] not in OPEN_LAYERS
    return target[0] > source[0]


def every_file() -> list[Path]:
    return sorted(f for f in PACKAGE.rglob("*.py") if f != PACKAGE / "__init__.py")


def test_every_module_is_in_a_layer() -> None:
    for file in every_file():
        layer_of(module_of(file))
        sublayer_of(module_of(file))


@pytest.mark.parametrize("file", every_file(), ids=lambda f: f.relative_to(PACKAGE).as_posix())
def test_a_module_imports_only_from_layers_below_or_its_own_package(file: Path) -> None:
    importer = module_of(file)
    bad = [f"line {line}: {module}" for line, module in imports_of(file)
           if wrong_way(importer, module)]
    assert bad == [], f"{file.relative_to(SRC)} imports upward or sideways: {bad}"


def test_the_order_check_flags_planted_upward_sideways_and_lazy_imports() -> None:
    planted = {
        "mulligan.session.log": "from mulligan.app import Controller\n",  # upward
        "mulligan.tools.files": "def f():\n    from mulligan.session import SessionLog\n",
        "mulligan.loop": "from .harness import Harness\n",  # relative, upward
        "mulligan.app.controller": "from mulligan.frontends import tree\n",
        "mulligan.providers.local.model": "import mulligan.testing\n",  # sideways
        "mulligan.app.workspace.store.snapshots": "from mulligan.app.controller import Refused\n",
        "mulligan.app.rewind.back": "from mulligan.app.exports.export import KINDS\n",
        "mulligan.app.exports.html": "from mulligan.app.settings import Settings\n",
    }
    for importer, source in planted.items():
        found = [m for _, m in imported_names(source, importer) if wrong_way(importer, m)]
        assert found, f"{importer}: {source!r} was not flagged"
    allowed = {
        "mulligan.frontends.repl": "from mulligan.app import Controller\n",
        "mulligan.wire": "from mulligan.messages import Message\n",
        "mulligan.cli": "from mulligan import modes\n",
        "mulligan.session.log": "from mulligan.session.index import Index\n",
        "mulligan.app.controller": "from mulligan.app.rewind.back import go_back\n",
        "mulligan.app.workspace.restore": "from mulligan.app.workspace.store import snapshots\n",
        "mulligan.app.attempts.run": "from mulligan.app import Controller\n",
    }
    for importer, source in allowed.items():
        found = [m for _, m in imported_names(source, importer) if wrong_way(importer, m)]
        assert found == [], f"{importer}: {source!r} was flagged: {found}"


def test_no_module_is_over_500_lines_and_no_folder_holds_more_than_12_modules() -> None:
    """Issue 22's sizes: a file past ~500 lines, or a folder past 12 modules, asks to be
    split (a package's __init__ counts as one of its folder's modules)."""
    long = [f"{f.relative_to(SRC)}: {n} lines" for f in sorted(PACKAGE.rglob("*.py"))
            if (n := len(f.read_text(encoding="utf-8").splitlines())) > 500]
    crowded = [f"{d.relative_to(SRC)}: {n} modules" for d in sorted(PACKAGE.rglob("*"))
               if d.is_dir() and d.name != "__pycache__"
               and (n := len(list(d.glob("*.py")))) > 12]
    full = len(list(PACKAGE.glob("*.py")))
    if full > 12:
        crowded.append(f"mulligan: {full} modules")
    assert long == [] and crowded == []
