"""Delta Lake transaction logs as a merge sees them: the log's file names, a version's actions, the
conflicts between two lines of versions written since a common one, and the replay of one line
after the other under new version numbers.

A Delta table is a prefix whose ``_delta_log/`` holds one JSON file per version
(``00000000000000000007.json``: newline-delimited actions, ``commitInfo``, ``add``, ``remove``,
``metaData``, ``protocol``, ``txn``, ``domainMetadata``), checkpoints of the state at some versions,
and ``_last_checkpoint``. Data files are named uniquely by their writers, so two branches that
both wrote a table differ in the log alone: both wrote the versions after their common one under
the same numbers. This module decides, as Delta's optimistic concurrency decides between two
writers, whether the second line of versions can follow the first (:func:`conflicts`), and writes
it after the first (:func:`replay`): the actions as they were, the commit info told its new
version. Reading a table's state (its active files, its schema) is ``deltalake``'s work
(:mod:`lakectl.core.tables.delta`); this module reads and rewrites the versions' JSON only. No I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

LOG = "_delta_log/"
LAST_CHECKPOINT = "_last_checkpoint"
NOTE = "lakectl_delta_replayed"
"""The merge commit's metadata key naming the Delta versions a merge replayed, per table."""
REPLAY = "lakectlReplay"
"""The key a replayed version's ``commitInfo`` names its version on the source side under."""

_VERSION = re.compile(r"^(\d{20})\.json$")


def table_root(path: str) -> str | None:
    """The prefix of the Delta table whose log holds ``path`` ("" for a table at the root, with a
    trailing ``/`` otherwise), or None when ``path`` is not in a ``_delta_log/`` directory."""
    if path.startswith(LOG):
        return ""
    root, found, _ = path.partition("/" + LOG)
    return root + "/" if found else None


def log_prefix(root: str) -> str:
    return f"{root}{LOG}"


def version_path(root: str, version: int) -> str:
    return f"{root}{LOG}{version:020d}.json"


def version_of(path: str) -> int | None:
    """The version a log file is the commit of (``…/_delta_log/00000000000000000012.json``), or
    None for a checkpoint, ``_last_checkpoint`` or any other file of the log."""
    found = _VERSION.match(path.rpartition("/")[2])
    return int(found.group(1)) if found and table_root(path) is not None else None


def checkpoint_version(path: str) -> int | None:
    """The version a checkpoint file holds the state of (classic, multi-part or V2), or None."""
    name = path.rpartition("/")[2]
    head, _, rest = name.partition(".")
    if table_root(path) is None or not rest.startswith("checkpoint.") or not head.isdigit():
        return None
    return int(head)


@dataclass(frozen=True)
class Version:
    """One version of a table's log: its number and its bytes as written, read into actions when
    asked (a merge of appends reads few of them: each question first looks for its action's
    name in the bytes)."""

    number: int
    raw: bytes
    where: str = ""

    @classmethod
    def parse(cls, number: int, data: bytes, where: str) -> Version:
        return cls(number, data, where)

    @cached_property
    def actions(self) -> tuple[dict[str, Any], ...]:
        """The version's actions; ``InvalidArgument`` when a line is no JSON object."""
        return tuple(_action(line, self.where) for line in self.raw.splitlines() if line.strip())

    def mentions(self, name: str) -> bool:
        return f'"{name}"'.encode() in self.raw

    def of(self, kind: str) -> list[dict[str, Any]]:
        if not self.mentions(kind):
            return []
        return [a[kind] for a in self.actions if isinstance(a.get(kind), dict)]

    @property
    def info(self) -> dict[str, Any]:
        found = self.of("commitInfo")
        return found[0] if found else {}

    @property
    def operation(self) -> str:
        return str(self.info.get("operation") or "UNKNOWN")

    @property
    def added(self) -> list[str]:
        return [str(a.get("path")) for a in self.of("add")]

    @property
    def removed(self) -> list[str]:
        return [str(a.get("path")) for a in self.of("remove")]

    def summary(self) -> dict[str, Any]:
        """What a diff shows of the version: its number, operation, time and files."""
        return {
            "version": self.number,
            "operation": self.operation,
            "timestamp": self.info.get("timestamp"),
            "files_added": len(self.added),
            "files_removed": len(self.removed),
        }


def _action(line: bytes, where: str) -> dict[str, Any]:
    from lakectl.errors import InvalidArgument

    try:
        action = json.loads(line)
    except ValueError as e:
        raise InvalidArgument(f"{where} is not a Delta log version: {e}", path=where) from e
    if not isinstance(action, dict):
        raise InvalidArgument(f"{where} is not a Delta log version: a line is no action", path=where)
    return action


@dataclass
class Line:
    """The versions one side wrote since the common version, and what they changed together."""

    versions: list[Version] = field(default_factory=list)

    def removed(self) -> dict[str, int]:
        """Each file a version removed (a rewrite, a delete, a compaction, a deletion vector
        added), with the first version that removed it."""
        out: dict[str, int] = {}
        for v in self.versions:
            for path in v.removed:
                out.setdefault(path, v.number)
        return out

    def last(self, kind: str) -> dict[str, Any] | None:
        found = [a for v in self.versions for a in v.of(kind)]
        return found[-1] if found else None

    def keyed(self, kind: str, key: str) -> dict[str, dict[str, Any]]:
        return {str(a.get(key)): a for v in self.versions for a in v.of(kind)}

    def writes_data(self) -> bool:
        return any(a.get("dataChange", True) for v in self.versions for a in v.of("add"))


