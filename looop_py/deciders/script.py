"""Replay moves from a file, one per decide: for demos and tests.

`[decider] script` names a file (relative to the work dir) holding either a
JSON array or JSON lines (blank lines and `#` comments skipped). Each entry is
a move, returned as is (the pulse validates it, so hostile entries are fine),
or a wrapper `{"move": <move>, "usage": {"input_tokens": n, "output_tokens": n,
"cost_usd": x} | null}` for replaying metered (or unmetered) decides. A plain
entry reports zero usage: replaying costs nothing.

The cursor lives in state/script-cursor.json, keyed by the script's path relative
to the work dir (a copied or moved work dir keeps its place), and advances before the move is
returned, under a lock, so restarts and concurrent callers never replay one
entry twice. Past the end every decide is a noop saying so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from looop_py import jsonio
from looop_py.deciders import parse
from looop_py.deciders.base import (
    DecideError,
    DecideRequest,
    Decision,
    InvalidReply,
    PermanentError,
    TemporaryError,
    Usage,
)
from looop_py.errors import ConfigError, LooopError
from looop_py.locks import PulseLock
from looop_py.workdir.config import DeciderConfig

CURSOR = "script-cursor.json"


class ScriptDecider:
    name = "script"
    reads_prompt = True  # a stand-in for a model: its runs keep the prompt one would get

    def __init__(self, cfg: DeciderConfig) -> None:
        if not cfg.script.strip():
            raise ConfigError(
                "[decider] backend script needs a script file",
                'e.g. script = "moves.jsonl" (one move per line, relative to the work dir)',
            )
        self.cfg = cfg

    def path(self, workdir: Path) -> Path:
        return (workdir / Path(self.cfg.script).expanduser()).resolve()

    def decide(self, request: DecideRequest) -> Decision:
        path = self.path(request.workdir)
        entries = load_entries(path)
        index = take(request.state_dir, cursor_key(request.workdir, path), len(entries))
        if index is None:
            reason = f"script {self.cfg.script} exhausted: all {len(entries)} move(s) replayed"
            return Decision({"action": "noop", "reason": reason}, raw="", usage=Usage(0, 0, 0.0))
        raw = entries[index]
        meta = {"backend": self.name, "index": index, "of": len(entries)}
        try:
            value = parse.parse_object(parse.decode_utf8(raw, f"entry {index + 1}"))
        except DecideError as exc:
            exc.raw = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
            raise
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        if "move" in value and "action" not in value:
            usage = _usage(value.get("usage")) if "usage" in value else Usage(0, 0, 0.0)
            return Decision(value["move"], raw=text, usage=usage, meta=meta)
        return Decision(value, raw=text, usage=Usage(0, 0, 0.0), meta=meta)


def load_entries(path: Path) -> list[bytes | str]:
    """The file's entries as raw text, each parsed only when its turn comes."""
    try:
        data = jsonio.read_bounded(path, jsonio.STATE_CAP)
    except FileNotFoundError as exc:
        raise PermanentError(f"cannot read the script {path}: {exc.strerror}") from exc
    except LooopError as exc:
        raise PermanentError(f"cannot read the script: {exc.message}") from exc
    if data.lstrip()[:1] == b"[":
        try:
            array = jsonio.loads_bounded(data, jsonio.MAX_DEPTH + 1)
        except (jsonio.JSONDecodeError, jsonio.TooDeep) as exc:
            raise PermanentError(f"the script {path} is not a valid JSON array ({exc})") from exc
        if not isinstance(array, list):
            raise PermanentError(f"the script {path} is not a JSON array")
        return [jsonio.dumps(v).decode() for v in array]
    lines = (line.strip() for line in data.split(b"\n"))
    return [line for line in lines if line and not line.startswith(b"#")]


def cursor_key(workdir: Path, path: Path) -> str:
    """The script as the cursor names it: relative to the work dir when it lies inside, so
    a work dir that is copied or moved keeps its place (it never replays a move)."""
    try:
        return path.relative_to(workdir.resolve()).as_posix()
    except ValueError:
        return str(path)


def take(state_dir: Path, key: str, count: int) -> int | None:
    """Claim the next index for script `key`, or None when all are used."""
    cursor_path = state_dir / CURSOR
    state_dir.mkdir(exist_ok=True)
    lock = PulseLock(state_dir / "script-cursor.lock")
    if not lock.acquire(timeout_s=10):
        raise TemporaryError("the script cursor stayed locked by another process for 10s")
    with lock:
        try:
            cursor = jsonio.read_json(cursor_path, {})
        except Exception:
            cursor = {}  # a broken cursor restarts the script rather than wedging it
        known = isinstance(cursor, dict) and cursor.get("script") == key
        index = cursor.get("next", 0) if known else 0
        if not isinstance(index, int) or index < 0:
            index = 0
        if index >= count:
            return None
        jsonio.write_json(cursor_path, {"script": key, "next": index + 1})
        return index


def _usage(value: Any) -> Usage | None:
    if value is None:
        return None  # replays an unmetered decide
    if not isinstance(value, dict):
        raise InvalidReply("a script entry's usage must be an object or null")
    tokens_in, tokens_out = value.get("input_tokens", 0), value.get("output_tokens", 0)
    cost = value.get("cost_usd")
    if not isinstance(tokens_in, int) or not isinstance(tokens_out, int):
        raise InvalidReply("a script entry's usage needs integer input_tokens/output_tokens")
    if cost is not None and (not isinstance(cost, int | float) or isinstance(cost, bool)):
        raise InvalidReply("a script entry's usage.cost_usd must be a number")
    return Usage(tokens_in, tokens_out, None if cost is None else float(cost))
