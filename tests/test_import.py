"""`mulligan sessions import`: sessions of Claude Code, Codex, pi and Tau become Mulligan
sessions with their trees, through the real command. The files under tests/fixtures/import/
are written in each tool's format (tests/fixtures/README.md says from which source)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mulligan.session import SessionLog
from mulligan.session.branches import labels_of

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "import"
PYTHON = sys.executable


def mulligan(tmp_path: Path, *args: str, env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[str]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    environment = {**os.environ, "MULLIGAN_HOME": str(tmp_path / "home"), **(env or {})}
    environment.pop("MULLIGAN_STORE", None)
    return subprocess.run([PYTHON, "-m", "mulligan", "sessions", "import", *args], cwd=work,
                          env=environment, capture_output=True, text=True, timeout=60)


def imported(tmp_path: Path, name: str, *flags: str) -> SessionLog:
    out = tmp_path / f"{name}.mulligan.jsonl"
    done = mulligan(tmp_path, str(FIXTURES / name), "-o", str(out), *flags)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == str(out)
    return SessionLog(out)


def said(log: SessionLog, leaf: str | None = None) -> list[str]:
    """The branch's transcript as role: text / tool-call id lines, for comparing."""
    lines = []
    for message in log.replay() if leaf is None else _replay(log, leaf):
        role = message["role"]
        if role == "toolResult":
            first = str(message["content"]).strip().splitlines()[0]
            lines.append(f"result {message['tool_call_id']}: {first}")
        elif role == "assistant":
            for block in message["content"]:
                if block["type"] == "text":
                    lines.append(f"ai: {block['text']}")
                elif block["type"] == "toolCall":
                    lines.append(f"call {block['id']} {block['name']}")
        else:
            content = message["content"]
            text = content if isinstance(content, str) else " ".join(
                b.get("text", f"[{b['type']}]") for b in content)
            lines.append(f"user: {text.splitlines()[0] if text else ''}")
    return lines


def _replay(log: SessionLog, leaf: str) -> list[dict]:
    from mulligan.session.view import transcript

    return [message for _, message in transcript(log.branch(leaf))]


def entry_from(log: SessionLog, source_id: str) -> dict:
    return next(e for e in log.entries() if (e.get("source") or {}).get("id") == source_id)


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.jsonl")))
def test_every_fixture_imports_into_a_sound_session_naming_its_source(tmp_path, name):
    log = imported(tmp_path, name)
    info = log.entries()[0]
    assert info["type"] == "session_info" and info["imported"]["file"] == str(FIXTURES / name)
    check = subprocess.run([PYTHON, "-m", "mulligan", "sessions", "check", str(log.path)],
                           capture_output=True, text=True, env={**os.environ,
                                                                "MULLIGAN_HOME": str(tmp_path)})
    assert check.returncode == 0, check.stdout
    assert all("source" in e for e in log.entries()[1:])


def test_a_branched_claude_code_transcript_keeps_both_attempts_and_the_sidechain(tmp_path):
    log = imported(tmp_path, "claude-code-branched.jsonl")
    assert said(log) == [
        "user: Why does add() fail on strings? [image]",
        "ai: Let me read calc.py.", "call toolu_01 Read",
        "result toolu_01: 1→def add(a, b):",
        "ai: add() casts both sides with int(), so 'x' raises ValueError.",
        "user: No: raise a TypeError with a clear message.",
        "call toolu_02 Edit", "result toolu_02: The file calc.py has been updated.",
        "ai: add() now raises TypeError for strings."]
    first_attempt = entry_from(log, "a5")["id"]
    assert said(log, first_attempt)[-2:] == ["user: Make it concatenate strings instead.",
                                             "ai: Done: add() returns a + b for strings."]
    reply = entry_from(log, "a1")  # three records of one reply: one message, thinking first
    assert [b["type"] for b in reply["message"]["content"]] == ["thinking", "text", "toolCall"]
    assert reply["source"]["merged"] == ["a2", "a3"]
    side = entry_from(log, "s2")
    assert said(log, side["id"]) == ["user: Find every caller of add().",
                                     "ai: Only main.py calls add()."]
    info = log.entries()[0]
    assert info["name"] == "add() and strings" and info["cwd"] == "/home/ada/calc"
    assert info["imported"]["not_imported"] == {"file-history-snapshot": 1,
                                                "queue-operation": 1}