def conflicts(source: Line, dest: Line, base_meta: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Why ``source``'s versions cannot follow ``dest``'s, as Delta's optimistic concurrency
    would refuse a writer that read the common version after another writer committed ``dest``:
    a file both removed (both rewrote, deleted from or compacted it), the table's metadata,
    protocol, an application's transaction or a domain changed by both differently, or a schema
    change on one side that the other side's new files cannot be read under (a column retyped,
    a required column added, the partitioning changed). Each as data: its type, the file or
    field, and the versions on each side. ``base_meta`` is the common version's ``metaData``
    action; None when unknown."""
    found: list[dict[str, Any]] = []
    theirs = dest.removed()
    for path, number in sorted(source.removed().items()):
        if path in theirs:
            both = {"source_version": number, "dest_version": theirs[path]}
            found.append({"type": "removed-on-both", "path": path, **both})
    for kind in ("metaData", "protocol"):
        mine, other = source.last(kind), dest.last(kind)
        if mine is not None and other is not None and _comparable(mine) != _comparable(other):
            found.append({"type": f"{kind}-changed-on-both"})
    for kind, key in (("txn", "appId"), ("domainMetadata", "domain")):
        mine_k, other_k = source.keyed(kind, key), dest.keyed(kind, key)
        for name in sorted(set(mine_k) & set(other_k)):
            if mine_k[name] != other_k[name] or kind == "txn":
                found.append({"type": f"{kind}-on-both", key: name})
    for changer, writer, side in ((source, dest, "source"), (dest, source, "dest")):
        meta = changer.last("metaData")
        if meta is not None and writer.writes_data() and base_meta is not None:
            found += [{**c, "changed_on": side} for c in _incompatible(base_meta, meta)]
    return found


def _comparable(action: Mapping[str, Any]) -> dict[str, Any]:
    """A metaData or protocol action without what every writer sets anew (its creation time)."""
    return {k: v for k, v in action.items() if k != "createdTime"}


def schema_of(meta: Mapping[str, Any]) -> dict[str, Any]:
    text = meta.get("schemaString") or "{}"
    try:
        loaded = json.loads(text)
    except ValueError:
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _incompatible(base_meta: Mapping[str, Any], meta: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The changes ``meta`` makes to the common metadata that files written under it cannot be
    read under: a field retyped, a required field added, the partition columns changed. A
    nullable field added or a field dropped reads fine (as nulls, or ignored)."""
    old = {str(f.get("name")): f for f in schema_of(base_meta).get("fields", []) if isinstance(f, dict)}
    out = []
    for f in schema_of(meta).get("fields", []):
        if not isinstance(f, dict):
            continue
        name = str(f.get("name"))
        before = old.get(name)
        if before is not None and before.get("type") != f.get("type"):
            out.append({"type": "schema-incompatible", "field": name, "reason": "retyped"})
        elif before is None and not f.get("nullable", True):
            out.append({"type": "schema-incompatible", "field": name, "reason": "required field added"})
    if list(base_meta.get("partitionColumns") or []) != list(meta.get("partitionColumns") or []):
        out.append({"type": "schema-incompatible", "field": "", "reason": "partition columns changed"})
    return out


def replay(
    versions: Sequence[Version], after: int, last_timestamp: int | None, about: Mapping[str, str]
) -> list[tuple[int, bytes]]:
    """``versions`` (one side's, since the common version) written as the versions after
    ``after``, in order: each one's actions as they were, its commit info told its new version
    (``readVersion``), where it came from (:data:`REPLAY`: ``about`` and its version there), and,
    where the table keeps in-commit timestamps, a timestamp after the one before it
    (``last_timestamp``)."""
    out = []
    previous = last_timestamp
    for offset, v in enumerate(versions, start=1):
        number = after + offset
        lines = []
        for line in v.raw.splitlines():
            if not line.strip():
                continue
            if b'"commitInfo"' not in line[:16]:
                lines.append(line)  # every other action byte for byte
                continue
            info = dict(_action(line, v.where)["commitInfo"])
            if "readVersion" in info:
                info["readVersion"] = number - 1
            if isinstance(info.get("inCommitTimestamp"), int):
                stamp = int(info["inCommitTimestamp"])
                info["inCommitTimestamp"] = stamp if previous is None else max(stamp, previous + 1)
                previous = info["inCommitTimestamp"]
            info[REPLAY] = {**about, "version": v.number}
            lines.append(json.dumps({"commitInfo": info}, separators=(",", ":")).encode())
        out.append((number, b"\n".join(lines) + b"\n"))
    return out


def in_commit_timestamp(version: Version | None) -> int | None:
    stamp = version.info.get("inCommitTimestamp") if version is not None else None
    return stamp if isinstance(stamp, int) else None


def note(replayed: Iterable[tuple[str, int, int, int, int]]) -> str:
    """The merge commit's note (:data:`NOTE`): per table, the source's first and last versions
    replayed and the versions they became (``tables/orders/:3-5>9-11``)."""
    return ",".join(f"{r or '/'}:{first}-{last}>{at}-{end}" for r, first, last, at, end in replayed)
