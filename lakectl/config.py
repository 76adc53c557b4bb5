"""The user's lakectl configuration file (``~/.lakectl.yaml``, or ``$LAKECTL_CONFIG``)."""

from __future__ import annotations

import os
from typing import Any

from lakectl.errors import InvalidArgument


def config_path() -> str:
    return os.environ.get("LAKECTL_CONFIG") or os.path.join(os.path.expanduser("~"), ".lakectl.yaml")


def load() -> dict[str, Any]:
    """The parsed file; an absent file is an empty configuration, a malformed one an error."""
    path = config_path()
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError as e:
        raise InvalidArgument(f"invalid configuration {path}: not UTF-8 text") from e
    except OSError as e:
        raise InvalidArgument(f"cannot read configuration {path}: {e.strerror}") from e
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise InvalidArgument(f"invalid configuration {path}: {e}") from e
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InvalidArgument(f"invalid configuration {path}: expected a mapping at the top level")
    return data


def get(dotted: str) -> Any:
    """A value by dotted key (``user.name``), or None."""
    node: Any = load()
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node
