"""Runtimes: built-ins, [runtimes.NAME] overrides, quoting of the prompt path, the contract."""

from __future__ import annotations

import errno
import json
import subprocess
from pathlib import Path

import pytest

from looop_py.errors import ConfigError, LooopError, WorkerRefused
from looop_py.workdir.config import Config, RuntimeConfig, load
from looop_py.workdir.paths import Paths
from looop_py.workers import launch, records, runtimes, streams


def config_with(tmp_path: Path, text: str) -> Config:
    p = tmp_path / "looop.toml"
    p.write_text(text)
    return load(p)


def test_builtins_and_default() -> None:
    cfg = Config()
    assert runtimes.resolve(cfg, None).name == "shell"
    assert set(runtimes.known(cfg)) == {"claude", "codex", "pi", "aider", "shell"}
    for name in runtimes.known(cfg):
        assert runtimes.PLACEHOLDER in runtimes.resolve(cfg, name).command
    assert runtimes.resolve(cfg, "claude").usage == "claude"
    with pytest.raises(WorkerRefused, match="unknown runtime 'nope'") as info:
        runtimes.resolve(cfg, "nope")
    assert "[runtimes.nope]" in str(info.value)


def test_config_overrides_and_adds(tmp_path: Path) -> None:
    cfg = config_with(
        tmp_path,
        "[workers]\ndefault_runtime = 'mine'\n"
        "[runtimes.mine]\ncommand = 'mytool --file {{prompt_file}}'\n"
        "[runtimes.claude]\ncommand = 'claude -p --model opus < {{prompt_file}}'\n",
    )
    assert cfg.runtimes["mine"] == RuntimeConfig(command="mytool --file {{prompt_file}}")
    mine = runtimes.resolve(cfg, None)
    assert (mine.name, mine.usage, mine.script) == ("mine", "", False)
    claude = runtimes.resolve(cfg, "claude")
    assert "--model opus" in claude.command and claude.usage == "claude"  # keeps its stream


@pytest.mark.parametrize(
    "text,needle",
    [
        ("[runtimes.x]\ncommand = 'tool'\n", "runtimes.x.command: does not hold {{prompt_file}}"),
        ("[runtimes.x]\nusage = 'claude'\n", "runtimes.x.command: a new runtime needs a command"),
        ("[runtimes.x]\ncommand = 't {{prompt_file}}'\nusage = 'gpt'\n", "runtimes.x.usage: must"),
        (
            "[runtimes.x]\ncommand = 't {{prompt_file}}'\nread_only = 't'\n",
            "runtimes.x.read_only: does not hold",
        ),
    ],
)
def test_bad_runtimes_are_refused_by_name_when_looop_toml_loads(
    tmp_path: Path, text: str, needle: str
) -> None:
    with pytest.raises(ConfigError) as info:
        config_with(tmp_path, text)
    assert needle in str(info.value) and "looop.toml: " in str(info.value)


def test_resolve_still_refuses_a_bad_runtime_built_without_the_loader() -> None:
    cfg = Config(runtimes={"x": RuntimeConfig(command="tool")})
    with pytest.raises(ConfigError, match="does not hold"):
        runtimes.resolve(cfg, "x")


@pytest.mark.parametrize(
    "text,needle",
    [
        ("[runtimes.x]\ncmd = 'a'\n", "unknown key runtimes.x.cmd"),
        ("[runtimes]\nx = 3\n", "[runtimes.x] should be a table"),
        ("runtimes = 3\n", "[runtimes] should be a table of tables"),
        ('[runtimes."../x"]\ncommand = "a"\n', "unsafe name"),
    ],
)
def test_runtime_tables_are_checked(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        config_with(tmp_path, text)
    assert needle in str(info.value)


def test_prompt_path_is_shell_quoted(tmp_path: Path) -> None:
    odd = tmp_path / "a b" / "it's $HOME.md"
    odd.parent.mkdir()
    odd.write_text("echo quoted-ok\n")
    for template in ("bash {{prompt_file}}", "bash '{{prompt_file}}'", 'bash "{{prompt_file}}"'):
        rt = runtimes.Runtime("t", template)
        cmd = runtimes.launch_command(rt, odd)
        out = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True)
        assert out.stdout == "quoted-ok\n", (template, cmd, out.stderr)


