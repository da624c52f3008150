"""`looop init`: create a work dir from the starter template."""

from __future__ import annotations

from pathlib import Path

import click

from looop_py.cli import onboard
from looop_py.cli.options import json_option
from looop_py.cli.output import json_out, show


@click.command()
@click.argument("directory", default=".", type=click.Path(file_okay=False, path_type=Path))
@json_option
def init(directory: Path, as_json: bool) -> None:
    """Create a work dir from the starter template (never overwrites a file).

    \b
    Example:
      looop init ~/ops      # creates looop.toml, PLAYBOOK.md, goals/, sensors/ …
      looop init ~/ops      # again: keeps every existing file, adds what is missing
      looop init ~/ops --json | jq .created
    """
    from looop_py.workdir.template import init as create

    result = create(directory)
    if as_json:
        json_out({**result.to_json(), "next_steps": onboard.next_steps(result)})
    else:
        show(onboard.init_lines(result))


COMMANDS = [init]
