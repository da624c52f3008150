"""One source per fact: the reference pages against the code they describe.

The CLI page's command reference is click's --help; the configuration page's key table and
the starter looop.toml both come from the table of keys workdir/config.py validates;
`looop help` topics are the pages; README.md stays a five-minute read; every link and
every file a page names exists.
"""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from looop_py.cli import reference
from looop_py.cli.app import cli
from looop_py.cli.manual import TOPICS, page
from tests.project.docs import DOCS, PAGES, ROOT


def _generated(name: str) -> str:
    return reference.split((DOCS / name).read_text(encoding="utf-8"))[1]


@pytest.mark.parametrize("name", reference.GENERATED_PAGES)
def test_each_generated_part_is_up_to_date(name: str) -> None:
    # As a user would have run a command first: click caches each help option as first made.
    assert "-h, --help" in CliRunner().invoke(cli, ["pulse", "--help"]).output
    assert _generated(name) == reference.generated(name), (
        f"looop_py/docs/{name} is stale: run `python -m looop_py.cli.reference`"
    )


def test_a_new_option_or_command_changes_the_rendering() -> None:
    @click.group()
    def root() -> None:
        """The root."""

    @root.command()
    @click.option("--fast", is_flag=True, help="Go fast.")
    def go(fast: bool) -> None:
        """Go somewhere."""

    before = reference.commands_markdown(root)
    assert "### `looop go`" in before and "--fast  Go fast." in before
    go.params.append(click.Option(["--slow"], is_flag=True, help="Go slow."))
    root.add_command(click.Command("stop", help="Stop."))
    after = reference.commands_markdown(root)
    assert "--slow  Go slow." in after and "### `looop stop`" in after


def _all_commands(group: click.Group, prefix: str = "looop") -> list[str]:
    ctx = click.Context(group, info_name=prefix)
    out = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        out.append(f"{prefix} {name}")
        if isinstance(command, click.Group):
            out += _all_commands(command, f"{prefix} {name}")
    return out


def test_every_command_has_exactly_one_heading_in_the_cli_page() -> None:
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    commands = _all_commands(cli)
    assert len(commands) >= 40
    for command in commands:
        assert text.count(f"### `{command}`\n") == 1, command


def test_every_exit_code_is_in_the_cli_page() -> None:
    from looop_py import errors

    table = (DOCS / "cli.md").read_text().split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    codes = {c.exit_code for c in vars(errors).values() if hasattr(c, "exit_code")}
    for code in {int(c) for c in codes} | {0, 1, 2, 70, 130}:
        assert f"\n| {code} | " in table, code


def test_every_key_is_in_the_configuration_page_exactly_once() -> None:
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    keys = reference.config_keys()
    assert len(keys) >= 70 and "coordination.prefix" in keys and "runtimes.NAME.env" in keys
    rows = re.findall(r"^\| `([\w.]+)` \|", text, re.M)
    assert sorted(rows) == sorted(keys)
    for key in keys:
        assert text.count(f"`{key}`") == 1, f"{key} is documented more than once"


STARTER = reference.starter_lines(reference.starter_text())


def _same(default: object, shown: object) -> bool:
    if isinstance(default, tuple):
        return list(default) == shown
    return default == shown


@pytest.mark.parametrize("key", list(reference.config_keys()))
def test_the_starter_file_states_each_key_as_validated(key: str) -> None:
    default = reference.config_keys()[key]
    name = key.rpartition(".")[2]
    assert key in STARTER, f"template/looop.toml has no commented `{name} =` line"
    value, comment = STARTER[key]
    if default not in ("", None):  # an empty default may show an example instead
        shown = reference.starter_value(value)
        assert _same(default, shown), (
            f"{key}: the starter file says {value}, looop uses {default!r}"
        )
    rng = reference.key_range(key)
    if rng:
        assert comment.startswith(rng + ";"), f"{key}: the starter file should say `{rng};`"
    assert re.sub(r"^range [^;]*;\s*", "", comment), f"{key}: say what it does"


def test_a_starter_line_that_disagrees_is_caught() -> None:
    lines = reference.starter_lines("[sensors]\n# timeout_s = 30     # range >0..60; seconds\n")
    value, comment = lines["sensors.timeout_s"]
    assert reference.starter_value(value) != reference.config_keys()["sensors.timeout_s"]
    assert not comment.startswith(reference.key_range("sensors.timeout_s") + ";")


def test_every_loop_frontmatter_key_is_in_the_loops_table() -> None:
    from dataclasses import fields

    from looop_py.engine.budget import TokenBudget
    from looop_py.engine.spec import SPEC_KEYS

    text = (DOCS / "loops.md").read_text(encoding="utf-8")
    rows = {
        k
        for row in re.findall(r"^\| (`[^|]+) \|", text, re.M)
        for k in re.findall(r"`(\w+):`", row)
    }
    assert rows == SPEC_KEYS | {"intent", "on"}
    budget_row = next(line for line in text.splitlines() if line.startswith("| `budget:`"))
    for f in fields(TokenBudget):
        assert f"`{f.name}" in budget_row, f.name


def test_help_topics_are_the_pages() -> None:
    assert set(TOPICS) == {p.stem for p in DOCS.glob("*.md")}
    for topic in TOPICS:
        text = page(topic)
        assert text == (DOCS / f"{topic}.md").read_text(encoding="utf-8")
        assert re.match(r"# [^\n]+: \S", text), f"{topic}.md: start with `# Title: summary`"


def test_the_readme_is_a_five_minute_read() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines; move reference to docs/"
    for topic in TOPICS:
        assert f"(looop_py/docs/{topic}.md)" in "\n".join(lines), f"link docs/{topic}.md"


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return {_slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}


LINK = re.compile(r"\]\(([^)\s]+)\)")
FILE = re.compile(r"`((?:looop_py|tests|bench|template|\.ci)/[\w./-]*\w)`")


def _references(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return LINK.findall(text)


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.name)
def test_every_link_and_named_file_exists(path: Path) -> None:
    missing = []
    for target in _references(path):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        dangling = bool(anchor) and dest.suffix == ".md" and anchor not in _anchors(dest)
        if not dest.exists() or dangling:
            missing.append(target)
    for name in FILE.findall(path.read_text(encoding="utf-8")):
        if not (ROOT / name).exists():
            missing.append(name)
    assert not missing, f"{path.name} points at what does not exist: {missing}"


def test_a_dangling_link_is_caught(tmp_path: Path) -> None:
    page_ = tmp_path / "p.md"
    page_.write_text("# Top\n\nsee [a](gone.md), [b](#top), [c](#nowhere)\n")
    refs = _references(page_)
    assert refs == ["gone.md", "#top", "#nowhere"]
    assert "top" in _anchors(page_) and "nowhere" not in _anchors(page_)
