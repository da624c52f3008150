"""The manual that ships with the tool: `looop help TOPIC` prints one of these pages.

Each page is plain text, kept in step with README.md and the code it describes.
"""

from __future__ import annotations

SENSORS = """\
SENSORS: what wakes the loop

A sensor is any executable sensors/<name>.sh. Every beat runs all of them at
once ([sensors] concurrency, 8), with the work dir as the current directory and
LOOOP_DIR and LOOOP_BIN in the environment. What one prints becomes
snapshots/sensor-<name>.json, always {"signal": …, "detail": …}:

  prints a JSON object with "signal"   stored as is ("detail" defaults to {})
  prints other JSON                    {"signal": <value>, "detail": {}}
  prints plain text                    {"signal": "<trimmed text>", "detail": {}}
  exits non-zero                       {"signal": {"error": true, "exit_code": N}, …}
  runs past its timeout                exit code 124 (a signal death is 128+N;
                                       not runnable is 126/127)
  prints more than max_bytes (8192)    {"signal": {"error": "too-large", "cap": 8192}, …}
  prints bytes that are not UTF-8      {"signal": {"error": "not-utf8"}, …}

Only "signal" enters the world hash, so put there what should wake the loop
(states, counts, ids; never timestamps) and the rest in "detail".

Headers in the first 20 lines of the script:
  # looop:interval=300   reuse the last reading for 300 s (an edited script re-runs at once)
  # looop:timeout=10     kill it, and everything it started, after 10 s
                         (default: [sensors] timeout_s, 60)

A broken sensor wakes the loop once (its error signal is stable) and never stops
a beat; `looop status` lists the failed ones. A sensor is a reading, not a daemon:
whatever it leaves running when it exits is ended.

Example:
  #!/usr/bin/env bash
  # looop:interval=300
  n=$(gh pr list --json number --jq length)
  printf '{"signal":{"open_prs":%d},"detail":{"checked":"%s"}}\\n' "$n" "$(date +%T)"

See also: looop sense (run them now, commit nothing), looop help goals.
"""

GOALS = """\
GOALS: the desired state, in markdown

A goal is goals/<id>.md (id: letters, digits, '.', '_', '-'). Goals and
PLAYBOOK.md (the policy in prose) are part of the world hash: editing one wakes
the decider, which sees every goal in its prompt. goals/archive/ is not read.

Optional YAML frontmatter between `---` fences tells the offline `rules`
decider what to do when one of the goal's sensors changes:

  ---
  goal: Keep this work dir healthy
  on: [disk, git]        # sensors whose change starts this goal's work
  runtime: shell         # the worker runtime (see: looop help runtimes)
  work: |                # the worker's prompt (default: the goal's body)
    ...
  verify: test -s reports/status.md   # run once after the worker ends
  ---

The rules decider starts one worker (id: the goal's id) per beat for goals
whose `on:` sensors changed, least recently acted first. A goal whose
frontmatter has loop keys (level, cadence, budget, action, allow, maker,
checker) is a loop instead: see `looop help loops`.

Example:
  looop new daily-triage          # a loop goal from a ready-made pattern
  $EDITOR goals/daily-triage.md
"""

LOOPS = """\
LOOPS: maker, checker, gate, executor on a cadence and a budget

A goal whose frontmatter carries loop keys is a loop:

  ---
  intent: Keep the default branch green by proposing fixes for CI failures.
  level: L2-assisted     # L1-report | L2-assisted | L3-unattended (L1, L2, L3 work too)
  cadence: every 10m     # every N{s,m,h,d} (<= 366d, on a grid) | daily HH:MM | weekly <day> HH:MM
                         # | cron "m h dom mon dow" (local time)
  budget: {max_total_tokens: 400000, max_iters_per_round: 20, max_wall_s: 1800}
  action: apply-patch    # the kind the gate matches and the executor runs
  allow: [apply-patch]   # at L3, these kinds run without a human
  target: repo-main      # the claim a round takes (default: the loop's own name)
  runtime: claude        # maker and checker runtime
  on: [ci]               # the rules decider starts a round when these sensors change
  maker: |
    If CI is failing, find the root cause and make the smallest fix.
  checker: |
    Run the build and the tests; confirm nothing regressed.
  ---

A round: recall the last five unexpired memory entries, claim the target, workspace,
maker worker, budget check, checker worker, budget check, gate, then the
executor or an approval ask, a memory entry, release the claim. Rounds advance
at the start of every beat and are saved in rounds/<id>.json after each step;
a finished round moves to rounds/done/ after an hour (`looop prune`). Memory
entries expire after `memory_ttl_days:` (default 30; null keeps them forever).

Levels: L1 reports and never acts (read-only workers); at L2 every action waits
for `looop approve`; at L3 only verified work of an allowed kind runs alone.

An approved action runs [actions.<kind>] command from looop.toml in the round's
workspace (the proposal on stdin); with none configured it does nothing and says so.

Example:
  looop patterns                  # the ready-made loops
  looop new demo && looop run demo   # a whole round offline, on the shell runtime
  looop approve loop-demo-1          # its gate asks you; with no [actions.note] command
                                     # the approval says that nothing ran
  looop new ci-sweeper && looop run ci-sweeper   # needs an agent CLI (claude, codex …)
  looop loops; looop rounds --all
"""