def test_a_branched_pi_session_keeps_its_tree_summary_compaction_and_label(tmp_path):
    log = imported(tmp_path, "pi-branched-v3.jsonl")
    left = entry_from(log, "c1000004")["id"]
    assert said(log, left) == ["user: speed up slow() in main.py",
                               "ai: I'll add a global cache.", "call toolu_p1 edit",
                               "result toolu_p1: Successfully replaced text in main.py.",
                               "ai: Added a global CACHE."]
    summary = entry_from(log, "e1000001")
    assert summary["type"] == "branch_summary" and summary["from_id"] == \
        entry_from(log, "d1000001")["id"]
    compaction = entry_from(log, "g1000001")
    assert compaction["first_kept_entry_id"] == entry_from(log, "f1000003")["id"]
    now = said(log)  # the compaction's summary, the kept part from f1000003, what follows
    assert "The user wants slow() fast" in log.replay()[0]["content"]
    assert now[1:] == ["call toolu_p2 edit",
                       "result toolu_p2: Successfully replaced text in main.py.",
                       "ai: slow() is now O(1): n*(n-1)//2."]
    assert log.tip() == entry_from(log, "g1000002")["id"]
    target = entry_from(log, "c1000002")["id"]
    assert labels_of(log.entries()) == {target: "cache attempt"}
    assert log.entries()[0]["name"] == "slow() without globals"


def test_codex_rollouts_old_and_new_become_one_branch_of_turns(tmp_path):
    log = imported(tmp_path, "codex-rollout.jsonl")
    assert said(log) == [
        "user: [imported Codex context]", "user: run the tests and fix what fails",
        "call call_1 shell", 'result call_1: {"output":"1 failed, 3 passed\\n","metadata":'
        '{"exit_code":1,"duration_seconds":1.2}}',
        "call call_2 apply_patch", "result call_2: Success. Updated the following files:",
        "ai: Fixed add(): it no longer casts to int. All 4 tests pass."]
    reply = next(e for e in log.entries() if e.get("source", {}).get("line") == 7)
    # the reasoning item and the call after it: one assistant message
    assert [b["type"] for b in reply["message"]["content"]] == ["thinking", "toolCall"]
    assert reply["message"]["content"][0]["encrypted_content"] == "gAAAAB-opaque"
    info = log.entries()[0]
    assert info["model"] == "gpt-5-codex" and info["imported"]["not_imported"][
        "event_msg user_message"] == 1
    older = imported(tmp_path, "codex-rollout-older.jsonl")
    assert said(older) == ["user: what does main.py print?", "call call_a shell",
                           "result call_a: {\"output\":\"print('hi')\\n\",\"metadata\":"
                           "{\"exit_code\":0}}",
                           "ai: It prints hi."]


def test_pi_version_1_and_tau_sessions_import_with_their_tips(tmp_path):
    linear = imported(tmp_path, "pi-linear-v1.jsonl")
    kinds = [e["type"] for e in linear.entries()]
    assert kinds.count("compaction") == 1 and said(linear)[-1].startswith(
        "user: [imported reminder message]")
    tau = imported(tmp_path, "tau-branched.jsonl")
    # The tip pointer named the first attempt's last result: the session ends there.
    assert said(tau)[-1] == "result call_t2: edited"
    assert tau.entry(tau.tip())["type"] == "branch"
    assert said(tau, entry_from(tau, "8b2")["id"])[-1] == "ai: Left as it is."


def test_importing_the_same_file_twice_gives_the_same_bytes(tmp_path):
    for name in ("claude-code-branched.jsonl", "pi-branched-v3.jsonl", "tau-branched.jsonl"):
        one, two = tmp_path / f"1-{name}", tmp_path / f"2-{name}"
        assert mulligan(tmp_path, str(FIXTURES / name), "-o", str(one)).returncode == 0
        assert mulligan(tmp_path, str(FIXTURES / name), "-o", str(two)).returncode == 0
        assert one.read_bytes() == two.read_bytes()


def test_the_wrong_tool_and_a_damaged_line_are_refused_by_name_writing_nothing(tmp_path):
    out = tmp_path / "out.jsonl"
    done = mulligan(tmp_path, str(FIXTURES / "pi-branched-v3.jsonl"), "--from", "codex",
                    "-o", str(out))
    assert done.returncode == 1 and "not a codex session" in done.stderr and \
        "pi-branched-v3.jsonl" in done.stderr and not out.exists()
    damaged = tmp_path / "damaged.jsonl"
    lines = (FIXTURES / "claude-code-branched.jsonl").read_text().splitlines()
    lines[4] = lines[4][:40]
    damaged.write_text("\n".join(lines) + "\n")
    done = mulligan(tmp_path, str(damaged), "-o", str(out))
    assert done.returncode == 1 and f"{damaged}: line 5" in done.stderr and not out.exists()
    assert "Traceback" not in done.stderr


