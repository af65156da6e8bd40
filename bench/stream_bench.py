"""Streamed replies, assembled: a long text reply and a long tool call's arguments through
`run_agent` and the Anthropic adapter, against the local server that speaks the Messages API's
streaming protocol, in one run with their floor.

    .venv/bin/python bench/stream_bench.py [--sizes 1,2] [--tool-kb 512] [--piece 24]

The floor is the same stream read by the official SDK alone (every event iterated, nothing
folded). For each size it prints the floor, Mulligan's time and the ratio; then how the time
grows from the smallest size to the largest against how the size and the floor grow (linear:
about the same; quadratic: the square). Exits 1 when a run is over 3x its floor, or its
growth over 1.5x the larger of the size's and the floor's.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import anthropic  # noqa: E402

from fakes import anthropic_server as wire  # noqa: E402
from fakes.http_server import ScriptedServer, Sse  # noqa: E402
from mulligan.loop import run_agent  # noqa: E402
from mulligan.providers.anthropic import AnthropicModel  # noqa: E402

KEY = "sk-ant-bench"


def pieces(text: str, size: int) -> list[str]:
    return [text[at:at + size] for at in range(0, len(text), size)]


def text_reply(megabytes: float, piece: int) -> Sse:
    words = ("lorem ipsum dolor sit amet " * (int(megabytes * 1e6) // 27 + 1))
    return wire.reply(wire.text_block(0, *pieces(words[:int(megabytes * 1e6)], piece)))


def tool_reply(kilobytes: int, piece: int) -> Sse:
    content = "x = 1  # a line of a long file\n" * (kilobytes * 1000 // 31 + 1)
    arguments = json.dumps({"path": "big.py", "content": content[:kilobytes * 1000]})
    return wire.reply(wire.tool_use_block(0, "toolu_01W", "write", *pieces(arguments, piece)),
                      stop_reason="tool_use")


def floor(reply: Sse) -> float:
    """The SDK alone: the request made and every event iterated."""
    with ScriptedServer([reply]) as server:
        client = anthropic.Anthropic(api_key=KEY, base_url=server.url, max_retries=0)
        began = time.perf_counter()
        stream = client.messages.create(model="claude-sonnet-4-6", max_tokens=10,
                                        messages=[{"role": "user", "content": "go"}],
                                        stream=True)
        for _ in stream:
            pass
        return time.perf_counter() - began


def ours(reply: Sse) -> float:
    """The same stream through the adapter and `run_agent`, every event consumed."""
    with ScriptedServer([reply]) as server:
        model = AnthropicModel("claude-sonnet-4-6", api_key=KEY, base_url=server.url,
                               prompt_caching=False, max_retries=0)
        write: Any = {"name": "write", "description": "w", "parameters": {"type": "object"},
                      "execute": lambda arguments: "ok"}
        began = time.perf_counter()
        record: list[Any] = []
        for _ in run_agent(model, "", record, [write], "go", max_turns=1):
            pass
        took = time.perf_counter() - began
    assert record[1]["stop_reason"] in ("stop", "toolUse"), record[1]
    return took


def measure(label: str, make: Any, sizes: list[float], unit: str) -> bool:
    times, floors = [], []
    good = True
    for size in sizes:
        reply = make(size)
        base, mine = min(floor(reply) for _ in range(2)), min(ours(reply) for _ in range(2))
        times.append(mine)
        floors.append(base)
        ratio = mine / base
        good &= ratio <= 3.0
        print(f"  {label} {size:g} {unit:3}  SDK alone {base:7.2f} s   Mulligan {mine:7.2f} s "
              f"  {ratio:5.2f}x the floor")
    if len(sizes) > 1:
        grew, floor_grew = times[-1] / times[0], floors[-1] / floors[0]
        linear = grew <= 1.5 * max(floor_grew, sizes[-1] / sizes[0])
        good &= linear
        print(f"  {label}: {sizes[-1] / sizes[0]:g}x the size took {grew:.2f}x the time "
              f"(the SDK alone {floor_grew:.2f}x): "
              f"{'linear' if linear else 'worse than linear'}")
    return good


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,2", help="text replies, MB")
    parser.add_argument("--tool-kb", default="128,512", help="tool call arguments, KB")
    parser.add_argument("--piece", type=int, default=24, help="characters per stream delta")
    args = parser.parse_args()
    sizes = [float(s) for s in args.sizes.split(",")]
    kbs = [float(s) for s in args.tool_kb.split(",")]
    print(f"streamed replies in deltas of {args.piece} characters")
    good = measure("text", lambda mb: text_reply(mb, args.piece), sizes, "MB")
    good &= measure("tool arguments", lambda kb: tool_reply(int(kb), args.piece), kbs, "KB")
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
