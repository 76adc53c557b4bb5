"""Where a table is read (:class:`Tree`: a commit's tree, or a branch's staging area over it),
and a read-only pyarrow filesystem over such a tree under a prefix: what a Delta table's snapshot
(``deltalake``'s dataset of its active files) reads its data files through. A file opens as a
seekable file over the object's blocks (:class:`lakectl.core.objectfile.ObjectFile`): a Parquet
reader reads the footer, then the column chunks it needs, never the whole object.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from lakectl.core.lake import Lake
from lakectl.core.model import Entry, Row
from lakectl.core.objectfile import ObjectFile


@dataclass(frozen=True)
class Tree:
    """Where a table is read: a commit's tree, or a branch's staging area over its commit."""

    lookup: Callable[[str], Row | None]
    iter: Callable[[str, str], Iterator[tuple[str, Row]]]
    """Rows from a start key, under a prefix."""


class TreeHandler(pafs.FileSystemHandler):  # type: ignore[misc]
    """The objects of ``tree`` under ``prefix``, by their paths after it."""

    def __init__(self, lake: Lake, tree: Tree, prefix: str) -> None:
        self._lake, self._tree, self._prefix = lake, tree, prefix

    def get_type_name(self) -> str:
        return "lakectl-tree"

    def normalize_path(self, path: str) -> str:
        return path.lstrip("/")

    def equals(self, other: Any) -> bool:
        return other is self

    def _info(self, path: str) -> pafs.FileInfo:
        path = path.lstrip("/")
        row = self._tree.lookup(self._prefix + path)
        if row is not None:
            entry = Entry.from_row(row)
            return pafs.FileInfo(path, pafs.FileType.File, size=entry.size)
        under = f"{self._prefix}{path.rstrip('/')}/" if path else self._prefix
        if next(iter(self._tree.iter(under, under)), None) is not None:
            return pafs.FileInfo(path, pafs.FileType.Directory)
        return pafs.FileInfo(path, pafs.FileType.NotFound)

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return [self._info(p) for p in paths]

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        base = selector.base_dir.strip("/")
        under = f"{self._prefix}{base}/" if base else self._prefix
        found: list[pafs.FileInfo] = []
        dirs: set[str] = set()
        for path, row in self._tree.iter(under, under):
            rest = path[len(under) :]
            if "/" in rest and not selector.recursive:
                name = f"{base}/{rest.partition('/')[0]}".lstrip("/")
                if name not in dirs:
                    dirs.add(name)
                    found.append(pafs.FileInfo(name, pafs.FileType.Directory))
                continue
            size = Entry.from_row(row).size
            found.append(pafs.FileInfo(path[len(self._prefix) :], pafs.FileType.File, size=size))
        return found

    def open_input_file(self, path: str) -> pa.NativeFile:
        row = self._tree.lookup(self._prefix + path.lstrip("/"))
        if row is None:
            raise FileNotFoundError(f"{self._prefix}{path}")
        return pa.PythonFile(ObjectFile(self._lake, Entry.from_row(row)), mode="r")

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return self.open_input_file(path)

    def _read_only(self, *_: Any, **__: Any) -> Any:
        raise OSError("a tree of the lake is read-only here")

    create_dir = delete_dir = delete_dir_contents = delete_root_dir_contents = _read_only
    delete_file = move = copy_file = open_output_stream = open_append_stream = _read_only


def filesystem(lake: Lake, tree: Tree, prefix: str) -> pafs.FileSystem:
    """The objects of ``tree`` under ``prefix`` as a read-only pyarrow filesystem."""
    return pafs.PyFileSystem(TreeHandler(lake, tree, prefix))
