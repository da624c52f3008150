"""Cadences: the reference's grammar and next-fire cases, plus cron and the rejected zero."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator

import pytest

from looop_py import Schedule, ScheduleError
from looop_py.engine.cadence import MAX_INTERVAL_S

D = dt.datetime


@pytest.fixture
def berlin(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Local time = Europe/Berlin (DST last Sunday of March and of October)."""
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_daily_parses_and_rejects_bad_times() -> None:
    assert Schedule.parse("daily 08:00").kind == "daily"
    assert Schedule.parse("daily 23:59").minute == 59
    for bad in ("daily 25:00", "daily noon", "daily 24:00", "daily 12:60", "daily 1200"):
        with pytest.raises(ScheduleError):
            Schedule.parse(bad)


def test_weekly_parses_and_rejects_bad_days() -> None:
    s = Schedule.parse("weekly mon 09:30")
    assert (s.kind, s.weekday, s.hour, s.minute) == ("weekly", 0, 9, 30)
    for bad in ("weekly funday 09:30", "weekly tues 09:30", "weekly mon", "weekly mon 9:30 x"):
        with pytest.raises(ScheduleError):
            Schedule.parse(bad)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("every 30s", 30), ("every 5m", 300), ("every 2h", 7200), ("every 1d", 86400)],
)
def test_intervals_parse(text: str, seconds: int) -> None:
    assert Schedule.parse(text).interval_s == seconds


@pytest.mark.parametrize(
    "text", ["every 5min", "every 1w", "every m", "every", "every 0s", "every -5m", "every 0d"]
)
def test_bad_or_non_positive_intervals_are_rejected(text: str) -> None:
    with pytest.raises(ScheduleError):
        Schedule.parse(text)


def test_zero_interval_message_says_why() -> None:
    with pytest.raises(ScheduleError, match="positive"):
        Schedule.parse("every 0s")


@pytest.mark.parametrize("text", ["Daily 09:00", "hourly", "", "at 09:00", "0 9 * *"])
def test_unknown_forms_are_rejected(text: str) -> None:
    with pytest.raises(ScheduleError):
        Schedule.parse(text)


def test_daily_next_fire_today_or_tomorrow() -> None:
    s = Schedule.parse("daily 08:00")
    assert s.next_after(D(2026, 5, 14, 9, 0)) == D(2026, 5, 15, 8, 0)
    assert s.next_after(D(2026, 5, 14, 7, 0)) == D(2026, 5, 14, 8, 0)
    assert s.next_after(D(2026, 5, 14, 8, 0)) == D(2026, 5, 15, 8, 0)  # strictly after


def test_weekly_next_fire() -> None:
    s = Schedule.parse("weekly mon 09:30")
    saturday = D(2026, 5, 16, 12, 0)
    assert saturday.weekday() == 5
    assert s.next_after(saturday) == D(2026, 5, 18, 9, 30)


def test_weekly_wraps_a_week_when_today_is_past_the_time() -> None:
    s = Schedule.parse("weekly mon 09:30")
    monday_noon = D(2026, 5, 18, 12, 0)
    assert s.next_after(monday_noon) == D(2026, 5, 25, 9, 30)
    assert s.next_after(D(2026, 5, 18, 9, 0)) == D(2026, 5, 18, 9, 30)


def test_daily_midnight_boundary() -> None:
    s = Schedule.parse("daily 00:05")
    assert s.next_after(D(2026, 5, 14, 23, 30)) == D(2026, 5, 15, 0, 5)


def test_interval_next_is_now_plus_interval() -> None:
    now = D(2026, 5, 14, 10, 0, 7)
    assert Schedule.parse("every 30s").next_after(now) == now + dt.timedelta(seconds=30)
    assert Schedule.parse("every 30s").next_fire(1000.5) == 1030.5


def test_weekday_aliases_all_accepted() -> None:
    for day in ("mon", "monday", "Mon", "MONDAY"):
        assert Schedule.parse(f"weekly {day} 09:30").weekday == 0
    for day in ("sun", "sunday", "SUN"):
        assert Schedule.parse(f"weekly {day} 09:30").weekday == 6


# -- cron ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["*/15 * * * *", 'cron "*/15 * * * *"', "cron */15 * * * *", "cron '*/15 * * * *'"]
)
def test_cron_forms(text: str) -> None:
    s = Schedule.parse(text)
    assert s.kind == "cron"
    assert s.next_after(D(2026, 5, 14, 10, 7, 30)) == D(2026, 5, 14, 10, 15)
    assert s.next_after(D(2026, 5, 14, 10, 15)) == D(2026, 5, 14, 10, 30)


