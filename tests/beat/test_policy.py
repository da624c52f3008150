"""The policy hash (the part of the world a human edits: PLAYBOOK.md and the goals) is
worked out by SENSE in the same pass as the world hash, and still cuts a backoff short."""

from __future__ import annotations

import random

from looop_py import world
from looop_py.beat.decide import policy_hash
from looop_py.beat.pulse import beat
from looop_py.deciders.base import DecideRequest, Decision, PermanentError
from looop_py.spend import limits
from looop_py.workdir.paths import Paths
from tests.conftest import open_wd, write_sensor


class Failing:
    name = "failing"

    def decide(self, request: DecideRequest) -> Decision:
        raise PermanentError("always fails")


def test_a_sensor_change_is_held_by_the_backoff_a_goal_edit_is_not(wd: Paths) -> None:
    flag = wd.root / "flag"
    flag.write_text("a")
    write_sensor(wd, "flag", f"cat {flag}")
    (wd.goals / "tidy.md").write_text("# Tidy\n")
    first = beat(open_wd(wd), decider=Failing())
    assert first.outcome == "failed"
    armed = limits.load(open_wd(wd)).backoff
    assert armed.fails == 1 and armed.policy is not None
    flag.write_text("b")  # a reading changed: not the policy
    held = beat(open_wd(wd), decider=Failing())
    assert held.outcome == "held" and "backoff" in (held.reason or "")
    (wd.goals / "tidy.md").write_text("# Tidy, edited\n")
    retried = beat(open_wd(wd), decider=Failing())
    assert retried.outcome == "failed", "a goal edit retries at once"
    assert limits.load(open_wd(wd)).backoff.policy != armed.policy


def test_the_two_hashes_of_one_pass_are_the_world_hash_and_the_policy_hash() -> None:
    items = {"playbook": "xxh3:p", "goal:a": "xxh3:a", "goal:b": "xxh3:b", "snap:s": '"x"'}
    items |= {"playbook@h": "1", "goals:x": "2", "snap:goal:y": "3", "goal:c@h": "4", "": ""}
    pairs = list(items.items())
    for seed in range(20):  # any order: each hash follows the map's own order
        random.Random(seed).shuffle(pairs)
        shuffled = dict(pairs)
        policy = {k: v for k, v in shuffled.items() if k == "playbook" or k.startswith("goal:")}
        assert world.hashes(shuffled) == (world.world_hash(shuffled), world.world_hash(policy))
        assert policy_hash(shuffled) == world.world_hash(policy)
    assert world.hashes({}) == (world.world_hash({}), world.world_hash({}))


def test_the_sensed_world_carries_its_policy_hash(wd: Paths) -> None:
    (wd.goals / "tidy.md").write_text("# Tidy\n")
    from looop_py.sensing.sense import sense

    w = open_wd(wd)
    with w.memo.scope():
        seen = sense(w, 1000.0)
    assert seen.policy == policy_hash(seen.items)
    assert seen.hash == world.world_hash(seen.items)
