"""A steady signal under churning detail: the quiet beat's one parse.

A sensor whose `detail` changes every run (a timestamp, a counter) while its
`signal` holds leaves the world unchanged, but its raw digest differs from the
sealed one. Rather than hand the whole beat to the full path, the quiet beat
parses that one output here and compares the digest of its signal item with
the sealed one.

The full beat parses with orjson (jsonio.loads_bounded); this module uses the
standard library's json (~1 ms to import against orjson's ~18 ms) and says
"steady" only for output both parsers read as the same value: strict RFC 8259
(no NaN or Infinity, no float that overflows, no integer outside 64 bits, no
duplicate key, no lone surrogate), a JSON object holding `signal`, and no more
brackets than jsonio.MAX_DEPTH allows levels. Anything else is None: not
sure, and the full beat decides as it always did. Equal item texts then mean
equal values, which orjson writes as the same item the world hashed.
"""

from __future__ import annotations

import json

from looop_py.world import digest

# typing is not imported at run time: this runs on the quiet beat.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_DEPTH = 64  # jsonio.MAX_DEPTH (a test keeps them equal; jsonio loads orjson)
_INT64 = 1 << 63


class _Unsure(ValueError):
    """The output is one the two parsers might read differently."""


def _int(literal: str) -> int:
    value = int(literal)
    if not -_INT64 <= value < 2 * _INT64:  # orjson keeps i64 and u64 exact, no more
        raise _Unsure(literal)
    return value


def _float(literal: str) -> float:
    value = float(literal)
    if value in (float("inf"), float("-inf")):
        raise _Unsure(literal)
    return value


def _constant(literal: str) -> Any:
    raise _Unsure(literal)  # NaN, Infinity: Python's extension, not JSON


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        raise _Unsure("a duplicate key")
    return value


def _dumps(value: Any) -> bytes:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")  # a lone surrogate raises UnicodeEncodeError


def read(stdout: bytes) -> tuple[str, bytes] | None:
    """(the digest of the signal's world item, the snapshot's bytes) of a successful run's
    stdout, when sure the full beat reads the same signal; else None."""
    try:
        stripped = stdout.decode("utf-8").strip()
    except UnicodeDecodeError:
        return None
    if not stripped.startswith("{") or stripped.count("[") + stripped.count("{") > MAX_DEPTH:
        return None
    try:
        value = json.loads(
            stripped,
            parse_int=_int,
            parse_float=_float,
            parse_constant=_constant,
            object_pairs_hook=_object,
        )
        if not isinstance(value, dict) or "signal" not in value:
            return None
        value.setdefault("detail", {})
        return digest(_dumps(value["signal"])), _dumps(value) + b"\n"
    except (ValueError, RecursionError, UnicodeEncodeError):  # _Unsure is a ValueError
        return None
