"""What exec runs for a child: the program found on its PATH, and for a script whose first
line is `#!/usr/bin/env NAME`, NAME found on that PATH, as env itself would find it.

Most sensors begin `#!/usr/bin/env bash`. Exec'd as they are, the kernel starts env, and
env looks NAME up on PATH and execs it: one more program loaded per child, about
0.9 ms of CPU here, a fifth of a quiet beat's 8 sensors. `direct` does env's part in
the parent, so the child execs NAME at once with the argv env would have given it
(NAME, the script's path, the rest). The child cannot tell: env execs in place (same
pid, same environment, no output), so the process, its argv and its environment are
the ones it had. Only the plain form is taken, and only when exec of the script would
have reached env: anything else (options, an `=`, a path, a line the kernel reads
differently, a script exec would refuse) returns None and the script is exec'd as it
is, so the kernel and env decide, as they always did.
"""

from __future__ import annotations

import os
import stat

# typing is not imported at run time: a quiet beat spawns its sensors through here.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

ENVS = (b"/usr/bin/env", b"/bin/env")
_LINE = 256  # the kernel reads this much of a script for its #! line (BINPRM_BUF_SIZE)


def exec_path(program: str, env: Mapping[str, str]) -> str:
    """`program` as exec would find it on the child's PATH (what Popen does)."""
    if "/" in program:
        return program
    path = env.get("PATH")  # os.get_exec_path's reading of it, without importing warnings
    for folder in (os.defpath if path is None else path).split(os.pathsep):
        candidate = os.path.join(folder, program)
        if os.access(candidate, os.X_OK) and os.path.isfile(candidate):  # most: one call
            return candidate
    import errno  # not found: the error path only

    raise FileNotFoundError(errno.ENOENT, f"No such file or directory: {program!r}")


def direct(
    path: str, argv: list[str], env: Mapping[str, str], found: dict[str, str] | None = None
) -> tuple[str, list[str]] | None:
    """(NAME's path, the argv env would exec it with) for a `#!/usr/bin/env NAME` script
    exec would run; None to exec `path` as it is. `found`: NAMEs already looked up on
    this `env`'s PATH (children started together), so each is looked up once."""
    line = _env_line(path)
    if line is None:
        return None
    interp, name = line
    if not os.access(interp, os.X_OK):
        return None  # no env to run: exec fails, and says so
    program = found.get(name) if found is not None else None
    if program is None:
        try:
            program = exec_path(name, env)
        except OSError:
            return None  # env says it is not found, and exits 127: let it
        if found is not None:
            found[name] = program
    return program, [name, path, *argv[1:]]


def _env_line(path: str) -> tuple[str, str] | None:
    """(env, NAME) of a script exec would run whose first line is `#!/usr/bin/env NAME`
    (or /bin/env), split as the kernel splits it: the interpreter up to a blank, then one
    argument stripped of blanks."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or not os.access(path, os.X_OK):
            return None
        if os.statvfs(path).f_flag & os.ST_NOEXEC:
            return None
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            head = os.read(fd, _LINE)
        finally:
            os.close(fd)
    except OSError:
        return None  # unreadable, gone: exec decides
    end = head.find(b"\n")
    if not head.startswith(b"#!") or end < 0:
        return None
    line = head[2:end].lstrip(b" \t")
    blank = min((i for i in (line.find(b" "), line.find(b"\t")) if i >= 0), default=len(line))
    interp, name = line[:blank], line[blank:].strip(b" \t")
    if interp not in ENVS or not _plain(name):
        return None
    return interp.decode(), name.decode("ascii")


def _plain(name: bytes) -> bool:
    """A command name env looks up on PATH and runs with no option of its own: printable
    ASCII, no blank, slash, backslash, `=` (an assignment to env) or leading `-` (an
    option)."""
    return (
        bool(name)
        and all(33 <= byte < 127 for byte in name)
        and not name.startswith(b"-")
        and not any(char in name for char in (b"/", b"=", b"\\"))
    )
