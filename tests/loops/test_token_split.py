"""Self-reported tokens keep their direction: budgets per direction trip on what they name."""

from __future__ import annotations

import pytest

from looop_py import jsonio
from looop_py.workdir.paths import Paths
from tests.conftest import invoke_looop
from tests.loops.test_e2e import DONE, beat_until, finished, loop_goal, rounds_of, setup


def spend(wd: Paths, said: str, budget: str) -> dict:
    setup(wd)
    loop_goal(
        wd,
        "spender",
        "L1",
        f'"$LOOOP_BIN" done {said} --summary "spent"',
        f'{DONE} "ok"',
        budget=budget,
    )
    beat_until(wd, finished(wd))
    (r,) = rounds_of(wd)
    return r


@pytest.mark.parametrize(
    ("said", "budget", "limit"),
    [
        # a total alone has no direction: neither per-direction ceiling trips on it...
        ("--tokens 400", "{max_input_tokens: 100, max_output_tokens: 100}", None),
        # ...but the total ceiling does
        ("--tokens 400", "{max_total_tokens: 300}", "total-tokens"),
        # output past its ceiling trips output, not input
        (
            "--input-tokens 10 --output-tokens 400",
            "{max_input_tokens: 100, max_output_tokens: 100}",
            "output-tokens",
        ),
        (
            "--input-tokens 400 --output-tokens 10",
            "{max_input_tokens: 100, max_output_tokens: 100}",
            "input-tokens",
        ),
    ],
)
def test_budgets_per_direction_trip_on_the_direction_reported(
    wd: Paths, said: str, budget: str, limit: str | None
) -> None:
    r = spend(wd, said, budget)
    assert r.get("limit") == limit, r
    assert r["outcome"] == ("budget-exhausted" if limit else "reported")
    listed = jsonio.loads(invoke_looop("-C", str(wd.root), "loops", "--json").stdout)
    assert listed["loops"][0]["tokens"] == (410 if "input" in said else 400)


def test_a_split_report_shows_in_and_out_and_a_total_alone_shows_unsplit(wd: Paths) -> None:
    r = spend(wd, "--input-tokens 30 --output-tokens 10", "{max_total_tokens: 10000}")
    assert (r["input_tokens"], r["output_tokens"], r["unsplit_tokens"]) == (30, 10, 0)


def test_done_refuses_a_total_smaller_than_its_parts_and_negative_counts(wd: Paths) -> None:
    (wd.sessions / "w").mkdir(parents=True)
    root = ("-C", str(wd.root), "done", "--session", "w")
    bad = invoke_looop(*root, "--tokens", "5", "--input-tokens", "4", "--output-tokens", "3")
    assert bad.returncode == 2 and "less than" in bad.stderr
    neg = invoke_looop(*root, "--output-tokens", "-1")
    assert neg.returncode == 2 and "negative" in neg.stderr
