"""The quiet beat's one parse (sensing/steady.py) reads what the json module reads.

steady calls the C half of json (`_json`) so that a churning sensor does not load the
json package and, through it, `re`, enum and functools. What it reads and writes must
be what json.loads and json.dumps (with the same hooks) read and write, byte for byte:
the reference below is the code it replaced.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from looop_py.sensing import steady
from looop_py.world import digest
from tests.beat.test_quiet import UNSURE_OUTPUTS


def _reference(stdout: bytes) -> tuple[str, bytes] | None:
    """steady.read as it was, on the json package."""
    try:
        stripped = stdout.decode("utf-8").strip()
    except UnicodeDecodeError:
        return None
    if not stripped.startswith("{") or stripped.count("[") + stripped.count("{") > 64:
        return None

    def dumps(value: Any) -> bytes:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return text.encode("utf-8")

    try:
        value = json.loads(
            stripped,
            parse_int=steady._int,
            parse_float=steady._float,
            parse_constant=steady._constant,
            object_pairs_hook=steady._object,
        )
        if not isinstance(value, dict) or "signal" not in value:
            return None
        value.setdefault("detail", {})
        return digest(dumps(value["signal"])), dumps(value) + b"\n"
    except (ValueError, RecursionError, UnicodeEncodeError):
        return None


HOSTILE = [
    b"",
    b"{",
    b"{}",
    b'{"signal": 1} {"signal": 2}',
    b'{"signal": 1}\n\n',
    b'  {"signal": "\\u00e9\\ud83d\\ude00", "detail": {"z": 1, "a": [true, false, null]}}',
    b'{"signal": 1, "detail": {"x": "tab\tinside"}}',  # a raw control character: not strict
    b'{"signal": 1e5, "detail": -0.0}',
    b'{"signal": 18446744073709551615}',
    b'{"signal": -9223372036854775809}',
    b'{"signal": "\xef\xbb\xbf"}',
    b'\xef\xbb\xbf{"signal": 1}',
    b'{"signal": [1, 2,]}',
    b'{"signal": 01}',
    b'{"signal": .5}',
    b'{"signal": "a\\x"}',
    b'{"signal": 1}\x0b',
    b'{"signal": {"b": 1, "a": {"d": [], "c": {}}}}',
]
HOSTILE += [v if isinstance(v, bytes) else v.encode() for v in UNSURE_OUTPUTS.values()]


def test_hostile_outputs_read_as_the_json_module_reads_them() -> None:
    for stdout in HOSTILE:
        assert steady.read(stdout) == _reference(stdout), stdout


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(signal=JSON, detail=JSON, spaces=st.sampled_from(["", " ", "\n", "\t "]))
def test_any_output_reads_as_the_json_module_reads_it(
    signal: Any, detail: Any, spaces: str
) -> None:
    body = {"signal": signal, "detail": detail}
    for text in (json.dumps(body), json.dumps(body, ensure_ascii=False, indent=1)):
        stdout = (spaces + text + spaces).encode("utf-8", "surrogatepass")
        assert steady.read(stdout) == _reference(stdout), stdout
