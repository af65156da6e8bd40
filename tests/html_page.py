"""The HTML export as Debian's chromium renders it (driven by Playwright with executable_path;
no browser download), for the tests that check what a page shows: the page builds its tree
rows and cards in its own script, from the session file it embeds, so what it shows can only
be read in a browser.

`rendered(page_file)` opens a page and returns what it drew; `require()` skips the calling
test without chromium or playwright, saying why -- and under CI=true fails it instead.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - the test extras install it
    sync_playwright = None  # type: ignore[assignment]
MISSING = ("Debian's chromium is not installed" if CHROMIUM is None else
           "playwright is not installed" if sync_playwright is None else None)
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]

DRAWN = """async () => {
  const ids = mulligan.ids();
  return {cards: Object.fromEntries(ids.map((id) => [id, mulligan.card(id).outerHTML])),
          rows: ids.map((id) => mulligan.row(id).outerHTML),
          html: document.documentElement.outerHTML,
          session: await window.mulliganSessionText()};
}"""


def require() -> None:
    """Skip the calling test when the browser cannot run here; under CI=true fail it."""
    if MISSING is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the browser tests: {MISSING}")
        pytest.skip(MISSING)


def rendered(page_file: Path) -> dict[str, Any]:
    """What the page at `page_file` draws, as Chromium made it (`drawn`), in a browser of its
    own. A script error fails the test."""
    require()
    errors: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page()
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(page_file.as_uri())
            page.wait_for_selector("body[data-ready=true]", state="attached", timeout=30_000)
            found = drawn(page)
        finally:
            browser.close()
    assert errors == [], errors
    return found


def drawn(page: Any) -> dict[str, Any]:
    """What an opened page (Playwright's) draws: "cards" (entry id -> its card's HTML, every
    entry's, made as the page makes it when shown, Markdown rendered), "rows" (each entry's
    tree row's HTML), "html" (the document, drawn at the tip) and "session" (the embedded
    file's text, as the page gives it back)."""
    found: dict[str, Any] = page.evaluate(DRAWN)
    return found
