"""An MCP server written with the `mcp` SDK for the tests: tools that answer, hang, crash the
process mid-call, return an image, and see the HTTP headers they were sent.

    python odd_server.py [--slow-start SECONDS] [--http PORT]
"""

from __future__ import annotations

import argparse
import base64
import os
import time

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.utilities.types import Image

# A 1x1 PNG.
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")

server = MCPServer("odd")


@server.tool(description="Say the word back.")
def echo(word: str) -> str:
    return f"echo: {word}"


@server.tool(description="Never answer.")
def hang() -> str:
    time.sleep(3600)
    return "never"


@server.tool(description="End the server's process in the middle of the call.")
def crash() -> str:
    os._exit(3)


@server.tool(description="A tiny picture and a caption.", structured_output=False)
def picture():  # type: ignore[no-untyped-def]
    return ["a one-pixel picture", Image(data=PIXEL, format="png")]


@server.tool(description="Fail on purpose.")
def fail() -> str:
    raise ValueError("this tool always fails")


@server.tool(description="The Authorization header this call came with (HTTP only).")
def whoami(ctx: Context) -> str:
    request = getattr(ctx.request_context, "request", None)
    headers = getattr(request, "headers", None) or {}
    return f"authorization: {headers.get('authorization', '(none)')}"


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--slow-start", type=float, default=0.0)
    parser.add_argument("--http", type=int)
    options = parser.parse_args()
    time.sleep(options.slow_start)
    if options.http:
        server.run("streamable-http", port=options.http)
    else:
        server.run()
