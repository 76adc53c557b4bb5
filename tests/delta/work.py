"""A Delta table written on a branch as a job writes it: checked out into a directory, changed
there by ``deltalake`` (appends, deletes, schema changes, compactions, checkpoints, vacuums), and
the directory's changes uploaded back (new files, rewritten ones, files a vacuum deleted)."""

from __future__ import annotations

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
