"""Benchmark: the quiet beat while something churns — 8 sensors, 100 goals.

Three work dirs, each against the same bash loop over its own sensors, run
interleaved so a loaded machine slows them alike:

- sealed: every sensor prints the same bytes each run (the floor case);
- churning detail: one sensor's `detail` changes every run (a timestamp) while
  its `signal` stays the same — the world is unchanged, a full beat's work is not
  needed;
- live claim: a claim held (with a long TTL) by a live process;
- all in play: the churning detail, the live claim, a `looop ask` waiting on a human
  and an answered ask in its history, at once;
- worker: a live shell worker writing a line to its output every 100 ms;
- round: a loop round whose shell maker runs (writing a line every 100 ms), started by
  the rules decider when its trigger sensor appeared;
- usage: a live shell worker whose usage log grows every 100 ms, as aider's does (an
  event per reply in $LOOOP_SESSION_DIR/aider.events.jsonl), beside its output;
- approval: an L2 loop round whose maker and checker ended, its proposal awaiting a
  human's `looop approve` (its claim held by the round, its ask in asks/);
- held: a decider's move the gate held for a human (an approval ask, no round);
- ask: a live shell worker waiting in `looop ask` for a human's answer.

Each beat is timed by the wall clock and by the CPU time (user + sys) of the process
and the children it waited for (resource.getrusage), which a loaded machine inflates
less; both medians are printed.

    python bench/quiet_in_play.py [RUNS [KIND ...]]
    (KIND: sealed churn claim all worker round usage approval held ask)
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import LOOP, WORKER, add_sensor, cleanup, fresh_workdir, looop_cmd

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 30
KINDS = tuple(sys.argv[2:]) or (
    *("sealed", "churn", "claim", "all", "worker", "round", "usage"),
    *("approval", "held", "ask"),
)
EVENT = '{"event": "message_send", "properties": {"prompt_tokens": 120, "completion_tokens": 30}}'
USAGE = f"""log="$LOOOP_SESSION_DIR/aider.events.jsonl"
while :; do echo '{EVENT}' >> "$log"; date +%N; sleep 0.1; done"""
APPROVAL = """---
intent: sweep the floor
level: L2-assisted
action: apply
runtime: shell
on: [s1]
maker: '"$LOOOP_BIN" done --summary made'
checker: '"$LOOOP_BIN" done --summary checked'
---
# sweep
"""
ASKS = '"$LOOOP_BIN" ask --prompt "ship it?"; sleep 86400'
HOLD = """import sys, time
from pathlib import Path
from looop_py.coord.choose import open_workdir
from looop_py.moves import gate, union
from looop_py.workdir.paths import Paths
move = union.parse({"action": "run_shell", "cmd": "true"})
assert gate.admit(open_workdir(Paths(Path(sys.argv[1]))), move, time.time()).held
"""  # the gate holds a decider's move for a human, as a beat's DECIDE does
CHURN = 'echo "{\\"signal\\": {\\"n\\": 0}, \\"detail\\": {\\"at\\": $(date +%s%N)}}"'


def _workdir(kind: str, holder: int, waiting: list[subprocess.Popen[bytes]]) -> Path:
    root = fresh_workdir(f"inplay-{kind}")
    for i in range(8):
        body = f'echo \'{{"signal": {{"n": {i}}}, "detail": {{}}}}\''
        add_sensor(root, f"s{i}", CHURN if (kind in ("churn", "all") and i == 0) else body)
    for i in range(100):
        (root / "goals" / f"goal-{i:03}.md").write_text(f"# Goal {i}\n\nKeep thing {i} tidy.\n")
    if kind == "round":  # the first beat's rules start its round (its trigger appeared)
        (root / "goals" / "sweep.md").write_text(LOOP.format(root=root))
    if kind == "approval":  # as `round`; its action needs a human's yes
        (root / "goals" / "sweep.md").write_text(APPROVAL)
        with (root / "looop.toml").open("a") as f:
            f.write('\n[actions.apply]\ncommand = "true"\n')
    pulse = [*looop_cmd(), "-C", str(root), "pulse", "-q"]
    subprocess.run(pulse, check=True)  # the first beat decides and commits
    if kind in ("claim", "all"):
        claim = ["claim", "repo", "--ttl", "86400", "--pid", str(holder)]
        subprocess.run([*looop_cmd(), "-C", str(root), *claim], check=True, capture_output=True)
    if kind == "all":
        ask = [*looop_cmd(), "-C", str(root), "ask", "--prompt"]
        subprocess.run([*ask, "old?", "--timeout", "0.01"], check=False, capture_output=True)
        old = next(p.stem for p in (root / "asks").glob("*.json"))
        answer = [*looop_cmd(), "-C", str(root), "answer", old, "late"]
        subprocess.run(answer, check=True, capture_output=True)
        out = subprocess.DEVNULL
        waiting.append(subprocess.Popen([*ask, "ship it?"], stdout=out, stderr=out))
        while not any("waiter" in p.read_text() for p in (root / "asks").glob("*.json")):
            time.sleep(0.01)  # setting up, not measuring: the asker records itself
    if kind in ("worker", "usage", "ask"):
        script = {"worker": WORKER, "usage": USAGE, "ask": ASKS}[kind]
        start = ["worker", "start", "w1", "--runtime", "shell", script]
        subprocess.run([*looop_cmd(), "-C", str(root), *start], check=True, capture_output=True)
        status = root / "sessions" / "w1" / "status.json"
        while '"running"' not in status.read_text():
            time.sleep(0.01)  # setting up, not measuring: its supervisor records the pid
    if kind == "round":
        while not list((root / "sessions").glob("*.maker/meta.json")):
            time.sleep(0.01)  # setting up, not measuring: the round started its maker
    if kind == "approval":
        for _ in range(200):  # setting up, not measuring: beat until its proposal waits
            if any("awaiting-approval" in p.read_text() for p in (root / "rounds").glob("*.json")):
                break
            time.sleep(0.05)
            subprocess.run(pulse, check=True)
        else:
            print("  (approval: no round awaits approval)")
    if kind == "held":
        subprocess.run([sys.executable, "-c", HOLD, str(root)], check=True)
    if kind == "ask":
        while not any("waiter" in p.read_text() for p in (root / "asks").glob("*.json")):
            time.sleep(0.01)  # setting up, not measuring: the worker's asker records itself
    for _ in range(3):  # settle: the next beats see what is in play, then seal what they can
        subprocess.run(pulse, check=True)
    if kind not in ("churn", "claim", "all") and not (root / "state" / "quiet-seal").exists():
        print(f"  ({kind}: the settled beat left no seal)")
    return root


def main() -> None:
    holder = subprocess.Popen(["sleep", "86400"])  # the claim's live holder
    kinds = KINDS if "sealed" in KINDS else ("sealed", *KINDS)  # the yardstick
    waiting: list[subprocess.Popen[bytes]] = []  # the `looop ask` processes to end
    roots = {kind: _workdir(kind, holder.pid, waiting) for kind in kinds}
    commands: dict[str, list[str]] = {}
    for kind, root in roots.items():
        commands[f"looop pulse ({kind})"] = [*looop_cmd(), "-C", str(root), "pulse", "-q"]
        loop = f'cd "{root}" && for s in sensors/*.sh; do "$s"; done | sha256sum >/dev/null'
        commands[f"bash loop ({kind})"] = ["bash", "-c", loop]
    times: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(3 + RUNS):  # the first 3 rounds warm the page cache and are dropped
        for name, argv in commands.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
            times[name].append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            used = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
            cpu[name].append(used)
    print(f"quiet beat with work in play, 8 sensors + 100 goals, {RUNS} interleaved runs each")
    print(f"  load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for label, samples in (("wall", times), ("cpu", cpu)):
        median = {name: statistics.median(runs[3:]) * 1000 for name, runs in samples.items()}
        for name, ms in median.items():
            print(f"  {label:4} {name:30} median {ms:7.1f} ms")
        sealed = median["looop pulse (sealed)"]
        for kind in roots:
            looop, bash = median[f"looop pulse ({kind})"], median[f"bash loop ({kind})"]
            print(f"  {label:4} {kind:8} looop / bash {looop / bash:.2f}", end="")
            print(f"   looop / sealed looop {looop / sealed:.2f}")
    for proc in [holder, *waiting]:
        proc.kill()
        proc.wait()
    for kind in ("worker", "usage", "ask"):
        if kind in roots:
            stop = [*looop_cmd(), "-C", str(roots[kind]), "worker", "kill", "w1"]
            subprocess.run(stop, check=False, capture_output=True)
    for root in roots.values():
        cleanup(root)  # the round's maker ends with its work dir


if __name__ == "__main__":
    main()
