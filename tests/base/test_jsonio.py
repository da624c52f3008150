"""jsonio.number: the one rule for a number read back from JSON, TOML or a caller."""

from __future__ import annotations

import math
from typing import Any

import pytest

from looop_py import jsonio


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, 0.0),
        (3, 3.0),
        (-2.5, -2.5),
        (1e300, 1e300),
        (2**63, float(2**63)),
    ],
)
def test_a_finite_int_or_float_is_a_number(value: Any, expected: float) -> None:
    got = jsonio.number(value)
    assert got == expected
    assert type(got) is float


@pytest.mark.parametrize(
    "value",
    [
        True,
        False,
        math.nan,
        math.inf,
        -math.inf,
        10**400,
        None,
        "1",
        "nan",
        [1],
        {"n": 1},
    ],
)
def test_bools_non_finite_values_and_non_numbers_are_not_numbers(value: Any) -> None:
    assert jsonio.number(value) is None
