from __future__ import annotations

from looop_py.workdir.paths import Paths
from looop_py.world import Change, build_items, diff, world_hash
from tests.conftest import open_wd


def test_items_order_and_values() -> None:
    items = build_items(
        b"pb", [("b", b"B"), ("a", b"A")], [("sys-goals", {}), ("sensor-x", {"k": 1, "a": [2]})]
    )
    assert list(items) == ["playbook", "goal:a", "goal:b", "snap:sensor-x", "snap:sys-goals"]
    assert items["snap:sensor-x"] == '{"a":[2],"k":1}'
    assert items["playbook"].startswith("xxh3:") and len(items["playbook"]) == 37


def test_hash_is_stable_and_key_order_insensitive_inside_signals() -> None:
    a = build_items(None, [], [("s", {"x": 1, "y": 2})])
    b = build_items(None, [], [("s", {"y": 2, "x": 1})])
    assert world_hash(a) == world_hash(b)


def test_length_prefix_prevents_framing_collisions() -> None:
    assert world_hash({"ab": "c"}) != world_hash({"a": "bc"})
    assert world_hash({"a": "b", "c": "d"}) != world_hash({"a": "bc", "": "d"})


def test_no_playbook_differs_from_empty_playbook() -> None:
    assert world_hash(build_items(None, [], [])) != world_hash(build_items(b"", [], []))


def test_diff_reports_appeared_changed_gone() -> None:
    changes = diff({"a": "1", "b": "2"}, {"b": "3", "c": "4"})
    assert changes == [Change("b", "2", "3"), Change("c", None, "4"), Change("a", "1", None)]
    assert [c.kind for c in changes] == ["changed", "appeared", "gone"]
    assert Change("x", "a" * 500, None).to_json(limit=10)["old"] == "a" * 9 + "…"


def test_world_hash_of_a_fixed_work_dir_is_pinned(wd: Paths) -> None:
    """The quiet path may be made faster, never different: this hash is today's value."""
    from looop_py.beat.pulse import beat
    from tests.conftest import write_sensor

    for i in range(3):
        write_sensor(wd, f"s{i}", f'echo \'{{"signal": {{"n": {i}}}, "detail": {{"x": 1}}}}\'\n')
    write_sensor(wd, "plain", "echo 'not json'\n")
    for g in wd.goals.glob("*.md"):
        g.unlink()
    for i in range(5):
        (wd.goals / f"goal-{i}.md").write_text(f"# Goal {i}\n\nKeep thing {i} tidy.\n")
    (wd.root / "PLAYBOOK.md").write_text("# Playbook\n\nBe careful.\n")
    first = beat(open_wd(wd, clock=lambda: 1_700_000_000.0))
    second = beat(open_wd(wd, clock=lambda: 1_700_000_060.0))
    assert second.outcome.value == "skipped"
    assert first.world_hash == second.world_hash
    assert first.world_hash == PINNED_WORLD_HASH, first.world_hash


PINNED_WORLD_HASH = "xxh3:d97b0ded19d407b8678e22c425f01861"


class _Looked(dict[str, str]):
    """An item map that counts the items looked up in it one by one."""

    looks = 0

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        _Looked.looks += 1
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        _Looked.looks += 1
        return super().__contains__(key)


def test_diff_of_equal_maps_looks_up_no_item_and_any_change_is_still_found() -> None:
    items = {"playbook": "p", **{f"goal:g{i}": f"d{i}" for i in range(1000)}, "snap:s": "1"}
    _Looked.looks = 0
    assert diff(_Looked(items), dict(reversed(items.items()))) == []  # order alone is no change
    assert _Looked.looks == 0, "equal maps were compared item by item"
    for key in ("playbook", "goal:g500", "snap:s"):
        changed = {**items, key: "x"}
        assert diff(items, changed) == [Change(key, items[key], "x")]
        assert diff(changed, items) == [Change(key, "x", items[key])]
    assert diff(items, {**items, "goal:new": "n"}) == [Change("goal:new", None, "n")]


def test_a_sensed_world_holds_one_snap_item_per_snapshot_sorted_and_last(wd: Paths) -> None:
    """beat/decide.py takes the flap streaks' snap: items by the snapshots' names, not by a
    pass over every item: that is the same map, in the same order, only while this holds."""
    import time

    from looop_py.sensing.sense import sense
    from tests.conftest import write_sensor

    write_sensor(wd, "zeta", 'echo \'{"signal": {"n": 1}}\'\n')
    write_sensor(wd, "alpha", "exit 3\n")  # a broken sensor is a snapshot too
    for i in range(30):
        (wd.goals / f"g{i}.md").write_text(f"# {i}\n")
    w = open_wd(wd)
    with w.memo.scope():
        seen = sense(w, time.time(), persist=False)
    snaps = [k for k in seen.items if k.startswith("snap:")]
    assert len(snaps) > 2 and snaps == sorted(f"snap:{stem}" for stem in seen.snapshots)
    assert list(seen.items)[-len(snaps) :] == snaps, "snap: items come last"
