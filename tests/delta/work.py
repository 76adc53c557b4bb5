"""A Delta table written on a branch as a job writes it: checked out into a directory, changed
there by ``deltalake`` (appends, deletes, schema changes, compactions, checkpoints, vacuums), and
the directory's changes uploaded back (new files, rewritten ones, files a vacuum deleted)."""

from __future__ import annotations

import json
import struct
import uuid
import zlib
from pathlib import Path
from typing import Any

import lakectl


def checkout(branch: lakectl.Branch, root: str, into: Path) -> Path:
    """The objects under ``root`` (``tables/orders/``) at ``branch``, as files under ``into``."""
    into.mkdir(parents=True, exist_ok=True)
    for obj in branch.objects(prefix=root):
        target = into / obj.path[len(root) :]
        target.parent.mkdir(parents=True, exist_ok=True)
        with branch.object(obj.path).reader() as f:
            target.write_bytes(f.read())
    return into


def push(branch: lakectl.Branch, root: str, directory: Path, message: str) -> Any:
    """The directory's differences from the branch under ``root`` uploaded, and committed."""
    there = {o.path: o.size_bytes for o in branch.objects(prefix=root)}
    here = {f"{root}{p.relative_to(directory).as_posix()}": p for p in directory.rglob("*") if p.is_file()}
    for path, file in sorted(here.items()):
        data = file.read_bytes()
        if path not in there or there[path] != len(data) or path.endswith("_last_checkpoint"):
            branch.object(path).upload(data)
    for path in sorted(set(there) - set(here)):
        branch.object(path).delete()
    return branch.commit(message)


def rows(directory: Path) -> list[dict[str, Any]]:
    """The table's rows by ``deltalake``, sorted by ``id``."""
    from deltalake import DeltaTable

    table = DeltaTable(str(directory)).to_pyarrow_table()
    return sorted(table.to_pylist(), key=lambda r: r["id"])


def operations(directory: Path) -> list[str]:
    """The table's history, oldest first, as its operations."""
    from deltalake import DeltaTable

    return [h["operation"] for h in reversed(DeltaTable(str(directory)).history())]


def checkout_backend(backend: Any, repo: str, branch: str, root: str, into: Path) -> Path:
    """:func:`checkout` through a Backend."""
    for obj in backend.list_objects(repo, branch, root):
        target = into / obj.path[len(root) :]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"".join(backend.read(repo, branch, obj.path)))
    return into


def push_backend(backend: Any, repo: str, branch: str, root: str, directory: Path, message: str) -> None:
    """:func:`push` through a Backend: the files new or changed (by size) uploaded, committed."""
    there = {o.path: o.entry.size for o in backend.list_objects(repo, branch, root)}
    for file in sorted(directory.rglob("*")):
        path = f"{root}{file.relative_to(directory).as_posix()}"
        if file.is_file() and there.get(path) != file.stat().st_size:
            backend.upload(repo, branch, path, file.read_bytes())
    backend.commit(repo, branch, message)


_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def _z85(data: bytes) -> str:
    out = []
    for i in range(0, len(data), 4):
        n = int.from_bytes(data[i : i + 4], "big")
        chunk = []
        for _ in range(5):
            n, r = divmod(n, 85)
            chunk.append(_Z85[r])
        out += reversed(chunk)
    return "".join(out)


def delete_with_vector(directory: Path, rows: list[int], operation: str = "DELETE") -> None:
    """Delete rows (by position) of the table's one active file as Spark's Delta writer does with
    deletion vectors on (``deltalake`` writes none): a ``deletion_vector_<uuid>.bin`` beside the
    data, holding the rows in a 64-bit roaring bitmap, and a version that re-adds the file with it
    (the Delta protocol's formats, written out here)."""
    from deltalake import DeltaTable

    table = DeltaTable(str(directory))
    version = table.version() + 1
    log = directory / "_delta_log"
    adds: dict[str, dict[str, Any]] = {}
    for n in range(version):
        for line in (log / f"{n:020d}.json").read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                adds[action["add"]["path"]] = action["add"]
            if "remove" in action:
                adds.pop(action["remove"]["path"], None)
    ((path, add),) = adds.items()
    values = sorted(rows)
    container = struct.pack("<II", 12346, 1) + struct.pack("<HH", 0, len(values) - 1) + struct.pack("<I", 20)
    bitmap = (
        struct.pack("<Q", 1)
        + struct.pack("<I", 0)
        + container
        + b"".join(struct.pack("<H", v) for v in values)
    )
    data = struct.pack("<I", 1681511377) + bitmap
    name = uuid.uuid4()
    stored = b"\x01" + struct.pack(">I", len(data)) + data + struct.pack(">I", zlib.crc32(data))
    (directory / f"deletion_vector_{name}.bin").write_bytes(stored)
    vector = {"storageType": "u", "pathOrInlineDv": _z85(name.bytes), "offset": 1, "sizeInBytes": len(data)}
    actions = [
        {"commitInfo": {"timestamp": 1_800_000_000_000, "operation": operation, "readVersion": version - 1}},
        {
            "remove": {
                "path": path,
                "dataChange": True,
                "deletionTimestamp": 1_800_000_000_000,
                "size": add["size"],
                # a file is keyed by its path and its vector: the remove names the one it replaces
                **({"deletionVector": add["deletionVector"]} if add.get("deletionVector") else {}),
            }
        },
        {"add": {**add, "deletionVector": {**vector, "cardinality": len(values)}}},
    ]
    (log / f"{version:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
