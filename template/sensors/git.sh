#!/usr/bin/env bash
# The git repo this work dir sits in: branch, head commit, and whether tracked
# files have uncommitted changes. Outside a repo it says so (and stays quiet).
# looop:timeout=10
if ! top=$(git rev-parse --show-toplevel 2>/dev/null); then
  echo '{"signal":{"repo":false},"detail":{"message":"this work dir is not inside a git repo"}}'
  exit 0
fi
esc() { local s=${1//\\/\\\\}; printf '%s' "${s//\"/\\\"}"; }
branch=$(git symbolic-ref --short -q HEAD || echo "(detached)")
head=$(git rev-parse --short HEAD 2>/dev/null || echo "(no commits)")
# The whole repo, but not what looop itself writes here (the list in .gitignore), even
# when a work dir was committed with it: looop's own journal line must not wake it.
own=(journal.md journal.md.1 'events.jsonl*' reports memory asks answers corrupt snapshots
  state runs sessions claims rounds .worktrees)
if [ -n "$(git status --porcelain --untracked-files=no -- ':/' "${own[@]/#/:!}" 2>/dev/null \
  | head -n 1)" ]; then
  dirty=true
else
  dirty=false
fi
printf '{"signal":{"repo":true,"branch":"%s","head":"%s","dirty":%s},"detail":{"top":"%s"}}\n' \
  "$(esc "$branch")" "$(esc "$head")" "$dirty" "$(esc "$top")"
