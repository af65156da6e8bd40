"""The HTML export, opened in a real headless browser (Debian's chromium, driven by
Playwright with executable_path; no browser download): no script error, every attempt's text
on the page, a click shows the branch through an entry, hostile content does not run, and
the embedded session file round-trips. Skipped without chromium -- except under CI=true,
where that is a missing install step."""

from __future__ import annotations

import base64
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from html_page import ARGS, CHROMIUM, MISSING, drawn, sync_playwright
from mulligan.session import SessionLog

PYTHON = sys.executable
if MISSING and os.environ.get("CI") == "true":
    raise RuntimeError(f"CI must run the browser tests: {MISSING}")
pytestmark = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")
# Markdown is rendered in the page by this build of markdown-it (Debian's libjs-markdown-it);
# without it the page shows Markdown as text, so the tests of rendering need it.
MARKDOWN_IT = Path("/usr/share/javascript/markdown-it/markdown-it.js")
if not MARKDOWN_IT.is_file() and os.environ.get("CI") == "true":
    raise RuntimeError("CI must run the Markdown tests: libjs-markdown-it is not installed")
needs_markdown_it = pytest.mark.skipif(not MARKDOWN_IT.is_file(),
                                       reason="Debian's libjs-markdown-it is not installed")
HOSTILE = ('Look: <script>window.pwned=1</script> <img src=x onerror="window.pwned=2"> '
           '[x](javascript:window.pwned=3)')


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[Path, Path]:
    """A session with two attempts (the first wrote a file, the second did not), exported."""
    tmp = tmp_path_factory.mktemp("html")
    work, home = tmp / "work", tmp / "home"
    work.mkdir()
    first, second = tmp / "one.json", tmp / "two.json"
    first.write_text(json.dumps([
        {"role": "assistant", "content": [{"type": "toolCall", "id": "c1", "name": "write",
                                           "arguments": {"path": "NOTES.md",
                                                         "content": "# notes\n"}}],
         "stop_reason": "toolUse"}, f"FIRST ATTEMPT wrote **NOTES.md**. {HOSTILE}"]))
    second.write_text(json.dumps(["SECOND ATTEMPT answered without notes."]))
    env = {**os.environ, "MULLIGAN_HOME": str(home)}
    run = [PYTHON, "-m", "mulligan"]
    subprocess.run([*run, "-p", "take notes", "--model", f"scripted:{first}"], cwd=work,
                   env=env, check=True, capture_output=True)
    (session,) = (home / "sessions").glob("*/*.jsonl")
    subprocess.run([*run, "sessions", "back", str(session), "e1", "--files"], cwd=work,
                   env=env, check=True, capture_output=True)
    subprocess.run([*run, "-p", "answer", "-c", "--model", f"scripted:{second}"], cwd=work,
                   env=env, check=True, capture_output=True)
    page = tmp / "session.html"
    subprocess.run([*run, "sessions", "export", str(session), "--format", "html", "-o",
                    str(page)], cwd=work, env=env, check=True, capture_output=True)
    return page, session


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield launched
        launched.close()


def opened(browser, page_file: Path):
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(page_file.as_uri())
    ready(page)
    return page, errors


def ready(page):
    """Wait for the page's script: it unzips the tree and the cards before it draws them."""
    page.wait_for_selector("body[data-ready=true]", state="attached", timeout=30_000)


def test_the_export_is_one_private_file_that_fetches_nothing(exported):
    page, session = exported
    assert stat.S_IMODE(page.stat().st_mode) == 0o600
    # markdown-it's own script names its sources' addresses in comments: the rest is checked
    text = re.sub(r'<script id="markdown-it">.*?</script>', "", page.read_text(), flags=re.DOTALL)
    assert "http://" not in text.replace("http://www.w3.org", "") and "https://" not in text
    assert "default-src 'none'" in text
    assert base64.b64encode(session.read_bytes()).decode()[:40] not in text  # zipped, once


