"""Images in messages: the shape, `read` of an image, each provider's shape at its boundary (on
the request a local server received, through the official SDK), `-p --image`, the REPL's
@path, the session file and the exports."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from fakes import anthropic_server as claude
from fakes import openai_server as gpt
from fakes.http_server import ScriptedServer
from html_page import rendered
from mulligan import Harness
from mulligan.frontends.terminal.attachments import image_paths, with_attachments
from mulligan.messages import content_text, shape_problem, user_message
from mulligan.providers.anthropic import AnthropicModel
from mulligan.providers.local.chat import chat_messages
from mulligan.providers.openai.chat import OpenAIChatModel
from mulligan.session import SessionLog
from mulligan.testing import call, tool_result
from mulligan.tools import ToolError, read_tool

PYTHON = sys.executable


def png(width: int = 40, height: int = 20, colour: str = "red") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(out, "PNG")
    return out.getvalue()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def size_of(block: dict[str, Any]) -> tuple[int, int]:
    with Image.open(io.BytesIO(base64.b64decode(block["data"]))) as image:
        return image.size


IMAGE = {"type": "image", "mime_type": "image/png", "data": b64(png())}


# --- the shape --------------------------------------------------------------------------------

def test_user_and_tool_result_content_may_be_text_and_image_blocks() -> None:
    assert shape_problem(user_message([{"type": "text", "text": "look"}, IMAGE])) is None
    result = tool_result(call("read", id="c1"), [{"type": "text", "text": "[shot.png]"}, IMAGE])
    assert shape_problem(result) is None
    assert content_text(result["content"]).startswith("[shot.png]\n[image: image/png, ")


def test_a_malformed_image_block_is_named() -> None:
    problem = shape_problem({"role": "user", "content": [{"type": "image", "data": "x"}]})
    assert problem is not None and "malformed content block" in problem and "'image'" in problem
    assert shape_problem({"role": "user", "content": [{"type": "video"}]}) is not None


# --- read -------------------------------------------------------------------------------------

def test_read_of_a_big_png_returns_the_image_scaled_to_the_providers_limit(
        tmp_path: Path) -> None:
    (tmp_path / "wide.png").write_bytes(png(3136, 1000))
    text, image = read_tool(tmp_path)["execute"]({"path": "wide.png"})
    assert text == {"type": "text", "text": "[wide.png: image/png, 3136x1000, scaled to "
                                            "1568x500]"}
    assert image["type"] == "image" and image["mime_type"] == "image/png"
    assert size_of(image) == (1568, 500)


def test_read_of_a_small_jpeg_returns_its_bytes_as_they_are(tmp_path: Path) -> None:
    out = io.BytesIO()
    Image.new("RGB", (30, 30), "blue").save(out, "JPEG")
    (tmp_path / "a.jpg").write_bytes(out.getvalue())
    _, image = read_tool(tmp_path)["execute"]({"path": "a.jpg"})
    assert image == {"type": "image", "mime_type": "image/jpeg", "data": b64(out.getvalue())}


def test_a_file_named_png_that_is_not_an_image_is_not_sent_as_one(tmp_path: Path) -> None:
    (tmp_path / "fake.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 40)
    with pytest.raises(ToolError, match="fake.png: cannot read the image"):
        read_tool(tmp_path)["execute"]({"path": "fake.png"})
    (tmp_path / "text.png").write_text("not an image")
    assert read_tool(tmp_path)["execute"]({"path": "text.png"}) == "not an image"


# --- each provider's shape ------------------------------------------------------------------

def screenshot_run(model: Any, root: Path) -> None:
    (root / "shot.png").write_bytes(png())
    harness = Harness(model, "Be brief.", [read_tool(root)])
    list(harness.prompt([{"type": "text", "text": "What is this?"}, IMAGE]))


def test_anthropic_gets_user_and_tool_result_images_as_base64_image_blocks(
        tmp_path: Path) -> None:
    with ScriptedServer([
        claude.reply(claude.tool_use_block(0, "toolu_1", "read", '{"path": "shot.png"}'),
                     stop_reason="tool_use"),
        claude.text_reply("A red rectangle."),
    ]) as server:
        screenshot_run(AnthropicModel("claude-sonnet-4-6", api_key="k", base_url=server.url,
                                      timeout=10, prompt_caching=False), tmp_path)
    source = {"type": "base64", "media_type": "image/png", "data": IMAGE["data"]}
    sent = server.requests[1].body["messages"]
    assert sent[0] == {"role": "user", "content": [
        {"type": "text", "text": "What is this?"}, {"type": "image", "source": source}]}
    assert sent[2]["content"] == [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [
        {"type": "text", "text": "[shot.png: image/png, 40x20]"},
        {"type": "image", "source": source}]}]


def test_chat_completions_gets_image_url_parts_and_a_tool_results_image_after_the_results(
        tmp_path: Path) -> None:
    with ScriptedServer([
        gpt.reply(gpt.tool_call(0, "call_1", "read", '{"path": "shot.png"}'),
                  finish_reason="tool_calls"),
        gpt.text_reply("A red rectangle."),
    ], base_path="/v1") as server:
        screenshot_run(OpenAIChatModel("gpt-4.1", api_key="k", base_url=server.url,
                                       timeout=10), tmp_path)
    url = {"url": f"data:image/png;base64,{IMAGE['data']}"}
    sent = server.requests[1].body["messages"]
    assert sent[1] == {"role": "user", "content": [
        {"type": "text", "text": "What is this?"}, {"type": "image_url", "image_url": url}]}
    assert sent[3]["role"] == "tool" and sent[3]["content"].startswith(
        "[shot.png: image/png, 40x20]\n[image: image/png, ")
    assert sent[4] == {"role": "user", "content": [
        {"type": "text", "text": "The images read returned (call call_1):"},
        {"type": "image_url", "image_url": url}]}


def test_the_embedded_model_gets_a_note_instead_of_an_image() -> None:
    chat = chat_messages("", [user_message([{"type": "text", "text": "see"}, IMAGE])], [],
                         result_budget=1000)
    assert chat == [{"role": "user", "content": f"see\n{content_text([IMAGE])} "
                                                "(this model cannot see images)"}]


# --- mulligan -p --image ------------------------------------------------------------------------

def mulligan(tmp_path: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    environment = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    environment.update(MULLIGAN_HOME=str(tmp_path / "home"), **env)
    return subprocess.run([PYTHON, "-m", "mulligan", *args], cwd=work, env=environment,
                          capture_output=True, text=True, timeout=60)


def test_p_with_an_image_sends_an_anthropic_image_block(tmp_path: Path) -> None:
    (tmp_path / "shot.png").write_bytes(png())
    with ScriptedServer([claude.text_reply("Red.")]) as server:
        done = mulligan(tmp_path, "-p", "Colour?", "--image", str(tmp_path / "shot.png"),
                        "--model", "anthropic/claude-sonnet-4-6", "--base-url", server.url,
                        env={"ANTHROPIC_API_KEY": "sk-ant-test"})
    assert done.returncode == 0, done.stderr
    content = server.requests[0].body["messages"][0]["content"]
    assert content[0] == {"type": "text", "text": "Colour?"}
    assert content[1]["type"] == "image" and content[1]["source"] == {
        "type": "base64", "media_type": "image/png", "data": IMAGE["data"]}


def test_p_with_an_image_sends_a_chat_completions_image_url_part(tmp_path: Path) -> None:
    (tmp_path / "shot.png").write_bytes(png())
    with ScriptedServer([gpt.text_reply("Red.")], base_path="/v1") as server:
        done = mulligan(tmp_path, "-p", "Colour?", "--image", str(tmp_path / "shot.png"),
                        "--model", "openai/qwen2.5-vl", "--base-url", server.url, env={})
    assert done.returncode == 0, done.stderr
    assert server.requests[0].body["messages"][-1] == {"role": "user", "content": [
        {"type": "text", "text": "Colour?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{IMAGE['data']}"}}]}


def test_p_with_an_image_that_is_not_one_is_refused_before_anything_runs(
        tmp_path: Path) -> None:
    (tmp_path / "notes.png").write_text("hello")
    done = mulligan(tmp_path, "-p", "Colour?", "--image", str(tmp_path / "notes.png"),
                    "--model", "openai/x", "--base-url", "http://127.0.0.1:9/v1", env={})
    assert done.returncode == 1 and "notes.png is not a PNG, JPEG, GIF or WebP" in done.stderr
    assert not (tmp_path / "home" / "sessions").exists()
    done = mulligan(tmp_path, "--image", "x.png", env={})
    assert done.returncode == 2 and "--image needs -p" in done.stderr


# --- the REPL's @path ---------------------------------------------------------------------------

def test_at_paths_and_a_pasted_path_attach_images_and_other_at_words_stay_text(
        tmp_path: Path) -> None:
    (tmp_path / "shots").mkdir()
    (tmp_path / "shots" / "a b.png").write_bytes(png())
    (tmp_path / "c.png").write_bytes(png())
    assert image_paths("compare @c.png with @'shots/a b.png', mail me@example.com",
                       tmp_path) == [tmp_path / "c.png", tmp_path / "shots" / "a b.png"]
    assert image_paths(f"'{tmp_path}/shots/a b.png'", tmp_path) == [tmp_path / "shots/a b.png"]
    assert image_paths(f"file://{tmp_path}/shots/a%20b.png", tmp_path) == \
        [tmp_path / "shots/a b.png"]
    assert image_paths("@missing.png and @decorator", tmp_path) == []
    said: list[str] = []
    content = with_attachments("what is @c.png?", tmp_path, lambda text, style: said.append(text))
    assert content == [{"type": "text", "text": "what is @c.png?"}, IMAGE]
    assert said == [f"(attached {tmp_path / 'c.png'}: image/png, 40x20)"]


def test_an_at_path_that_is_not_an_image_sends_nothing_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "bad.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 8)
    said: list[str] = []
    assert with_attachments("@bad.png", tmp_path, lambda t, s: said.append(t)) is None
    assert said and said[0].startswith(f"cannot attach {tmp_path / 'bad.png'}")


# --- the session file and exports -----------------------------------------------------------

def test_a_session_keeps_string_content_without_images_and_blocks_with_them(
        tmp_path: Path) -> None:
    log = SessionLog(tmp_path / "s.jsonl")
    log.append_message(user_message("plain"))
    log.append_message(user_message([{"type": "text", "text": "look"}, IMAGE]))
    lines = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert lines[0]["message"]["content"] == "plain"
    assert lines[1]["message"]["content"][1] == IMAGE
    assert SessionLog(tmp_path / "s.jsonl").replay()[1]["content"][1] == IMAGE


def test_exports_show_an_image_as_a_note_in_markdown_and_inline_in_html(tmp_path: Path) -> None:
    log = SessionLog(tmp_path / "s.jsonl")
    log.append_message(user_message([{"type": "text", "text": "look"}, IMAGE]))
    hostile = {"type": "image", "mime_type": "text/html", "data": "PHNjcmlwdD4="}
    log.append_message(tool_result(call("read", id="c9"), [hostile]))
    env = {**os.environ, "MULLIGAN_HOME": str(tmp_path / "home")}
    for fmt in ("md", "html"):
        subprocess.run([PYTHON, "-m", "mulligan", "sessions", "export", str(log.path),
                        "--format", fmt, "-o", str(tmp_path / f"out.{fmt}")],
                       check=True, env=env, capture_output=True)
    markdown = (tmp_path / "out.md").read_text()
    assert f"[image: image/png, {len(IMAGE['data']) * 3 // 4 / 1024:.1f} KB]" in markdown
    assert IMAGE["data"] not in markdown
    parts = rendered(tmp_path / "out.html")
    page = parts["html"] + " ".join(parts["cards"].values())  # what Chromium draws
    assert f'src="data:image/png;base64,{IMAGE["data"]}"' in page
    assert "data:text/html" not in page and "[image: text/html, 0.0 KB]" in page


def test_the_repl_sends_an_at_path_image_with_the_prompt(tmp_path: Path) -> None:
    from mulligan.testing import ScriptedModel, say
    from test_repl import controller, repl_on

    model = ScriptedModel([say("A red rectangle.")])
    c = controller(tmp_path, model, None)
    (tmp_path / "work" / "shot.png").write_bytes(png())
    with repl_on(c) as repl:
        shown = repl.type("what is @shot.png?\r")
        assert "(attached " in shown and "shot.png: image/png, 40x20)" in shown
        assert "A red rectangle." in shown
        (tmp_path / "work" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n")
        shown = repl.type("and @broken.png\r")
        assert "cannot attach" in shown and "nothing was sent" in shown
    assert model.calls[0].messages[-1]["content"] == [
        {"type": "text", "text": "what is @shot.png?"}, IMAGE]
    assert len(model.calls) == 1
