"""Browser logins of one `looop serve` process: one-time codes and expiring sessions.

`looop serve` prints a URL holding a one-time code, never the token: the code is
exchanged once for a session cookie (HttpOnly, SameSite=Strict) and is worthless
after, so the URL left in the browser's history opens nothing. The /login form
takes the token itself (a POST body: not in history) for a second browser. A
session ends after SESSION_S or at logout; everything lives in this process, so
restarting the server logs every browser out. Pure: every call takes `now`.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

CODE_S = 3600.0  # a printed login code is good once, within the hour
SESSION_S = 12 * 3600.0  # a browser logs in again after 12 hours
MAX_SESSIONS = 256  # the oldest is dropped past this (a flood of logins cannot grow memory)


@dataclass
class Sessions:
    codes: dict[str, float] = field(default_factory=dict)  # code → expires at
    live: dict[str, float] = field(default_factory=dict)  # session id → expires at

    def new_code(self, now: float) -> str:
        code = secrets.token_urlsafe(18)
        self.codes = {c: t for c, t in self.codes.items() if t > now}
        self.codes[code] = now + CODE_S
        return code

    def redeem(self, code: str, now: float) -> str | None:
        """A new session for a valid code, which is spent; None for anything else."""
        expires = self.codes.pop(code, None)
        if expires is None or expires <= now:
            return None
        return self.start(now)

    def start(self, now: float) -> str:
        self.live = {s: t for s, t in self.live.items() if t > now}
        while len(self.live) >= MAX_SESSIONS:
            self.live.pop(min(self.live, key=self.live.__getitem__))
        sid = secrets.token_urlsafe(32)
        self.live[sid] = now + SESSION_S
        return sid

    def valid(self, sid: str | None, now: float) -> bool:
        if not sid:
            return False
        expires = self.live.get(sid)
        if expires is None:
            return False
        if expires <= now:
            del self.live[sid]
            return False
        return True

    def end(self, sid: str | None) -> None:
        if sid:
            self.live.pop(sid, None)
