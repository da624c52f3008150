"""The deny-list tripwire: commands refused outright, whoever approves them. Pure.

It catches the catastrophic mistake (sudo, rm -rf of / or ~, force-push to
main, curl|sh, mkfs, dd to a device, shutdown, kill -1 …); it is not a
sandbox, and everything it lets through still needs an approval or an
allowlist rule. It matches what would *run*, not how it is spelled: the
command is cut into simple commands and unwrapped by shparse.py (paths of
argv[0], backslashes, quotes, wrappers such as env/command/nice/timeout/sudo,
`sh -c`, process substitution), then the rules below look at the words, with
paths compared after collapsing `//`, `/./`, `..`, trailing `/` and `/*`, and
`$HOME`/`${HOME}` read as `~`. The old text patterns still run over the
flattened command as a second net.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from looop_py.moves.shparse import SHELLS, Segment, commands, dash_c, split_commands

SUDO = frozenset({"sudo", "doas", "su", "pkexec", "run0", "sudoedit"})
DOWNLOADERS = frozenset({"curl", "wget", "fetch", "aria2c", "http", "https", "xh"})
SOURCE = frozenset({"source", ".", "eval"})
SYSTEM_DIR = re.compile(
    r"^/(?:|root|home|etc|usr|var|bin|sbin|boot|lib(?:32|64)?|opt|srv|dev|sys|proc|mnt|media"
    r"|run|snap|Users|System|Library|Applications|private)$"
)
DISK = re.compile(r"^/dev/(?:sd|nvme|disk|rdisk|hd|vd|xvd|mmcblk|md\d|dm-|mapper/|loop)")
SAFE_DEV = re.compile(r"^/dev/(?:null|zero|full|u?random|stdout|stderr|stdin|tty|fd/|pts/)")
POWER = frozenset({"poweroff", "halt", "reboot", "kexec", "soft-reboot", "shutdown"})


# -- the rules ---------------------------------------------------------------------------


def norm_path(word: str) -> str:
    """A path as the rules compare it: ~ for home, no `//`, `.`, `..`, trailing `/` or `/*`."""
    w = re.sub(r"^(?:\$\{HOME\}|\$HOME)(?=/|$)", "~", word.replace("\\", ""))
    w = re.sub(r"/+", "/", w)
    while w.endswith("/*"):
        w = w[:-2] or "/"
    if w.startswith("/"):
        return posixpath.normpath(w).replace("//", "/")
    if w.startswith("~"):
        head, _, tail = w.partition("/")
        tail = posixpath.normpath(tail) if tail else "."
        if tail == ".":
            return head
        return "/home" if tail.startswith("..") else f"{head}/{tail}"
    return w


def rootish(word: str) -> bool:
    """/, ~, a home or a top-level system directory, however spelled."""
    w = norm_path(word)
    if SYSTEM_DIR.match(w) or w == "~":
        return True
    return bool(re.fullmatch(r"~[A-Za-z_][\w.-]*", w))


def _operands(args: list[str]) -> list[str]:
    out, ended = [], False
    for a in args:
        if not ended and a == "--":
            ended = True
        elif ended or not a.startswith("-") or a == "-":
            out.append(a)
    return out


def _has_short(args: list[str], letters: str, longs: tuple[str, ...] = ()) -> bool:
    for a in args:
        if a == "--":
            return False
        if a in longs or any(a.startswith(lng + "=") for lng in longs):
            return True
        if a.startswith("-") and not a.startswith("--") and any(ch in a[1:] for ch in letters):
            return True
    return False


@dataclass
class _Context:
    home_cwd: bool = False  # an earlier `cd` went to / or ~


def _rule(argv: list[str], ctx: _Context) -> str | None:
    name, args = argv[0], argv[1:]
    operands = _operands(args)
    if name in SUDO:
        return "sudo"
    if name == "rm" and _has_short(args, "rR", ("--recursive",)):
        here = ("*", ".", "./", "./*", ".*", "*/")
        if "--no-preserve-root" in args or any(rootish(a) for a in operands):
            return "rm -rf of / or ~"
        if ctx.home_cwd and any(a in here for a in operands):
            return "rm -rf of / or ~"
    if name == "find" and operands and rootish(operands[0]) and "-delete" in args:
        return "rm -rf of / or ~"
    if name == "git" and "push" in args:
        forced = _has_short(args[args.index("push") :], "f", ("--force", "--force-with-lease"))
        forced = forced or any(a.startswith("+") for a in operands) or "--mirror" in args
        main = re.compile(r"^\+?(?:[^:]*:)?(?:refs/heads/)?(?:main|master)$")
        if forced and (any(main.match(a) for a in operands) or {"--all", "--mirror"} & set(args)):
            return "force-push to main"
    if name.startswith("mkfs") or name in ("mke2fs", "wipefs"):
        return "mkfs"
    if name == "dd":
        for a in args:
            if a.startswith("of="):
                target = norm_path(a[3:])
                if target.startswith("/dev/") and not SAFE_DEV.match(target):
                    return "dd to a device"
    if name == "tee" and any(DISK.match(norm_path(a)) for a in operands):
        return "write to a disk device"
    if name in ("shutdown", "reboot", "halt", "poweroff"):
        return "shutdown"
    if name in ("init", "telinit") and operands[:1] in (["0"], ["6"]):
        return "shutdown"
    if name in ("systemctl", "loginctl") and POWER & set(operands):
        return "shutdown"
    if name == "killall5" or (name == "kill" and _kills_everything(args)):
        return "kill every process"
    if name in ("chmod", "chown", "chgrp") and any(rootish(a) for a in operands):
        return "chmod/chown of /"
    return None


def _kills_everything(args: list[str]) -> bool:
    """`kill -9 -1`, `kill -- -1`, `kill -s KILL -1`, `kill -1` alone: every process."""
    if args == ["-1"]:
        return True
    rest = list(args)
    if rest and rest[0] in ("-s", "-n", "--signal") and len(rest) > 1:
        rest = rest[2:]
    elif rest and rest[0].startswith("-") and rest[0] != "--":
        rest = rest[1:]  # the signal: -9, -KILL, -SIGKILL, -1 (HUP)
    if rest and rest[0] == "--":
        rest = rest[1:]
    return "-1" in rest


def _reads_code_from_stdin(argv: list[str]) -> bool:
    name, args = argv[0], argv[1:]
    interpreter = name in SHELLS or re.match(r"^(?:python[\d.]*|perl|ruby|node|php|lua)$", name)
    if not interpreter:
        return False
    if dash_c(args) is not None and name in SHELLS:
        return False
    operands = _operands(args)
    return not operands or operands[0] == "-" or "-s" in args


def _runs_code(argv: list[str]) -> bool:
    name = argv[0]
    return (
        name in SHELLS
        or name in SOURCE
        or bool(re.match(r"^(?:python[\d.]*|perl|ruby|node|php|lua)$", name))
    )


_FALLBACK: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("curl | sh", re.compile(r"\b(?:curl|wget)\b[^;&]*\|\s*(?:sudo\s+)?(?:ba|z|k|da)?sh\b")),
    ("fork bomb", re.compile(r"([\w:.-]+)\s*\(\s*\)\s*\{[^}]*?\1\s*\|\s*&?\s*\1")),
    ("write to a disk device", re.compile(r">\s*/+dev/+(?:sd|nvme|disk|rdisk|hd|vd|mmcblk)")),
    (
        "rm -rf of / or ~",
        re.compile(
            r"(?:^|[;&|(`{]|\$\()\s*(?:\S*/)?\\?rm\s+-[a-zA-Z]*[rR][a-zA-Z]*\s+/+\s*(?:$|[;&|)])"
        ),
    ),
)


def tripwire(cmd: str) -> str | None:
    """The name of the first deny rule the command trips, if any."""
    segments = split_commands(cmd)
    ctx = _Context()
    expanded = [list(commands(seg.words)) for seg in segments]
    for pos, seg in enumerate(segments):
        for argv in expanded[pos]:
            if argv[0] == "cd" and not seg.inside:
                target = _operands(argv[1:])
                ctx.home_cwd = not target or rootish(target[0])
            hit = _rule(argv, ctx)
            if hit:
                return hit
        if any(DISK.match(norm_path(r)) for r in seg.redirects):
            return "write to a disk device"
        downloads = any(argv[0] in DOWNLOADERS for argv in expanded[pos])
        inner = seg.parent is not None and seg.inside in ("$(", "<(", "`")
        if downloads and inner and any(_runs_code(argv) for argv in expanded[seg.parent or 0]):
            return "curl | sh"
        if downloads and _pipes_into_code(segments, expanded, pos):
            return "curl | sh"
    flat = " ".join(cmd.split())
    for name, pattern in _FALLBACK:
        if pattern.search(flat):
            return name
    return None


def _pipes_into_code(segments: list[Segment], expanded: list[list[list[str]]], start: int) -> bool:
    """Does the pipeline that segment `start` begins feed a shell or interpreter reading stdin?"""
    frame = (segments[start].inside, segments[start].parent)
    for pos in range(start + 1, len(segments)):
        seg = segments[pos]
        if (seg.inside, seg.parent) != frame:
            continue  # a substitution inside the pipeline: not the pipe itself
        if seg.op not in ("|", "|&"):
            return False
        if any(_reads_code_from_stdin(argv) for argv in expanded[pos]):
            return True
    return False
