"""jsonio: the one rule for a number read back from JSON, and for a rebuildable state file."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from looop_py import jsonio
from looop_py.errors import CorruptFile
from looop_py.workdir import shelf as shelf_mod
from tests.memshelf import MemoryShelf


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


# -- read_object: state looop rebuilds never stops the loop ------------------------


@pytest.mark.parametrize(
    "content",
    [b"{torn", b"[1, 2]", b'"text"', b"null", b"[" * 5000 + b"]" * 5000, b"\xff\xfe"],
    ids=["torn", "list", "string", "null", "too-deep", "not-utf8"],
)
def test_a_state_file_that_does_not_fit_reads_as_none(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "ledger.json"
    path.write_bytes(content)
    assert jsonio.read_object(path) is None
    shelf = MemoryShelf()
    shelf.put("state", "ledger", content)
    assert shelf_mod.read_object(shelf, "state", "ledger") is None


def test_a_missing_state_file_reads_as_none_and_an_object_as_itself(tmp_path: Path) -> None:
    path = tmp_path / "ledger.json"
    assert jsonio.read_object(path) is None
    path.write_bytes(b'{"goals": {"a": 1}}')
    assert jsonio.read_object(path) == {"goals": {"a": 1}}
    shelf = MemoryShelf()
    assert shelf_mod.read_object(shelf, "state", "ledger") is None
    shelf.put("state", "ledger", b'{"goals": {}}')
    assert shelf_mod.read_object(shelf, "state", "ledger") == {"goals": {}}


def test_a_directory_where_a_state_file_belongs_reads_as_none(tmp_path: Path) -> None:
    """read_json names it (CorruptFile: not a regular file); read_object starts afresh."""
    (tmp_path / "ledger.json").mkdir()
    with pytest.raises(CorruptFile, match="not a regular file"):
        jsonio.read_json(tmp_path / "ledger.json")
    assert jsonio.read_object(tmp_path / "ledger.json") is None