def test_without_o_the_session_joins_this_folders_sessions(tmp_path):
    done = mulligan(tmp_path, str(FIXTURES / "codex-rollout.jsonl"))
    assert done.returncode == 0, done.stderr
    made = Path(done.stdout.splitlines()[-1])
    assert made.is_file() and (tmp_path / "home" / "sessions") in made.parents
    listed = subprocess.run([PYTHON, "-m", "mulligan", "sessions", "ls"], cwd=tmp_path / "work",
                            capture_output=True, text=True,
                            env={**os.environ, "MULLIGAN_HOME": str(tmp_path / "home")})
    assert str(made) in listed.stdout


def test_all_imports_every_session_each_tool_keeps_for_this_folder(tmp_path):
    work = (tmp_path / "work").resolve()
    work.mkdir()
    claude = tmp_path / "claude" / "projects" / str(work).replace("/", "-")
    claude.mkdir(parents=True)
    shutil.copy(FIXTURES / "claude-code-branched.jsonl", claude / "one.jsonl")
    (claude / "two.jsonl").write_text("not json\n")
    done = mulligan(tmp_path, "--all", "claude-code",
                    env={"CLAUDE_CONFIG_DIR": str(tmp_path / "claude")})
    assert done.returncode == 1  # one file could not be read: said, the other imported
    assert "two.jsonl: line 1 is not JSON" in done.stderr and "one.jsonl" in done.stdout
    pi = tmp_path / "pi" / "sessions" / ("--" + str(work).lstrip("/").replace("/", "-") + "--")
    pi.mkdir(parents=True)
    shutil.copy(FIXTURES / "pi-branched-v3.jsonl", pi / "s.jsonl")
    done = mulligan(tmp_path, "--all", "pi", env={"PI_CODING_AGENT_DIR": str(tmp_path / "pi")})
    assert done.returncode == 0 and "s.jsonl (pi, 15 entries)" in done.stdout
    codex = tmp_path / "codex" / "sessions" / "2025" / "10" / "29"
    codex.mkdir(parents=True)
    rollout = json.loads((FIXTURES / "codex-rollout.jsonl").read_text().splitlines()[0])
    rollout["payload"]["cwd"] = str(work)
    rest = (FIXTURES / "codex-rollout.jsonl").read_text().split("\n", 1)[1]
    (codex / "rollout-2025-10-29T00-59-38-x.jsonl").write_text(json.dumps(rollout) + "\n" + rest)
    shutil.copy(FIXTURES / "codex-rollout.jsonl", codex / "rollout-elsewhere.jsonl")
    done = mulligan(tmp_path, "--all", "codex", env={"CODEX_HOME": str(tmp_path / "codex")})
    assert done.returncode == 0 and done.stdout.count("imported ") == 1


SHARED = Path(__file__).resolve().parents[2] / "shared" / "import-fixtures"


def shared_fixtures() -> list[Path]:
    """Real session files the tools wrote, placed by the steering repo in
    shared/import-fixtures/<tool>/ (developers may not commit fetched data; see
    tests/fixtures/README.md); none there: nothing to run."""
    return sorted(SHARED.glob("*/*.jsonl")) if SHARED.is_dir() else []


@pytest.mark.skipif(not shared_fixtures(), reason="no shared/import-fixtures/<tool>/*.jsonl "
                    "placed by the steering repo")
@pytest.mark.parametrize("file", shared_fixtures(), ids=lambda f: f"{f.parent.name}/{f.name}")
def test_real_files_from_the_shared_folder_import_into_sound_sessions(tmp_path, file):
    out = tmp_path / "out.jsonl"
    done = mulligan(tmp_path, str(file), "--from", file.parent.name, "-o", str(out))
    assert done.returncode == 0, done.stderr
    check = subprocess.run([PYTHON, "-m", "mulligan", "sessions", "check", str(out)],
                           capture_output=True, text=True, env={**os.environ,
                                                                "MULLIGAN_HOME": str(tmp_path)})
    assert check.returncode == 0, check.stdout
