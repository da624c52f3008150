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
# Patterns, compiled on first use (`re` keeps them): text that is plain printable ASCII,
# as most journal lines are, needs neither (compiling both is a full beat's fixed cost).
_HIDDEN = f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_INVISIBLE}]"
_HIDDEN_OR_TAB = f"[\x00-\x08\x0b-\x1f\x7f-\x9f\t{_INVISIBLE}]"


def _plain(text: str, *, tabs: bool) -> bool:
    """Printable ASCII but for newlines (and tabs, when they stay): nothing to spell out."""
    if not text.isascii():
        return False
    text = text.replace("\n", "")
    return (text.replace("\t", "") if tabs else text).isprintable()


def _show(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0xA0 else f"⟨U+{code:04X}⟩"


def visible(text: str, *, tabs: bool = True) -> str:
    """`text` with every character a human cannot see spelled out (`tabs`: keep tabs)."""
    if _plain(text, tabs=tabs):
        return text
    pattern = _HIDDEN if tabs else _HIDDEN_OR_TAB
    return re.sub(pattern, lambda m: _show(m.group()), text)


def hidden(text: str) -> list[str]:
    """The hidden characters in `text`, named once each in order (`ESC \\x1b`, …)."""
    if _plain(text, tabs=True):
        return []
    seen: dict[str, None] = {}
    for ch in re.findall(_HIDDEN, text):
        seen.setdefault(ch, None)
    return [f"{_name(ch)} {_show(ch)}" for ch in seen]


def _name(ch: str) -> str:
    names = {"\x1b": "ESC", "\r": "CR", "\x00": "NUL", "\x7f": "DEL", "\x08": "BS"}
    if ch in names:
        return names[ch]
    import unicodedata  # only when naming one, for a warning

    return unicodedata.name(ch, "control character").lower()
