"""Allow rules that understand argv: a `*` never lets a program run code or write outside.

First the issue's attacks, carried out through the gate as a model's run_shell
would be (the canary must not appear, the move waits for a human). Then, per
program, a property test: generated option/value combinations, and whenever the
classifier lets one through, the real program runs it in a scratch work dir —
and must neither create the canary nor write anything outside.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from looop_py.moves import act, shellgate, union
from looop_py.workdir.paths import Paths
from tests.conftest import open_wd

RULES = [
    "make test *",
    "wget *",
    "npm init *",
    "npm test *",
    "tar *",
    "curl *",
    "git *",
    "git log *",
    "git clone *",
]

# (command with {c}: the canary path, {o}: a dir outside the work dir)
ATTACKS = [
    "make test X!=touch\\ {c}",
    "make test X:=$(shell touch {c})",
    "make test X::=$(shell touch {c})",
    "make test X:::=$(shell touch {c})",
    "make test X+=$(shell touch {c})",
    "make test X?=$(shell touch {c})",
    "make test SHELL=/bin/touch",
    "make test --eval=X:=$(shell\\ touch\\ {c})",
    "make test -f {o}/Makefile",
    "make test -C {o}",
    "make test --file={o}/Makefile",
    "make test -E X!=touch\\ {c}",
    "wget --use-askpass=/bin/touch http://127.0.0.1:9/",
    "wget -e use_askpass=/bin/touch http://127.0.0.1:9/",
    "wget -O {o}/f http://127.0.0.1:9/",
    "wget --output-document={c} http://127.0.0.1:9/",
    "npm init --init-module={o}/m.js",
    "npm init --init-module {o}/m.js",
    "npm init evil",
    "npm test --script-shell=/bin/touch",
    "npm test --node-options=--require={o}/m.js",
    "tar --index-file={c} -tf x.tar",
    "tar -tf x.tar --to-command=touch\\ {c}",
    "tar --checkpoint-action=exec=touch\\ {c} -tf x.tar",
    "tar -xf x.tar -C {o}",
    "tar -tf {o}/x.tar",
    "curl --hsts {c} http://127.0.0.1:9/",
    "curl --alt-svc {c} http://127.0.0.1:9/",
    "curl -o {c} http://127.0.0.1:9/",
    "curl -w %output{{{c}}}x http://127.0.0.1:9/",
    "curl -d @/etc/passwd http://127.0.0.1:9/",
    "curl -K {o}/cfg http://127.0.0.1:9/",
    "git --attr-source X clone -u touch\\ {c} https://x/r",
    "git clone -u touch\\ {c} https://x/r",
    "git clone --upload-pack=touch\\ {c} https://x/r",
    "git clone ext::sh\\ -c\\ touch\\ {c} r",
    "git clone --template={o} https://x/r",
    "git -c core.pager=touch\\ {c} log",
    "git --config-env=core.pager=HOME log",
    "git -C {o} status",
    "git --exec-path={o} status",
    "git st",
    "git bundle create {o}/b HEAD",
    "git init {o}/repo",
    "git log --output={c}",
    "git log --ext-diff",
    "git clone https://x/r {o}/r",
    "git config alias.st !touch\\ {c}",
    "git submodule update",
]


@pytest.mark.parametrize("attack", ATTACKS)
def test_a_wildcard_never_runs_the_attack(wd: Paths, tmp_path: Path, attack: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    canary = wd.root / "PWNED"
    (wd.root / "Makefile").write_text("test:\n\t@true\n")
    wd.config.write_text(
        wd.config.read_text() + f"[gates]\nshell_allow = {list(RULES)!r}\n".replace("'", '"')
    )
    cmd = attack.format(c=canary, o=outside)
    outcome = act.execute(open_wd(wd), union.parse({"action": "run_shell", "cmd": cmd}), 1.0)
    assert outcome.held is not None, f"ran unasked: {cmd}"
    assert not canary.exists() and list(outside.iterdir()) == []


ALLOWED = [
    ("make test -k -j4", "make test *"),
    ("make test --no-print-directory -s", "make test *"),
    ("git log --oneline -5", "git log *"),
    ("git -P log --stat", "git *"),
    ("git clone https://x/r sub/r", "git clone *"),
    ("curl -sSL -H 'Accept: */*' https://x", "curl *"),
    ("curl -d @body.json https://x", "curl *"),
    ("wget -q -O out/f https://x", "wget *"),
    ("tar -tzf x.tgz", "tar *"),
    ("tar tzf x.tgz", "tar *"),
    ("npm test --silent", "npm test *"),
    ("npm init --yes", "npm init *"),
]


@pytest.mark.parametrize(("cmd", "rule"), ALLOWED)
def test_what_the_program_reads_as_safe_is_still_allowed(cmd: str, rule: str) -> None:
    assert shellgate.allowed(shlex.split(cmd), (rule,)) == rule


# -- per program: generated argv, run for real whenever the classifier allows it ----------


def _token(canary: Path, outside: Path) -> st.SearchStrategy[str]:
    ops = ["=", ":=", "::=", ":::=", "+=", "?=", "!="]
    cmds = [f"touch {canary}", f"$(shell touch {canary})", f"touch {outside}/x"]
    return st.one_of(
        st.builds(
            lambda n, op, v: f"{n}{op}{v}",
            st.sampled_from(["X", "SHELL", "MAKE"]),
            st.sampled_from(ops),
            st.sampled_from(cmds),
        ),
        st.sampled_from([f"{outside}/x", "../x", "~/x", str(canary), "sub/ok", "-", "--"]),
        st.text("abcdefghijklmnopqrstuvwxyz-=#%", min_size=1, max_size=12),
    )


def _argv(options: list[str], canary: Path, outside: Path) -> st.SearchStrategy[list[str]]:
    word = st.one_of(st.sampled_from(options), _token(canary, outside))
    return st.lists(word, max_size=4)


def _run_if_allowed(words: list[str], rule: str, root: Path, canary: Path, outside: Path) -> None:
    if shellgate.allowed(words, (rule,)) is None:
        return
    env = {**os.environ, "HOME": str(root), "GIT_CONFIG_NOSYSTEM": "1", "GIT_PAGER": "cat"}
    subprocess.run(
        words, cwd=root, env=env, capture_output=True, timeout=20, stdin=subprocess.DEVNULL
    )
    assert not canary.exists(), f"{shlex.join(words)} ran code"
    assert list(outside.iterdir()) == [], f"{shlex.join(words)} wrote outside"


SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
OPTS = {
    "make": ["-k", "-s", "-n", "-j2", "-B", "-f", "-C", "--eval", "-E", "-I", "-o", "-W"],
    "git": [
        "--oneline",
        "-1",
        "-p",
        "--stat",
        "-c",
        "-C",
        "--output",
        "-o",
        "--ext-diff",
        "--exec-path",
        "--attr-source",
        "--no-pager",
        "-P",
        "--format=%H",
    ],
    "tar": [
        "-t",
        "-v",
        "-z",
        "-f",
        "-C",
        "--index-file",
        "--to-command",
        "-I",
        "-x",
        "--checkpoint-action",
        "--exclude",
        "-O",
    ],
    "curl": [
        "-s",
        "-S",
        "-o",
        "-O",
        "--hsts",
        "--alt-svc",
        "-D",
        "-c",
        "-w",
        "-K",
        "--max-time",
        "1",
        "--trace",
        "--output-dir",
        "-d",
    ],
    "wget": ["-q", "-O", "-P", "-o", "-a", "--use-askpass", "-e", "-nv", "-T", "1", "-x"],
}


@pytest.fixture
def sandbox(tmp_path: Path) -> tuple[Path, Path, Path]:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "Makefile").write_text("test:\n\t@true\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(root),
            "-c",
            "user.email=a@b",
            "-c",
            "user.name=a",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x",
        ],
        check=True,
    )
    subprocess.run(["tar", "-cf", str(root / "x.tar"), "-C", str(root), "Makefile"], check=True)
    return root, root / "PWNED", outside


@pytest.mark.parametrize(
    ("program", "prefix", "rule", "suffix"),
    [
        ("make", ["make", "test"], "make test *", []),
        ("git", ["git", "log"], "git log *", []),
        ("tar", ["tar"], "tar *", ["-tf", "x.tar"]),
        ("curl", ["curl"], "curl *", ["http://127.0.0.1:9/"]),
        ("wget", ["wget"], "wget *", ["-t", "1", "http://127.0.0.1:9/"]),
    ],
)
def test_generated_argv_the_classifier_allows_runs_no_code_and_writes_nothing_outside(
    sandbox: tuple[Path, Path, Path],
    program: str,
    prefix: list[str],
    rule: str,
    suffix: list[str],
) -> None:
    root, canary, outside = sandbox

    @SETTINGS
    @given(_argv(OPTS[program], canary, outside))
    def check(tail: list[str]) -> None:
        _run_if_allowed([*prefix, *tail, *suffix], rule, root, canary, outside)

    check()


@SETTINGS
@given(
    st.lists(
        st.one_of(
            st.sampled_from(
                [
                    "--json",
                    "--yes",
                    "-y",
                    "--init-module",
                    "--script-shell",
                    "--prefix",
                    "--userconfig",
                    "--node-options",
                    "--git",
                    "--shell",
                    "-w",
                    "pkg",
                ]
            ),
            st.builds(
                lambda o, v: f"{o}={v}",
                st.sampled_from(
                    [
                        "--init-module",
                        "--script-shell",
                        "--onload-script",
                        "--workspace",
                        "--loglevel",
                    ]
                ),
                st.sampled_from(["/tmp/m.js", "m.js", "../m.js", "info"]),
            ),
        ),
        max_size=4,
    )
)
def test_npm_init_under_a_wildcard_never_takes_a_module_a_shell_or_a_package(
    tail: list[str],
) -> None:
    """npm is not run here (it would fetch packages): its classifier answer is checked
    against npm's documented parsing instead."""
    words = ["npm", "init", *tail]
    if shellgate.allowed(words, ("npm init *",)) is None:
        return
    risky = (
        "--init-module",
        "--script-shell",
        "--prefix",
        "--userconfig",
        "--node-options",
        "--git",
        "--shell",
        "--onload-script",
    )
    assert not any(w.split("=", 1)[0] in risky for w in tail)
    assert not any(not w.startswith("-") for w in tail), "npm init NAME runs create-NAME"
    assert not any(
        w.startswith("--workspace=") and w.split("=")[1].startswith(("/", "..")) for w in tail
    )
