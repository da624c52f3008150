"""The survey: what a quiet beat depends on, by stat calls only.

sensing/seal.py records it at the end of a full beat; beat/quiet.py takes it again
and compares. Files by inode, size, times and mode; snapshots by inode and size
(each beat refreshes their mtime); directories by their entries. The names are
work-dir relative strings: pathlib costs the quiet beat ~5 ms. The goals folder is
one line however many goals it holds: a digest of each entry's name and stat in a
canonical order (`goals_line`), so a quiet beat at 10,000 goals compares one line.

History is one line per folder, by name and inode only (`history_line`): archived
rounds, answers, and the asks they answer are written once, by a rename or a link, and
never edited in place (a replace is a new inode), and no quiet beat acts on them; a record
damaged in place is the full beat's to find (beat/corrupt.py). Listing a folder costs
one getdents per ~1,000 entries, where a stat per record cost the quiet beat a call per
record: its cost no longer grows with the history kept. Pending asks, claims, sessions
and live rounds stay file by file.
"""

from __future__ import annotations

import os
import stat

from looop_py.world import GONE, digest, listing_digest, stat_text

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
# Live rounds (and the last hour's done ones) are surveyed file by file (`r` lines: the
# seal vouches for a round waiting on its worker); the archived ones in done/ are one
# history line.
ROUNDS, ROUNDS_DONE = "rounds", "rounds/done"
SNAPSHOTS = "snapshots"
GOALS = "goals"
SENSORS = "sensors"
LISTED = {"goals": GOALS, "sensors": SENSORS, "snapshots": SNAPSHOTS}
LISTED["rounds_done"] = ROUNDS_DONE
# Worker sessions may stay ended and settled, or live and steady (the writer checks): each
# one's files are surveyed, one level deep; its logs by name only: a live worker's output
# churns (the seal keeps its mtime apart, which may only grow), and so do the logs aider
# keeps beside it (its usage streams into the events log), which only its supervisor
# reads, once, when the worker has ended (workers/aider.py) and status.json says so.
SESSIONS = "sessions"
OUTPUT = "output.log"
LOGS = (OUTPUT, "aider.chat.md", "aider.events.jsonl")


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def survey(
    root: str,
    goals: dict[str, str] | None = None,
    listed: Listed | None = None,
    *,
    sensing: bool = True,
) -> list[str]:
    """One line per thing a quiet beat depends on; equal surveys, equal beats.

    Stat calls only. Files by inode, size, times and mode; snapshots by inode
    and size (each beat refreshes their mtime); directories by their entries.
    `goals`, when given, receives each goal file's stat text by relative name
    (the seal's writer checks them one by one; the survey holds only their digest).
    `listed`: goals/ as the full beat listed it (`Listed`), taken instead of listing it
    again while the folder's own stat is the one it was listed under.
    `sensing=False` leaves out the lines `sensing` takes (see `besides_sensing`).
    """
    lines = []
    for rel in FILES.values():
        if not sensing and rel == FILES["config"]:
            continue
        st = _lstat(os.path.join(root, rel))
        lines.append(f"f {rel} {stat_text(st) if st else '-'}")
    # Each records folder is listed once: its names say both whether it holds anything and
    # which files to survey (answers/ and asks/ with inodes: their history is one line).
    claims = _record_names(root, CLAIMS, dotfiles=False)
    answers, asks = _entries(os.path.join(root, ANSWERS)), _entries(os.path.join(root, ASKS))
    held = {CLAIMS: bool(claims), ASKS: bool(asks)}  # dotfiles count in asks/ only
    held[ANSWERS] = any(name[0] != "." for name, _ in answers or ())
    for rel in NO_ENTRIES.values():
        found = held[rel] if rel in held else _holds(os.path.join(root, rel), dotfiles=False)
        lines.append(f"e {rel} {int(found)}")
    for rel in EMPTY.values():
        found = held[rel] if rel in held else _holds(os.path.join(root, rel), dotfiles=True)
        lines.append(f"e {rel} {int(found)}")
    live = _record_names(root, ROUNDS, dotfiles=True, skip="done")  # done/: a history line
    lines.append(f"e {ROUNDS} {int(bool(live))}")
    lines += _survey_records(root, CLAIMS, claims) + _survey_mailbox(root, answers, asks)
    lines += [f"r{ln[1:]}" for ln in _survey_records(root, ROUNDS, live)]
    lines += _survey_sessions(root)
    for rel in LISTED.values():
        if sensing or rel != SENSORS:
            lines += _listed(root, rel, goals, listed)
    return lines


