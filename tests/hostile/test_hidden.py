"""What a human reads is what runs: hidden characters are spelled out, never auto-run.

A model puts ESC, CR, bidi overrides or zero-width characters in a command: the
allow rules hold it (with a warning naming them), and every place a human reads it
(`looop asks`, approve output, the journal, the page) shows them as escapes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from looop_py.asks import mailbox
from looop_py.moves import gate, union
from looop_py.web import pages
from looop_py.workdir import journal
from looop_py.workdir.paths import Paths
from tests.conftest import invoke_looop, open_wd

RAW = ("\x1b", "\r", "\u202e", "\u200b", "\u2066", "\x9b", "\x08", "\u2028", "\ufeff")

# (a command a wildcard rule would have allowed, the characters it hides, a name in the warning)
VARIANTS = [
    ("touch {d}/ok\x1b[2K\x1b[1Afile", "\\x1b", "ESC"),
    ("touch {d}/ok\u202eexe.txt", "⟨U+202E⟩", "right-to-left override"),
    ("touch {d}/ok\u200bfile", "⟨U+200B⟩", "zero width space"),
    ("touch {d}/ok\u2066file\u2069", "⟨U+2066⟩", "left-to-right isolate"),
    ("touch {d}/ok\x9bfile", "\\x9b", "control character"),
    ("touch {d}/ok\x08\x08file", "\\x08", "BS"),
    ("touch {d}/ok\ufefffile", "⟨U+FEFF⟩", "zero width no-break space"),
    ("touch {d}/ok\u2028file", "⟨U+2028⟩", "line separator"),
]


@pytest.mark.parametrize(("cmd", "shown", "named"), VARIANTS, ids=[v[2] for v in VARIANTS])
def test_a_command_with_hidden_characters_is_held_and_shown_spelled_out(
    wd: Paths, tmp_path: Path, cmd: str, shown: str, named: str
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    wd.config.write_text(wd.config.read_text() + '[gates]\nshell_allow = ["touch *"]\n')
    cmd = cmd.format(d=out)
    admission = gate.admit(open_wd(wd), union.parse({"action": "run_shell", "cmd": cmd}), 1.0)
    assert admission.held is not None, "an allow rule ran a command with hidden characters"
    assert list(out.iterdir()) == []
    ask = mailbox.get_ask(open_wd(wd), admission.held)
    assert ask.hold["runs"] == cmd  # what runs, exactly
    assert "WARNING" in ask.prompt and named in ask.prompt and shown in ask.prompt
    listed = invoke_looop("-C", str(wd.root), "asks")
    assert listed.returncode == 0, listed.stderr
    assert not any(ch in listed.stdout for ch in RAW), repr(listed.stdout)
    assert shown in listed.stdout
    page = pages.asks({"asks": [{**ask.to_json(), "age_s": 1, "state": "pending"}]}, None)
    assert not any(ch in page for ch in RAW) and shown in page
    approved = invoke_looop("-C", str(wd.root), "approve", ask.id)
    assert approved.returncode == 0, approved.stderr
    assert not any(ch in approved.stdout + approved.stderr for ch in RAW)
    assert len(list(out.iterdir())) == 1  # the human saw it and approved: it ran as is
    line = journal.tail(wd, 1)[0]
    assert not any(ch in line for ch in RAW) and shown in line


def test_the_same_command_without_them_still_runs_by_the_rule(wd: Paths, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    wd.config.write_text(wd.config.read_text() + '[gates]\nshell_allow = ["touch *"]\n')
    move = union.parse({"action": "run_shell", "cmd": f"touch {out}/okfile"})
    assert gate.admit(open_wd(wd), move, 1.0).held is None


def test_a_screen_rewriting_command_cannot_pose_as_another(wd: Paths, tmp_path: Path) -> None:
    """The issue's case: `looop asks` showed `git status`, approve ran `touch PWNED`."""
    canary = tmp_path / "PWNED"
    cmd = f"touch {canary} #\r\x1b[2Kgit status"
    admission = gate.admit(open_wd(wd), union.parse({"action": "run_shell", "cmd": cmd}), 1.0)
    assert admission.held is not None and not canary.exists()
    listed = invoke_looop("-C", str(wd.root), "asks")
    assert f"touch {canary} #\\x0d\\x1b[2Kgit status" in listed.stdout
    js = json.loads(invoke_looop("-C", str(wd.root), "asks", "--json").stdout)
    assert js["asks"][0]["hold"]["runs"] == cmd  # JSON keeps the exact bytes, escaped by JSON


def test_the_plain_ascii_shortcut_spells_out_exactly_what_the_pattern_does() -> None:
    """Printable ASCII skips the pattern (a full beat's fixed cost); every ASCII character,
    alone and between letters, tabs kept or not, is shown as the pattern alone shows it."""
    import re

    from looop_py import glyphs

    for tabs, pattern in ((True, glyphs._HIDDEN), (False, glyphs._HIDDEN_OR_TAB)):
        for code in range(128):
            for text in (chr(code), f"a{chr(code)}b\n", f"ok\n\t{chr(code)}"):
                expected = re.sub(pattern, lambda m: glyphs._show(m.group()), text)
                assert glyphs.visible(text, tabs=tabs) == expected, (tabs, code)
    assert glyphs.hidden("plain\ttext\n") == [] and glyphs.hidden("a\rb") == ["CR \\x0d"]
    assert glyphs.visible("caf\u00e9 \u200b") == "caf\u00e9 ⟨U+200B⟩"
