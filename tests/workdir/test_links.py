"""A goal, sensor or PLAYBOOK linking out of the work dir is not followed unless allowed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from looop_py.beat.pulse import beat
from looop_py.deciders.base import DecideRequest, Decision
from looop_py.engine.spec import LoopSpecError
from looop_py.loops.index import index
from looop_py.loops.specs import load_spec
from looop_py.workdir.paths import Paths
from tests.conftest import open_wd

SECRET = "TOPSECRET-outside-the-work-dir"


class Recorder:
    name = "recorder"

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def decide(self, request: DecideRequest) -> Decision:
        self.prompts.append(request.prompt)
        return Decision(move={"action": "noop"}, raw="")


@pytest.fixture
def linked(wd: Paths, tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "goal.md").write_text(
        f"---\nintent: {SECRET}\nlevel: L3-unattended\nmaker: touch {outside}/ran\n---\n"
    )
    (outside / "pb.md").write_text(f"Policy: {SECRET}\n")
    script = outside / "sensor.sh"
    script.write_text(f"#!/bin/sh\ntouch {outside}/sensed\necho {SECRET}\n")
    script.chmod(0o755)
    os.symlink(outside / "goal.md", wd.goals / "evil.md")
    os.symlink(outside / "sensor.sh", wd.sensors / "evil.sh")
    wd.playbook.unlink()
    os.symlink(outside / "pb.md", wd.playbook)
    (wd.goals / "real.md").write_text("# A goal inside\n")
    os.symlink("real.md", wd.goals / "alias.md")  # a link inside the work dir is fine
    return outside


def test_links_out_of_the_work_dir_are_not_followed(wd: Paths, linked: Path) -> None:
    d = Recorder()
    result = beat(open_wd(wd), decider=d)
    assert result.outcome == "decided"
    prompt = d.prompts[0]
    assert SECRET not in prompt
    assert "goals/evil.md is a symlink to" in prompt and "PLAYBOOK.md is a symlink to" in prompt
    assert "A goal inside" in prompt.split("alias", 1)[1]
    assert not (linked / "sensed").exists()
    snap = next(r.snapshot for r in result.readings if r.stem == "sensor-evil")
    assert snap["signal"] == {"error": "outside-link"}
    assert "sensors/evil.sh is a symlink to" in snap["detail"]["message"]
    assert "allow_outside_links" in snap["detail"]["message"]
    assert "evil" not in index(open_wd(wd))
    with pytest.raises(LoopSpecError, match="outside the work dir"):
        load_spec(open_wd(wd), "evil")


def test_looop_toml_can_allow_them(wd: Paths, linked: Path) -> None:
    wd.config.write_text('[decider]\nbackend = "noop"\n[gates]\nallow_outside_links = true\n')
    d = Recorder()
    beat(open_wd(wd), decider=d)
    assert SECRET in d.prompts[0] and (linked / "sensed").exists()
    assert load_spec(open_wd(wd), "evil").intent == SECRET
