"""Characters a human cannot see, shown as what they are.

A terminal obeys ESC and CR; a bidi override reorders what follows it; a zero-width
space hides between letters. Text a model wrote reaches a human in `looop asks`,
the approve and deny output, the journal, notifications and the page; each shows it
through `visible`, so what a human reads is what the bytes say: C0 and C1 controls
and DEL as `\\x1b`, bidi controls, zero-width and other invisible format characters
as `⟨U+202E⟩`. Newlines (and tabs, unless asked) stay: they are what they look like.
`hidden` names them, for a warning (and the shell gate holds a command that has any).
"""

from __future__ import annotations

import re

# Bidi embeddings/overrides/isolates and marks, zero-width and invisible format
# characters, line/paragraph separators, the Hangul fillers and the BOM.
_INVISIBLE = (
    "\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f"
    "\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb"
)
_HIDDEN = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_INVISIBLE}]")
_HIDDEN_OR_TAB = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f\t{_INVISIBLE}]")


def _show(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0xA0 else f"⟨U+{code:04X}⟩"


def visible(text: str, *, tabs: bool = True) -> str:
    """`text` with every character a human cannot see spelled out (`tabs`: keep tabs)."""
    pattern = _HIDDEN if tabs else _HIDDEN_OR_TAB
    return pattern.sub(lambda m: _show(m.group()), text)


def hidden(text: str) -> list[str]:
    """The hidden characters in `text`, named once each in order (`ESC \\x1b`, …)."""
    seen: dict[str, None] = {}
    for ch in _HIDDEN.findall(text):
        seen.setdefault(ch, None)
    return [f"{_name(ch)} {_show(ch)}" for ch in seen]


def _name(ch: str) -> str:
    names = {"\x1b": "ESC", "\r": "CR", "\x00": "NUL", "\x7f": "DEL", "\x08": "BS"}
    if ch in names:
        return names[ch]
    import unicodedata  # only when naming one, for a warning

    return unicodedata.name(ch, "control character").lower()
