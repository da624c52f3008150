"""Secrets stay with the decider: no child of looop sees the key, and an echoed key is redacted."""

from __future__ import annotations

import fnmatch
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from looop_py.beat.pulse import beat
from looop_py.deciders.base import DecideError, DecideRequest, Decision
from looop_py.loops import advance
from looop_py.loops.specs import load_spec
from looop_py.moves import act, union
from looop_py.workdir import config as config_mod
from looop_py.workdir import environ, journal
from looop_py.workdir.paths import Paths
from tests.conftest import open_wd, wait_for, write_sensor

KEY = "sk-live-decider-0123456789abcdef"  # named by [decider] api_key_env
SECRETS = {
    "MY_LLM_KEY": KEY,
    "OPENAI_API_KEY": "sk-openai-0123456789",
    "GH_TOKEN": "ghp_0123456789abcdef",
    "DEPLOY_SECRET": "deploy-secret-value-42",
    "RUNTIME_ONLY_API_KEY": "rt-key-0123456789",
}
LOOP = "---\nintent: x\nlevel: L2-assisted\naction: ship\nmaker: x\n---\n"


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PLAIN_SETTING", "visible-to-children")
    return SECRETS


def _config(wd: Paths, extra: str = "") -> config_mod.Config:
    wd.config.write_text(
        '[decider]\nbackend = "noop"\napi_key_env = "MY_LLM_KEY"\n'
        '[gates]\nallow_sensors = ["*"]\nallow_runtimes = ["shell", "keyed"]\n'
        'shell_allow = ["printenv *"]\n'
        '[runtimes.keyed]\ncommand = "env > envs/keyed.txt # {{prompt_file}}"\n'
        'env = ["RUNTIME_ONLY_API_KEY"]\n' + extra
    )
    return config_mod.load(wd.config)


def _seen(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return dict(pairs)


def test_no_child_process_inherits_the_key(wd: Paths, secrets: dict[str, str]) -> None:
    _config(wd)
    out = wd.root / "envs"
    out.mkdir()
    write_sensor(wd, "dump", f"env > {out}/sensor.txt; echo ok")
    now = time.time()
    beat(open_wd(wd))  # the sensor
    # run_shell (an approved command, through bash), a worker with a verify command
    shell = union.parse({"action": "run_shell", "cmd": f"env > {out}/shell.txt"})
    assert act.execute(open_wd(wd), shell, now, approved=True).ok
    worker = union.parse(
        {
            "action": "start_worker",
            "id": "w1",
            "prompt": f"env > {out}/worker.txt",
            "runtime": "shell",
            "verify": f"env > {out}/verify.txt",
        }
    )
    assert act.execute(open_wd(wd), worker, now, approved=True).ok
    keyed = union.parse(
        {
            "action": "start_worker",
            "id": "w2",
            "prompt": f"env > {out}/keyed.txt",
            "runtime": "keyed",
        }
    )
    assert act.execute(open_wd(wd), keyed, now).ok
    wait_for(lambda: (out / "worker.txt").exists() and (out / "keyed.txt").exists(), 20)
    wait_for(lambda: beat(open_wd(wd), force=True) and (out / "verify.txt").exists(), 20, "verify")
    # the loop action executor gets the same scrubbed environment
    (wd.goals / "ship.md").write_text(LOOP)
    engine = advance.engine_for(open_wd(wd), load_spec(open_wd(wd), "ship"))
    action_env = engine.executor.env  # type: ignore[attr-defined]
    for where in ("sensor", "shell", "worker", "verify", "keyed"):
        env = _seen(out / f"{where}.txt")
        assert env.get("PLAIN_SETTING") == "visible-to-children", where
        leaked = {n for n in secrets if n in env}
        assert leaked == ({"RUNTIME_ONLY_API_KEY"} if where == "keyed" else set()), where
        assert KEY not in (out / f"{where}.txt").read_text()
    assert not set(secrets) & set(action_env) and action_env["PLAIN_SETTING"]
    # the decider alone gets the whole environment
    assert environ.decider_env(wd)["MY_LLM_KEY"] == KEY


def test_keep_and_scrub_are_configurable(wd: Paths, secrets: dict[str, str]) -> None:
    cfg = _config(wd, '[env]\nscrub = ["*_SECRET"]\nkeep = ["DEPLOY_SECRET"]\n')
    env = environ.child_env(wd, config=cfg)
    assert env["GH_TOKEN"] == SECRETS["GH_TOKEN"]  # no longer matched
    assert env["DEPLOY_SECRET"] == SECRETS["DEPLOY_SECRET"]  # kept on purpose
    assert "MY_LLM_KEY" not in env and "OPENAI_API_KEY" not in env  # decider keys: always


class Leaky:
    """A provider whose error text and output echo the key back."""

    name = "leaky"

    def __init__(self, fail: bool) -> None:
        self.fail = fail

    def decide(self, request: DecideRequest) -> Decision:
        if self.fail:
            raise DecideError(f"HTTP 401: Incorrect API key provided: {KEY}")
        move = {"action": "noop", "reason": f"key is {KEY}", "journal": f"echo {KEY}"}
        return Decision(move=move, raw=f"I was told {KEY} and {SECRETS['GH_TOKEN']}")


def test_an_echoed_key_never_lands_in_a_file(wd: Paths, secrets: dict[str, str]) -> None:
    _config(wd)
    failed = beat(open_wd(wd), decider=Leaky(fail=True))
    assert failed.outcome == "failed" and environ.REDACTED in (failed.reason or "")
    assert KEY not in (failed.reason or "")
    ok = beat(open_wd(wd, clock=lambda: time.time() + 400), decider=Leaky(fail=False))
    assert ok.outcome == "decided", ok.reason
    assert environ.REDACTED in journal.tail(wd, 1)[0]
    for path in wd.root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for value in secrets.values():
                assert value.encode() not in data, (path, value)


# -- scrub patterns matched without fnmatch's regexes (environ.matcher) --------------------

GLOB_CHARS = "AZ_az09*?[]!.-\\^$()|+{}"


def _fnmatch_any(name: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


@settings(max_examples=3000, deadline=None)
@given(
    names=st.lists(st.text(alphabet=GLOB_CHARS, max_size=8), max_size=4),
    patterns=st.lists(st.text(alphabet=GLOB_CHARS, max_size=8), max_size=4),
)
def test_matcher_is_fnmatchcase_for_any_names_and_patterns(
    names: list[str], patterns: list[str]
) -> None:
    matches = environ.matcher(patterns)
    for name in names:
        assert matches(name) == _fnmatch_any(name, patterns), (name, patterns)


def test_matcher_agrees_on_the_default_patterns_and_the_hard_ones() -> None:
    names = ["", "KEY", "_KEY", "MY_KEY", "MY_KEY_ID", "AWS_SECRET_ACCESS_KEY", "PGPASSWORD"]
    names += ["my_key", "X_TOKENS", "SECRETS", "A*KEY", "A?B", "[x]", "CREDENTIALS_FILE"]
    patterns = [*config_mod.DEFAULT_SCRUB, "*", "**", "", "KEY*", "A*B", "A?B", "[x]", "*[!A]"]
    for chosen in [patterns, *([p] for p in patterns)]:  # all of them, then one at a time
        matches = environ.matcher(chosen)
        for name in names:
            assert matches(name) == _fnmatch_any(name, chosen), (name, chosen)
    assert environ.matcher([])("ANY") is False
