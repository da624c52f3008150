"""The listing vouches for goals/ to the seal (workdir/listing.py `for_seal`) only when the
world holds exactly the goals listed, each at the stamp it was listed with."""

from __future__ import annotations

from dataclasses import dataclass

from looop_py.workdir import listing

FOUND = [("a", "1.10.100.100.33188"), ("a-b", "2.10.100.100.33188"), ("b", "3.10.100.100.33188")]
RECORD = ("9.4096.100.100.16877", "g goals 3 xxh3:00.0")


@dataclass
class Held:
    id: str
    stamp: str | None


def _held(pairs: list[tuple[str, str | None]]) -> list[Held]:
    return [Held(g, s) for g, s in pairs]


def test_no_vouch_for_a_goal_held_at_another_stamp_missing_doubled_or_unstamped() -> None:
    hostile = {
        "another stamp": [FOUND[0], ("a-b", "2.11.100.100.33188"), FOUND[2]],
        "one missing": FOUND[:2],
        "one extra": [*FOUND, ("c", "4.10.100.100.33188")],
        "one doubled, one not held": [FOUND[0], FOUND[0], FOUND[2]],
        "held unstamped": [FOUND[0], ("a-b", None), FOUND[2]],
        "another order": [FOUND[1], FOUND[0], FOUND[2]],
    }
    for why, held in hostile.items():
        assert listing.for_seal(FOUND, {}, RECORD, _held(held)) is None, why
    gone = [FOUND[0], ("a-b", None), FOUND[2]]  # listed, then gone before its stat
    assert listing.for_seal(gone, {}, RECORD, _held(gone)) is None, "a goal with no stat"
    refused = {"out": "links out of the work dir"}
    assert listing.for_seal(FOUND, refused, RECORD, _held(FOUND)) is None, "a refused goal"
    assert listing.for_seal(FOUND, {}, None, _held(FOUND)) is None, "no record"


def test_the_listing_vouches_for_each_goal_at_its_stamp() -> None:
    listed = listing.for_seal(FOUND, {}, RECORD, _held(FOUND))
    assert listed == (*RECORD, {f"goals/{g}.md": s for g, s in FOUND})
