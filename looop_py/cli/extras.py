"""How to add an optional extra (`[web]`) to the install this looop runs from.

A checkout (`pip install -e .`, or `pip install .` from a directory) takes the extra
from that directory: `pip install -e '.[web]'` there; PyPI's name would fetch another
copy. pip records which it was in the distribution's direct_url.json (PEP 610).
"""

from __future__ import annotations

import shlex
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

from looop_py import jsonio

DISTRIBUTION = "looop-py"


def install_hint(extra: str) -> str:
    """The command that installs `extra` into this looop's own install."""
    root = Path(__file__).resolve().parents[2]
    if (root / "pyproject.toml").is_file():  # this code runs from a checkout (pip install -e)
        return _from_directory(str(root), extra, editable=True)
    for dist in metadata.distributions(name=DISTRIBUTION):
        return hint_for(dist.read_text("direct_url.json"), extra)
    return hint_for(None, extra)


def hint_for(direct_url: str | None, extra: str) -> str:
    """`install_hint` from the text of direct_url.json (None: installed from an index)."""
    try:
        url = jsonio.loads(direct_url) if direct_url else None
    except ValueError:
        url = None
    if isinstance(url, dict) and isinstance(url.get("dir_info"), dict):
        where = urlparse(str(url.get("url", "")))
        if where.scheme == "file":
            editable = bool(url["dir_info"].get("editable"))
            return _from_directory(unquote(where.path), extra, editable=editable)
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def _from_directory(root: str, extra: str, *, editable: bool) -> str:
    return f"cd {shlex.quote(root)} && pip install {'-e ' if editable else ''}'.[{extra}]'"
