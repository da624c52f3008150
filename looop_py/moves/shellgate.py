"""`[gates] shell_allow`: the rules that let a command run without a human. Pure.

A command runs on its own only when it is a *simple* command (no pipes,
redirections, substitutions, `;`, `&&` …) whose whole argv matches a rule;
it is then executed without a shell, so nothing in it can be reinterpreted.

A rule is the words of a command, compared word for word with the argv:

    "git status"       allows `git status` and nothing else (not `git status -s`)
    "git log *"        a trailing `*` allows any further arguments …
    "df -h"            … and only a trailing `*` is a wildcard: elsewhere `*` is a word

For make, git, npm, wget, tar and curl a wildcard stands only for what
programs.py knows each program's parser reads as safe (unknown options, make's
variable assignments, paths outside the work dir are refused). For the rest it
never matches an option that makes a read-only program execute something or
write a file (NEVER_BY_WILDCARD: `find -exec`, `sort -o` …, attached values and
abbreviations included), and never
matches anything for a program whose arguments are code (NO_WILDCARD: shells,
interpreters, sed, awk, xargs, env, sudo …): list such a command exactly.
Programs whose job is to write (cp, mv, tee, wget, touch …) do so under a
wildcard rule: `"cp *"` means any copy. The deny-list tripwire (tripwire.py)
runs first and refuses the catastrophic outright.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from looop_py.glyphs import hidden
from looop_py.moves import programs, shparse
from looop_py.moves import tripwire as tripwire_mod

_CONTROL = re.compile(r"[;&|<>`\n\r]|\$\(|\$\{|\$[A-Za-z_]|\(|\)")

# Programs whose arguments are code, or which run another command: a wildcard matches
# nothing for them (a rule naming the exact command still does).
_CODE_PROGRAMS = (
    "perl ruby node nodejs deno bun php lua luajit tclsh Rscript osascript pwsh sed gsed awk",
    "gawk mawk nawk xargs parallel expect vim vi nvim emacs ed ex gdb eval source . ssh npx",
    "pnpx bunx uvx pipx script",
)
NO_WILDCARD = frozenset(
    (*shparse.SHELLS, *shparse.WRAPPERS, *tripwire_mod.SUDO, *" ".join(_CODE_PROGRAMS).split())
)
_INTERPRETER = re.compile(r"^(?:python[\d.]*|pypy[\d.]*|php[\d.]*|perl[\d.]*|ruby[\d.]*)$")

# Options (and sub-commands) that make a program execute something or write a file. A `*`
# never matches them. `--long` also catches `--long=value` and abbreviations (`--out`);
# `-x` also catches clusters (`-sSo`) and attached values (`-ofile`); a `-word` (find's
# style) catches `-word…`; a bare word is a sub-command. (make, git, npm, wget, tar and
# curl are judged by what programs.py knows of their options instead.)
NEVER_BY_WILDCARD: dict[str, tuple[str, ...]] = {
    "find": ("-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fls"),
    "sort": ("-o", "--output", "--compress-program"),
    "rsync": ("-e", "--rsh", "--rsync-path", "--remove-source-files", "--delete"),
    "rg": ("--pre",),
    "date": ("-s", "--set"),
    "gh": ("alias", "extension", "--exec"),
}


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


def parse_rule(entry: str) -> tuple[list[str], bool] | None:
    """(the fixed words, whether a trailing `*` allows more) of one rule; None if unusable."""
    try:
        words = shlex.split(entry)
    except ValueError:
        return None
    wildcard = bool(words) and words[-1] == "*"
    fixed = words[:-1] if wildcard else words
    return (fixed, wildcard) if fixed else None


def _program(word: str) -> str:
    return shparse.name_of(word)


def _subcommand(words: list[str]) -> str | None:
    return next((w for w in words[1:] if not w.startswith("-")), None)


def _hits(word: str, option: str) -> bool:
    if option.startswith("--"):
        name = word.split("=", 1)[0]
        return word.startswith("--") and len(name) > 2 and option.startswith(name)
    if len(option) == 2 and option.startswith("-"):
        return word.startswith("-") and not word.startswith("--") and option[1] in word[1:]
    if option.startswith("-"):
        return word.startswith(option)
    return word == option


def wildcard_refuses(words: list[str], fixed: int) -> str | None:
    """Why a `*` may not stand for words[fixed:], or None when it may."""
    program = _program(words[0])
    if program in NO_WILDCARD or _INTERPRETER.match(program):
        return f"{program}'s arguments are code: a wildcard never matches them"
    tail = words[fixed:]
    if program == "tar" and tail and tail[0].isalpha() and fixed == 1:
        tail = ["-" + tail[0], *tail[1:]]  # old-style `tar xzf`
    if program in programs.PROGRAMS:  # knowledge of its options (programs.py)
        return programs.refuses(program, [words[0], *words[1:fixed], *tail], fixed)
    options = list(NEVER_BY_WILDCARD.get(program, ()))
    sub = _subcommand(words)
    if sub is not None:
        options += NEVER_BY_WILDCARD.get(f"{program} {sub}", ())
    for word in tail:
        for option in options:
            if _hits(word, option):
                return f"{word!r} makes {program} execute or write; a wildcard never allows it"
    return None


def allowed(words: list[str], allow: tuple[str, ...]) -> str | None:
    """The rule that allows exactly this argv, if any."""
    for entry in allow:
        rule = parse_rule(entry)
        if rule is None:
            continue
        fixed, wildcard = rule
        if not wildcard:
            if words == fixed:
                return entry
            continue
        if words[: len(fixed)] == fixed and wildcard_refuses(words, len(fixed)) is None:
            return entry
    return None


def tripwire(cmd: str) -> str | None:
    """The name of the first deny rule the command trips, if any (see tripwire.py)."""
    return tripwire_mod.tripwire(cmd)


def check_shell(cmd: str, allow: tuple[str, ...], *, allow_dangerous: bool = False) -> ShellVerdict:
    """Decide what happens to a proposed shell command (run_shell, a verify command)."""
    rule = None if allow_dangerous else tripwire(cmd)
    if rule is not None:
        return ShellVerdict(False, denied=rule, reason=f"refused by the tripwire ({rule})")
    unseen = hidden(cmd)
    if unseen:
        return ShellVerdict(
            False,
            reason=f"it contains characters a human cannot see ({', '.join(unseen)});"
            " needs a human's approval",
        )
    words = simple_words(cmd)
    if words is None:
        return ShellVerdict(False, reason="not a simple command; needs a human's approval")
    entry = allowed(words, allow)
    if entry is None:
        return ShellVerdict(
            False, reason="no [gates] shell_allow rule matches it whole; needs a human's approval"
        )
    return ShellVerdict(True, argv=tuple(words), reason=f"allowed by {entry!r}")
