"""A `#!/usr/bin/env NAME` child is exec'd as NAME at once (shebang.direct), and nothing it can
tell differs from exec'ing the script: the same argv, $0, executable, environment and
exit codes, the program env would find on the child's PATH, and every form env or the
kernel reads differently left to them. Each case runs both ways children start
(`where`: posix_spawn, which goes direct, and Popen, which execs the script as it is),
so the Popen run is the oracle for the direct one. Counted: the direct child is one
execve, not two (strace)."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from looop_py import procs, shebang
from tests.base.test_procs import where as where  # noqa: PLC0414 - both ways a child starts

BASH = shutil.which("bash")
STRACE = ["strace", "-ff", "-qq", "-e", "trace=execve"]  # -o PREFIX: a log per process


def execs_done(logs: Path) -> dict[str, int]:
    """How many times each program was exec'd (and the exec succeeded), from strace's
    logs in `logs`, one per process (so no call is split across lines)."""
    done: dict[str, int] = {}
    for log in logs.iterdir():
        for line in log.read_text().splitlines():
            if line.startswith("execve(") and line.endswith(" = 0"):
                program = line.split('"', 2)[1]
                done[program] = done.get(program, 0) + 1
    return done


def _script(folder: Path, name: str, text: str, mode: int = 0o755) -> Path:
    path = folder / name
    path.write_text(text)
    path.chmod(mode)
    return path


def _run(argv: list[str], where: Path, env: dict[str, str] | None = None) -> procs.Result:
    return procs.run(argv, cwd=where, env=env or dict(os.environ), timeout_s=10, cap=10_000)


# -- rainy days first: every form env or the kernel decides stays theirs -----------------


def test_a_script_exec_refuses_is_refused_though_bash_could_read_it(where: Path) -> None:
    """Not executable: exec says EACCES. Bash would happily read it: it must not."""
    script = _script(where, "plain.sh", "#!/usr/bin/env bash\necho ran\n", mode=0o644)
    assert shebang.direct(str(script), [str(script)], os.environ) is None
    res = _run([str(script)], where)
    assert res.spawn_errno == errno.EACCES and res.exit_code == 126 and res.stdout == b""


def test_a_name_not_on_path_is_envs_127_and_its_message(where: Path) -> None:
    script = _script(where, "gone.sh", "#!/usr/bin/env no-such-interpreter-here\necho ran\n")
    res = _run([str(script)], where)
    assert res.returncode == 127 and res.stdout == b""
    assert b"no-such-interpreter-here" in res.stderr_tail and b"env" in res.stderr_tail


@pytest.mark.parametrize(
    ("first", "expected"),
    [
        # env's own options, an assignment, a blank inside: env reads these, not NAME.
        ("#!/usr/bin/env -S bash -e", b""),  # env -S splits it: bash -e
        ("#!/usr/bin/env bash -e", None),  # env looks for a program called `bash -e`
        ("#!/usr/bin/env bash\r", None),  # a CRLF script: `bash\r` is not found
        ("#!/usr/bin/env ./bash", None),  # a path: env runs it as it is
    ],
)
def test_forms_env_reads_its_own_way_are_left_to_env(
    where: Path, first: str, expected: bytes | None
) -> None:
    """(`#!/usr/bin/env FOO=1 bash` is not run: env would set FOO and exec the script
    itself, forever; test_direct_is_name_on_path… checks it is not direct.)"""
    script = _script(where, "odd.sh", first + "\nfalse\necho after-false\n")
    assert shebang.direct(str(script), [str(script)], os.environ) is None
    res = _run([str(script)], where)
    if expected is None:
        assert res.returncode == 127 and res.stdout == b""
    else:
        assert res.returncode == 1 and res.stdout == b""  # bash -e stopped at `false`


def test_name_is_found_on_the_childs_path_first_as_env_finds_it(
    where: Path, tmp_path: Path
) -> None:
    """A `bash` earlier on the child's PATH than the real one is the one run, and this
    process's own PATH plays no part."""
    tools = tmp_path / "tools"
    tools.mkdir()
    _script(tools, "bash", f'#!{BASH}\necho "shadow bash: $1"\n')
    script = _script(where, "s.sh", "#!/usr/bin/env bash\necho real\n")
    env = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}"}
    assert _run([str(script)], where, env).stdout == f"shadow bash: {script}\n".encode()
    assert _run([str(script)], where).stdout == b"real\n"