DECIDERS = """\
DECIDERS: who proposes the move

When the world changed, the pulse builds a prompt and asks the decider in
looop.toml [decider] backend for one move; looop validates it and carries it
out (the model never acts itself). Check a choice with `looop decider test`.

  rules      the default: offline, deterministic moves from what changed; no model
  command    any agent CLI under `bash -c`; the prompt on stdin or in {{prompt_file}};
             one JSON move read from stdout (keys: command, timeout_s)
  openai     chat completions over HTTP with the move union as a strict JSON schema:
             OpenAI, Ollama, llama.cpp, vLLM, LiteLLM (keys: model, base_url, api_key_env)
  anthropic  the Messages API; the move comes back as a forced tool call
  script     replays moves from a file, one per decide (key: script)
  noop       always decides noop

Moves: noop, write_goal, archive_goal, write_sensor, write_playbook,
write_schedule, drop_schedule, run_shell, start_worker, kill_worker,
start_round, ask_human; each may carry `journal` and `next_interval_s`.
Anything else (an unknown action, a bad field, two JSON objects, prose) fails
the decide with its reason, journaled.

Limits live outside the model ([limits]): decides_per_hour (120), daily_tokens
and daily_usd budgets, failure backoff 60·2^(n−1) s up to 300 s, a noop re-decided
after 6 h. A beat the limits hold back reports `held`; `looop why` says which.
The daily budgets count one ledger (state/spend.json): decides (an unusable
reply too: it was billed), each loop's workers and other workers, by source and
runtime, each charged once. A call that reports tokens but no cost is priced
from [decider] / [runtimes.NAME] usd_per_mtok_*, else the pinned CLI's built-in
price, else [limits] unpriced_usd_per_mtok; with none, daily_usd holds and
`looop status` names what has no price. The budget is checked before every
decide and every worker start, so it is overspent by one call at most; while it
is spent no round starts either (`looop loops`: held: budget). `looop status`
shows today's spend by source and runtime and the share of prompt tokens a
provider's cache served.
Every decide is archived in runs/<id>/ (the newest runs_keep, 50, are kept).

Example:
  [decider]
  backend = "command"
  command = "claude -p --output-format json --model sonnet"
"""

RUNTIMES = """\
RUNTIMES: how a worker's agent CLI is launched

A worker is a detached session (sessions/<id>/) running one runtime: a bash
command line holding {{prompt_file}}, replaced by the quoted path of the prompt.

  claude   claude -p --output-format stream-json …  (usage and cost from its result line)
  codex    codex exec --json …                      (usage from its turns)
  pi       pi --print --mode json @{{prompt_file}}   (usage and cost from its messages)
  aider    aider --message-file {{prompt_file}} --yes-always --no-git …
           (no commands: it reports with a STATUS line in its last message; usage,
           cost and that line are read from files it writes to the session dir)
  shell    bash {{prompt_file}}: the prompt is a bash script (used when no agent CLI
           is on PATH; a model's shell worker waits for a human's approval)

[workers] default_runtime picks the one used when none is named. Override a
built-in or add one in looop.toml:

  [runtimes.mine]
  command = "my-agent --prompt-file {{prompt_file}}"
  usage = ""           # "claude" | "codex" | "pi" | "aider": where usage is read from
  read_only = ""       # the command in a read-only mode, for L1 loops ("": L1 runs
                       # in a throwaway copy of its directory, discarded at exit)

The worker contract goes before every prompt: ask with "$LOOOP_BIN" ask, claim
before touching a shared target, deliver into reports/, finish with
"$LOOOP_BIN" done (aider, which runs no commands, ends with a STATUS line
instead). Workers get LOOOP_SESSION_ID, LOOOP_BIN, LOOOP_DIR, LOOOP_CLAIMS_DIR,
LOOOP_REPORTS_DIR, LOOOP_WORKSPACE and LOOOP_SESSION_DIR.

Example:
  looop worker start fix-ci "Make CI green" --runtime claude --verify 'make test'
  looop workers; looop worker logs fix-ci -f
"""

