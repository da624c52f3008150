"""Goal files: goals/<id>.md, plain markdown with optional YAML frontmatter; PLAYBOOK.md.

A goal, sensor or PLAYBOOK that is a symlink to a file outside the work dir is
not followed (`outside_link`) unless looop.toml says `[gates] allow_outside_links
= true`: such a goal reads as a one-line refusal that says why, and is never a
loop; such a sensor becomes an error reading (sensing/sense.py).
"""

from __future__ import annotations

import functools
import os
import stat
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from looop_py import jsonio, world
from looop_py.errors import CorruptFile, UsageError
from looop_py.ids import is_safe_segment
from looop_py.workdir import goalside, goalsplice, listing, watched
from looop_py.workdir.goalfile import GOAL_CAP, GoalFile, notice, read_goal_once, why_not_read
from looop_py.workdir.goalside import Side
from looop_py.workdir.goalsplice import Splice
from looop_py.workdir.paths import Paths

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from looop_py.workdir.context import WorkDir
    from looop_py.workdir.watched import Vouch, Watched


# What looop reads of the files a human edits. Past a cap, or not a regular file
# (a directory, a FIFO, a link to /dev/zero), a file is never read: it is an
# error that names it, and the beat goes on without it.
PLAYBOOK_CAP = 1024 * 1024
GOALS_TOTAL_CAP = 16 * 1024 * 1024  # all goals of one beat together


def outside_link(wd: WorkDir, path: Path, *, linked: bool | None = None) -> str | None:
    """Why `path` is not read: a symlink out of the work dir that looop.toml does not allow.

    `linked` says whether the caller already knows it is (or is not) a symlink;
    a path that is not one is inside (the cheap, usual case: no syscall).
    """
    if linked is False or (linked is None and not path.is_symlink()):
        return None
    try:
        target = path.resolve()
        root = wd.paths.root.resolve()
    except (OSError, RuntimeError):  # a loop of links
        target, root = Path("(a symlink loop)"), wd.paths.root
    if target == root or root in target.parents or wd.config.gates.allow_outside_links:
        return None
    rel = path.relative_to(wd.paths.root) if path.is_relative_to(wd.paths.root) else path
    return (
        f"{rel} is a symlink to {target}, outside the work dir, so it is not read or run"
        " (looop.toml [gates] allow_outside_links = true allows it)"
    )


# While a beat runs REAP, ADVANCE and SENSE nothing writes goals/: the pulse lists it once
# for all of them and the seal (the loop index, the probes, the hash) in `wd.memo.scope()`.


Scan = tuple[list[tuple[str, str | None]], dict[str, str], tuple[str, str] | None]
Pair = tuple[str, str] | None


class Listed(NamedTuple):
    """One beat's listing of goals/ (a tuple: callers unpack it, and one is made per beat)."""

    found: list[tuple[str, str | None]]  # (id, stat stamp or None) of each goal, by id
    refused: dict[str, str]  # {id: why} of the goals not read (links out of the work dir)
    record: Pair  # what the seal's survey may take of it (workdir/listing.py), or None
    # The goal side recorded for this listing (workdir/goalside.py), else whether this
    # beat's may be recorded (a settled listing, `Seen.settled`): the full pass.
    side: Side | bool
    key: Pair  # the listing's key (`Seen.key`), the side is recorded under
    splice: Splice | None  # the record of another listing, spliced (workdir/goalsplice.py)


def _scan(wd: WorkDir) -> Scan:
    found, refused, record, *_ = _listed(wd)
    return list(found), dict(refused), record


def _listed(wd: WorkDir, vouch: Callable[[int], Watched | None] | None = None) -> Listed:
    return wd.memo.once(("goals", wd.paths.goals), lambda: _scan_now(wd, vouch))


