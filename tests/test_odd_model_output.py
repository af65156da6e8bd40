"""Whatever a model sends ends up in the record: arguments the session's encoder refuses, or
that JSON has no word for, are kept as invalid_arguments and answered with an error -- never
a crash in the append, never a broken next request."""

from __future__ import annotations

import json

import pytest

from mulligan import Harness
from mulligan.session import SessionLog, persist_to
from mulligan.testing import ScriptedModel, call, reply, say
from mulligan.tools import coding_tools


def nested(depth: int) -> object:
    value: object = "bottom"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("odd", [2 ** 70, -(2 ** 65), nested(254), float("nan"),
                                 float("inf")], ids=["big", "negative-big", "deep", "nan",
                                                     "inf"])
def test_odd_tool_arguments_are_recorded_as_invalid_and_the_run_goes_on(tmp_path, odd):
    log = SessionLog(tmp_path / "s.jsonl")
    model = ScriptedModel([reply(call("read", {"path": "a.txt", "offset": odd}, id="c1")),
                           say("understood")])
    h = Harness(model, "system", coding_tools(tmp_path))
    h.subscribe(persist_to(log))
    events = list(h.prompt("go"))
    assert events[-1]["type"] == "agent_end"
    recorded = [m for m in log.replay()]
    block = recorded[1]["content"][0]
    assert block["arguments"] == {} and "invalid_arguments" in block
    assert recorded[2]["is_error"] and "not run" in recorded[2]["content"]
    assert recorded[-1]["content"] == [{"type": "text", "text": "understood"}]
    # The next request holds nothing JSON cannot say: it could be sent to any provider.
    json.dumps(model.calls[1].messages, allow_nan=False)


def test_a_reply_whose_text_cannot_be_encoded_becomes_an_error_not_a_crash(tmp_path):
    log = SessionLog(tmp_path / "s.jsonl")
    h = Harness(ScriptedModel([say("half a pair \ud800 here")]), "system", [])
    h.subscribe(persist_to(log))
    list(h.prompt("go"))
    last = log.replay()[-1]
    assert last["stop_reason"] == "error" and "cannot be recorded" in last["error_message"]
