"""What a wildcard may stand for, per program: knowledge of its options, not a denylist.

For the programs here a `*` in a `[gates] shell_allow` rule stands only for words
the program's own parser would read as: an option this table knows to be safe (it
neither runs code nor writes or reads outside the work dir), that option's value,
or a plain argument. Anything else — an option the table does not know, a
sub-command it does not list (a git alias may be `!cmd`), make's `NAME op= value`
(every op: `=`, `:=`, `::=`, `:::=`, `+=`, `?=`, `!=`: make evaluates them), a
value or argument naming a path outside the work dir (`/x`, `~/x`, `../x`), an
option-shaped next word as an option's value (`-w --init-module`) — is refused:
write that command out in full in the rule instead. Long options match
exactly (no abbreviations); short options may cluster (`-sSL`) and take an
attached value (`-j4`). Words the rule itself spells out are the human's and are
not judged. Pure.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Program:
    flags: frozenset[str]  # options without a value
    valued: frozenset[str]  # options that take a value (the next word, `=v`, or attached)
    attached: frozenset[str] = frozenset()  # short options whose value may only be attached
    subcommands: frozenset[str] | None = None  # the first plain word must be one of these
    # sub-command → options refused after it though listed above (or plain words it runs)
    sub_refuses: dict[str, frozenset[str]] = field(default_factory=dict)
    no_positional: frozenset[str] = frozenset()  # sub-commands taking no plain argument
    assignments: bool = False  # a plain word with `=` is code (make's variables)
    value_prefixes: tuple[str, ...] = ()  # stripped before a value's path check (curl's @)


def _w(text: str) -> frozenset[str]:
    return frozenset(text.split())


GIT_SUBCOMMANDS = _w(
    "status log diff show branch tag fetch pull clone add commit checkout switch restore "
    "reset stash merge rebase push remote ls-files ls-remote rev-parse describe shortlog "
    "blame grep init worktree cherry-pick revert mv rm clean bundle archive format-patch "
    "range-diff reflog count-objects fsck gc show-ref for-each-ref cat-file rev-list "
    "name-rev whatchanged am apply cherry merge-base diff-tree ls-tree version"
)
# Options of git's sub-commands that execute a program or write a chosen file.
GIT_EXECUTES = _w(
    "-u --upload-pack --receive-pack --exec -x --output -o --output-directory --ext-diff "
    "--template --separate-git-dir --config -c -O --open-files-in-pager --remote "
    "--interactive -i --edit -e --exec-path --textconv --run --tool --extcmd --gpg-program"
)

PROGRAMS: dict[str, Program] = {
    "make": Program(
        flags=_w(
            "-k --keep-going -s --silent --quiet -n --dry-run --just-print --recon -q "
            "--question -B --always-make -w --print-directory --no-print-directory -i "
            "--ignore-errors -r --no-builtin-rules -R --no-builtin-variables -S "
            "--no-keep-going --stop --trace -j --jobs -l --load-average -O --output-sync"
        ),
        valued=frozenset(),
        attached=_w("-j -l -O"),
        assignments=True,
    ),
    "git": Program(
        # global options (before the sub-command) and, after it, anything not in GIT_EXECUTES
        flags=_w(
            "--no-pager -P --paginate -p --no-optional-locks --literal-pathspecs "
            "--glob-pathspecs --noglob-pathspecs --icase-pathspecs --no-replace-objects"
        ),
        valued=frozenset(),
        subcommands=GIT_SUBCOMMANDS,
    ),
    "npm": Program(
        flags=_w(
            "--json --long -l --parseable -p --all -a --silent -s --quiet -q --yes -y "
            "--dry-run --no-audit --no-fund --prefer-offline --offline --production"
        ),
        valued=_w("--depth --omit --include --loglevel --workspace -w --registry"),
        subcommands=_w(
            "ls list ll la view v info show outdated test t tst init create search find "
            "whoami doctor ping prefix root help explain why fund audit"
        ),
        no_positional=_w("init create"),  # `npm init NAME` runs the package create-NAME
    ),
    "wget": Program(
        flags=_w(
            "-q --quiet -v --verbose -nv --no-verbose -S --server-response --spider -N "
            "--timestamping -c --continue -nc --no-clobber -nd --no-directories "
            "--no-check-certificate -4 -6 --inet4-only --inet6-only --no-cookies"
        ),
        valued=_w(
            "-O --output-document -P --directory-prefix -T --timeout -t --tries -U "
            "--user-agent --header --max-redirect -w --wait --limit-rate --user"
        ),
    ),
    "tar": Program(
        flags=_w(
            "-t --list -v --verbose -z --gzip --gunzip -j --bzip2 -J --xz --zstd -a "
            "--auto-compress --numeric-owner --wildcards --no-wildcards --totals"
        ),
        valued=_w("-f --file -C --directory --exclude"),
    ),
    "curl": Program(
        flags=_w(
            "-s --silent -S --show-error -f --fail --fail-with-body -L --location -I --head "
            "-i --include -v --verbose -k --insecure --compressed -g --globoff -4 -6 -N "
            "--no-buffer -# --progress-bar --http1.1 --http2 -G --get"
        ),
        valued=_w(
            "-H --header -X --request -d --data --data-raw --data-binary --data-urlencode "
            "--json -m --max-time --connect-timeout -A --user-agent -u --user -e --referer "
            "--retry --retry-delay -w --write-out -r --range -b --cookie --url"
        ),
        value_prefixes=("@",),
    ),
}


def outside(word: str) -> bool:
    """True when `word` names a path outside the work dir (absolute, ~, or up via ..)."""
    if word.startswith(("/", "~")):
        return True
    norm = posixpath.normpath(word)
    return norm == ".." or norm.startswith("../")


def _url_refuses(word: str) -> str | None:
    low = word.lower()
    if low.startswith(("ext::", "fd::", "file:")):
        return f"{word!r} is a transport that runs a program or reads outside the work dir"
    return None


def refuses(name: str, words: list[str], fixed: int) -> str | None:
    """Why a `*` may not stand for words[fixed:] of this known program; None when it may."""
    spec = PROGRAMS[name]
    sub: str | None = None
    i = 1
    while i < len(words):
        word, mine = words[i], i >= fixed  # words before `fixed` the rule spells out
        step, why = _judge(name, spec, words, i, sub)
        if why is not None and mine:
            return why
        plain = not word.startswith("-") or word == "-"
        if plain and sub is None and spec.subcommands is not None:
            sub = word
        i += step
    return None


def _judge(
    name: str, spec: Program, words: list[str], i: int, sub: str | None
) -> tuple[int, str | None]:
    """(how many words this one takes, why it is refused or None)."""
    word = words[i]
    if word == "--" or not word.startswith("-") or word == "-":
        return 1, _positional(name, spec, word, sub)
    if name == "git" and sub is not None:  # git's sub-command options: knowledge of the risky
        opt = word.split("=", 1)[0]
        if opt in GIT_EXECUTES or (not opt.startswith("--") and _short_hits(word, GIT_EXECUTES)):
            return 1, f"{word!r} makes git {sub} execute or write; a wildcard never allows it"
        value = word.split("=", 1)[1] if "=" in word else None
        if value is not None and outside(value):
            return 1, f"{word!r} names a path outside the work dir"
        return 1, None
    if word in spec.flags:
        return 1, None
    if word.startswith("--"):
        opt, eq, value = word.partition("=")
        if opt in spec.valued:
            return _valued(spec, word, value if eq else None, words, i)
        return 1, _unknown(name, word)
    for j in range(1, len(word)):  # a cluster of short options, maybe ending in a value
        opt = "-" + word[j]
        rest = word[j + 1 :]
        if opt in spec.attached:
            return 1, None if rest.isdigit() or not rest else _unknown(name, word)
        if opt in spec.valued:
            return _valued(spec, word, rest or None, words, i)
        if opt not in spec.flags:
            return 1, _unknown(name, word)
    return 1, None


def _short_hits(word: str, options: frozenset[str]) -> bool:
    return any(len(o) == 2 and o[1] in word[1:] for o in options)


def _valued(
    spec: Program, word: str, inline: str | None, words: list[str], i: int
) -> tuple[int, str | None]:
    """An option that takes a value: written into the word (`--out=F`, `-oF`), else the
    next word, which it then consumes (2 words)."""
    if inline is not None:
        return 1, _value(spec, word, inline)
    if i + 1 >= len(words):
        return 1, f"{word!r} needs a value"
    value = words[i + 1]
    if value.startswith("-") and value != "-":
        # Parsers disagree on whether an option-shaped word is a value or an option (npm's
        # takes `-w --init-module` as a workspace; a shorter read runs the init module):
        # a wildcard never makes that guess. `-` alone is standard input or output.
        return 2, (
            f"{word} {value!r}: a value that looks like an option; a wildcard does not allow"
            " it (write the command out in full in the rule)"
        )
    return 2, _value(spec, word, value)


def _unknown(name: str, word: str) -> str:
    return (
        f"{word!r} is not an option looop knows to be safe for {name}: a wildcard does not"
        " allow it (write the command out in full in the rule)"
    )


def _value(spec: Program, option: str, value: str) -> str | None:
    path = value
    for prefix in spec.value_prefixes:
        path = path.removeprefix(prefix)
    if "%output{" in value:
        return f"{option} {value!r} writes a file (curl's %output)"
    if outside(path):
        return f"{option} {value!r} names a path outside the work dir"
    return None


def _positional(name: str, spec: Program, word: str, sub: str | None) -> str | None:
    if spec.subcommands is not None and sub is None and word != "--":
        if word not in spec.subcommands:
            return f"{name} {word!r} is not a sub-command looop knows (an alias may run code)"
        return None
    if sub in spec.no_positional:
        return f"{name} {sub} {word!r} runs a package"
    if spec.assignments and "=" in word:
        return f"{word!r} sets a {name} variable (make evaluates it); a wildcard never allows it"
    if name == "git":
        why = _url_refuses(word)
        if why is not None:
            return why
    if outside(word):
        return f"{word!r} names a path outside the work dir"
    return None
