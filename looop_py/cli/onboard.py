"""Setting a work dir up and keeping it running, in words: init's next steps, doctor, cron.

No click here; `cli/render.py` renders the running loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from looop_py.ops.cron import CronStatus
    from looop_py.ops.doctor import Report
    from looop_py.workdir.template import InitResult

    Lines = list[str]


def init_lines(result: InitResult) -> Lines:
    lines = [
        f"  created {p.relative_to(result.root)}{'/' if p.is_dir() else ''}" for p in result.created
    ]
    if result.kept:
        lines.append(f"  kept {len(result.kept)} existing file(s) as they were")
    if not result.created:
        return [*lines, f"{result.root} is already a complete work dir; nothing to do"]
    lines.append(f"work dir ready: {result.root}")
    lines.append(result.runtime_note())
    lines.append("next:")
    return lines + [f"  {n}. {step}" for n, step in enumerate(next_steps(result), 1)]


def next_steps(result: InitResult) -> list[str]:
    """Three steps, tailored to what init found: the repo, agent CLIs, cron."""
    d = result.root
    watch = (
        f"the git sensor watches {result.repo}"
        if result.repo
        else "no git repo here, so the git sensor reports none"
    )
    first = f"run one beat: looop -C {d} pulse   ({watch}; the welcome goal writes reports/)"
    if result.agent_clis:
        clis = ", ".join(result.agent_clis)
        second = (
            f"let a model decide: found {clis} on PATH; uncomment its block under [decider]"
            f" in {d}/looop.toml, then check it with: looop -C {d} decider test"
        )
    else:
        second = (
            "decisions come from the offline rules decider (looop help deciders); with"
            " claude, codex, pi or llm on PATH, `looop init` offers a ready block for each"
        )
    if result.crontab:
        third = f"run it every minute from cron: looop -C {d} cron install"
    else:
        third = (
            f"no crontab here: run `looop -C {d} pulse` every minute from your scheduler"
            " (or install cron, then `looop cron install`)"
        )
    return [first, second, third]


MARKS = {"ok": "✓", "warn": "!", "fail": "✗"}


def doctor_lines(report: Report) -> Lines:
    lines: Lines = []
    for c in report.checks:
        lines.append(f"{MARKS[c.verdict]} {c.name:<16} {c.message}")
        if c.fix and c.verdict != "ok":
            lines.append(f"  {'':<16} → {c.fix}")
    bad = sum(c.verdict == "fail" for c in report.checks)
    return [*lines, "all good" if report.ok else f"{bad} check(s) failed"]


def cron_lines(entry: CronStatus, *, did: str | None = None) -> Lines:
    names = [f"  {entry.env_file} (0600) sets: {', '.join(entry.env_names)}"]
    if did:
        if not entry.installed:
            return [f"{did}: no looop line left"]
        return [f"{did}: {entry.line}", *names]
    if entry.installed is None:
        return ["not installed; `looop cron install` adds:", f"  {entry.line}"]
    state = "installed" if entry.up_to_date else "installed, but out of date (`looop cron install`)"
    return [f"{state}:", f"  {entry.installed}", *(names if entry.env_names else [])]
