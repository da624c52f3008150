"""A model's worker on an agent that runs its tools unasked waits for a human.

claude with --dangerously-skip-permissions, codex with
--dangerously-bypass-approvals-and-sandbox, pi (no prompts at all): a prompt to them
is as good as code, so a model-proposed start_worker is held (the ask shows the
prompt) unless `[gates] allow_runtimes` names the runtime or a goal file a human
wrote defines exactly this worker.
"""

from __future__ import annotations

import pytest

from looop_py.asks import mailbox
from looop_py.moves import act, gate, union
from looop_py.workdir.paths import Paths
from tests.conftest import open_wd

PROMPT = "Delete the test suite and push to main."

CUSTOM = (  # agents the human declared prose-reading (executes_prompt = false) …
    '[runtimes.yolo]\ncommand = "claude -p --permission-mode bypassPermissions < {{prompt_file}}"\n'
    "executes_prompt = false\n"
    '[runtimes.gem]\ncommand = "gemini --yolo < {{prompt_file}}"\nexecutes_prompt = false\n'
)  # … whose flags still turn their permission prompts off


@pytest.mark.parametrize("runtime", ["claude", "codex", "pi", "yolo", "gem"])
def test_a_models_unattended_agent_worker_is_held_showing_its_prompt(
    wd: Paths, runtime: str
) -> None:
    wd.config.write_text(wd.config.read_text() + CUSTOM)
    move = union.parse({"action": "start_worker", "id": "w1", "prompt": PROMPT, "runtime": runtime})
    outcome = act.execute(open_wd(wd), move, 1.0)
    assert outcome.held is not None, outcome
    assert not (wd.sessions / "w1").exists()  # nothing started
    ask = mailbox.get_ask(open_wd(wd), outcome.held)
    assert PROMPT in ask.prompt and "permission prompts off" in ask.prompt


@pytest.mark.parametrize("runtime", ["claude", "pi"])
def test_a_rule_the_human_wrote_lets_it_start(wd: Paths, runtime: str) -> None:
    wd.config.write_text(wd.config.read_text() + f'[gates]\nallow_runtimes = ["{runtime}"]\n')
    move = union.parse({"action": "start_worker", "id": "w1", "prompt": PROMPT, "runtime": runtime})
    verdict, _ = gate.judge(open_wd(wd), move)
    assert not verdict.needs_approval and "allow_runtimes" in (verdict.allowed_by or "")


def test_an_agent_that_asks_before_it_acts_is_still_prose(wd: Paths) -> None:
    """aider declines shell commands; a custom claude without the bypass flag asks."""
    wd.config.write_text(
        wd.config.read_text()
        + '[runtimes.careful]\ncommand = "claude -p < {{prompt_file}}"\nexecutes_prompt = false\n'
    )
    for runtime in ("aider", "careful"):
        move = union.parse(
            {"action": "start_worker", "id": "w1", "prompt": PROMPT, "runtime": runtime}
        )
        verdict, _ = gate.judge(open_wd(wd), move)
        assert not verdict.needs_approval, runtime