def test_the_page_loads_without_errors_and_holds_every_attempt(exported, browser):
    page, errors = opened(browser, exported[0])
    assert "SECOND ATTEMPT" in page.text_content("main")  # the tip's branch, drawn
    page.evaluate("mulligan.show('e5')")  # the first attempt's last entry, from the page
    assert "FIRST ATTEMPT" in page.text_content("main")
    assert errors == []


def test_hostile_content_is_shown_not_run(exported, browser):
    page, _ = opened(browser, exported[0])
    page.click("nav button.fold")
    page.click("nav a[data-id=e5]")
    assert page.evaluate("window.pwned") is None
    assert "<script>window.pwned=1</script>" in page.text_content("#e5")
    assert page.query_selector("a[href^=javascript]") is None  # not made a link at all
    assert page.query_selector("main img") is None


def test_a_click_shows_the_branch_through_that_entry(exported, browser):
    page, _ = opened(browser, exported[0])
    assert page.is_visible("#e9") and not page.is_visible("#e5")  # the tip's branch
    page.click("nav button.fold")
    page.click("nav a[data-id=e5]")
    assert page.is_visible("#e5") and page.is_visible("#e2") and not page.is_visible("#e9")
    assert "NOTES.md" in page.text_content("#e4")  # the file change, as a diff
    page.click("nav a[data-id=e9]")
    assert page.is_visible("#e9") and not page.is_visible("#e5")


def test_a_link_per_entry_opens_its_branch(exported, browser):
    page = browser.new_page()
    page.goto(exported[0].as_uri() + "#e3")
    ready(page)
    assert page.is_visible("#e3") and not page.is_visible("#e9")


def test_the_search_box_finds_text_in_every_attempt(exported, browser):
    page, _ = opened(browser, exported[0])
    page.fill("#search", "first attempt")
    assert page.is_visible("#e5") and not page.is_visible("#e9")
    # typing on narrows the last search; a broader one looks in everything again
    page.fill("#search", "attempt")
    assert page.is_visible("#e5") and page.is_visible("#e9")
    page.fill("#search", "second attempt")
    assert page.is_visible("#e9") and not page.is_visible("#e5")
    page.fill("#search", "attempt")
    assert page.is_visible("#e5") and page.is_visible("#e9")


def test_the_embedded_session_file_round_trips(exported, browser):
    page, _ = opened(browser, exported[0])
    text = page.evaluate("window.mulliganSessionText()")
    assert text == exported[1].read_text()
    with page.expect_download() as download:  # the button gives the file back, unzipped
        page.click("button#download")
    assert Path(download.value.path()).read_text() == text
    assert download.value.suggested_filename.endswith(".jsonl")
    assert len(SessionLog(exported[1]).entries()) == len(text.splitlines())


def export_of(tmp_path: Path, lines: list[dict]) -> Path:
    """`lines` written as a session file (by hand, as a hostile one would be), exported."""
    session, page = tmp_path / "crafted.jsonl", tmp_path / "crafted.html"
    session.write_text("".join(json.dumps(line) + "\n" for line in lines))
    subprocess.run([PYTHON, "-m", "mulligan", "sessions", "export", str(session), "--format",
                    "html", "-o", str(page)], cwd=tmp_path, check=True, capture_output=True,
                   env={**os.environ, "MULLIGAN_HOME": str(tmp_path / "home")})
    return page


