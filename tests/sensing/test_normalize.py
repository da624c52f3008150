"""Normalization of a sensor's result into {signal, detail} (README "Writing a sensor"), pure."""

from __future__ import annotations

import errno

import pytest

from looop_py.sensing.sensors import RawRun, normalize, parse_header

CAP = 64


def run(
    rc: int | None = 0,
    out: bytes = b"",
    *,
    total: int | None = None,
    err: bytes = b"",
    timed_out: bool = False,
    spawn_errno: int | None = None,
) -> dict:
    raw = RawRun(rc, out, len(out) if total is None else total, err, timed_out, spawn_errno)
    return normalize(raw, cap=CAP, timeout_s=2)


def test_json_with_signal_is_kept_and_detail_defaults_to_empty() -> None:
    assert run(out=b'{"signal": {"n": 1}, "extra": 2}') == {
        "signal": {"n": 1},
        "extra": 2,
        "detail": {},
    }
    assert run(out=b'{"signal": 1, "detail": {"d": 2}}') == {"signal": 1, "detail": {"d": 2}}


@pytest.mark.parametrize(
    "out,signal",
    [
        (b"[1, 2]", [1, 2]),
        (b"42", 42),
        (b'{"a": 1}', {"a": 1}),
        (b"null", None),
        (b"true", True),
    ],
)
def test_other_json_becomes_the_signal(out: bytes, signal: object) -> None:
    assert run(out=out) == {"signal": signal, "detail": {}}


def test_plain_text_is_trimmed() -> None:
    assert run(out=b"  all good\n\n") == {"signal": "all good", "detail": {}}
    assert run(out=b"") == {"signal": "", "detail": {}}


def test_nonzero_exit_keeps_only_exit_code_in_signal() -> None:
    snap = run(rc=3, out=b"ignored", err=b"boom\n")
    assert snap["signal"] == {"error": True, "exit_code": 3}
    assert snap["detail"]["stderr"] == "boom"
    assert "exited 3" in snap["detail"]["message"]


def test_timeout_is_124_and_signal_death_is_128_plus_n() -> None:
    assert run(rc=-9, timed_out=True)["signal"] == {"error": True, "exit_code": 124}
    killed = run(rc=-15)
    assert killed["signal"] == {"error": True, "exit_code": 143}
    assert "SIGTERM" in killed["detail"]["message"]


def test_spawn_failures_are_126_and_127() -> None:
    assert run(rc=None, spawn_errno=errno.EACCES)["signal"]["exit_code"] == 126
    assert run(rc=None, spawn_errno=errno.ENOEXEC)["signal"]["exit_code"] == 126
    assert run(rc=None, spawn_errno=errno.ENOENT)["signal"]["exit_code"] == 127


def test_too_large_keeps_byte_count_out_of_the_signal() -> None:
    a = run(out=b"x" * (CAP + 1), total=10_000)
    b = run(out=b"x" * (CAP + 1), total=20_000)
    assert a["signal"] == b["signal"] == {"error": "too-large", "cap": CAP}
    assert a["detail"]["bytes"] == 10_000


def test_exactly_the_cap_is_not_too_large() -> None:
    assert run(out=b"y" * CAP)["signal"] == "y" * CAP


def test_not_utf8() -> None:
    snap = run(out=b"\xff\xfe bad")
    assert snap["signal"] == {"error": "not-utf8"}
    assert snap["detail"]["bytes"] == 6


def test_header_parsing() -> None:
    head = b"#!/bin/sh\n# looop:timeout=2\n#looop:interval = 30\necho\n"
    assert parse_header(head) == {"timeout": 2.0, "interval": 30.0}
    late = b"\n" * 25 + b"# looop:timeout=2\n"
    assert parse_header(late) == {}
