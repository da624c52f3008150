"""The survey: what a quiet beat depends on, by stat calls only.

sensing/seal.py records it at the end of a full beat; beat/quiet.py takes it again
and compares. Files by inode, size, times and mode; snapshots by inode and size
(each beat refreshes their mtime); directories by their entries. The names are
work-dir relative strings: pathlib costs the quiet beat ~5 ms. The goals folder is
one line however many goals it holds: a digest of each entry's name and stat in a
canonical order (`goals_line`), so a quiet beat at 10,000 goals compares one line.
"""

from __future__ import annotations

import os
import stat

from looop_py.world import digest

# Work-dir relative names, keyed by the Paths attribute they mirror (a test keeps
# them equal): this module sees the work dir as plain strings, pathlib costs ~5 ms.
FILES = {
    "config": "looop.toml",
    "playbook": "PLAYBOOK.md",
    "last_world": "state/last-world.json",
    "goal_activity": "state/goal-activity.json",
    "wal": "state/wal.json",
    "step_failures": "state/step-failures.json",
    "round_reports": "state/round-reports.json",
    "loop_schedule": "state/loop-schedule.json",
}
MUST_BE_ABSENT = ("wal", "step_failures")
# Housekeeping runs only when one of these holds something besides dotfiles.
# Claims, asks and answers are surveyed file by file too: the seal may vouch for them.
CLAIMS, ASKS, ANSWERS = "claims", "asks", "answers"
NO_ENTRIES = {"claims": CLAIMS, "answers": ANSWERS}
NO_ENTRIES["approved"] = "state/approved"
# The probes read these as empty only when they hold nothing at all.
EMPTY = {"asks": ASKS, "timers": "state/schedules"}
# No round may be live (or recently done: a beat archives it later), so rounds/ holds
# nothing but done/, whose archived rounds are surveyed file by file.
ROUNDS, ROUNDS_DONE = "rounds", "rounds/done"
SNAPSHOTS = "snapshots"
GOALS = "goals"
LISTED = {"goals": "goals", "sensors": "sensors", "snapshots": SNAPSHOTS}
LISTED["rounds_done"] = ROUNDS_DONE
# Worker sessions may stay ended and settled, or live and steady (the writer checks): each
# one's files are surveyed, one level deep; its output log by name only (a live worker's
# churns: the seal keeps its mtime apart, which may only grow).
SESSIONS = "sessions"
OUTPUT = "output.log"


def stat_text(st: os.stat_result) -> str:
    return f"{st.st_ino}.{st.st_size}.{st.st_mtime_ns}.{st.st_ctime_ns}.{st.st_mode}"


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def survey(root: str, goals: dict[str, str] | None = None) -> list[str]:
    """One line per thing a quiet beat depends on; equal surveys, equal beats.

    Stat calls only. Files by inode, size, times and mode; snapshots by inode
    and size (each beat refreshes their mtime); directories by their entries.
    `goals`, when given, receives each goal file's stat text by relative name
    (the seal's writer checks them one by one; the survey holds only their digest).
    """
    lines = []
    for rel in FILES.values():
        st = _lstat(os.path.join(root, rel))
        lines.append(f"f {rel} {stat_text(st) if st else '-'}")
    # Each records folder is listed once: its names say both whether it holds anything and
    # which files to survey (the same names: dotfiles count in asks/ only).
    records = {rel: _record_names(root, rel, dotfiles=False) for rel in (CLAIMS, ANSWERS)}
    records[ASKS] = _record_names(root, ASKS, dotfiles=True)
    for rel in NO_ENTRIES.values():
        held = records[rel] if rel in records else _holds(os.path.join(root, rel), dotfiles=False)
        lines.append(f"e {rel} {int(bool(held))}")
    for rel in EMPTY.values():
        held = records[rel] if rel in records else _holds(os.path.join(root, rel), dotfiles=True)
        lines.append(f"e {rel} {int(bool(held))}")
    rounds = os.path.join(root, ROUNDS)
    lines.append(f"e {ROUNDS} {int(_holds(rounds, dotfiles=True, besides='done'))}")
    for rel in (CLAIMS, ANSWERS, ASKS):
        lines += _survey_records(root, rel, records[rel])
    lines += _survey_sessions(root)
    for rel in LISTED.values():
        folder = os.path.join(root, rel)
        st = _lstat(folder)
        lines.append(f"f {rel} {stat_text(st) if st else '-'}")
        if rel == GOALS:
            lines.append(goals_line(folder, goals))
            continue
        try:
            with os.scandir(folder) as it:
                names = sorted(e.name for e in it)
        except OSError:
            continue
        for name in names:
            sub = f"{rel}/{name}"
            if rel == "snapshots" and name.endswith(".json"):
                s = _lstat(os.path.join(folder, name))
                lines.append(f"s {sub} {f'{s.st_ino}.{s.st_size}' if s else '-'}")
            elif name.endswith((".md", ".sh")) or rel == ROUNDS_DONE:
                s = _lstat(os.path.join(folder, name))
                lines.append(f"f {sub} {stat_text(s) if s else '-'}")
            else:
                lines.append(f"n {sub}")
    return lines