def list_with(wd: WorkDir, vouch: Vouch) -> None:
    """List goals/ now for this beat's `wd.memo.scope()`, taking its entries as `vouch` (an
    inotify watch under `looop up`, workdir/watched.py) vouches for them, if it does."""
    took: list[Watched] = []

    def keep(fd: int) -> Watched | None:
        if (held := vouch.vouched(fd)) is not None:
            took.append(held)
        return held

    _listed(wd, keep)
    wd.memo.once(("goals watched", wd.paths.goals), lambda: (vouch, took[0]) if took else None)


def _scan_now(wd: WorkDir, vouch: Callable[[int], Watched | None] | None = None) -> Listed:
    """(id, stat stamp or None) of each goal, sorted, {id: why} of those refused, what the
    seal's survey may take of the listing (workdir/listing.py), and the goal side recorded
    for this listing (workdir/goalside.py) if there is one. One lstat per goal (and a stat
    of a link, following it as a read does), shared by the loop index, SENSE and the seal;
    names only, no Path per goal.

    A first pass takes each .md entry's name and lstat; when none is a link or went and the
    listing is the one recorded, that is all (it held only safe names). Else a second pass.
    `vouch`: the entries as a watch vouches for them, taken instead of listdir and lstat."""
    seen = listing.Seen(str(wd.paths.goals))
    try:
        fd = os.open(wd.paths.goals, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return Listed([], {}, None, False, None, None)
    try:
        return _scan_at(wd, fd, seen, None if vouch is None else vouch(fd))
    finally:
        os.close(fd)


def _scan_at(wd: WorkDir, fd: int, seen: listing.Seen, held: Watched | None = None) -> Listed:
    """`_scan_now` with goals/ open as `fd`: each name lstat'ed relative to it (no path
    walk from the root per goal, as the survey's goals line does), or taken as `held`."""
    names: list[str] = []
    flat: list[int] = []
    odd: list[tuple[str, bool]] = []  # .md links, and those whose lstat failed: (name, linked)
    if held is not None:  # the same entries, heaps and numbers, without a syscall per goal
        for name in held.others:
            seen.other(name, fd, held.lstat)
        names, flat, odd = held.goals[:], held.numbers[:], [(n, True) for n in held.links]
    for name in os.listdir(fd) if held is None else ():
        if name[-3:] != ".md":
            seen.other(name, fd)  # no goal: a name (a .sh file: its lstat)
            continue
        try:
            st = os.lstat(name, dir_fd=fd)
        except OSError:
            odd.append((name, False))
            continue
        if stat.S_ISLNK(st.st_mode):  # its stat is its target's
            odd.append((name, True))
            continue
        names.append(name)
        flat += (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)
    seen.goals(names, flat)
    key = None if odd else seen.key()
    past = goalside.load(wd.paths.goals_seen)
    if past is not None and past.matches(key):
        recorded: list[tuple[str, str | None]] = list(zip(past.ids, past.stamps, strict=True))
        return Listed(recorded, {}, past.record, past, key, None)
    refused: dict[str, str] = {}
    whole_dir = outside_link(wd, wd.paths.goals)  # goals/ itself a link out
    got = None
    if past is not None and names and not whole_dir:  # the record of another listing
        got = goalsplice.match(past, names, flat, seen.spoil)
    if got is not None and got[0].kept() * 2 < len(got[1]):
        got = None  # a record that vouches for few: the goal cache serves the full pass better
    splice, found = got if got is not None else (None, [])
    for i, name in enumerate(names if got is None else ()):
        goal_id = name[:-3]
        if not is_safe_segment(goal_id):
            seen.spoil()  # an .md that is no goal
        elif whole_dir:
            refused[goal_id] = whole_dir
        else:
            found.append((goal_id, world.STAT_TEXT % tuple(flat[5 * i : 5 * i + 5])))
    plain = len(found)
    for name, linked in odd:
        goal_id = name[:-3]
        # Not only regular files: reading a directory or a FIFO names the problem
        # instead of skipping the goal in silence.
        if not is_safe_segment(goal_id):
            seen.other(name, fd)
            continue
        why = whole_dir or (linked and outside_link(wd, wd.paths.goals / name, linked=True))
        if why:
            refused[goal_id] = why
            continue
        try:
            st = os.stat(name, dir_fd=fd)  # a link's: the read follows it
            nums = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)
        except OSError:
            nums = None  # gone, or a link to nowhere: the read says which
        found.append((goal_id, None if nums is None else world.STAT_TEXT % nums))  # stamp_of
        seen.goal(name, None if linked else nums)
    if splice is not None:
        splice.extra.update(found[plain:])  # linked or unreadable: read, never kept
    found.sort(key=itemgetter(0))  # ids are unique: by id alone, the same order, sooner
    # None once an entry spoilt it; the line a watch worked out from these entries, if all
    line = held.record[1] if held is not None and held.record and not odd else None
    record = seen.record(line)
    may = record is not None and not refused and seen.settled()
    return Listed(found, refused, record, may, key, splice)


