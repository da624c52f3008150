#!/usr/bin/env bash
# Today's date. Its signal changes once a day, so the loop wakes at least daily;
# the clock time stays in detail, where it never wakes anything.
# looop:timeout=5
read -r day weekday clock < <(date '+%F %A %H:%M')
printf '{"signal":{"date":"%s"},"detail":{"weekday":"%s","time":"%s"}}\n' "$day" "$weekday" "$clock"
