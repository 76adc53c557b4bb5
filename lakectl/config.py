"""The user's lakectl configuration file (``~/.lakectl.yaml``, ``$LAKECTL_CONFIG``, or ``-c FILE``)."""

from __future__ import annotations

import contextlib
import copy
import os
from typing import Any

from lakectl.errors import InvalidArgument, NotFound

_chosen: str | None = None
"""The file named by ``lakectl -c FILE`` for this run, which wins over $LAKECTL_CONFIG."""


def use(path: str | None) -> None:
    """Read (and write) ``path`` for the rest of this run; None: back to the default."""
    global _chosen
    _chosen = path


def chosen() -> str | None:
    """The file ``-c`` named, or None."""
    return _chosen


def config_path() -> str:
    return (
        _chosen or os.environ.get("LAKECTL_CONFIG") or os.path.join(os.path.expanduser("~"), ".lakectl.yaml")
    )


def require() -> None:
    """As lakeFS's lakectl: a file named by ``-c`` must exist and parse, whatever the command
    reads from it (the default file may be absent, and is read when needed)."""
    if _chosen is None:
        return
    if not os.path.exists(_chosen):
        raise NotFound(
            f"config file {_chosen} not found: run 'lakectl -c {_chosen} config' to create it", path=_chosen
        )
    load()


_parsed: tuple[str, str, dict[str, Any]] | None = None
"""The last file parsed: its path, its text and what it holds. One command asks for several
keys (the server's endpoint and credentials, the committer): the file is parsed (and PyYAML
imported) once, yet read each time, so that a file rewritten meanwhile is never stale (a
timestamp may not change between two quick writes)."""


def load() -> dict[str, Any]:
    """The parsed file; an absent file is an empty configuration, a malformed one an error."""
    return copy.deepcopy(_load())


def _load() -> dict[str, Any]:
    global _parsed
    path = config_path()
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) else "it is not UTF-8 text"
        raise InvalidArgument(f"cannot read configuration {path}: {reason}") from e
    if _parsed is not None and _parsed[:2] == (path, text):
        return _parsed[2]
    data = _parse(path, text)
    _parsed = (path, text, data)
    return data


def _parse(path: str, text: str) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise InvalidArgument(f"invalid configuration {path}: {' '.join(str(e).split())}") from e
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InvalidArgument(f"invalid configuration {path}: expected a mapping at the top level")
    return data


def get(dotted: str) -> Any:
    """A value by dotted key (``user.name``), or None."""
    node: Any = _load()
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return copy.deepcopy(node) if isinstance(node, (dict, list)) else node


def write(values: dict[str, str]) -> str:
    """Set dotted keys (``server.endpoint_url``) in the file, keeping every other key, and return
    its path. The file holds a secret, so it is written private (0600), whole or not at all."""
    path = config_path()
    data = load()
    for dotted, value in values.items():
        node = data
        *parents, last = dotted.split(".")
        for part in parents:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[last] = value
    import yaml

    text = yaml.safe_dump(data, default_flow_style=False, sort_keys=True, allow_unicode=True)
    directory = os.path.dirname(os.path.abspath(path))
    temporary = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise InvalidArgument(f"cannot write configuration {path}: {e.strerror or e}") from e
    return path