def side(wd: WorkDir) -> Side | None:
    """The goal side recorded for this beat's listing of goals/, or None (workdir/goalside.py)."""
    got = _listed(wd).side
    return got if isinstance(got, Side) else None


def spliced(wd: WorkDir) -> Side | None:
    """The goal side this beat's goals make from the record of another listing and the goals
    read (workdir/goalsplice.py), once `read_goals` took that way; else None."""
    splice = _listed(wd).splice
    return None if splice is None else goalsplice.side_of(splice)


def maybe_fenced(wd: WorkDir) -> list[tuple[str, str]]:
    """(id, stamp) of the listed goals that may open a `---` fence (and so be loops): all
    but those the goal side or the goal cache knows to open none, and those with no stat."""
    found, _, _, got, _, splice = _listed(wd)
    if isinstance(got, Side):
        return got.fenced_stamps()
    if splice is not None:  # the kept goals by the record; the others may be
        rest = [(g, s) for g, s in splice.extra.items() if s is not None]
        return sorted(splice.fenced() + rest) if rest else splice.fenced()
    from looop_py.workdir import goalcache  # a full beat's; the quiet beat never lists goals

    known = goalcache.hits(wd, found)
    return [(g, s) for g, s in found if s is not None and ((hit := known.get(g)) is None or hit[1])]


def may_remember(wd: WorkDir, goals: Sequence[GoalFile]) -> bool:
    """Whether this beat's goal side may be recorded (workdir/goalside.py): none is yet for
    this listing, the listing is settled, and the world hashed every listed goal at the
    stamp it was listed with."""
    found, _, record, may, *_ = _listed(wd)
    if may is not True or record is None:
        return False
    held = _spliced_held(wd)
    return (bool(held) and tuple(goals) == held) or [(g.id, g.stamp) for g in goals] == found


def _spliced_held(wd: WorkDir) -> tuple[GoalFile, ...]:
    """The goals `read_goals` spliced (workdir/goalsplice.py) when each is at the stamp the
    listing gave it (those kept are, by their recorded stamp; the few read are compared), so
    a caller holding these very objects compares none of 10,000 again; else ()."""
    found, splice = _listed(wd).found, _listed(wd).splice
    if splice is None or splice.goals is None or splice.fresh is None:
        return ()
    extra = splice.extra
    if len(splice.goals) != len(found) or any(
        g.id not in extra or g.stamp != extra[g.id] for g in splice.fresh
    ):
        return ()  # one refused, gone while read, or read at another stamp
    return tuple(splice.goals)


def remember(wd: WorkDir, goals: Sequence[GoalFile]) -> None:
    """Record the goal side (`may_remember` said so): each goal's digest and fence."""
    found, _, record, _, key, _ = _listed(wd)
    if record is None or key is None:
        return
    fenced = "".join(["1" if g.fenced else "0" for g in goals])
    digests = [g.digest for g in goals]
    section = s.section if (s := spliced(wd)) else None  # the items framed, spliced
    goalside.save(
        wd.paths.goals_seen, key, record, found, digests=digests, fenced=fenced, section=section
    )


