#!/usr/bin/env bash
# Disk space where this work dir lives, as a bucket (ok / low / critical), so the
# loop wakes when the bucket moves, not on every byte written. Checked every 5 min.
# looop:interval=300
# looop:timeout=10
set -eu
read -r used avail < <(df -Pk . | awk 'NR == 2 { sub("%", "", $5); print $5, $4 }')
if [ "$used" -ge 95 ]; then bucket=critical
elif [ "$used" -ge 85 ]; then bucket=low
else bucket=ok
fi
printf '{"signal":{"disk":"%s"},"detail":{"used_pct":%d,"avail_kib":%d}}\n' "$bucket" "$used" "$avail"