def test_slot_names_and_quotes_in_a_crafted_session_inject_nothing(tmp_path, browser):
    # An id holding a slot name: were the template filled slot after slot, "__DATA__" in an
    # attribute would become the tree's JSON, whose quotes end the attribute and turn the
    # next id into event handlers.
    evil = " autofocus onfocus=window.pwned=1 x"
    page_file = export_of(tmp_path, [
        {"type": "session_info", "id": "e1", "parent_id": None, "timestamp": "t"},
        {"type": "message", "id": "x__DATA__", "parent_id": "e1", "timestamp": "t",
         "message": {"role": "user", "content": "say `__DATA__`, `__JSONL__`, `__TREE__`"}},
        {"type": "message", "id": evil, "parent_id": "x__DATA__", "timestamp": "t",
         "message": {"role": "user", "content": 'a "quoted" id'}},
    ])
    page, errors = opened(browser, page_file)
    for link in page.query_selector_all("nav a[data-id]"):
        link.click()
    assert page.evaluate("window.pwned") is None
    assert "say __DATA__, __JSONL__, __TREE__" in page.text_content("main")
    assert page.get_attribute("nav a.tip", "data-id") == evil  # the id is an id, whole
    assert errors == []


def test_the_pages_policy_runs_its_own_script_and_no_inline_handler(exported, browser):
    page, errors = opened(browser, exported[0])
    assert page.is_visible("#e9") and not page.is_visible("#e5")  # its script ran
    page.evaluate("""() => { const probe = document.createElement("button");
        probe.id = "probe"; probe.textContent = "probe";
        probe.setAttribute("onclick", "window.pwned = 1"); document.body.append(probe); }""")
    page.click("#probe")
    assert page.evaluate("window.pwned") is None
    assert "unsafe-inline'; img" not in exported[0].read_text()


def user_entry(entry_id: str, parent: str | None, text: str = "") -> dict:
    return {"type": "message", "id": entry_id, "parent_id": parent, "timestamp": "t",
            "message": {"role": "user", "content": text or f"said at {entry_id}"}}


def test_two_thousand_nested_attempts_export_open_and_unfold(tmp_path, browser):
    # a0 -> a1 -> ... -> a1999, and each a_i has a later child b_i: the newest (b_i) goes on,
    # so a_{i+1} is an attempt inside the attempt of a_i -- 2,000 levels deep.
    depth = 2000
    lines = [user_entry("root", None)]
    lines += [user_entry(f"a{i}", f"a{i - 1}" if i else "root") for i in range(depth)]
    lines += [user_entry(f"b{i}", f"a{i}") for i in reversed(range(depth))]
    page_file = export_of(tmp_path, lines)  # no RecursionError
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(page_file.as_uri() + "#a1999")  # the deepest attempt: unfolded, shown
    ready(page)
    assert page.is_visible("nav a[data-id=a1999]") and page.is_visible("#a1999")
    assert page.is_visible("#a1990") and not page.is_visible("#b0")
    page.evaluate("document.querySelector('nav div.tree').scrollTop = 0")
    page.click("nav button.fold >> nth=0")  # fold the outermost attempt: b0 comes up
    page.click("nav a[data-id=b0]")
    assert page.is_visible("#b0") and not page.is_visible("#a1999")
    assert errors == []


def test_a_label_hides_nothing_of_the_branch(tmp_path, browser):
    lines = [user_entry("e1", None), user_entry("e2", "e1"),
             {"type": "label", "id": "e3", "parent_id": "e2", "timestamp": "t",
              "target_id": "e2", "label": "checkpoint"},
             user_entry("e4", "e3"), user_entry("e5", "e4")]
    page, errors = opened(browser, export_of(tmp_path, lines))
    assert [card.get_attribute("id") for card in page.query_selector_all("article")
            if card.is_visible()] == ["e1", "e2", "e4", "e5"]
    assert "checkpoint" in page.text_content("nav a[data-id=e2]")
    assert errors == []