def goal_paths(wd: WorkDir) -> list[tuple[str, Path]]:
    """(id, path) of every top-level goals/*.md that may be read, sorted by id.

    archive/ is not read, nor a goal that links out of the work dir.
    """
    folder = wd.paths.goals
    return [(goal_id, folder / f"{goal_id}.md") for goal_id, _ in _scan(wd)[0]]


def goal_stamps(wd: WorkDir) -> list[tuple[str, str | None]]:
    """(id, the file's stat as `stamp_of` writes it, or None) of the goals `goal_paths`
    names: the stat the beat listed it with, taken once."""
    return _scan(wd)[0]


def refused(wd: WorkDir) -> dict[str, str]:
    """{goal id: why} of the goals that are not read: links out of the work dir."""
    return _scan(wd)[1]


def for_seal(wd: WorkDir) -> Callable[[Sequence[GoalFile]], tuple[str, str, dict[str, str]] | None]:
    """This beat's listing of goals/ for the seal's survey (`listing.for_seal`), if it asks;
    one a watch listed and still vouches for when goals/ had changed just before (`watched.
    for_seal`: the beat's own record is then not to be reused)."""
    found, refused, record = _scan(wd)
    took: tuple[Vouch, Watched] | None = wd.memo.once(("goals watched", wd.paths.goals), _none)
    if record is None and took is not None:
        return functools.partial(watched.for_seal, *took, found, refused)
    known = s.held if (s := side(wd)) else _spliced_held(wd)
    return functools.partial(listing.for_seal, found, refused, record, known=known)


def _none() -> None:
    return None


def read_playbook(wd: WorkDir) -> bytes | None:
    """PLAYBOOK.md's bytes; None when there is none; a notice when it cannot be read."""
    return read_playbook_stamped(wd)[0]


def read_playbook_stamped(wd: WorkDir) -> tuple[bytes | None, os.stat_result | None]:
    """`read_playbook`, with the file's stat when it held still while it was read."""
    why = outside_link(wd, wd.paths.playbook)
    if why:
        return notice("PLAYBOOK.md", why), None
    try:
        return jsonio.read_stamped(wd.paths.playbook, PLAYBOOK_CAP)
    except FileNotFoundError:
        return None, None
    except CorruptFile as exc:
        return notice("PLAYBOOK.md", why_not_read(exc, wd.paths.playbook)), None


HELD_CAP = 256 * 1024  # bodies a beat keeps in memory from its reads (the prompt's cap)


