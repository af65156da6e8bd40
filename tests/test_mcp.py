"""The MCP client against real servers, really started: the protocol's reference servers from
npm (server-everything over stdio and streamable HTTP, server-filesystem over stdio), and a
server written with the `mcp` SDK (tests/mcp_servers/odd_server.py) that hangs, crashes in
the middle of a call, fails and returns an image.

The npm servers are installed by `.ci/run` (`npm install --prefix tests/mcp_servers`). Without
node or them the tests skip saying why -- except under CI=true, where they fail."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mulligan.app.extensions.mcp_client import McpServers, tool_name
from mulligan.app.extensions.mcp_config import Server, servers_from_config, servers_from_file
from mulligan.tools import ToolError, run_tool

HERE = Path(__file__).resolve().parent
MODULES = HERE / "mcp_servers" / "node_modules" / "@modelcontextprotocol"
EVERYTHING = MODULES / "server-everything" / "dist" / "index.js"
FILESYSTEM = MODULES / "server-filesystem" / "dist" / "index.js"
ODD = HERE / "mcp_servers" / "odd_server.py"
NODE = shutil.which("node")
MISSING = ("node is not installed" if NODE is None else
           "the npm reference servers are not installed (npm install --prefix "
           "tests/mcp_servers)" if not (EVERYTHING.is_file() and FILESYSTEM.is_file()) else None)
if MISSING and os.environ.get("CI") == "true":
    raise RuntimeError(f"CI must run the MCP tests: {MISSING}")
npm = pytest.mark.skipif(MISSING is not None, reason=str(MISSING))


def everything(timeout: float = 30) -> Server:
    return Server("everything", "test", command=str(NODE), args=(str(EVERYTHING), "stdio"),
                  timeout=timeout)


def odd(timeout: float = 30, *args: str) -> Server:
    return Server("odd", "test", command=sys.executable, args=(str(ODD), *args),
                  timeout=timeout)


def started(*servers: Server) -> McpServers:
    running = McpServers(list(servers)).start()
    assert running.wait(60), [(s.server.name, s.state) for s in running.states()]
    return running


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_http(command: list[str], port: int, env: dict[str, str] | None = None) \
        -> subprocess.Popen[bytes]:
    process = subprocess.Popen(command, env={**os.environ, **(env or {})},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"{command} did not listen on {port}")


def call(tools: list, name: str, arguments: dict) -> dict:
    return dict(run_tool(tools, {"type": "toolCall", "id": "c1", "name": name,
                                 "arguments": arguments}))


# -- the reference servers ---------------------------------------------------------------

@npm
def test_a_stdio_reference_server_lists_its_tools_and_answers_a_call():
    servers = started(everything())
    try:
        tools = servers.tools()
        names = [t["name"] for t in tools]
        assert "mcp__everything__echo" in names and "mcp__everything__get-sum" in names
        echo = next(t for t in tools if t["name"] == "mcp__everything__echo")
        assert echo["parameters"]["properties"]["message"]["type"] == "string"
        result = call(tools, "mcp__everything__echo", {"message": "hello"})
        assert (result["content"], result["is_error"]) == ("Echo: hello", False)
        summed = call(tools, "mcp__everything__get-sum", {"a": 2, "b": 3})
        assert "5" in summed["content"]
    finally:
        servers.close()


@npm
def test_an_image_and_a_resource_from_the_reference_server_become_a_tool_result():
    servers = started(everything())
    try:
        image = servers.call("everything", "get-tiny-image", {})
        assert isinstance(image, list)
        (picture,) = [b for b in image if b["type"] == "image"]
        assert picture["mime_type"] == "image/png" and picture["data"].startswith("iVBOR")
        resource = servers.call("everything", "get-resource-reference",
                                {"resourceType": "Text", "resourceId": 1})
        assert "[resource demo://resource/dynamic/text/1]" in resource
        assert "Resource 1" in resource
    finally:
        servers.close()


@npm
def test_the_filesystem_reference_server_reads_a_file(tmp_path):
    (tmp_path / "note.txt").write_text("written by the test\n")
    server = Server("files", "test", command=str(NODE),
                    args=(str(FILESYSTEM), str(tmp_path)), timeout=30)
    servers = started(server)
    try:
        text = servers.call("files", "read_text_file", {"path": str(tmp_path / "note.txt")})
        assert text == "written by the test\n"
        with pytest.raises(ToolError, match="files"):  # the server refuses; named by it
            servers.call("files", "read_text_file", {"path": "/etc/passwd"})
    finally:
        servers.close()


@npm
def test_the_reference_server_over_streamable_http():
    port = free_port()
    process = serve_http([str(NODE), str(EVERYTHING), "streamableHttp"], port,
                         {"PORT": str(port)})
    try:
        servers = started(Server("remote", "test", url=f"http://127.0.0.1:{port}/mcp",
                                 timeout=30))
        try:
            (state,) = servers.states()
            assert state.state == "ready", state.error
            assert servers.call("remote", "echo", {"message": "over http"}) == \
                "Echo: over http"
        finally:
            servers.close()
    finally:
        process.kill()
        process.wait()


def test_headers_are_sent_to_an_http_server():
    port = free_port()
    process = serve_http([sys.executable, str(ODD), "--http", str(port)], port)
    try:
        servers = started(Server("odd", "test", url=f"http://127.0.0.1:{port}/mcp",
                                 headers={"Authorization": "Bearer t0ken"}, timeout=30))
        try:
            assert servers.call("odd", "whoami", {}) == "authorization: Bearer t0ken"
        finally:
            servers.close()
    finally:
        process.kill()
        process.wait()


# -- a server that misbehaves ---------------------------------------------------------------

def test_an_image_from_an_sdk_server_is_an_image_block():
    servers = started(odd())
    try:
        result = call(servers.tools(), "mcp__odd__picture", {})  # through run_tool
        content = result["content"]
        assert result["is_error"] is False
        assert content[0] == {"type": "text", "text": "a one-pixel picture"}
        assert content[1]["type"] == "image" and content[1]["mime_type"] == "image/png"
    finally:
        servers.close()


def test_a_call_that_hangs_ends_at_the_timeout_naming_the_server_and_the_server_goes_on():
    servers = started(odd(timeout=2))
    try:
        tools = servers.tools()
        began = time.monotonic()
        result = call(tools, "mcp__odd__hang", {})
        took = time.monotonic() - began
        assert result["is_error"] is True
        assert "MCP server odd did not answer hang within 2 s" in result["content"]
        assert 1.5 < took < 10
        assert call(tools, "mcp__odd__echo", {"word": "still"})["content"] == "echo: still"
    finally:
        servers.close()


def test_a_server_that_dies_mid_call_is_named_and_the_run_goes_on():
    servers = started(odd(), everything() if MISSING is None else odd())
    try:
        tools = servers.tools()
        crashed = call(tools, "mcp__odd__crash", {})
        assert crashed["is_error"] is True
        assert "MCP server odd stopped" in crashed["content"]
        after = call(tools, "mcp__odd__echo", {"word": "x"})
        assert after["is_error"] is True and "MCP server odd is not running" in after["content"]
        assert [s.state for s in servers.states() if s.server.name == "odd"] == ["stopped"]
    finally:
        servers.close()


def test_an_error_result_is_an_error_naming_the_server():
    servers = started(odd())
    try:
        result = call(servers.tools(), "mcp__odd__fail", {})
        assert result["is_error"] is True and result["content"].startswith(
            "MCP server odd: fail failed")
    finally:
        servers.close()


def test_a_server_that_cannot_start_is_named_and_the_others_still_serve(tmp_path):
    missing = Server("ghost", "test", command=str(tmp_path / "no-such-program"))
    servers = started(missing, odd())
    try:
        states = {s.server.name: s for s in servers.states()}
        assert states["ghost"].state == "failed"
        assert "no-such-program" in states["ghost"].error
        assert [t["name"] for t in servers.tools()][0].startswith("mcp__odd__")
        with pytest.raises(ToolError, match="MCP server ghost is not running"):
            servers.call("ghost", "anything", {})
    finally:
        servers.close()


def test_a_server_that_hangs_at_start_fails_at_its_timeout():
    hanging = Server("slow", "test", command=sys.executable,
                     args=("-c", "import time; time.sleep(60)"), timeout=1.5)
    servers = started(hanging)
    try:
        (state,) = servers.states()
        assert state.state == "failed" and "did not start within 1.5 s" in state.error
    finally:
        servers.close()


def test_start_returns_before_a_slow_server_is_ready():
    servers = McpServers([odd(30, "--slow-start", "1.5")])
    began = time.monotonic()
    servers.start()
    returned = time.monotonic() - began
    try:
        assert [s.state for s in servers.states()] == ["starting"]
        assert servers.wait(60)
        assert time.monotonic() - began > returned
        assert [s.state for s in servers.states()] == ["ready"]
    finally:
        servers.close()


def test_closing_ends_a_stdio_server_process():
    servers = started(odd())
    pid_probe = servers.call("odd", "echo", {"word": "x"})
    assert pid_probe == "echo: x"
    servers.close()
    assert not servers._thread.is_alive()  # noqa: SLF001 (the one thread it started)


# -- names and configuration -----------------------------------------------------------------

def test_tool_names_are_prefixed_and_made_safe_for_providers():
    assert tool_name("db", "query") == "mcp__db__query"
    assert tool_name("db", "a.b/c d") == "mcp__db__a_b_c_d"
    assert len(tool_name("s" * 40, "t" * 40)) == 64


def test_config_toml_servers_and_a_claude_code_mcp_json(tmp_path):
    config = {"mcp_servers": {"files": {"command": "npx", "args": ["-y", "x"], "env": {"A": "1"},
                                        "cwd": "/srv", "timeout": 5},
                              "remote": {"url": "https://example.com/mcp",
                                         "headers": {"Authorization": "Bearer x"}}}}
    files, remote = servers_from_config(config)
    assert (files.transport, files.command, files.args, files.env, files.cwd, files.timeout) \
        == ("stdio", "npx", ("-y", "x"), {"A": "1"}, "/srv", 5.0)
    assert (remote.transport, remote.headers) == ("http", {"Authorization": "Bearer x"})
    shaped = tmp_path / ".mcp.json"
    shaped.write_text(json.dumps({"mcpServers": {
        "db": {"command": "db-server", "args": ["--token", "${TOKEN}"]},
        "web": {"type": "http", "url": "${BASE:-http://localhost:1}/mcp"}}}))
    db, web = servers_from_file(shaped, env={"TOKEN": "s3cret"})
    assert db.args == ("--token", "s3cret") and web.url == "http://localhost:1/mcp"


@pytest.mark.parametrize("table, problem", [
    ({"command": "x", "url": "http://y"}, "either command"),
    ({}, "either command"),
    ({"command": "x", "timeout": 0}, "timeout"),
    ({"command": "x", "args": "not a list"}, "args"),
    ({"command": "x", "colour": "red"}, "unknown setting colour"),
    ({"url": "http://x", "type": "sse"}, "not supported"),
])
def test_a_bad_server_setting_is_refused_naming_the_server(table, problem):
    with pytest.raises(ValueError, match=problem) as raised:
        servers_from_config({"mcp_servers": {"mine": table}})
    assert "'mine'" in str(raised.value)


def test_the_model_is_offered_the_servers_tools_with_its_schemas_at_the_next_prompt(tmp_path):
    from mulligan.app import Controller
    from mulligan.app.extensions.setup import Extensions
    from mulligan.app.settings import Settings
    from mulligan.testing import ScriptedModel, say

    found = Extensions(tmp_path, servers=[odd()]).start()
    model = ScriptedModel([say("one"), say("two")])
    c = Controller(model, [], Settings(cwd=tmp_path, home=tmp_path / "home"), None,
                   extensions=found)
    try:
        list(c.run_prompt("first"))  # waits for the server still starting
        offered = {t["name"]: t for t in model.calls[0].tools}
        assert offered["mcp__odd__echo"]["parameters"]["properties"]["word"]["type"] == "string"
        assert offered["mcp__odd__echo"]["description"] == "(MCP server odd) Say the word back."
        list(c.run_prompt("second"))
        assert [t["name"] for t in model.calls[1].tools] == list(offered)
    finally:
        c.close()


def test_slash_mcp_shows_each_server_its_state_and_tools(tmp_path):
    from mulligan.app import Controller
    from mulligan.app.extensions.setup import Extensions
    from mulligan.app.settings import Settings
    from mulligan.frontends.slash import run_command
    from mulligan.testing import ScriptedModel

    ghost = Server("ghost", "config.toml", command=str(tmp_path / "nope"))
    found = Extensions(tmp_path, servers=[odd(), ghost])
    c = Controller(ScriptedModel([]), [], Settings(cwd=tmp_path, home=tmp_path / "home"),
                   None, extensions=found)
    try:
        run_command(c, "/mcp")  # starts them, if the REPL has not yet
        assert found.mcp.wait(60)
        lines = run_command(c, "/mcp").lines
        assert lines[0].startswith(f"odd  ready  (stdio: {sys.executable} {ODD}; from test)")
        assert lines[1].startswith("  mcp__odd__echo, mcp__odd__hang")
        assert lines[2].startswith("ghost  failed: FileNotFoundError")
    finally:
        c.close()
    empty = Controller(ScriptedModel([]), [], Settings(cwd=tmp_path, home=tmp_path / "home"))
    assert run_command(empty, "/mcp").lines[0].startswith("no MCP servers")
