"""MCP benchmark: the REPL's first prompt with a slow-starting MCP server configured, against
the same REPL with none (the servers start in the background: the prompt must not wait); and
one tool call through Mulligan's `McpServers` (thread hop, schema check, result conversion),
against the same call made directly with the `mcp` SDK's Client, in the same run.

    .venv/bin/python bench/mcp_bench.py [--runs 7] [--calls 200]

The server is tests/mcp_servers/odd_server.py (the `mcp` SDK), made to sleep 2 s before it
serves. Exits 1 if a target is missed: the first prompt with the server under 1.5x the first
prompt without it, and a call under 3x the bare SDK's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from startup_bench import first_prompt  # noqa: E402

ODD = Path(__file__).resolve().parent.parent / "tests" / "mcp_servers" / "odd_server.py"


def repl_times(runs: int) -> tuple[float, float]:
    scratch = Path(tempfile.mkdtemp(prefix="mulligan-mcp-bench-"))
    plain, with_server = scratch / "plain", scratch / "server"
    for home in (plain, with_server):
        home.mkdir()
    (with_server / "config.toml").write_text(
        f'[mcp_servers.slow]\ncommand = "{sys.executable}"\n'
        f'args = ["{ODD}", "--slow-start", "2"]\n')
    base = {**os.environ, "TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1",
            "ANTHROPIC_API_KEY": "bench-dummy", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
    base.pop("OPENAI_API_KEY", None)
    times: dict[str, list[float]] = {"none": [], "slow server": []}
    for _ in range(runs):
        times["none"].append(first_prompt({**base, "MULLIGAN_HOME": str(plain)}, str(scratch)))
        times["slow server"].append(first_prompt({**base, "MULLIGAN_HOME": str(with_server)},
                                                 str(scratch)))
    return statistics.median(times["none"]), statistics.median(times["slow server"])


def call_times(calls: int) -> tuple[float, float]:
    from mcp import Client, StdioServerParameters

    from mulligan.app.extensions.mcp_client import McpServers
    from mulligan.app.extensions.mcp_config import Server
    from mulligan.tools import run_tool

    async def bare() -> float:
        params = StdioServerParameters(command=sys.executable, args=[str(ODD)])
        async with Client(params, cache=None) as client:
            await client.call_tool("echo", {"word": "warm"})
            started = time.perf_counter()
            for n in range(calls):
                await client.call_tool("echo", {"word": str(n)})
            return (time.perf_counter() - started) / calls

    floor = asyncio.run(bare())
    servers = McpServers([Server("odd", "bench", command=sys.executable,
                                 args=(str(ODD),))]).start()
    try:
        servers.wait(60)
        tools = servers.tools()
        call = {"type": "toolCall", "id": "c", "name": "mcp__odd__echo",
                "arguments": {"word": "warm"}}
        run_tool(tools, call)  # type: ignore[arg-type]
        started = time.perf_counter()
        for n in range(calls):
            run_tool(tools, {**call, "arguments": {"word": str(n)}})  # type: ignore[arg-type]
        ours = (time.perf_counter() - started) / calls
    finally:
        servers.close()
    return floor, ours


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--calls", type=int, default=200)
    options = parser.parse_args()
    none, slow = repl_times(options.runs)
    floor, ours = call_times(options.calls)
    print(f"{'measure':<44} {'median':>9} {'ratio':>7}")
    print(f"{'REPL first prompt, no MCP server':<44} {none * 1000:>7.1f}ms {1:>6.2f}x")
    print(f"{'REPL first prompt, a server taking 2 s':<44} {slow * 1000:>7.1f}ms "
          f"{slow / none:>6.2f}x")
    print(f"{'tool call, the mcp SDK Client directly':<44} {floor * 1000:>7.2f}ms {1:>6.2f}x")
    print(f"{'tool call, through run_tool and McpServers':<44} {ours * 1000:>7.2f}ms "
          f"{ours / floor:>6.2f}x")
    missed = []
    if slow / none >= 1.5:
        missed.append(f"the first prompt waited for the server ({slow / none:.2f}x, < 1.5x)")
    if ours / floor >= 3:
        missed.append(f"a call costs {ours / floor:.2f}x the SDK's (target < 3x)")
    for line in missed:
        print(f"MISSED: {line}")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
