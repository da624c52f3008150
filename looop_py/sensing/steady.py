"""A steady signal under churning detail: the quiet beat's one parse.

A sensor whose `detail` changes every run (a timestamp, a counter) while its
`signal` holds leaves the world unchanged, but its raw digest differs from the
sealed one. Rather than hand the whole beat to the full path, the quiet beat
parses that one output here and compares the digest of its signal item with
the sealed one.

The full beat parses with orjson (jsonio.loads_bounded); this module uses the
standard library's JSON scanner and encoder, called through their C half (`_json`,
as json.loads and json.dumps do): the `json` package imports `re`, and with it enum
and functools, ~4 ms of a quiet beat (orjson's import is ~18 ms). It says
"steady" only for output both parsers read as the same value: strict RFC 8259
(no NaN or Infinity, no float that overflows, no integer outside 64 bits, no
duplicate key, no lone surrogate), a JSON object holding `signal`, and no more
brackets than jsonio.MAX_DEPTH allows levels. Anything else is None: not
sure, and the full beat decides as it always did. Equal item texts then mean
equal values, which orjson writes as the same item the world hashed.
"""

from __future__ import annotations

from looop_py.world import digest

try:  # the C half of json (what json.loads and json.dumps call), without json's `re`
    import _json
except ImportError:  # an interpreter without it: the json package
    _json = None  # type: ignore[assignment]

# typing is not imported at run time: this runs on the quiet beat.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_C_JSON: Any = _json  # None: use the json package
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


class _Decoding:
    """What the scanner reads of a json.JSONDecoder: strict RFC 8259, with the checks above."""

    strict = True
    object_hook = None
    object_pairs_hook = staticmethod(_object)
    parse_float = staticmethod(_float)
    parse_int = staticmethod(_int)
    parse_constant = staticmethod(_constant)


def _unserializable(value: Any) -> Any:
    raise TypeError(f"not JSON: {type(value).__name__}")  # never: all of it was parsed


def _loads(text: str) -> Any:
    """json.loads(text) with the hooks above (ValueError when it is not one JSON value)."""
    if _C_JSON is None:
        import json  # an interpreter without _json only

        return json.loads(
            text,
            parse_int=_int,
            parse_float=_float,
            parse_constant=_constant,
            object_pairs_hook=_object,
        )
    try:
        scan = _C_JSON.make_scanner(_Decoding())  # a decoder-like context
        value, end = scan(text, 0)
    except StopIteration:
        raise ValueError("no JSON value") from None
    if end != len(text):  # the text is stripped: anything left is more than one value
        raise ValueError("extra data")
    return value


def _dumps(value: Any) -> bytes:
    """json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)."""
    if _C_JSON is None:
        import json  # an interpreter without _json only

        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    else:
        quote = _C_JSON.encode_basestring  # ensure_ascii=False
        encode = _C_JSON.make_encoder({}, _unserializable, quote, None, ":", ",", True, False, True)
        text = "".join(encode(value, 0))
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
        value = _loads(stripped)
        if not isinstance(value, dict) or "signal" not in value:
            return None
        value.setdefault("detail", {})
        return digest(_dumps(value["signal"])), _dumps(value) + b"\n"
    except (ValueError, RecursionError, UnicodeEncodeError):  # _Unsure is a ValueError
        return None