def read_goals(wd: WorkDir, *, save: bool = False) -> list[GoalFile]:
    """Every goal, each under GOAL_CAP and all under GOALS_TOTAL_CAP together; a goal that
    links out of the work dir reads as a refusal saying why.

    A goal whose stat is the one state/goals-cache.json knows it by is not opened: it
    comes with its digest, and its body is read if someone asks for it. What is read is
    kept in memory up to HELD_CAP in all. `save`: write what was learnt to the cache.
    """
    found, refused, _, got, _, splice = _listed(wd)
    folder = wd.paths.goals
    if isinstance(got, Side):  # goals/ as recorded: each goal known by its stamp, none opened
        return _known(folder, got)
    if splice is not None and (spliced_goals := _spliced(wd, splice, refused)) is not None:
        return spliced_goals  # no cap could bind: the kept are known, the rest were read
    from looop_py.workdir import goalcache  # a full beat's; the quiet beat never lists goals

    goals: list[GoalFile] = [
        GoalFile(g, folder, notice(f"goals/{g}.md", w), w) for g, w in refused.items()
    ]
    cache, hits = goalcache.of_beat(wd), goalcache.hits(wd, found)
    now_ns = goalcache.now_ns()
    room, held = GOALS_TOTAL_CAP, HELD_CAP
    for goal_id, stamp in found:
        size = int(stamp.split(".", 2)[1]) if stamp is not None else GOAL_CAP + 1
        known = hits.get(goal_id) if size <= min(GOAL_CAP, room) else None
        if known is not None:
            digest, fenced = known
            goals.append(GoalFile(goal_id, folder, None, None, stamp, digest=digest, fenced=fenced))
            room -= size
            continue
        path = folder / f"{goal_id}.md"
        goal = read_goal_once(wd, goal_id, path, min(GOAL_CAP, max(0, room)), keep=False)
        if goal is None:
            continue  # removed while we listed
        if goal.error is not None and room < GOAL_CAP and "cap" in goal.error:
            why = f"the goals together are over the {jsonio.size_text(GOALS_TOTAL_CAP)} cap"
            goal = GoalFile(goal_id, folder, notice(f"goals/{goal_id}.md", why), why)
        elif goal.error is None:
            size = len(goal.body)
            room -= size
            cache.put(goal_id, goal.stamp, goal.digest, goal.fenced, now_ns)
            if size > held:
                goal._body = None  # read again (and checked against its digest) if asked for
            held -= min(size, held)
        goals.append(goal)
    if save:
        cache.save()
    if refused:  # the rest came in id order from the listing
        goals.sort(key=lambda g: g.id)
    return goals


def _known(folder: Path, side: Side) -> list[GoalFile]:
    """A GoalFile per goal of the recorded side, not read: as `GoalFile(id, folder, None,
    None, stamp, digest=, fenced=)` builds it, without the call (10,000 goals: 2.5 ms, not 6)."""
    new, out = object.__new__, list[GoalFile]()
    add = out.append
    for goal_id, stamp, digest, flag in zip(
        side.ids, side.stamps, side.items.values(), side.fenced, strict=True
    ):
        goal = new(GoalFile)
        goal.id, goal.folder, goal._body, goal.error = goal_id, folder, None, None
        goal.stamp, goal.digest, goal.fenced = stamp, digest, flag == "1"
        add(goal)
    side.held = tuple(out)  # the seal's listing knows these at the listed stamps
    return out


def _spliced(wd: WorkDir, splice: Splice, refused: dict[str, str]) -> list[GoalFile] | None:
    """`read_goals` with the goals kept from the record known (workdir/goalsplice.py) and
    the others read: the full pass's goals, in id order, when no cap could bind (every goal
    listed and every byte read together at least GOAL_CAP under GOALS_TOTAL_CAP: the full
    pass would have read each with GOAL_CAP and known each kept one too); else None (the
    full pass, which reads those few again)."""
    folder, held, used = wd.paths.goals, HELD_CAP, splice.listed_size
    fresh = [GoalFile(g, folder, notice(f"goals/{g}.md", w), w) for g, w in refused.items()]
    for goal_id in sorted(splice.extra):  # those not kept, in id order
        goal = read_goal_once(wd, goal_id, folder / f"{goal_id}.md", GOAL_CAP, keep=False)
        if goal is None:
            continue  # removed while we listed
        if goal.error is None:
            size = len(goal.body)
            used += size
            if size > held:
                goal._body = None  # read again (and checked against its digest) if asked for
            held -= min(size, held)
        fresh.append(goal)
    if used > GOALS_TOTAL_CAP - GOAL_CAP:
        return None
    fresh.sort(key=lambda g: g.id)
    goals = goalsplice.merged(goalsplice.kept_goals(folder, splice), fresh)
    splice.fresh, splice.goals, splice.side = fresh, goals, None
    return goals


def create(paths: Paths, goal_id: str, text: str) -> Path:
    """Write goals/<id>.md only if no such file exists yet: a goal is never overwritten."""
    path = paths.goal(goal_id)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise UsageError(f"{path} already exists", "pick another id with --name") from None
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    return path
