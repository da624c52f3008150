"""Schedules: the decider's timers (write_schedule) and the loops' schedule book, on the shelf."""
