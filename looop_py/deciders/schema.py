"""The move union's JSON schema as structured-output APIs want it, and the way back.

Both providers want an object at the root, and the move union is an `anyOf`,
so the schema handed over is `{"move": <union>}` and the reply is unwrapped.
OpenAI's strict mode also wants every property required, optional ones made
nullable, and no `const`; `null` then means "absent", which is how
union.parse reads it anyway, and `unwrap` drops those nulls.
"""

from __future__ import annotations

from typing import Any

from looop_py.moves import union

WRAPPER_KEY = "move"


def wrapped(*, strict: bool = False) -> dict[str, Any]:
    moves = union.json_schema()
    if strict:
        moves = {"anyOf": [_strict_branch(b) for b in moves["anyOf"]]}
    return {
        "type": "object",
        "properties": {WRAPPER_KEY: moves},
        "required": [WRAPPER_KEY],
        "additionalProperties": False,
    }


def _strict_branch(branch: dict[str, Any]) -> dict[str, Any]:
    required = set(branch["required"])
    props: dict[str, Any] = {}
    for name, given in branch["properties"].items():
        prop = dict(given)
        if "const" in prop:
            prop = {"type": "string", "enum": [prop.pop("const")], **prop}
        if name not in required:
            prop["type"] = [prop["type"], "null"]
        props[name] = prop
    return {**branch, "properties": props, "required": list(props)}


def unwrap(value: Any) -> Any:
    """`{"move": {...}}` → the move without null fields; anything else as it came."""
    if isinstance(value, dict) and set(value) == {WRAPPER_KEY}:
        inner = value[WRAPPER_KEY]
        if isinstance(inner, dict):
            return {k: v for k, v in inner.items() if v is not None}
        return inner
    return value