def test_cron_weekdays_lists_ranges_steps_and_names() -> None:
    weekdays_9 = Schedule.parse("0 9 * * 1-5")
    friday_10 = D(2026, 5, 15, 10, 0)
    assert weekdays_9.next_after(friday_10) == D(2026, 5, 18, 9, 0)  # skips the weekend
    named = Schedule.parse("30 8,17 * jan-mar mon,fri")
    assert named.next_after(D(2026, 5, 14)) == D(2027, 1, 1, 8, 30)  # Friday 1 Jan 2027
    stepped = Schedule.parse("0 8-18/5 * * *")
    assert stepped.cron is not None and stepped.cron.hours == (8, 13, 18)
    sunday7 = Schedule.parse("0 0 * * 7")
    assert sunday7.next_after(D(2026, 5, 14)) == D(2026, 5, 17, 0, 0)
    start_step = Schedule.parse("5/20 * * * *")
    assert start_step.cron is not None and start_step.cron.minutes == (5, 25, 45)


def test_cron_day_of_month_or_day_of_week_when_both_given() -> None:
    s = Schedule.parse("0 12 13 * fri")  # the 13th, or any Friday
    assert s.next_after(D(2026, 5, 11)) == D(2026, 5, 13, 12, 0)  # Wednesday 13th
    assert s.next_after(D(2026, 5, 14)) == D(2026, 5, 15, 12, 0)  # Friday 15th


def test_cron_leap_day() -> None:
    assert Schedule.parse("0 0 29 2 *").next_after(D(2026, 3, 1)) == D(2028, 2, 29)


@pytest.mark.parametrize(
    "text",
    [
        "60 * * * *",
        "* 24 * * *",
        "* * 0 * *",
        "* * * 13 *",
        "* * * * 8",
        "5-1 * * * *",
        "*/0 * * * *",
        "a * * * *",
        "0 0 30 2 *",
        "0 0 31 4,6 *",
        "* * * * * *",
    ],
)
def test_bad_crons_are_rejected(text: str) -> None:
    with pytest.raises(ScheduleError):
        Schedule.parse(text)


# -- local time -----------------------------------------------------------------------


def test_next_fire_uses_local_wall_clock_across_dst(berlin: None) -> None:
    s = Schedule.parse("daily 09:00")
    before = D(2026, 3, 28, 12, 0).timestamp()  # Saturday before spring-forward
    fire = s.next_fire(before)
    assert D.fromtimestamp(fire) == D(2026, 3, 29, 9, 0)
    assert fire - before == 20 * 3600  # 21 wall-clock hours, one of them skipped


def test_next_fire_in_a_dst_gap_still_moves_forward(berlin: None) -> None:
    s = Schedule.parse("daily 02:30")  # 02:30 does not exist on 2026-03-29 in Berlin
    now = D(2026, 3, 29, 1, 0).timestamp()
    fire = s.next_fire(now)
    assert fire > now and fire - now < 3 * 3600


def test_aware_now_gives_an_aware_local_result(berlin: None) -> None:
    s = Schedule.parse("daily 09:00")
    utc_now = dt.datetime(2026, 5, 14, 6, 0, tzinfo=dt.UTC)  # 08:00 in Berlin
    nxt = s.next_after(utc_now)
    assert nxt.tzinfo is not None
    assert nxt == dt.datetime(2026, 5, 14, 7, 0, tzinfo=dt.UTC)


# -- maxima: every value is either a schedule or a clear error, never a crash ------------


@pytest.mark.parametrize(
    "text",
    [
        "every 99999999999999d",
        "every 367d",
        "every 31622401s",
        "every 8785h",
        "every " + "9" * 5000 + "s",  # past int()'s own digit limit
        "every -" + "9" * 5000 + "m",
        "every ١٢s",  # digits int() reads, but not ASCII
    ],
)
def test_intervals_past_the_maximum_or_not_ascii_are_usage_errors(text: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        Schedule.parse(text)
    assert caught.value.exit_code == 2 and len(caught.value.message) < 200


def test_the_longest_interval_is_366_days_and_says_so() -> None:
    assert Schedule.parse("every 366d").interval_s == MAX_INTERVAL_S == 366 * 86400
    with pytest.raises(ScheduleError, match="maximum of 366d"):
        Schedule.parse("every 367d")


# -- the grid -----------------------------------------------------------------------------


def test_next_slot_stays_on_the_grid_of_the_slot_it_was_due_at() -> None:
    hourly = Schedule.parse("every 1h")
    slot = 1_800_000_000.0
    assert hourly.next_slot(slot, slot + 7 * 60) == slot + 3600  # late by 7 min: still :00
    assert hourly.next_slot(slot, slot + 3600) == slot + 7200  # exactly on the next: strictly after
    assert hourly.next_slot(slot, slot + 5 * 3600 + 1) == slot + 6 * 3600  # missed ones coalesce
    daily = Schedule.parse("daily 09:00")
    assert daily.next_slot(slot, slot + 60) == daily.next_fire(slot + 60)