def test_contract_is_comments_for_shell_and_text_for_agents() -> None:
    shell = runtimes.prompt_text("w1", runtimes.BUILTINS["shell"], "echo hi", None)
    head, _, body = shell.partition("\n\n")
    assert all(line.startswith("#") for line in head.splitlines())
    assert body == "echo hi\n"
    assert '"$LOOOP_BIN" ask --prompt' in head and "looop/" not in head
    agent = runtimes.prompt_text("w1", runtimes.BUILTINS["claude"], "Fix CI", Path("/wt/w1"))
    assert agent.startswith("LOOOP WORKER CONTRACT (session w1, runtime claude)")
    for needle in (
        "claim NAME",
        "unclaim NAME",
        "LOOOP_REPORTS_DIR",
        "PLAYBOOK.md",
        "done --status",
    ):
        assert needle in agent
    assert "/wt/w1 on branch looop/w1" in agent and agent.endswith("Fix CI\n")


def test_usage_from_codex_turns(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    log.write_text(
        '{"type":"turn.completed","usage":{"input_tokens":10,"output_tokens":2}}\n'
        "not json\n"
        '{"type":"turn.completed","usage":{"input_tokens":5,"cached_input_tokens":4,'
        '"output_tokens":1}}\n'
    )
    assert runtimes.usage_from_output("codex", log) == {
        "input_tokens": 15,
        "output_tokens": 3,
        "total_tokens": 18,
        "cache_read_tokens": 4,
        "cache_write_tokens": 0,
        "cost_usd": None,
        "source": "stream",
    }
    assert runtimes.usage_from_output("", log) is None
    assert runtimes.usage_from_output("claude", log) is None


def test_done_on_a_read_only_file_system_says_what_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = Paths(tmp_path)
    (paths.sessions / "w1").mkdir(parents=True)

    def refuse(path: Path, value: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    monkeypatch.setattr(records.jsonio, "write_json", refuse)
    with pytest.raises(LooopError, match="Read-only file system") as info:
        records.report(paths, "w1", status="done", summary="s", tokens=None, cost_usd=None, now=0.0)
    assert info.value.exit_code == 1
    assert "final message" in str(info.value.hint)


def test_usage_and_final_word_from_a_pi_stream(tmp_path: Path) -> None:
    def end(text: str, inp: int, cost: float, **extra: object) -> str:
        message = {
            "role": "assistant",
            "content": [{"type": "text", "text": text}],
            "usage": {"input": inp, "output": 5, "cacheRead": 1, "cost": {"total": cost}},
            **extra,
        }
        return json.dumps({"type": "message_end", "message": message}) + "\n"

    log = tmp_path / "out.log"
    log.write_text(
        '{"type":"agent_start"}\n{"type":"compaction_start"}\n'
        + end("calling a tool", 10, 0.5)
        + end("All done.", 20, 0.25)
    )
    got = streams.read("pi", log)
    assert got.usage is not None
    assert (got.usage["input_tokens"], got.usage["output_tokens"]) == (32, 10)
    assert (got.usage["cache_read_tokens"], got.usage["cache_write_tokens"]) == (2, 0)
    assert got.usage["cost_usd"] == pytest.approx(0.75)
    derived = streams.derived_result(got, 0, 1.0)
    assert derived is not None
    assert (derived["status"], derived["summary"], derived["source"]) == (
        "done",
        "All done.",
        "envelope",
    )
    assert streams.derived_result(got, 1, 1.0)["status"] == "blocked"  # type: ignore[index]
    assert streams.derived_result(streams.read("", log), 0, 1.0) is None


def test_a_runtime_whose_program_is_not_on_path_is_refused_at_start(tmp_path: Path) -> None:
    with pytest.raises(WorkerRefused, match="runs 'no-such-cli-x', which is not on PATH"):
        launch.check_runnable(
            "no-such-cli-x --file {{prompt_file}}", "ghost", {"PATH": str(tmp_path)}
        )
    launch.check_runnable("cd /tmp && no-such-cli-x {{prompt_file}}", "x", {"PATH": str(tmp_path)})


def test_claude_as_root_is_explained_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    claude = tmp_path / "claude"
    claude.write_text("#!/bin/sh\n")
    claude.chmod(0o755)
    cmd = runtimes.BUILTINS["claude"].command
    monkeypatch.setattr(launch.os, "geteuid", lambda: 0)
    with pytest.raises(WorkerRefused, match="as root") as info:
        launch.check_runnable(cmd, "claude", {"PATH": str(tmp_path)})
    assert "IS_SANDBOX=1" in str(info.value.hint)
    launch.check_runnable(cmd, "claude", {"PATH": str(tmp_path), "IS_SANDBOX": "1"})
    read_only = runtimes.BUILTINS["claude"].read_only  # plan mode skips nothing: allowed
    launch.check_runnable(read_only, "claude", {"PATH": str(tmp_path)})


def test_prose_on_the_shell_runtime_is_refused_with_a_hint() -> None:
    env = {"PATH": "/usr/bin:/bin"}
    with pytest.raises(WorkerRefused, match="'Summarize' is not a command") as info:
        launch.check_script("Summarize open PRs", "shell", env)
    assert "--runtime claude" in str(info.value.hint)
    for script in ("# a comment\necho hi", "x=1; echo $x", "./run.sh", "if true; then :; fi"):
        launch.check_script(script, "shell", env)


def _aider_files(d: Path, events: list[dict[str, object]], chat: str) -> Path:
    d.mkdir(exist_ok=True)
    (d / "aider.events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (d / "aider.chat.md").write_text(chat)
    log = d / "output.log"
    log.write_text("Aider v0.86.2\n")
    return log


ASKED = "\n# aider chat started at 2026-01-01\n\n> aider --message-file p.md  \n\n#### Do it.  \n"
SENT = {"event": "message_send_starting"}


def _replied(inp: int, out: int, cost: float) -> dict[str, object]:
    return {
        "event": "message_send",
        "properties": {"prompt_tokens": inp, "completion_tokens": out, "cost": cost},
    }


def test_aider_usage_and_status_line_from_its_event_log_and_chat_history(tmp_path: Path) -> None:
    chat = (
        ASKED
        + "\nfirst try\n\n> Tokens: 100 sent, 10 received.  \n> Applied edit to a.txt  \n"
        + "\nFixed it.\n\n#### not a prompt\nSTATUS: done-with-concerns: tests still slow\n\n"
        + "> Tokens: 20 sent, 5 received.  \n"
    )
    events = [SENT, _replied(100, 10, 0.5), SENT, _replied(20, 5, 0.25), {"event": "exit"}]
    got = streams.read("aider", _aider_files(tmp_path, events, chat))
    assert got.usage == {
        "input_tokens": 120,
        "output_tokens": 15,
        "total_tokens": 135,
        "cost_usd": 0.75,
        "source": "aider-events",
    }
    derived = streams.derived_result(got, 0, 1.0)
    assert derived is not None
    assert (derived["status"], derived["summary"]) == ("done-with-concerns", "tests still slow")


def test_aider_without_a_status_line_or_a_price_is_done_with_concerns(tmp_path: Path) -> None:
    log = _aider_files(tmp_path, [SENT, _replied(7, 3, 0)], ASKED + "\nAll good.\n\n")
    got = streams.read("aider", log)
    assert got.usage is not None and got.usage["cost_usd"] is None  # aider knew no price
    derived = streams.derived_result(got, 0, 1.0)
    assert derived is not None and derived["status"] == "done-with-concerns"
    assert derived["summary"] == "no STATUS line in aider's last reply, which says: All good."


def test_an_aider_request_without_a_reply_is_blocked_in_aider_s_words(tmp_path: Path) -> None:
    chat = ASKED + (
        "> litellm.AuthenticationError: AuthenticationError: OpenAIException - bad key  \n"
        "> The API provider is not able to authenticate you. Check your API key.  \n"
    )
    got = streams.read("aider", _aider_files(tmp_path, [SENT, {"event": "exit"}], chat))
    assert got.usage is None
    derived = streams.derived_result(got, 0, 1.0)
    assert derived is not None and derived["status"] == "blocked"
    assert derived["summary"].endswith(
        "bad key The API provider is not able to authenticate you. Check your API key."
    )
    # A reply, then a failed follow-up: still blocked, the error after the tokens line.
    chat2 = ASKED + "\nSTATUS: done: x\n\n> Tokens: 1 sent, 1 received.  \n> boom  \n"
    events = [SENT, _replied(1, 1, 0), SENT]
    derived = streams.derived_result(
        streams.read("aider", _aider_files(tmp_path, events, chat2)), 0, 1.0
    )
    assert derived is not None and (derived["status"], derived["summary"]) == ("blocked", "boom")
    # Nothing from aider at all (it died at start): the log's last lines, and the exit.
    for f in ("aider.events.jsonl", "aider.chat.md"):
        (tmp_path / f).unlink()
    assert streams.read("aider", tmp_path / "output.log").final is None


def test_leading_assignments_do_not_hide_the_program_from_the_path_check(tmp_path: Path) -> None:
    with pytest.raises(WorkerRefused, match="runs 'aider', which is not on PATH"):
        launch.check_runnable(runtimes.BUILTINS["aider"].command, "aider", {"PATH": str(tmp_path)})


def test_the_aider_contract_asks_for_a_status_line_not_for_commands() -> None:
    text = runtimes.prompt_text("w1", runtimes.BUILTINS["aider"], "Fix CI", Path("/wt/w1"))
    assert "STATUS: done|done-with-concerns|blocked" in text
    assert "$LOOOP_BIN" not in text and "claim NAME" not in text
    assert "uncommitted" in text and text.endswith("Fix CI\n")


def test_a_claude_worker_s_cut_stream_is_counted_from_model_usage(tmp_path: Path) -> None:
    """After a cut stream claude's result says `usage` 0; modelUsage keeps what was billed."""
    result = {
        "type": "result",
        "subtype": "error_during_execution",
        "is_error": True,
        "result": "API Error: Connection error.",
        "total_cost_usd": 0.0042,
        "usage": {"input_tokens": 0, "output_tokens": 0},
        "modelUsage": {
            "claude-sonnet-5": {
                "inputTokens": 300,
                "outputTokens": 40,
                "cacheReadInputTokens": 900,
                "cacheCreationInputTokens": 0,
            }
        },
    }
    log = tmp_path / "output.log"
    log.write_text(json.dumps(result) + "\n")
    usage = streams.read("claude", log).usage
    assert usage is not None
    assert (usage["input_tokens"], usage["output_tokens"]) == (1200, 40)
    assert (usage["cache_read_tokens"], usage["cost_usd"]) == (900, 0.0042)


AIDER_RETRY = (
    b"\nlitellm.InternalServerError: InternalServerError: OpenAIException - internal \n"
    b"error in the fake model server\nThe API provider's servers are down or overloaded.\n"
    b"Retrying in 0.2 seconds...\n"
)


@pytest.mark.parametrize(
    "said",
    [
        b"Retrying in 0.2 seconds...\n",  # no error before it
        b"litellm.X: y\n\nRetrying in 0.2 seconds...\n",  # a blank line between: another block
        b"litellm.X: y\nRetrying in 0.2 seconds...\nSTATUS: done: ok\n",  # not what ends it
        b"litellm.X: y\nRetrying in a moment...\n",  # not aider's line
        b"litellm.X: y\n  Retrying in 0.2 seconds... or so\n",
        b"litellm.X: y\nRetrying in 0.2 seconds...",  # unfinished: aider ends its lines
    ],
)
def test_aider_s_retry_line_is_not_what_a_reply_or_a_partial_line_says(said: bytes) -> None:
    from looop_py.workers import aider

    assert aider.RetryWatch().feed(b"Aider v0.86.2\n" + said) == 0


def test_aider_s_retry_line_is_counted_however_its_output_is_cut_into_reads() -> None:
    from looop_py.workers import aider

    for size in (1, 7, len(AIDER_RETRY)):
        watch = aider.RetryWatch()
        seen = [watch.feed(AIDER_RETRY[i : i + size]) for i in range(0, len(AIDER_RETRY), size)]
        assert seen[-1] == 1 and seen.count(1) >= 1, size
    watch = aider.RetryWatch()
    assert watch.feed(AIDER_RETRY) == 1
    assert watch.feed(AIDER_RETRY.replace(b"0.2", b"0.5")) == 2
