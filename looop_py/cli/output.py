"""Output to the terminal and error reporting: what a command prints and how it exits.

No click here: console.py's fast path for `looop pulse` uses this module.

Exit codes a cron job can rely on:
  0  done (for `pulse`: skipped, decided, held or locked)
  1  the command ran and failed (a failed beat, a refused move)
  2  usage: bad arguments (an unknown runtime, an empty prompt), no work dir, bad looop.toml
  3  busy: a lock another process holds, or a loop's live round (`run`)
  4  a claim another live holder has (or, for --renew, that lapsed), an ask that timed out
  74 the environment: disk full, read-only file system, permission denied (the path named)
  70 a bug in looop; the traceback goes to state/errors.log, not to cron mail
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from looop_py.errors import EnvironmentProblem, LooopError

if TYPE_CHECKING:
    from looop_py.workdir.paths import Paths

EX_SOFTWARE = 70
EX_INTERRUPTED = 130


class Note(str):
    """A line for stderr: commentary that a script reading stdout should not see."""

    __slots__ = ()


def echo(text: str, *, err: bool = False) -> None:
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")
    stream.flush()


def seen(text: str) -> str:
    """`text` with what a terminal would obey or hide spelled out (`\\x1b`, `⟨U+202E⟩`)."""
    if text.isascii() and text.isprintable():
        return text
    from looop_py.glyphs import visible  # only for text that has something to show

    return visible(text)


def show(lines: Iterable[str]) -> None:
    """Print rendered lines (nothing in them hidden): a Note to stderr, others to stdout."""
    for line in lines:
        echo(seen(line), err=isinstance(line, Note))


def json_out(value: Any) -> None:
    from looop_py import jsonio

    sys.stdout.buffer.write(jsonio.dumps(value, pretty=True) + b"\n")
    sys.stdout.flush()


def json_line(value: Any) -> None:
    """One compact JSON object on one line: a stream's item (`worker logs -f --json`, `up`)."""
    from looop_py import jsonio

    raw_out(jsonio.dumps(value) + b"\n")


def present(view: Any, as_json: bool, lines: Callable[[Any], Iterable[str]]) -> None:
    """A view as JSON (its to_json()) under --json, else as the lines `lines` renders."""
    if as_json:
        json_out(view.to_json())
    else:
        show(lines(view))


def raw_out(chunk: bytes) -> None:
    sys.stdout.buffer.write(chunk)
    sys.stdout.flush()


def resolve(workdir: str | None) -> Paths:
    """The work dir from -C DIR, else $LOOOP_DIR, else the nearest ancestor with looop.toml."""
    import looop_py.coord  # noqa: F401 - registers the etcd shelf, for work dirs that share records
    from looop_py.workdir.paths import find_workdir

    return find_workdir(workdir, os.environ, Path.cwd())


def error_out(message: str, hint: str | None, code: int, *, as_json: bool) -> int:
    """One error: a line on stderr, or under --json one object on stdout. Returns `code`."""
    if as_json:
        json_out({"error": message, "hint": hint, "exit_code": code})
    else:
        text = f"looop: {message}" + (f"\n  → {hint}" if hint else "")
        sys.stderr.write(seen(text) + "\n")
    return code


def report_error(exc: BaseException, workdir: str | None, *, as_json: bool = False) -> int:
    """Tell the user what went wrong; return the exit code."""
    if isinstance(exc, LooopError):
        return error_out(exc.message, exc.hint, exc.exit_code, as_json=as_json)
    if isinstance(exc, KeyboardInterrupt):
        return error_out("interrupted", None, EX_INTERRUPTED, as_json=as_json)
    problem = EnvironmentProblem.from_os_error(exc) if isinstance(exc, OSError) else None
    if problem is not None:  # not a bug: no traceback (and no errors.log on a full disk)
        return error_out(problem.message, problem.hint, problem.exit_code, as_json=as_json)
    where = log_crash(workdir)
    return error_out(
        f"internal error (a bug): {exc!r}", f"traceback in {where}", EX_SOFTWARE, as_json=as_json
    )


def log_crash(workdir: str | None) -> str:
    """Append the current traceback to state/errors.log (stderr outside a work dir)."""
    import traceback

    text = f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} looop {' '.join(sys.argv[1:])}\n"
    text += traceback.format_exc()
    try:
        log = resolve(workdir).error_log
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a", encoding="utf-8") as f:
            f.write(text)
        return str(log)
    except Exception:
        sys.stderr.write(text)
        return "stderr"


def closed_pipe() -> int:
    """The reader went away (`looop status | head -1`): stop quietly, exit 0.

    Whatever is still buffered would raise again when Python flushes at exit,
    so the standard streams are pointed at /dev/null (the recipe in the
    `signal` module's documentation).
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        try:
            os.dup2(devnull, stream.fileno())
        except (OSError, ValueError, AttributeError):
            continue  # not a real file (a test runner's capture)
    os.close(devnull)
    return 0
