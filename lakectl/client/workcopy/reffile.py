"""lakeFS's ``.lakefs_ref.yaml``: the source URI and head commit a directory is linked to."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from lakectl.client.workcopy.index import REF_FILE
from lakectl.errors import InvalidArgument, NotFound

__all__ = ["Ref", "find_root", "read_ref", "write_ref"]


@dataclass(frozen=True, slots=True)
class Ref:
    """``src``: lakefs://repo/ref/prefix/ (the prefix empty or ending with ``/``); ``at_head``:
    the commit the directory holds; ``active_operation``: the verb that was cut short, if any
    (lakeFS's field; empty when the last one finished)."""

    src: str
    at_head: str
    active_operation: str = ""


def find_root(directory: str) -> str:
    """The working copy holding ``directory``: itself or the nearest parent with a ref file, as
    lakeFS's lakectl looks; ``NotFound`` when none has one."""
    here = os.path.abspath(directory)
    if not os.path.isdir(here):
        raise NotFound(f"directory {directory!r} does not exist", path=directory)
    probe = here
    while True:
        if os.path.isfile(os.path.join(probe, REF_FILE)):
            return probe
        parent = os.path.dirname(probe)
        if parent == probe:
            raise NotFound(
                f"directory {here!r} is not linked to a lakeFS path: no {REF_FILE} in it or its "
                "parents (lakectl local init or clone links one)",
                path=here,
            )
        probe = parent


def read_ref(root: str) -> Ref:
    path = os.path.join(root, REF_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"cannot read {path!r}: {exc}", path=path) from exc
    data = _plain(text)
    if data is None:  # quoted values, comments, another layout: YAML proper (its import costs)
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise InvalidArgument(f"cannot read {path!r}: {exc}", path=path) from exc
    if not isinstance(data, dict) or not isinstance(data.get("src"), str):
        raise InvalidArgument(f"{path!r} has no src: not a lakeFS reference file", path=path)
    return Ref(str(data["src"]), str(data.get("at_head") or ""), str(data.get("active_operation") or ""))


def _plain(text: str) -> dict[str, str] | None:
    """The mapping of a file of ``key: value`` lines whose values need no YAML (as this module
    and lakeFS's lakectl write them); None for anything else."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(": ")
        if value in ("''", '""'):
            out[key] = ""
            continue
        if not sep or not key.isidentifier() or value[:1] in _SPECIAL or " #" in value:
            if line.endswith(":") and line[:-1].isidentifier():
                out[line[:-1]] = ""
                continue
            return None
        out[key] = value.rstrip()
    return out


_SPECIAL = frozenset("'\"[]{}&*!|>%@`#,?:-")


def write_ref(root: str, ref: Ref) -> None:
    """Write atomically; the fields in lakeFS's order and names."""
    fields = {"src": ref.src, "at_head": ref.at_head, "active_operation": ref.active_operation}
    text = _dump_plain(fields)
    if text is None:  # a value YAML must quote: YAML proper (its import costs ~20 ms)
        import yaml

        text = yaml.safe_dump(fields, sort_keys=False)
    path = os.path.join(root, REF_FILE)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def _dump_plain(fields: dict[str, str]) -> str | None:
    """``key: value`` lines when every value reads back as the same string in YAML unquoted
    (a lakefs:// URI of plain characters, a commit id, an operation's name) or is empty; None
    otherwise."""
    lines = []
    for key, value in fields.items():
        if not value:
            lines.append(f'{key}: ""')
        elif _PLAIN_VALUE.fullmatch(value) and not _NUMBER.fullmatch(value) and value.lower() not in _WORDS:
            lines.append(f"{key}: {value}")
        else:
            return None
    return "\n".join(lines) + "\n"


# A URI of unreserved characters, a word, or a hex id with a letter: YAML reads no number,
# date or time in them (those start with a digit and need ".", "-", ":", "x" or "o"), but for
# an id of digits around one "e", a float in YAML 1.2 (lakeFS's reader).
_PLAIN_VALUE = re.compile(r"lakefs://[A-Za-z0-9_.~/=+-]*|[A-Za-z][A-Za-z0-9_]*|[0-9a-f]*[a-f][0-9a-f]*")
_NUMBER = re.compile(r"[0-9]*e[0-9]+")
_WORDS = frozenset({"y", "n", "yes", "no", "true", "false", "on", "off", "null"})