GATES = """\
GATES: what may run without a human

Nothing a model writes runs unless a human approves it or a rule the human
wrote allows exactly that. Every move is classified by what it can cause to
run: nothing, text a human reads, or code (run_shell, a worker whose runtime
runs its prompt, any verify command, a sensor, a goal that defines or changes
a loop's executable parts). Code waits for `looop approve ID`, which shows
exactly what will run and runs exactly that, once.

A [gates] shell_allow rule is a whole argv: "git status" allows `git status`
and nothing more; a trailing * allows more arguments ("gh pr list *"), but
never options that execute or write (find -exec, git -c, curl -o …). The
command must be simple (no pipes, redirections, substitutions, `;` or `&&`)
and then runs without a shell, its whole process group killed after
shell_timeout_s (300). allow_runtimes and allow_sensors let a model start a
worker on a runtime, or write a sensor, unasked.

A deny-list tripwire refuses outright: sudo/doas/su, rm -rf of / or ~, a
force-push to main or master, curl|sh, mkfs, dd or writes to a disk device,
shutdown/reboot, a fork bomb, chmod/chown of /. allow_dangerous = true switches
it off. It catches the catastrophic mistake; it is not a sandbox.

Loops have their own gate, by level: L1 never acts, L2 asks a human for every
action, L3 lets verified work (the checker ended `done`) of an `allow:`ed kind
proceed alone. These floors hold whatever gate is installed.

Example:
  [gates]
  shell_allow = ["git status", "gh pr list", "df -h"]
"""

EXIT_CODES = """\
EXIT CODES: what a cron job or a script can rely on

  0   done; for `pulse`: skipped, decided, held or locked
  1   the command ran and failed: a failed beat, a failed approved move,
      `decider test` without a valid move, a failed round (`run`)
  2   usage: bad arguments, no work dir, a bad looop.toml, an unknown id,
      an unknown runtime, an empty prompt
  3   busy: a lock another process holds; `run`: the loop already has a live round;
      on etcd, cut off: `pulse` found etcd out of reach or lost the pulse mid-beat
      (one line on stderr: why, since when), `status` is degraded (the local mirror,
      marked stale)
  4   `claim`/`unclaim`: another live holder has the claim;
      `claim --renew`: the lease is no longer yours (it lapsed: do not proceed);
      `ask`: no answer within --timeout (the ask stays pending);
      `wait`: nothing needed a human within --timeout
  70  a bug in looop: the traceback goes to state/errors.log, not to cron mail
  74  the environment: disk full, read-only file system, permission denied
      (the path is named; fix it and the next beat picks up)
  130 interrupted

With --json an error is one object on stdout, with the same exit code:
  {"error": "no work dir found …", "hint": "…", "exit_code": 2}

A closed pipe (`looop journal | head -1`) is not an error: exit 0.

Example:
  epoch=$(looop claim repo-main) || exit 0
  looop pulse || echo "the beat failed: see looop why"
"""

HUMANS = """\
HUMANS: the page, notifications, and a mailbox agents can wait on

`looop serve` (pip install 'looop-py[web]') serves a page on 127.0.0.1:8765
that updates itself within a second of a beat, an ask, an answer or a worker
ending: overview (pending asks first, beats by outcome, wake ratio, spend per
day vs budget, sensors, workers, rounds), beats (each with its move, what ran,
exit code, output, cost), asks (answer, deny, withdraw; approve takes a
confirm step naming what runs; each ask keeps who answered, from where, and
what ran), workers (log, kill, tell), goals, sensors (a chart of a numeric
signal), loops and rounds (run now), the whole journal (search, counted,
paged). It prints a one-time login link (a session cookie for 12 hours; the
token, in state/web-token-PORT 0600, is for scripts: Authorization: Bearer,
or paste it at /login). Every change is a POST with a CSRF token and an
Origin check; a Host it does not print is refused. --read-only changes
nothing; a non-loopback --host needs --allow-remote. Add ?format=json to any
page for its JSON.

`looop report --html FILE` writes the overview as one self-contained file.

[notify] command runs once per event: a new ask or approval, fail_streak
failed beats in a row, a worker stuck or ended badly, a budget spent, a round
escalated. The event is JSON on stdin and LOOOP_EVENT_KIND/_KEY/_TEXT/_ID/
_JSON (bounded); a failing or slow hook (timeout_s) is journaled, never fails a
beat, and the event is tried again next beat (`looop status` counts them).

`looop wait --only-asks` blocks until an ask is pending and prints it;
`looop tell WORKER TEXT` leaves a message a worker reads with `looop told`.

Example:
  [notify]
  command = 'curl -fsS -m 8 -d "$LOOOP_EVENT_TEXT" https://ntfy.sh/my-topic'
"""

PAGES: dict[str, str] = {
    "sensors": SENSORS,
    "goals": GOALS,
    "loops": LOOPS,
    "deciders": DECIDERS,
    "runtimes": RUNTIMES,
    "gates": GATES,
    "exit-codes": EXIT_CODES,
    "humans": HUMANS,
}
