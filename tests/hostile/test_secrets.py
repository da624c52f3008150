"""Secrets of the kinds tools commonly read reach no child and no file, in any encoding.

A sensor dumps its environment (a child a model may have written); a decider echoes
every secret back URL-encoded, base64-encoded (alone and inside Basic auth) and
JSON-escaped in its error and its output; then every file in the work dir is read.
"""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from looop_py.beat.pulse import beat
from looop_py.deciders.base import DecideError, DecideRequest, Decision
from looop_py.workdir import environ
from looop_py.workdir.paths import Paths
from tests.conftest import invoke_looop, open_wd, write_sensor

SCRUBBED = {
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "PGPASSWORD": "pg-pass-w0rd!",
    "GITHUB_PAT": "github_pat_11AAAAAA0123456789",
    "DATABASE_URL": "postgres://app:db-pa55word@db.internal:5432/app",
    "MYSQL_PWD": 'my$ql"pwd/2024',
    "SENTRY_DSN_SECRET": "sentry-secret-987654",
    "GOOGLE_APPLICATION_CREDENTIALS": "/home/u/creds-0123456.json",
    "NPM_TOKEN": "npm_abcdefghij0123456789",
    "STRIPE_KEY": "sk_live_0123456789abcdef",
    "SMTP_PASSWD": "smtp-passwd-42x",
}
KEPT = {
    "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
    "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "32000",
    "SSH_AUTH_SOCK": "/tmp/ssh-agent.sock",
    "HTTPS_PROXY": "http://proxyuser:proxypass@proxy:3128",
    "PIP_INDEX_URL": "https://user:idxpass@pypi.internal/simple",
    "PLAIN_SETTING": "visible-to-children",
}


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {**SCRUBBED, **KEPT}.items():
        monkeypatch.setenv(name, value)


def _dumped(wd: Paths, extra: str = "") -> dict[str, str]:
    wd.config.write_text(wd.config.read_text() + extra)
    out = wd.root / "env.json"
    write_sensor(
        wd, "dump", f"python3 -c 'import json,os; print(json.dumps(dict(os.environ)))' > {out}"
    )
    beat(open_wd(wd))
    return dict(json.loads(out.read_text()))


def test_no_child_gets_a_secret_and_tools_keep_what_they_need(wd: Paths, env: None) -> None:
    seen = _dumped(wd)
    assert not set(SCRUBBED) & set(seen), set(SCRUBBED) & set(seen)
    for name, value in KEPT.items():
        assert seen.get(name) == value, name
    assert "PATH" in seen and "PWD" in seen


def test_keep_lets_one_through(wd: Paths, env: None) -> None:
    seen = _dumped(wd, '[env]\nkeep = ["GITHUB_PAT"]\n')
    assert seen["GITHUB_PAT"] == SCRUBBED["GITHUB_PAT"]
    assert "PGPASSWORD" not in seen


def test_doctor_names_what_it_scrubs(wd: Paths, env: None) -> None:
    r = invoke_looop("-C", str(wd.root), "doctor", "--offline", "--json")
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    message = checks["secrets"]["message"]
    assert all(name in message for name in SCRUBBED)
    assert not any(name in message for name in KEPT)
    assert not any(value in r.stdout for value in SCRUBBED.values())


def _forms(value: str) -> list[str]:
    raw = value.encode()
    return [
        value,
        quote(value, safe=""),
        json.dumps(value)[1:-1],
        base64.b64encode(raw).decode(),
        base64.b64encode(b"user:" + raw).decode(),  # Basic auth
        base64.b64encode(b"x" + raw).decode(),
        base64.urlsafe_b64encode(b"ab" + raw).decode(),
    ]


class Echo:
    name = "echo"

    def __init__(self, fail: bool) -> None:
        self.fail = fail

    def decide(self, request: DecideRequest) -> Decision:
        text = " ".join(f for v in SCRUBBED.values() for f in _forms(v))
        if self.fail:
            raise DecideError(f"HTTP 401: bad credentials {text}")
        return Decision(move={"action": "noop", "reason": text[:4000]}, raw=text)


def test_no_encoding_of_a_secret_lands_in_any_file(wd: Paths, env: None) -> None:
    assert beat(open_wd(wd), decider=Echo(fail=True)).outcome == "failed"
    beat(open_wd(wd, clock=lambda: time.time() + 400), decider=Echo(fail=False))
    leaks = []
    for path in Path(wd.root).rglob("*"):
        if path.is_file():
            data = path.read_text("utf-8", "replace")
            for value in SCRUBBED.values():
                for form in _forms(value):
                    core = form[4:-4]  # the part a neighbour cannot change
                    if len(core) >= 8 and core in data:
                        leaks.append((path.name, form))
    assert leaks == []
    assert environ.REDACTED in (wd.root / "journal.md").read_text()