@needs_markdown_it
def test_tables_the_session_name_and_a_narrow_screen(tmp_path, browser):
    table = "| tool | time |\n| --- | --- |\n| grep | 3 s |\n"
    lines = [{"type": "session_info", "id": "e1", "parent_id": None, "timestamp": "t",
              "name": "Speed-up of grep"}, user_entry("e2", "e1", "a table:\n\n" + table),
             user_entry("e3", "e2", "x" * 400 + "\n\n```\n" + "y" * 400 + "\n```")]
    page_file = export_of(tmp_path, lines)
    page = browser.new_page(viewport={"width": 375, "height": 700})
    page.goto(page_file.as_uri())
    ready(page)
    assert page.title().startswith("Speed-up of grep")
    assert page.text_content("main table th") == "tool"
    assert page.text_content("main table td") == "grep"
    assert page.text_content("main pre code") == "y" * 400 + "\n"  # the fenced block
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 375, f"the page is {width} px wide on a 375 px screen"
    nav, main = page.query_selector("nav").bounding_box(), page.query_selector("main") \
        .bounding_box()
    assert main["width"] >= 340 and main["y"] >= nav["y"] + nav["height"] - 1  # one column


def test_a_key_in_the_session_is_redacted_in_every_part_of_the_page(tmp_path, browser):
    key = "sk-ant-page-0123456789abcdef"
    session, page_file = tmp_path / "leaky.jsonl", tmp_path / "leaky.html"
    session.write_text("".join(json.dumps(line) + "\n" for line in [
        user_entry("e1", None, f"my key is {key}"), user_entry("e2", "e1", "thanks")]))
    subprocess.run([PYTHON, "-m", "mulligan", "sessions", "export", str(session), "--format",
                    "html", "-o", str(page_file)], cwd=tmp_path, check=True, capture_output=True,
                   env={**os.environ, "MULLIGAN_HOME": str(tmp_path / "home"),
                        "ANTHROPIC_API_KEY": key})
    page, _ = opened(browser, page_file)
    shown = page.text_content("main") + page.text_content("nav")
    assert key not in shown and "[redacted: ANTHROPIC_API_KEY]" in shown
    text = page.evaluate("window.mulliganSessionText()")
    assert key not in text and "[redacted: ANTHROPIC_API_KEY]" in text


CRAFTED = (
    "**bold** and `code`\n\n"
    "<script>window.pwned=1</script>\n\n"
    'an image <img src=x onerror="window.pwned=2"> inline\n\n'
    "[js](javascript:window.pwned=3) [JS](JAVASCRIPT:window.pwned=4) "
    "[spaced](java\tscript:window.pwned=5) <javascript:window.pwned=6> "
    "![pic](javascript:window.pwned=7) [data](data:text/html,<script>window.pwned=8</script>)\n\n"
    '<div onclick="window.pwned=9">raw block</div>\n\n'
    '<a href="javascript:window.pwned=10">raw link</a> <iframe src="javascript:1"></iframe>\n\n'
    "[fine](https://example.com/a?b=1) [here](#e1)\n")


@needs_markdown_it
def test_markdown_is_rendered_in_the_page_and_nothing_in_it_runs(tmp_path, browser):
    page_file = export_of(tmp_path, [user_entry("e1", None, "first"),
                                     user_entry("e2", "e1", CRAFTED),
                                     {"type": "message", "id": "e3", "parent_id": "e2",
                                      "timestamp": "t", "message": {
                                          "role": "assistant", "stop_reason": "stop",
                                          "content": [{"type": "text", "text": CRAFTED}]}}])
    page, errors = opened(browser, page_file)
    for card in ("#e2", "#e3"):
        assert page.text_content(f"{card} strong") == "bold"  # rendered, in the page
        assert page.text_content(f"{card} code") == "code"
        text = page.text_content(card)
        assert "<script>window.pwned=1</script>" in text and 'onerror="window.pwned=2"' in text
        assert '<div onclick="window.pwned=9">raw block</div>' in text  # raw HTML is text
        hrefs = [a.get_attribute("href") for a in page.query_selector_all(f"{card} div.md a")]
        assert hrefs == ["https://example.com/a?b=1", "#e1"], hrefs  # the rest stays text
    assert page.query_selector_all("main img, main iframe, main script") == []
    assert page.evaluate("""() => [...document.querySelectorAll("main *")].flatMap(
        (el) => [...el.attributes].map((a) => a.name)).filter((n) => n.startsWith("on"))""") == []
    page.click("#e2 >> text=raw block")  # were it an element, its onclick would run
    assert page.evaluate("window.pwned") is None
    # only the page's two scripts run: its own and markdown-it, each allowed by its hash
    policy = page.get_attribute("meta[http-equiv=Content-Security-Policy]", "content")
    assert policy.count("'sha256-") == 2 and "unsafe-eval" not in policy
    assert errors == []


