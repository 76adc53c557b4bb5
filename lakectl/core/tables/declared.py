"""Tables a repository declares, with their keys: one committed file, :data:`PATH`, that
``lakectl tables declare`` writes and anyone may edit like any other object::

    tables:
      tables/orders:
        key: [order_id]
      events:
        key: [day, event_id]

A table is named by its path (a prefix such as ``tables/orders``, or one object such as
``lookups/codes.parquet``); a path belongs to the longest declared table it is in. The table
diff, pull requests, the web UI and the rows merge strategy take a table's key from here when
none is given. The file is versioned with the data: a branch that re-keys a table carries its
declaration, and a diff reads the declaration of its right side (else its left side's).

Parsing, rendering and lookup only (no I/O, no pyarrow): the CLI uses them; the readers at a
ref or a tree are :func:`at_ref` and :func:`in_tree`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lakectl.errors import InvalidArgument, NotFound

if TYPE_CHECKING:
    from lakectl.core.lake import Lake
    from lakectl.core.model import MetaRangeId

PATH = "_lakectl/tables.yaml"
CONTENT_TYPE = "application/yaml"
HEADER = (
    "# The tables of this repository and their keys. `lakectl diff --table`, pull requests, the\n"
    "# web UI and the rows merge strategy use a table's key when none is given.\n"
    "# Written by `lakectl tables declare`; edit it like any other file, and commit it.\n"
)

Declared = dict[str, tuple[str, ...]]
"""Table path (no leading or trailing ``/``) -> its key columns."""


def table_name(path: str) -> str:
    """A table's path as the file names it: no leading or trailing ``/``."""
    from lakectl.core.uri import check_new_path

    name = path.strip("/")
    if not name:
        raise InvalidArgument("a table is named by its path: not the repository's root")
    return check_new_path(name)


def key_columns(text: str | Sequence[str]) -> tuple[str, ...]:
    """Key columns from ``a,b`` (or a list of names), checked: at least one, none empty or
    named twice."""
    names = [c.strip() for c in text.split(",")] if isinstance(text, str) else [str(c).strip() for c in text]
    if not names or any(not n for n in names):
        raise InvalidArgument(f"a key is one or more column names, comma-separated: not {text!r}")
    from lakectl.core.limits import check_name

    for name in names:
        check_name(name, "key column")
    if len(set(names)) != len(names):
        raise InvalidArgument(f"a key column is named twice: {', '.join(names)}")
    return tuple(names)


def parse(data: bytes, where: str) -> Declared:
    """The declarations in the file's bytes; ``InvalidArgument`` naming ``where`` (the file at
    a ref) and what is wrong when it is not a mapping of tables to keys."""
    import yaml

    try:
        loaded: Any = yaml.safe_load(data.decode("utf-8")) if data.strip() else None
    except (UnicodeDecodeError, yaml.YAMLError) as e:
        raise InvalidArgument(f"{where} is not valid YAML: {e}") from e
    if loaded is None:
        return {}
    tables = loaded.get("tables") if isinstance(loaded, dict) else None
    if not isinstance(loaded, dict) or not isinstance(tables or {}, dict):
        raise InvalidArgument(f"{where}: expected `tables:` mapping each table's path to its `key:`")
    declared: Declared = {}
    for path, spec in (tables or {}).items():
        key = spec.get("key") if isinstance(spec, dict) else None
        if not isinstance(path, str) or not isinstance(key, (str, list)):
            raise InvalidArgument(f"{where}: table {path!r} needs `key:` (a column, or a list of columns)")
        try:
            declared[table_name(path)] = key_columns(key if isinstance(key, str) else [str(k) for k in key])
        except InvalidArgument as e:
            raise InvalidArgument(f"{where}: table {path!r}: {e.message}") from e
    return declared


def render(declared: Mapping[str, Sequence[str]]) -> bytes:
    """The file's bytes for ``declared``: tables in path order, each key a flow-style list."""
    import yaml

    tables = {path: {"key": list(declared[path])} for path in sorted(declared)}
    body: str = yaml.safe_dump({"tables": tables}, default_flow_style=None, sort_keys=False)
    return (HEADER + body).encode()


def key_for(declared: Mapping[str, tuple[str, ...]], path: str) -> tuple[str, ...]:
    """The key of the declared table ``path`` is in (the table itself, a partition of it or
    one of its objects; the longest declared path wins), or ``()``."""
    name = path.strip("/")
    best = ""
    for table in declared:
        if (name == table or name.startswith(table + "/")) and len(table) > len(best):
            best = table
    return declared[best] if best else ()


def table_for(declared: Mapping[str, tuple[str, ...]], path: str) -> str:
    """The declared table an object at ``path`` is part of, as a diff names it (a prefix with
    its trailing ``/``, or the object itself), or "" when it is in none. A prefix is a table of
    Parquet objects: a CSV object under a declared prefix is a table of its own (its key is
    still the prefix's, by :func:`key_for`)."""
    best = ""
    for table in declared:
        if (path == table or path.startswith(table + "/")) and len(table) > len(best):
            best = table
    if not best or best == path:
        return best
    return best + "/" if path.endswith(".parquet") else ""


def at_ref(lake: Lake, repo: str, ref: str) -> Declared:
    """The declarations at ``ref`` (a branch's include its uncommitted change to the file);
    none when the file is not there."""
    from lakectl.core import porcelain
    from lakectl.core.model import Entry

    row = porcelain.lookup(lake, repo, ref, PATH)
    if row is None:
        return {}
    return parse(b"".join(porcelain.read_entry(lake, Entry.from_row(row))), f"{PATH} at {ref}")


def in_tree(lake: Lake, mid: MetaRangeId, what: str) -> Declared:
    """The declarations in the tree ``mid`` (``what`` names it in errors)."""
    from lakectl.core import porcelain
    from lakectl.core.model import Entry

    row = lake.trees.lookup(mid, PATH)
    if row is None:
        return {}
    return parse(b"".join(porcelain.read_entry(lake, Entry.from_row(row))), f"{PATH} at {what}")


def declared_key(lake: Lake, repo: str, sides: tuple[str, str], path: str) -> tuple[str, ...]:
    """The key declared for the table at ``path``: at the right side of a diff, else at its
    left side (a table both sides declare takes the right side's)."""
    for ref in (sides[1], sides[0]):
        try:
            key = key_for(at_ref(lake, repo, ref), path)
        except NotFound:  # a ref that does not exist is the diff's own error to give
            continue
        if key:
            return key
    return ()
