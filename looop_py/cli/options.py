"""Options and decorators every verb module shares: the work dir, its config, --json."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

import click

from looop_py.cli.output import resolve

if TYPE_CHECKING:
    from looop_py.workdir.config import Config
    from looop_py.workdir.paths import Paths

P = ParamSpec("P")
R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])

JSON_WANTED = "looop.json"  # ctx.meta key: --json was given, so errors come out as JSON too


class State:
    """Per invocation: the work dir and its config, each found and loaded at most once."""

    def __init__(self, workdir: str | None = None) -> None:
        self.workdir = workdir
        self._paths: Paths | None = None
        self._config: Config | None = None

    @property
    def paths(self) -> Paths:
        if self._paths is None:
            self._paths = resolve(self.workdir)
        return self._paths

    @property
    def config(self) -> Config:
        if self._config is None:
            from looop_py.workdir import config

            self._config = config.load(self.paths.config, self.paths.config_cache)
        return self._config


def _state() -> State:
    return click.get_current_context().ensure_object(State)


def pass_paths(f: Callable[Concatenate[Paths, P], R]) -> Callable[P, R]:
    """Call the command with the work dir's Paths first (the work dir is found here)."""

    @functools.wraps(f)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        return f(_state().paths, *args, **kwargs)

    return wrapper


def pass_config(f: Callable[Concatenate[Paths, Config, P], R]) -> Callable[P, R]:
    """Call the command with the work dir's Paths and its loaded looop.toml first."""

    @functools.wraps(f)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        state = _state()
        return f(state.paths, state.config, *args, **kwargs)

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
