"""Runtimes: built-ins, [runtimes.NAME] overrides, quoting of the prompt path, the contract."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from looop_py.errors import ConfigError, WorkerRefused
from looop_py.workdir.config import Config, RuntimeConfig, load
from looop_py.workers import runtimes


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
        '{"type":"turn.completed","usage":{"input_tokens":5,"output_tokens":1}}\n'
    )
    assert runtimes.usage_from_output("codex", log) == {
        "input_tokens": 15,
        "output_tokens": 3,
        "total_tokens": 18,
        "cost_usd": None,
        "source": "stream",
    }
    assert runtimes.usage_from_output("", log) is None
    assert runtimes.usage_from_output("claude", log) is None