def goals_line(folder: str, goals: dict[str, str] | None = None) -> str:
    """`g goals COUNT DIGEST`: every entry of goals/ by name, with the stat of each
    .md or .sh file, in name order. An edit in place changes only the file's own stat,
    so each is taken (relative to the folder's descriptor: no path joins); one digest
    of them all is what the seal keeps and the quiet beat compares. `g goals -`: the
    folder cannot be listed."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return f"g {GOALS} -"
    parts = []
    try:
        for name in os.listdir(fd):
            if not name.endswith((".md", ".sh")):
                parts.append(f"{name}\0n")  # a name only, as in the other folders
                continue
            try:
                text = stat_text(os.lstat(name, dir_fd=fd))
            except FileNotFoundError:
                text = "-"
            if goals is not None:
                goals[f"{GOALS}/{name}"] = text
            parts.append(f"{name}\0{text}")
    except OSError:
        return f"g {GOALS} -"
    finally:
        os.close(fd)
    parts.sort()  # NUL sorts first and no name holds one: this is name order
    body = "\n".join(parts).encode("utf-8", "surrogateescape")
    return f"g {GOALS} {len(parts)} {digest(body)}"


def _record_names(root: str, rel: str, *, dotfiles: bool) -> list[str]:
    """The names in a records folder, sorted (dotfiles, such as the claim locks, only if
    they count for the folder's emptiness); none when it is missing. Another error
    raises, as the folder's emptiness cannot be told."""
    try:
        with os.scandir(os.path.join(root, rel)) as it:
            return sorted(e.name for e in it if dotfiles or not e.name.startswith("."))
    except FileNotFoundError:
        return []


def _survey_records(root: str, rel: str, names: list[str]) -> list[str]:
    """Each file in a records folder, by the names `_record_names` listed."""
    folder = os.path.join(root, rel)
    lines = []
    for name in names:
        st = _lstat(os.path.join(folder, name))
        lines.append(f"f {rel}/{name} {stat_text(st) if st else '-'}")
    return lines


def _survey_sessions(root: str) -> list[str]:
    """Each session directory and every entry in it (a subdirectory by its own stat; the
    output log by name)."""
    folder = os.path.join(root, SESSIONS)
    st = _lstat(folder)
    lines = [f"f {SESSIONS} {stat_text(st) if st else '-'}"]
    try:
        with os.scandir(folder) as it:
            sessions = sorted(e.name for e in it)
    except OSError:
        return lines
    for sid in sessions:
        rel = f"{SESSIONS}/{sid}"
        s = _lstat(os.path.join(root, rel))
        lines.append(f"f {rel} {stat_text(s) if s else '-'}")
        if s is None or stat.S_ISREG(s.st_mode):
            continue  # gone, or a file (sessions/.start.lock): nothing to list
        try:
            with os.scandir(os.path.join(root, rel)) as it:
                names = sorted(e.name for e in it)
        except OSError:
            continue
        for name in names:
            if name == OUTPUT:
                lines.append(f"n {rel}/{name}")
                continue
            f = _lstat(os.path.join(root, rel, name))
            lines.append(f"f {rel}/{name} {stat_text(f) if f else '-'}")
    return lines


def _holds(folder: str, *, dotfiles: bool, besides: str = "") -> bool:
    try:
        with os.scandir(folder) as it:
            return any((dotfiles or not e.name.startswith(".")) and e.name != besides for e in it)
    except FileNotFoundError:
        return False


def read_stable(root: str, rel: str, stats: dict[str, str], limit: int = -1) -> bytes | None:
    """The bytes of a regular file, if its stat is the surveyed one before and after."""
    try:
        fd = os.open(os.path.join(root, rel), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        before = os.fstat(fd)
        if not stat.S_ISREG(before.st_mode) or stat_text(before) != stats.get(rel):
            return None
        with os.fdopen(os.dup(fd), "rb") as f:
            body = f.read(limit)
        return body if stat_text(os.fstat(fd)) == stats.get(rel) else None
    finally:
        os.close(fd)