def sensing(root: str) -> list[str]:
    """The survey's lines the sensors' runs rest on (the config, sensors/ and each
    script), as `survey` writes them: a quiet beat checks these before it starts the
    sensors and the rest of the survey while they run (beat/quiet.py)."""
    st = _lstat(os.path.join(root, FILES["config"]))
    return [f"f {FILES['config']} {stat_text(st) if st else '-'}", *_listed(root, SENSORS, None)]


_SENSING = (f"f {FILES['config']} ", f"f {SENSORS} ", f"f {SENSORS}/", f"n {SENSORS}/")


def sensing_part(lines: list[str]) -> list[str]:
    """The lines of a whole survey that `sensing` takes again."""
    return [ln for ln in lines if ln.startswith(_SENSING)]


def besides_sensing(lines: list[str]) -> list[str]:
    """The lines of a whole survey that `survey(..., sensing=False)` takes again."""
    return [ln for ln in lines if not ln.startswith(_SENSING)]


# goals/ as a full beat listed it (workdir/listing.py): the folder's stat text then, its
# `g goals ...` line and {goals/NAME: stat text} of each .md or .sh file in it. Its entries'
# stats are those the beat's world was hashed from (or older), so a goal edited since
# differs from the seal and the next quiet beat is a full one; an entry added, removed or
# renamed changes the folder's stat, which is taken again.
Listed = tuple[str, str, dict[str, str]]


def _listed(
    root: str, rel: str, goals: dict[str, str] | None, listed: Listed | None = None
) -> list[str]:
    """A listed folder by its own stat, then its entries."""
    folder = os.path.join(root, rel)
    st = _lstat(folder)
    lines = [f"f {rel} {stat_text(st) if st else '-'}"]
    if rel == GOALS and listed is not None and lines[0] == f"f {rel} {listed[0]}":
        if goals is not None:
            goals.update(listed[2])
        return [*lines, listed[1]]
    if rel == GOALS:
        return [*lines, goals_line(folder, goals)]
    if rel == ROUNDS_DONE:
        entries = _entries(folder)
        return lines if entries is None else [*lines, history_line(rel, entries)]
    for name in _sorted_names(folder) or ():
        sub = f"{rel}/{name}"
        if rel == SNAPSHOTS and name.endswith(".json"):
            s = _lstat(os.path.join(folder, name))
            lines.append(f"s {sub} {f'{s.st_ino}.{s.st_size}' if s else '-'}")
        elif name.endswith((".md", ".sh")):
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
    folder cannot be listed.

    The names go through xxh3 once, joined; the stat numbers (inode, size, mtime and
    ctime in ns, mode) are never formatted (~0.5 µs a goal): they are hashed as one
    tuple of ints, whose hash has no per-process seed. Each int is one lane of that
    hash's rounds, each a bijection of the running value, so a change to any one number
    always moves it; another interpreter may hash otherwise, which costs a full beat."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return f"g {GOALS} -"
    numbers: list[int] = []
    add, lstat = numbers.extend, os.lstat
    try:
        names = os.listdir(fd)
        names.sort()  # the file system's order may change while the folder does not
        for name in names:
            if not name.endswith((".md", ".sh")):
                continue  # a name only, as in the other folders
            try:
                st = lstat(name, dir_fd=fd)
            except FileNotFoundError:
                add(GONE)
                if goals is not None:
                    goals[f"{GOALS}/{name}"] = "-"
                continue
            add((st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode))
            if goals is not None:
                goals[f"{GOALS}/{name}"] = stat_text(st)
    except OSError:
        return f"g {GOALS} -"
    finally:
        os.close(fd)
    return f"g {GOALS} {len(names)} {listing_digest(names, numbers)}"