def test_a_name_that_is_a_bare_script_runs_as_env_runs_it(where: Path, tmp_path: Path) -> None:
    """NAME is a text file with no #! line: exec of it is ENOEXEC, so the direct start falls
    back to the script, and env's execvp hands NAME to /bin/sh, as it always did."""
    tools = tmp_path / "tools"
    tools.mkdir()
    _script(tools, "mytool", 'echo "bare tool: $1"\n')
    script = _script(where, "t.sh", "#!/usr/bin/env mytool\n")
    env = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}"}
    res = _run([str(script)], where, env)
    assert res.returncode == 0 and res.stdout == f"bare tool: {script}\n".encode()


# -- the plain form: exec'd direct, and the child cannot tell ---------------------------


def test_an_env_script_sees_the_argv_exe_and_environment_env_gave_it(where: Path) -> None:
    script = _script(
        where,
        "tell.sh",
        "#!/usr/bin/env  bash  \n"  # blanks around NAME, as the kernel strips them
        'echo "0=$0"; echo "args=$*"; tr "\\0" " " < /proc/$$/cmdline; echo\n'
        'readlink /proc/$$/exe; env | LC_ALL=C sort | grep -v "^_=\\|^SHLVL=\\|^PWD="\n',
    )
    env = {**os.environ, "LOOOP_PROBE": "seen"}
    res = _run([str(script), "a b", "c"], where, env)
    lines = res.stdout.decode().splitlines()
    assert res.returncode == 0, res.stderr
    assert lines[0] == f"0={script}"
    assert lines[1] == "args=a b c"
    assert lines[2] == f"bash {script} a b c "
    assert lines[3] == os.path.realpath(str(BASH))
    assert "LOOOP_PROBE=seen" in lines[4:]
    shown = {line.split("=", 1)[0] for line in lines[4:] if "=" in line}
    assert {"LOOOP_PROBE", "PATH", "HOME"} <= shown


def test_direct_is_name_on_path_with_the_argv_env_would_give(tmp_path: Path) -> None:
    script = str(_script(tmp_path, "s.sh", "#! /usr/bin/env\tbash\t\necho\n"))
    assert shebang.direct(script, [script, "x"], os.environ) == (BASH, ["bash", script, "x"])
    assert shebang.direct(script, [script], {"PATH": str(tmp_path)}) is None  # not there
    text = str(_script(tmp_path, "t.txt", "echo no shebang line\n"))
    assert shebang.direct(text, [text], os.environ) is None
    found: dict[str, str] = {}  # children started together look NAME up once
    assert shebang.direct(script, [script], os.environ, found) == (BASH, ["bash", script])
    assert found == {"bash": BASH}
    found["bash"] = "/bin/true"  # no second look: what the first one found is used
    assert shebang.direct(script, [script], os.environ, found) == ("/bin/true", ["bash", script])
    assign = str(_script(tmp_path, "a.sh", "#!/usr/bin/env FOO=1 bash\n"))
    assert shebang.direct(assign, [assign], os.environ) is None  # env's assignment
    long = str(_script(tmp_path, "l.sh", "#!/usr/bin/env bash" + " " * 300 + "\n"))
    assert shebang.direct(long, [long], os.environ) is None  # past what the kernel reads


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace counts the execve calls")
def test_a_direct_child_is_one_execve_not_two(tmp_path: Path) -> None:
    """Counted: the env script's child execs bash only; the same script through Popen (as
    the kernel and env run it) execs twice. One env process less per sensor."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    script = _script(run_dir, "s.sh", "#!/usr/bin/env bash\necho one\n")
    child = (
        "import os, sys\n"
        "from looop_py import procs\n"
        "where = sys.argv[1]\n"
        "os.chdir(sys.argv[2])\n"
        "res = procs.run([sys.argv[3]], cwd=where, env=dict(os.environ), timeout_s=10, cap=99)\n"
        "assert res.stdout == b'one\\n', res\n"
    )
    counts = {}
    for way, cwd in (("posix_spawn", run_dir), ("popen", tmp_path)):
        logs = tmp_path / way
        logs.mkdir()
        argv = [sys.executable, "-c", child, str(cwd), str(run_dir), str(script)]
        done = subprocess.run(
            [*STRACE, "-o", str(logs / "pid"), *argv],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        counts[way] = execs_done(logs)
        assert counts[way].pop(sys.executable) == 1
    assert counts == {"posix_spawn": {BASH: 1}, "popen": {str(script): 1, BASH: 1}}
