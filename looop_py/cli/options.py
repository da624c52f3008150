"""Options and decorators every verb module shares: the work dir, opened once, and --json."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

import click

from looop_py.cli.output import resolve

if TYPE_CHECKING:
    from looop_py.workdir.context import WorkDir
    from looop_py.workdir.paths import Paths

P = ParamSpec("P")
R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])

JSON_WANTED = "looop.json"  # ctx.meta key: --json was given, so errors come out as JSON too


class State:
    """Per invocation: the work dir, found once, and opened (looop.toml loaded, its shelf
    opened) at most once, by the first command that needs it; closed with the command."""

    def __init__(self, workdir: str | None = None) -> None:
        self.workdir = workdir
        self._paths: Paths | None = None
        self._opened: WorkDir | None = None

    @property
    def paths(self) -> Paths:
        if self._paths is None:
            self._paths = resolve(self.workdir)
        return self._paths

    @property
    def opened(self) -> WorkDir:
        if self._opened is None:
            from looop_py.coord.choose import open_workdir

            self._opened = open_workdir(self.paths)
            click.get_current_context().call_on_close(self._opened.close)
        return self._opened


def _state() -> State:
    return click.get_current_context().ensure_object(State)


def pass_paths(f: Callable[Concatenate[Paths, P], R]) -> Callable[P, R]:
    """Call the command with the work dir's Paths first (the work dir is found here)."""

    @functools.wraps(f)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        return f(_state().paths, *args, **kwargs)

    return wrapper


def pass_workdir(f: Callable[Concatenate[WorkDir, P], R]) -> Callable[P, R]:
    """Call the command with the opened WorkDir first (looop.toml loaded, shelf opened)."""

    @functools.wraps(f)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        return f(_state().opened, *args, **kwargs)

    return wrapper


def _remember_json(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    if value:
        ctx.meta[JSON_WANTED] = True
    return value


def json_option(f: F) -> F:
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        callback=_remember_json,
        help="Print one JSON object (an error too: {error, hint, exit_code}).",
    )(f)


def session_option(f: F) -> F:
    return click.option(
        "--session",
        envvar="LOOOP_SESSION_ID",
        help="Holder session (default: $LOOOP_SESSION_ID).",
    )(f)


def pid_option(f: F) -> F:
    return click.option(
        "--pid",
        type=int,
        help="Process whose life the claim follows (default: the worker, else the caller).",
    )(f)