def history_line(rel: str, entries: list[tuple[str, int]]) -> str:
    """`h REL COUNT DIGEST`: a history folder's records by name and inode, in name order.
    Records there are created whole and never edited in place: an arrival, a removal, a
    rename or a replace each moves the line; the listing alone tells (no stat)."""
    entries.sort()
    body = "\n".join(f"{name}/{ino}" for name, ino in entries).encode("utf-8", "surrogateescape")
    return f"h {rel} {len(entries)} {digest(body)}"


def _sorted_names(folder: str) -> list[str] | None:
    """The names in a folder, sorted; None when it cannot be listed."""
    try:
        with os.scandir(folder) as it:
            return sorted(e.name for e in it)
    except OSError:
        return None


def _entries(folder: str) -> list[tuple[str, int]] | None:
    """Each entry's name and inode, from the listing alone; None when it cannot be listed."""
    try:
        with os.scandir(folder) as it:
            return [(e.name, e.inode()) for e in it]
    except OSError:
        return None


def _survey_mailbox(
    root: str, answers: list[tuple[str, int]] | None, asks: list[tuple[str, int]] | None
) -> list[str]:
    """answers/ and the asks they answer as one history line each; each pending ask, and
    anything in either folder that is no record, file by file (the seal refuses those).
    Dotfiles in asks/ count for its emptiness, so they are surveyed; answers/' are not.
    `answers`, `asks`: the folders' `_entries`."""
    answered = {n for n, _ in answers or () if n.endswith(".json") and n[0] != "."}
    lines = []
    for rel, entries in ((ANSWERS, answers), (ASKS, asks)):
        if entries is None:
            continue
        history, files = [], []
        for name, ino in entries:
            if name in answered:
                history.append((name, ino))  # an answer, or the ask it answers
            elif rel == ASKS or name[0] != ".":
                files.append(name)
        lines.append(history_line(rel, history))
        for name in sorted(files):
            st = _lstat(os.path.join(root, rel, name))
            lines.append(f"f {rel}/{name} {stat_text(st) if st else '-'}")
    return lines


def _record_names(root: str, rel: str, *, dotfiles: bool, skip: str = "") -> list[str]:
    """The names in a records folder, sorted (dotfiles, such as the claim locks, only if
    they count for the folder's emptiness; `skip`: a subfolder surveyed on its own); none
    when it is missing. Another error raises, as the folder's emptiness cannot be told."""
    try:
        with os.scandir(os.path.join(root, rel)) as it:
            return sorted(
                e.name for e in it if (dotfiles or not e.name.startswith(".")) and e.name != skip
            )
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
    worker's logs by name)."""
    folder = os.path.join(root, SESSIONS)
    st = _lstat(folder)
    lines = [f"f {SESSIONS} {stat_text(st) if st else '-'}"]
    for sid in _sorted_names(folder) or ():
        rel = f"{SESSIONS}/{sid}"
        s = _lstat(os.path.join(root, rel))
        lines.append(f"f {rel} {stat_text(s) if s else '-'}")
        if s is None or stat.S_ISREG(s.st_mode):
            continue  # gone, or a file (sessions/.start.lock): nothing to list
        for name in _sorted_names(os.path.join(root, rel)) or ():
            if name in LOGS:
                lines.append(f"n {rel}/{name}")
                continue
            f = _lstat(os.path.join(root, rel, name))
            lines.append(f"f {rel}/{name} {stat_text(f) if f else '-'}")
    return lines


def _holds(folder: str, *, dotfiles: bool) -> bool:
    try:
        with os.scandir(folder) as it:
            return any(dotfiles or not e.name.startswith(".") for e in it)
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
