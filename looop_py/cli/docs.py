"""The manual and shell completion: help TOPIC, completion SHELL."""

from __future__ import annotations

import click

from looop_py.cli import render
from looop_py.cli.manual import TOPICS, page
from looop_py.cli.options import json_option
from looop_py.cli.output import json_out, raw_out, show


@click.command(name="help")
@click.argument(
    "topic",
    required=False,
    shell_complete=lambda _ctx, _param, incomplete: [t for t in TOPICS if t.startswith(incomplete)],
)
@json_option
@click.pass_context
def help_command(ctx: click.Context, topic: str | None, as_json: bool) -> None:
    """Read a reference page (Markdown); with no TOPIC, list the topics.

    The pages are the files in looop_py/docs/ that README.md links to. A
    command's name as TOPIC shows that command's --help.

    \b
    Example:
      looop help
      looop help sensors
      looop help cli | less      # every command, its options, the exit codes
      looop help --json | jq -r '.topics | keys[]'
    """
    root = ctx.find_root()
    group = root.command
    if topic is None:
        pages = {name: page(name) for name in TOPICS}
        if as_json:
            json_out({"topics": {name: render.topic_summary(text) for name, text in pages.items()}})
        else:
            show(render.topics_lines(pages))
    elif topic in TOPICS:
        _page(topic, page(topic), as_json)
    elif isinstance(group, click.Group) and (command := group.get_command(root, topic)):
        text = command.get_help(click.Context(command, info_name=topic, parent=root))
        _page(topic, text, as_json)
    else:
        raise click.BadParameter(
            f"no such topic; one of: {', '.join(TOPICS)} (or a command's name)",
            param_hint="TOPIC",
        )


def _page(topic: str, text: str, as_json: bool) -> None:
    if as_json:
        json_out({"topic": topic, "text": text})
    else:
        show(text.splitlines())


@click.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
@json_option
@click.pass_context
def completion(ctx: click.Context, shell: str, as_json: bool) -> None:
    """Print the shell completion script for SHELL (bash, zsh or fish).

    \b
    Example:
      eval "$(looop completion bash)"                       # in ~/.bashrc
      eval "$(looop completion zsh)"                        # in ~/.zshrc
      looop completion fish > ~/.config/fish/completions/looop.fish
    """
    from click.shell_completion import get_completion_class

    complete = get_completion_class(shell)
    assert complete is not None  # every click.Choice above has a class
    script = complete(ctx.find_root().command, {}, "looop", "_LOOOP_COMPLETE").source()
    if as_json:
        json_out({"shell": shell, "script": script})
    else:
        raw_out(script.encode())  # exactly what `_LOOOP_COMPLETE=bash_source looop` prints


COMMANDS = [help_command, completion]
