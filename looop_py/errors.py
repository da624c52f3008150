"""The one exception family users see; each carries the exit code the CLI returns."""

from __future__ import annotations

# typing is not imported at run time: a worker's supervisor loads this at every start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn


def unreachable(value: NoReturn) -> NoReturn:
    """Ends an exhaustive `match`: mypy fails here when a new enum value is not handled."""
    raise AssertionError(f"unhandled value {value!r}")


class LooopError(Exception):
    """An error the user can act on: a message, an optional next step, an exit code."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  → {self.hint}"


class UsageError(LooopError):
    """Bad arguments, or a command run where it cannot work."""

    exit_code = 2


class NotAWorkDir(UsageError):
    """No work dir could be found from -C, $LOOOP_DIR or the current directory."""


class ConfigError(UsageError):
    """looop.toml is missing, malformed or holds a value of the wrong type."""


class CorruptFile(LooopError):
    """A state file exists but cannot be parsed; nothing is overwritten blindly."""


class Busy(LooopError):
    """Another process holds a lock this command needs."""

    exit_code = 3


class RoundLive(Busy):
    """The loop already has a live round: one at a time, so nothing new was started."""


class ClaimHeld(LooopError):
    """Another live holder has the claim; the caller must not proceed."""

    exit_code = 4


class NoAnswer(LooopError):
    """An ask nobody answered in time, or that was removed unanswered."""

    exit_code = 4


class WorkerRefused(LooopError):
    """A worker could not be started (alive already, fleet full, its program missing …)."""


class BadWorkerRequest(WorkerRefused, UsageError):
    """A worker request that can never start as asked (an unknown runtime or workspace, an
    empty prompt): a usage error, exit 2, wherever it is asked (worker start, a loop)."""


class Unavailable(LooopError):
    """Temporary: the shared coordination store cannot be reached or has no quorum.

    Nothing was decided either way (no claim granted or refused, no beat run);
    the same command later may succeed. Never answered by falling back to files.
    """

    exit_code = 3


class FenceLost(Unavailable):
    """Temporary: this beat's pulse token is no longer current (a newer pulse holds it).

    The write that found out was refused, and so is every later one of this beat.
    `token`: the token that was lost (None when the writer did not say).
    """

    exit_code = 4  # as ClaimHeld: another holder has it; do not proceed

    def __init__(self, message: str, hint: str | None = None, *, token: int | None = None):
        super().__init__(message, hint)
        self.token = token


class EnvironmentProblem(LooopError):
    """The machine, not looop: a disk full, a read-only file system, a permission denied.

    Nothing was torn (every record is written whole or not at all); the same command
    succeeds once the cause is fixed, and the next beat picks up where this one stopped.
    """

    exit_code = 74  # sysexits EX_IOERR

    @staticmethod
    def from_os_error(exc: OSError) -> EnvironmentProblem | None:
        """The problem an OSError reports, when it is the environment's; else None."""
        import errno  # only when an OSError reaches the door

        hints = {
            errno.ENOSPC: "the disk is full: free space (df -h), then run it again",
            errno.EDQUOT: "your disk quota is used up: free space, then run it again",
            errno.EROFS: "the file system is read-only: remount it read-write or move the work dir",
            errno.EACCES: "permission denied: give this user write access (ls -l, chown, chmod)",
            errno.EPERM: "operation not permitted: check the owner and mode (ls -l)",
            errno.EIO: "an I/O error: check the disk (dmesg)",
        }
        hint = hints.get(exc.errno or 0)
        if hint is None:
            return None
        where = exc.filename if exc.filename is not None else "a file of the work dir"
        return EnvironmentProblem(f"{exc.strerror or exc}: {where}", hint)
