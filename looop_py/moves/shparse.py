"""Shell commands as the words that would run. Pure; the tripwire and the allowlist read it.

`split_commands` cuts a command line into simple commands at `;` `&&` `||`
`|` `&` and newlines, and into what runs inside `$( )`, backticks, `<( )`,
`>( )` and `( )` (also inside double quotes), each remembering what holds
it; each is split into words (quotes and backslashes removed, so `\\rm` is
`rm`) with redirections set apart. `commands` unwraps one: leading
`NAME=value` words and `{` `!` `if` `then` `do` … go, wrappers (env, command,
exec, nice, nohup, timeout, stdbuf, setsid, time, xargs, flock, chroot, sudo …)
are peeled off, `sh -c STRING`, `eval`, `watch` and `env -S` are parsed again,
`find -exec CMD ;` yields CMD, and argv[0] is reduced to its basename with
repeated slashes collapsed (`/usr//bin/sudo` is `sudo`). Text that does not
parse falls back to splitting on whitespace.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "csh", "tcsh"})
KEYWORDS = frozenset({"{", "}", "!", "if", "then", "else", "elif", "do", "while", "until", "in"})
MAX_DEPTH = 6

# A wrapper runs the command after its options: name, positional words before the command,
# then the options that take a value.
_WRAPPER_SPEC = (
    "env 0 -u --unset -C --chdir -P",
    "timeout 1 -s -k --signal --kill-after",
    "nice 0 -n --adjustment",
    "ionice 0 -c -n -p -P -u --class --classdata",
    "stdbuf 0 -i -o -e --input --output --error",
    "time 0 -f -o --format --output",
    "xargs 0 -I -n -L -P -d -E -s -a --arg-file --delimiter",
    "flock 1 -w -E --timeout --conflict-exit-code",
    "chroot 1 --userspec --groups",
    "watch 0 -n --interval -d",
    "strace 0 -o -e -p -s -u",
    "ltrace 0 -o -e -p -s -u",
    "sudo 0 -u -g -C -D -h -p -r -t -U -T",
    "doas 0 -u -C",
    "run0 0 -u --user",
    "pkexec 0 --user",
    "exec 0 -a",
    "nsenter 0 -t --target",
    "taskset 1",
    "chrt 1",
    *(f"{name} 0" for name in ("command", "builtin", "nohup", "setsid", "unbuffer")),
    *(f"{name} 0" for name in ("busybox", "unshare")),
)
WRAPPERS = {w[0]: (frozenset(w[2:]), int(w[1])) for w in map(str.split, _WRAPPER_SPEC)}


@dataclass
class Segment:
    """One simple command, where it sits, and its words."""

    text: str
    op: str = ""  # the operator before it: "", ";", "&&", "||", "|", "|&", "&", "\n"
    inside: str = ""  # "" at the top, else the opener that holds it: $( <( >( ` (
    parent: int | None = None  # the segment whose words held that substitution
    words: list[str] = field(default_factory=list)
    redirects: list[str] = field(default_factory=list)  # redirection targets


@dataclass
class _Frame:
    kind: str
    parent: int | None
    seg: int
    op: str = ""
    quote: str | None = None
    buf: list[str] = field(default_factory=list)


def split_commands(cmd: str) -> list[Segment]:
    """Every simple command in `cmd`, nested substitutions included, in source order."""
    ids = iter(range(1 << 30))
    out: dict[int, Segment] = {}
    frames = [_Frame("", None, next(ids))]

    def flush(f: _Frame, op: str) -> None:
        text = "".join(f.buf).strip()
        if text:
            out[f.seg] = Segment(text, f.op, f.kind, f.parent)
        f.buf, f.op, f.seg = [], op, next(ids)

    def open_frame(kind: str) -> None:
        f = frames[-1]
        f.buf.append(" __looop_sub__ ")
        frames.append(_Frame(kind, f.seg, next(ids)))

    i, n = 0, len(cmd)
    while i < n:
        f, c = frames[-1], cmd[i]
        two = cmd[i : i + 2]
        if f.quote == "'":
            f.buf.append(c)
            f.quote = None if c == "'" else f.quote
            i += 1
        elif c == "\\" and i + 1 < n:
            f.buf.append(two)
            i += 2
        elif f.quote == '"' and c not in '"`' and two != "$(":
            f.buf.append(c)
            i += 1
        elif c == '"':
            f.quote = None if f.quote == '"' else '"'
            f.buf.append(c)
            i += 1
        elif c == "'":
            f.quote = "'"
            f.buf.append(c)
            i += 1
        elif two in ("$(", "<(", ">("):
            open_frame(two)
            i += 2
        elif c == "`":
            if f.kind == "`":
                flush(f, "")
                frames.pop()
            else:
                open_frame("`")
            i += 1
        elif c == "(":
            open_frame("(")
            i += 1
        elif c == ")":
            if len(frames) > 1:
                flush(f, "")
                frames.pop()
            i += 1
        elif two in ("&&", "||", "|&") or c in ";|\n" or (c == "&" and _is_control_amp(cmd, i)):
            op = two if two in ("&&", "||", "|&") else c
            flush(f, op)
            i += len(op)
        else:
            f.buf.append(c)
            i += 1
    while frames:
        flush(frames[-1], "")
        frames.pop()
    segments = [out[k] for k in sorted(out)]
    for seg in segments:
        seg.words, seg.redirects = _words(seg.text)
    # parents refer to ids; map them to list positions
    index = {k: pos for pos, k in enumerate(sorted(out))}
    for seg in segments:
        seg.parent = index.get(seg.parent) if seg.parent is not None else None
    return segments


def _is_control_amp(cmd: str, i: int) -> bool:
    """`&` ends a command unless it belongs to a redirection (`2>&1`, `&>file`, `>&2`)."""
    before = cmd[i - 1] if i else ""
    after = cmd[i + 1] if i + 1 < len(cmd) else ""
    return before not in "<>" and after != ">"


def _words(text: str) -> tuple[list[str], list[str]]:
    try:
        lex = shlex.shlex(text, posix=True, punctuation_chars="<>")
        lex.whitespace_split = True
        lex.commenters = ""
        tokens = list(lex)
    except ValueError:
        tokens = text.replace("<", " < ").replace(">", " > ").split()
    words: list[str] = []
    redirects: list[str] = []
    skip = False
    for i, tok in enumerate(tokens):
        if skip:
            skip = False
            continue
        if tok and set(tok) <= set("<>"):
            if i + 1 < len(tokens):
                redirects.append(tokens[i + 1].lstrip("&"))
                skip = True
            continue
        words.append(tok)
    return words, redirects


# -- unwrapping -------------------------------------------------------------------------


def name_of(word: str) -> str:
    """argv[0] as it would be looked up: no backslashes, no directory, `//` collapsed."""
    word = re.sub(r"/+", "/", word.replace("\\", ""))
    return os.path.basename(word.rstrip("/")) or word


def _parse_again(text: str, depth: int) -> Iterator[list[str]]:
    if depth >= MAX_DEPTH:
        return
    for seg in split_commands(text):
        yield from commands(seg.words, depth + 1)


def commands(words: list[str], depth: int = 0) -> Iterator[list[str]]:
    """Each command `words` runs: itself, then what a wrapper or `sh -c` runs inside it."""
    if depth >= MAX_DEPTH:
        return
    i = 0
    while i < len(words) and (words[i] in KEYWORDS or re.match(r"^[A-Za-z_]\w*=", words[i])):
        i += 1
    if i >= len(words):
        return
    argv = [name_of(words[i]), *words[i + 1 :]]
    yield argv
    name, args = argv[0], argv[1:]
    if name in SHELLS or name == "su" or (name == "flock" and "-c" in args):
        text = dash_c(args)
        if text is not None:
            yield from _parse_again(text, depth)
        if name not in ("su", "flock"):
            return
    if name == "eval":
        yield from _parse_again(" ".join(args), depth)
        return
    if name == "watch":
        yield from _parse_again(" ".join(_after_options(args, WRAPPERS["watch"])), depth)
        return
    if name == "env":
        for j, a in enumerate(args):
            if a in ("-S", "--split-string") and j + 1 < len(args):
                yield from _parse_again(" ".join(args[j + 1 :]), depth)
                return
            if a.startswith(("-S", "--split-string=")) and len(a) > 2:
                rest = a.split("=", 1)[1] if a.startswith("--") else a[2:]
                yield from _parse_again(" ".join([rest, *args[j + 1 :]]), depth)
                return
    if name in WRAPPERS:
        inner = _after_options(args, WRAPPERS[name], env=name == "env")
        if inner:
            yield from commands(inner, depth + 1)
    if name == "find":
        for j, a in enumerate(args):
            if a in ("-exec", "-execdir", "-ok", "-okdir"):
                end = next((k for k in range(j + 1, len(args)) if args[k] in (";", "+")), len(args))
                yield from commands(args[j + 1 : end], depth + 1)


def dash_c(args: list[str]) -> str | None:
    """The command string of `sh -c STRING` (also `-lc`, `-ec` …), if any."""
    for j, a in enumerate(args):
        if a.startswith("-") and not a.startswith("--") and "c" in a[1:] and j + 1 < len(args):
            return args[j + 1]
        if not a.startswith("-"):
            return None
    return None


def _after_options(
    args: list[str], spec: tuple[frozenset[str], int], *, env: bool = False
) -> list[str]:
    takes_value, positional = spec
    j = 0
    while j < len(args):
        a = args[j]
        if a == "--":
            j += 1
            break
        if a.startswith("-") and len(a) > 1:
            j += 2 if a in takes_value else 1
            continue
        if env and re.match(r"^[A-Za-z_]\w*=", a):
            j += 1
            continue
        if positional:
            positional -= 1
            j += 1
            continue
        break
    return args[j:]