def test_without_markdown_it_the_page_shows_markdown_as_text(tmp_path, browser):
    from mulligan.app.exports.html import to_html

    lines = [user_entry("e1", None, "first"), user_entry("e2", "e1", CRAFTED)]
    page_file = tmp_path / "plain.html"
    session = "".join(json.dumps(line) + "\n" for line in lines).encode()
    page_file.write_text(to_html(lines, "e2", title="t", session=session,
                                 file_name="s.jsonl", markdown_js=tmp_path / "missing.js"))
    page, errors = opened(browser, page_file)
    assert "libjs-markdown-it" in page.text_content("nav .meta")  # says why
    assert page.text_content("#e2 div.md") == CRAFTED  # the source, whole, as text
    assert page.query_selector_all("main strong, main a[href^=http], main img") == []
    assert page.evaluate("window.pwned") is None
    assert errors == []


def test_no_text_of_a_crafted_entry_becomes_markup_in_the_tree_or_the_cards(tmp_path, browser):
    # The page makes its rows and cards from the file: every piece of an entry must become
    # text, never an element -- in the tree row, the card, a label, a tool call, a result.
    img, end = '<img src=x onerror="window.pwned=1">', "</script><script>window.pwned=2</script>"
    marked = '<b id="bold">label</b><img src=x onerror="window.pwned=3">'
    lines = [{"type": "session_info", "id": "e1", "parent_id": None, "timestamp": img,
              "name": f"name {end}"}, user_entry("e2", "e1", f"{img} {end}"),
             {"type": "message", "id": "e3", "parent_id": "e2", "timestamp": "t", "message": {
                 "role": "assistant", "stop_reason": "error", "error_message": img,
                 "content": [{"type": "thinking", "thinking": end},
                             {"type": "toolCall", "id": "c1", "name": img,
                              "arguments": {"path": end}}]}},
             {"type": "message", "id": "e4", "parent_id": "e3", "timestamp": "t", "message": {
                 "role": "toolResult", "tool_call_id": "c1", "tool_name": img, "is_error": True,
                 "content": [{"type": "text", "text": end},
                             {"type": "image", "mime_type": "image/png", "data": f"x{img}"}]}},
             {"type": "label", "id": "e5", "parent_id": "e4", "timestamp": "t",
              "target_id": "e3", "label": marked},
             {"type": "branch_summary", "id": "e6", "parent_id": "e5", "timestamp": end,
              "from_id": "e4", "summary": img}]
    page_file = export_of(tmp_path, lines)
    page, errors = opened(browser, page_file)
    parts = drawn(page)
    # the rows and cards as drawn hold the crafted text as text, whole
    assert f"{img} {end}" in page.text_content("#e2")
    assert end in page.text_content("#e3") and f"{img}(" in page.text_content("#e3")
    assert f"[{marked}]" in page.text_content("nav a[data-id=e3]")  # the label, as text
    assert marked in page.text_content("#e3 .head .label")
    assert end in page.text_content("#e4") and "[image: image/png" in page.text_content("#e4")
    assert page.title().startswith(f"name {end}")
    # and none of it is an element: no img, no b#bold, no script in the tree or the cards
    made = " ".join([*parts["rows"], *parts["cards"].values()])
    assert "<img" not in made and "<b " not in made and "<script" not in made
    assert page.query_selector_all("main img, nav img, #bold, main script, nav script") == []
    assert page.evaluate("window.pwned") is None
    assert errors == []
