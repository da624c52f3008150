"""Cadences: when a loop is due, in the machine's local time zone.

    every N{s,m,h,d}        0 < N*unit <= 366 days; fires on a grid of slots N apart,
                            anchored to the loop's first slot (the scheduler keeps it)
    daily HH:MM             every day at that local wall-clock time
    weekly <day> HH:MM      mon…sun or monday…sunday, any case
    cron "m h dom mon dow"  five cron fields (the word `cron` and the quotes are optional)

Cron fields take `*`, numbers, lists (`1,15`), ranges (`1-5`) and steps (`*/10`,
`8-18/2`); months and weekdays also take names (`jan`, `mon`); Sunday is 0 or 7.
As in cron, when both day-of-month and day-of-week are restricted, a day matching
either one fires.

Time zone: local, like cron and the reference engine; there is no per-loop zone.
Daily, weekly and cron times are wall-clock times, so across a DST change they
stay at the same local hour. Everything takes `now`; nothing here reads the clock.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from looop_py.errors import UsageError

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_LONG_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
MAX_INTERVAL_S = 366 * 86400  # the longest `every`: a year and a day (leap years included)
_MAX_DIGITS = 9  # more digits than any interval within MAX_INTERVAL_S, in any unit
_SEARCH_DAYS = 8 * 366  # covers two leap cycles: a 29 Feb cron is always found
_FORMS = 'every N{s,m,h,d}, daily HH:MM, weekly <day> HH:MM, or cron "m h dom mon dow"'


class ScheduleError(UsageError):
    """A cadence string that does not parse, or one that would never fire."""


@dataclass(frozen=True)
class CronFields:
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: tuple[int, ...]
    months: tuple[int, ...]
    weekdays: tuple[int, ...]  # 0 = Sunday … 6 = Saturday, as in cron
    any_day: bool  # day-of-month field starts with `*`
    any_weekday: bool  # day-of-week field starts with `*`

    def day_matches(self, day: dt.date) -> bool:
        if day.month not in self.months:
            return False
        dom = day.day in self.days
        dow = (day.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return dom and dow
        return dom or dow


@dataclass(frozen=True)
class Schedule:
    """A parsed cadence. `str()` gives its canonical text."""

    kind: str  # every | daily | weekly | cron
    interval_s: int | None = None
    hour: int | None = None
    minute: int | None = None
    weekday: int | None = None  # 0 = Monday, as datetime.weekday()
    cron: CronFields | None = None
    text: str = ""

    @classmethod
    def parse(cls, text: str) -> Schedule:
        s = str(text).strip()
        if s.startswith("every "):
            return cls("every", interval_s=_interval(s[6:].strip()), text=s)
        if s.startswith("daily "):
            hour, minute = _hhmm(s[6:].strip())
            return cls("daily", hour=hour, minute=minute, text=s)
        if s.startswith("weekly "):
            parts = s[7:].split()
            if len(parts) != 2:
                raise ScheduleError(f"cadence {s!r}: expected `weekly <day> HH:MM`", _FORMS)
            hour, minute = _hhmm(parts[1])
            return cls("weekly", hour=hour, minute=minute, weekday=_weekday(parts[0]), text=s)
        body = s[5:].strip() if s.startswith("cron ") else s
        if len(body) >= 2 and body[0] == body[-1] and body[0] in "\"'":
            body = body[1:-1].strip()
        if len(body.split()) == 5:
            return cls("cron", cron=_cron(body), text=s)
        raise ScheduleError(f"cadence {_clip(s)!r} is not one of the known forms", _FORMS)

    def __str__(self) -> str:
        return self.text

    def next_after(self, now: dt.datetime) -> dt.datetime:
        """The next fire time strictly after `now`.

        A naive `now` is read as local wall-clock time and a naive result comes
        back; an aware `now` gets an aware result in the local zone.
        """
        if self.kind == "every":
            assert self.interval_s is not None
            return now + dt.timedelta(seconds=self.interval_s)
        if now.tzinfo is not None:
            local = now.astimezone().replace(tzinfo=None)
            return self._next_wall(local).astimezone()
        return self._next_wall(now)

    def next_fire(self, now_ts: float) -> float:
        """next_after for Unix timestamps: what the scheduler stores."""
        if self.kind == "every":
            assert self.interval_s is not None
            return now_ts + self.interval_s
        wall = dt.datetime.fromtimestamp(now_ts)
        for _ in range(4):  # a DST gap can map a wall time to an instant at or before now
            wall = self._next_wall(wall)
            ts = wall.timestamp()
            if ts > now_ts:
                return ts
        return now_ts + 60.0  # pragma: no cover - only reachable with a broken tz database

    def next_slot(self, slot: float, now_ts: float) -> float:
        """The first slot strictly after `now_ts` on the grid that `slot` is on.

        For `every N` the grid is slot + k*N, so a late run does not move the
        next one: an hourly loop fired at 10:07 for its 10:00 slot runs next at
        11:00. Missed slots coalesce (k skips them). Wall-clock forms are on their
        own grid already, so for them this is next_fire(now_ts).
        """
        if self.kind != "every":
            return self.next_fire(now_ts)
        assert self.interval_s is not None
        if slot > now_ts:
            return slot
        return slot + (int((now_ts - slot) // self.interval_s) + 1) * self.interval_s

    def _next_wall(self, now: dt.datetime) -> dt.datetime:
        if self.kind == "daily":
            assert self.hour is not None and self.minute is not None
            at = dt.time(self.hour, self.minute)
            candidate = dt.datetime.combine(now.date(), at)
            if candidate <= now:
                candidate = dt.datetime.combine(now.date() + dt.timedelta(days=1), at)
            return candidate
        if self.kind == "weekly":
            assert self.hour is not None and self.minute is not None
            at = dt.time(self.hour, self.minute)
            for ahead in range(8):
                day = now.date() + dt.timedelta(days=ahead)
                if day.weekday() == self.weekday:
                    candidate = dt.datetime.combine(day, at)
                    if candidate > now:
                        return candidate
            raise AssertionError("a weekday recurs within 8 days")  # pragma: no cover
        assert self.cron is not None
        return _cron_next(self.cron, now)


def _clip(text: str) -> str:
    """The text to quote in a message: a pasted megabyte is not echoed back."""
    return text if len(text) <= 40 else text[:20] + "…" + text[-8:]


def _interval(whole: str) -> int:
    rest = _clip(whole)
    if len(whole) < 2 or whole[-1] not in _UNITS:
        raise ScheduleError(
            f"interval {rest!r}: write a whole number and a unit, e.g. 30s, 10m, 2h, 1d"
        )
    number = whole[:-1].strip()
    digits = number[1:] if number[:1] in "+-" else number
    if not (digits.isascii() and digits.isdigit()):
        raise ScheduleError(
            f"interval {rest!r}: {_clip(number)!r} is not a whole number", "e.g. every 10m"
        )
    n = int(number) if len(digits) <= _MAX_DIGITS else int(number[:1] + "9" * _MAX_DIGITS)
    if n <= 0:
        raise ScheduleError(f"interval {rest!r} must be positive: a loop cannot fire every {rest}")
    seconds = n * _UNITS[whole[-1]]
    if seconds > MAX_INTERVAL_S:
        raise ScheduleError(
            f"interval {rest!r} is longer than the maximum of 366d",
            'for a yearly run write a cron, e.g. cron "0 9 1 1 *"',
        )
    return seconds


def _hhmm(text: str) -> tuple[int, int]:
    hour_text, sep, minute_text = text.partition(":")
    if (
        sep
        and hour_text.isdigit()
        and minute_text.isdigit()
        and len(hour_text) <= 2
        and len(minute_text) <= 2
    ):
        hour, minute = int(hour_text), int(minute_text)
        if hour <= 23 and minute <= 59:
            return hour, minute
    raise ScheduleError(f"time {text!r}: write HH:MM on a 24-hour clock, e.g. 09:30")


def _weekday(text: str) -> int:
    key = text.lower()
    for names in (_DAYS, _LONG_DAYS):
        if key in names:
            return names.index(key)
    raise ScheduleError(
        f"weekday {text!r}: write mon, tue, wed, thu, fri, sat or sun (or the full name)"
    )


def _cron(body: str) -> CronFields:
    m, h, dom, mon, dow = body.split()
    fields = CronFields(
        minutes=_cron_field(m, 0, 59, "minute"),
        hours=_cron_field(h, 0, 23, "hour"),
        days=_cron_field(dom, 1, 31, "day of month"),
        months=_cron_field(mon, 1, 12, "month", names=_MONTHS, base=1),
        weekdays=tuple(
            sorted({d % 7 for d in _cron_field(dow, 0, 7, "day of week", names=_CRON_DAYS)})
        ),
        any_day=dom.startswith("*"),
        any_weekday=dow.startswith("*"),
    )
    # With only day-of-month restricted, a date like 30 Feb would never come.
    if not fields.any_day and fields.any_weekday:
        possible = any(d <= _MONTH_DAYS[month - 1] for month in fields.months for d in fields.days)
        if not possible:
            raise ScheduleError(f"cron {body!r} names no day that exists, so it would never fire")
    return fields


_CRON_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


def _cron_value(text: str, names: tuple[str, ...], base: int, what: str) -> int:
    if text.isdigit():
        return int(text)
    key = text.lower()
    if names and key in names:
        return names.index(key) + base
    raise ScheduleError(f"cron {what} {text!r} is not a number" + (" or a name" if names else ""))


def _cron_field(
    text: str, lo: int, hi: int, what: str, *, names: tuple[str, ...] = (), base: int = 0
) -> tuple[int, ...]:
    values: set[int] = set()
    for item in text.split(","):
        span, slash, step_text = item.partition("/")
        step = 1
        if slash:
            if not step_text.isdigit() or int(step_text) == 0:
                raise ScheduleError(f"cron {what} step {step_text!r} should be a positive number")
            step = int(step_text)
        if span == "*":
            first, last = lo, hi
        elif "-" in span:
            a, _, b = span.partition("-")
            first, last = _cron_value(a, names, base, what), _cron_value(b, names, base, what)
        else:
            first = _cron_value(span, names, base, what)
            last = hi if slash else first  # `5/15` means from 5 to the end, every 15
        if not (lo <= first <= hi and lo <= last <= hi):
            raise ScheduleError(f"cron {what} {item!r} is outside {lo}-{hi}")
        if first > last:
            raise ScheduleError(f"cron {what} range {item!r} runs backwards")
        values.update(range(first, last + 1, step))
    return tuple(sorted(values))


def _cron_next(cron: CronFields, now: dt.datetime) -> dt.datetime:
    start = now.replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
    day = start.date()
    for _ in range(_SEARCH_DAYS):
        if cron.day_matches(day):
            for hour in cron.hours:
                for minute in cron.minutes:
                    candidate = dt.datetime.combine(day, dt.time(hour, minute))
                    if candidate >= start:
                        return candidate
        day += dt.timedelta(days=1)
    raise ScheduleError("this cron expression does not fire in the next eight years")
