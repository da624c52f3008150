"""Code-level gates for `run_shell`: an allowlist and a deny-list tripwire. Pure.

A command runs on its own only when it is a *simple* command (no pipes,
redirections, substitutions, `;`, `&&` …) whose leading words match an entry
of `[gates] shell_allow`; such a command is then executed without a shell, so
nothing in it can be reinterpreted. Anything else becomes an approval a human
answers. The tripwire refuses outright what is almost never intended (sudo,
rm -rf of / or ~, force-push to main, curl|sh, mkfs, dd to a device,
shutdown …): it catches the catastrophic mistake, it is not a sandbox.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

_CONTROL = re.compile(r"[;&|<>`\n\r]|\$\(|\$\{|\$[A-Za-z_]|\(|\)")


@dataclass(frozen=True)
class ShellVerdict:
    run: bool  # True: run it now; False: ask (or refuse, see `denied`)
    argv: tuple[str, ...] = ()  # for auto-run: the words, executed without a shell
    denied: str | None = None  # the tripwire rule that fired
    reason: str = ""


def simple_words(cmd: str) -> list[str] | None:
    """The words of a command with no shell control syntax, else None."""
    if _CONTROL.search(cmd):
        return None
    try:
        words = shlex.split(cmd)
    except ValueError:
        return None
    return words or None


def allowed(words: list[str], allow: tuple[str, ...]) -> str | None:
    """The allowlist entry whose words prefix `words`, if any."""
    for entry in allow:
        try:
            prefix = shlex.split(entry)
        except ValueError:
            continue
        if prefix and words[: len(prefix)] == prefix:
            return entry
    return None


# -- the tripwire ----------------------------------------------------------------------

_SEP = r"(?:^|[;&|(`{]|\$\(|\bthen\b|\bdo\b|\belse\b)\s*"
_WORD_END = r"(?=$|[\s;&|)`])"
_ROOTISH = r"(?:/|/\*|~|~/|~/\*|\$HOME|\$\{HOME\}|\"\$HOME\"|\$HOME/|\$HOME/\*|/root)"

_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("sudo", re.compile(_SEP + r"(?:sudo|doas|su)" + _WORD_END)),
    (
        "rm -rf of / or ~",
        re.compile(
            _SEP
            + r"rm\s+(?=[^;&|]*(?:-[a-zA-Z]*[rR]|--recursive))(?=[^;&|]*(?:-[a-zA-Z]*f|--force))"
            r"[^;&|]*?\s" + _ROOTISH + _WORD_END
        ),
    ),
    (
        "force-push to main",
        re.compile(
            r"\bgit\s+(?:-\S+\s+)*push\b(?=[^;&|]*(?:\s--force\b|\s-f\b|\s--force-with-lease\b|\s\+))"
            r"(?=[^;&|]*\b(?:main|master)\b)"
        ),
    ),
    ("curl | sh", re.compile(r"\b(?:curl|wget)\b[^;&]*\|\s*(?:sudo\s+)?(?:ba|z|k|da)?sh\b")),
    ("mkfs", re.compile(_SEP + r"mkfs(?:\.\w+)?" + _WORD_END)),
    ("dd to a device", re.compile(r"\bdd\b[^;&|]*\bof=/dev/(?!null\b|zero\b|stdout\b|stderr\b)")),
    ("write to a disk device", re.compile(r">\s*/dev/(?:sd|nvme|disk|rdisk|hd|vd|mmcblk)")),
    (
        "shutdown",
        re.compile(_SEP + r"(?:shutdown|reboot|halt|poweroff)" + _WORD_END + r"|\binit\s+[06]\b"),
    ),
    ("fork bomb", re.compile(r":\s*\(\s*\)\s*\{[^}]*:\s*\|\s*:")),
    ("chmod/chown of /", re.compile(r"\bch(?:mod|own)\s+(?:-\S+\s+)*\S+\s+/" + _WORD_END)),
)


def tripwire(cmd: str) -> str | None:
    """The name of the first deny rule the command trips, if any."""
    flat = " ".join(cmd.split())
    for name, pattern in _RULES:
        if pattern.search(flat):
            return name
    return None


def check_shell(cmd: str, allow: tuple[str, ...], *, allow_dangerous: bool = False) -> ShellVerdict:
    """Decide what happens to a proposed `run_shell` command."""
    rule = None if allow_dangerous else tripwire(cmd)
    if rule is not None:
        return ShellVerdict(False, denied=rule, reason=f"refused by the tripwire ({rule})")
    words = simple_words(cmd)
    if words is None:
        return ShellVerdict(False, reason="not a simple command; needs a human's approval")
    entry = allowed(words, allow)
    if entry is None:
        return ShellVerdict(False, reason="not in [gates] shell_allow; needs a human's approval")
    return ShellVerdict(True, argv=tuple(words), reason=f"allowed by {entry!r}")
