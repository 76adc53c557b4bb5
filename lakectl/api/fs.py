"""An fsspec filesystem over a lake: ``lakectl://<repository>/<ref>/<path>``, embedded or
remote, for pandas, polars, pyarrow and whatever opens files through fsspec.

It is registered as the ``lakectl`` protocol by the ``fsspec.specs`` entry point. The ``lakefs``
protocol belongs to lakefs-spec where that is installed; :func:`register` claims it on request,
for scripts that want their ``lakefs://`` URIs to reach this lake (docs/python.md)."""

from __future__ import annotations

import datetime
import tempfile
from typing import Any

from fsspec import AbstractFileSystem
from fsspec.registry import register_implementation
from fsspec.spec import AbstractBufferedFile
from fsspec.transaction import Transaction

from lakectl.api.client import Client
from lakectl.api.references import Branch, Reference
from lakectl.errors import LakectlError, NotFound
from lakectl.exceptions import ObjectNotFoundException, translated

SPOOL_BYTES = 8 << 20
"""What a file being written keeps in memory before it spools to a temporary file."""


class LakectlTransaction(Transaction):  # type: ignore[misc]
    """lakefs-spec's transaction: ``with fs.transaction("repo", "main") as tx:`` makes an
    ephemeral branch (``tx.branch``) from the base branch; files written under it are staged
    there as they close, ``tx.commit(message)`` commits them; leaving the block merges the
    branch into the base (``automerge``) when they differ and deletes it (``delete``:
    ``onsuccess``, ``always`` or ``never``). An exception in the block merges nothing."""

    def __init__(self, fs: LakectlFileSystem, **kwargs: Any) -> None:
        super().__init__(fs, **kwargs)
        self._base: Branch | None = None
        self._ephemeral: Branch | None = None
        self.automerge, self.delete = True, "onsuccess"

    def __call__(
        self,
        repository: str,
        base_branch: str | Branch = "main",
        branch_name: str | None = None,
        automerge: bool = True,
        delete: str = "onsuccess",
    ) -> LakectlTransaction:
        import uuid

        if delete not in ("onsuccess", "always", "never"):
            raise ValueError(f"delete must be onsuccess, always or never, not {delete!r}")
        client = self.fs.client
        base = base_branch.id if isinstance(base_branch, Reference) else base_branch
        self._base = Branch(repository, base, client)
        self._ephemeral = Branch(repository, branch_name or f"transaction-{uuid.uuid4().hex[:12]}", client)
        self.automerge, self.delete = automerge, delete
        return self

    @property
    def branch(self) -> Branch:
        """The ephemeral branch: write under ``<repository>/<tx.branch.id>/``."""
        if self._ephemeral is None:
            raise ValueError(
                "call the transaction with a repository: fs.transaction(repository, base_branch)"
            )
        return self._ephemeral

    def start(self) -> None:
        super().start()
        if self._ephemeral is not None and self._base is not None:
            self._ephemeral.create(self._base.get_commit().id)

    def commit(self, message: str, metadata: dict[str, str] | None = None) -> Reference:
        """Commit what the transaction's branch staged."""
        return self.branch.commit(message, metadata)

    def complete(self, commit: bool = True) -> None:
        super().complete(commit)
        if self._ephemeral is None or self._base is None:
            return
        if (
            commit
            and self.automerge
            and next(self._base.diff(self._ephemeral, max_amount=1), None) is not None
        ):
            self._ephemeral.merge_into(self._base)
        if self.delete == "always" or (commit and self.delete == "onsuccess"):
            self._ephemeral.delete()


class LakectlFileSystem(AbstractFileSystem):  # type: ignore[misc]
    """Objects of a lake as files: ``<repository>/<ref>/<path>``, directories by ``/``.

    Storage options: ``client`` (a :class:`~lakectl.api.client.Client`), else ``host``,
    ``username`` and ``password`` (a server), ``home`` (an embedded lake), or none of them (the
    lake the CLI would use). Files opened ``rb`` read only the ranges asked for; files opened
    ``wb`` stage the object on a branch when closed (spooled to disk past 8 MiB)."""

    protocol = ("lakectl",)
    root_marker = ""
    transaction_type = LakectlTransaction

    def __init__(
        self,
        client: Client | None = None,
        host: str | None = None,
        username: str | None = None,
        password: str | None = None,
        home: str | None = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        if client is None:
            client = Client(host, username, password, home=home)
        self.client = client

    @classmethod
    def _strip_protocol(cls, path: Any) -> str:
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]  # type: ignore[return-value]
        text = str(path)
        for protocol in (*cls.protocol, "lakefs"):
            if text.startswith(f"{protocol}://"):
                text = text[len(protocol) + 3 :]
                break
        return text.rstrip("/")

    @staticmethod
    def split(path: str) -> tuple[str, str, str]:
        """``(repository, ref, key)`` of a stripped path; missing parts are empty."""
        repo, _, rest = path.partition("/")
        ref, _, key = rest.partition("/")
        return repo, ref, key

    # -- reading ----------------------------------------------------------------------------

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        path = self._strip_protocol(path)
        repo, ref, key = self.split(path)
        backend = self.client.backend
        try:
            if not repo:
                found = [self._dir(r.name) for r in backend.list_repos()]
            elif not ref:
                found = [self._dir(f"{repo}/{b.name}") for b in backend.list_branches(repo)]
            else:
                prefix = f"{key}/" if key else ""
                found = [
                    self._entry(repo, ref, info) for info in backend.list_objects(repo, ref, prefix, "/")
                ]
                if not found and key:
                    found = [self.info(path)]  # a file: ls of a file lists the file
        except LakectlError as exc:
            raise _os_error(exc, path) from exc
        return found if detail else [f["name"] for f in found]

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        path = self._strip_protocol(path)
        repo, ref, key = self.split(path)
        if not key:
            return self._dir(path)
        backend = self.client.backend
        try:
            return self._entry(repo, ref, backend.stat(repo, ref, key))
        except NotFound:
            pass
        except LakectlError as exc:
            raise _os_error(exc, path) from exc
        try:
            under = next(iter(backend.list_objects(repo, ref, key + "/", "/", amount=1)), None)
        except LakectlError as exc:
            raise _os_error(exc, path) from exc
        if under is None:
            raise FileNotFoundError(path)
        return self._dir(path)

    def modified(self, path: str) -> datetime.datetime:
        """When the object was written (its ``mtime``), in UTC."""
        info = self.info(path)
        if info["type"] != "file":
            raise IsADirectoryError(path)
        return datetime.datetime.fromtimestamp(info["mtime"], tz=datetime.UTC)

    def cat_file(self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any) -> bytes:
        path = self._strip_protocol(path)
        repo, ref, key = self.split(path)
        size = None
        if (start is not None and start < 0) or (end is not None and end < 0):
            size = self.info(path)["size"]
        first = 0 if start is None else (start if start >= 0 else max(size + start, 0))  # type: ignore[operator]
        last = None if end is None else (end if end >= 0 else max(size + end, 0))  # type: ignore[operator]
        length = None if last is None else max(last - first, 0)
        if length == 0:
            return b""
        try:
            return b"".join(self.client.backend.read(repo, ref, key, offset=first, length=length))
        except LakectlError as exc:
            raise _os_error(exc, path) from exc

    def _open(self, path: str, mode: str = "rb", block_size: int | None = None, **kwargs: Any) -> Any:
        path = self._strip_protocol(path)
        # Staged on close, in a transaction too: the transaction is its branch, and what it
        # stages is committed by the transaction's commit (lakefs-spec's model).
        kwargs["autocommit"] = True
        return LakectlFile(self, path, mode, block_size or "default", **kwargs)

    # -- writing ----------------------------------------------------------------------------

    def _rm(self, path: str) -> None:
        repo, ref, key = self.split(self._strip_protocol(path))
        try:
            self.client.backend.delete_objects(repo, ref, [key])
        except LakectlError as exc:
            raise _os_error(exc, path) from exc

    def rm(self, path: Any, recursive: bool = False, maxdepth: int | None = None) -> None:
        for each in [path] if isinstance(path, str) else path:
            stripped = self._strip_protocol(each)
            if recursive and self.isdir(stripped):
                repo, ref, key = self.split(stripped)
                self.client.backend.delete_prefix(repo, ref, key + "/")
            else:
                self._rm(stripped)

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        """Nothing to do: a directory is the prefix of the objects under it."""

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        """Nothing to do, as for :meth:`mkdir`."""

    # -- records ----------------------------------------------------------------------------

    @staticmethod
    def _dir(name: str) -> dict[str, Any]:
        return {"name": name, "size": 0, "type": "directory"}

    @staticmethod
    def _entry(repo: str, ref: str, info: Any) -> dict[str, Any]:
        name = f"{repo}/{ref}/{info.path}".rstrip("/")
        if info.entry is None:
            return {"name": name, "size": 0, "type": "directory"}
        e = info.entry
        return {
            "name": name,
            "size": e.size,
            "type": "file",
            "checksum": e.checksum,
            "content_type": e.content_type,
            "mtime": e.mtime,
            "metadata": dict(e.metadata),
        }


class LakectlFile(AbstractBufferedFile):  # type: ignore[misc]
    """A file of a :class:`LakectlFileSystem`: read by ranges, or written to a spool and staged
    as the object on close (or, in an fsspec transaction, on its commit)."""

    def _fetch_range(self, start: int, end: int) -> bytes:
        return self.fs.cat_file(self.path, start, end)  # type: ignore[no-any-return]

    def _initiate_upload(self) -> None:
        self._spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115 - closed by commit/discard

    def _upload_chunk(self, final: bool = False) -> bool:
        self._spool.write(self.buffer.getvalue())
        if final and self.autocommit:
            self.commit()
        return True

    def commit(self) -> None:
        if self._spool.closed:  # staged on close already (a transaction commits it again)
            return
        repo, ref, key = self.fs.split(self.path)
        self._spool.seek(0)
        try:
            self.fs.client.backend.upload(repo, ref, key, self._spool)
        except LakectlError as exc:
            raise _os_error(exc, self.path) from exc
        finally:
            self._spool.close()

    def discard(self) -> None:
        spool = getattr(self, "_spool", None)
        if spool is not None:
            spool.close()


def _os_error(exc: LakectlError, path: str) -> Exception:
    """What a filesystem raises: ``FileNotFoundError`` for what is missing (lakeFS's
    ``ObjectNotFoundException`` is one), else the API's exception."""
    api = translated(exc)
    if isinstance(api, ObjectNotFoundException) or isinstance(exc, NotFound):
        return FileNotFoundError(2, str(exc), path)
    return api


def register(protocol: str = "lakefs", clobber: bool = True) -> None:
    """Make ``protocol://`` URIs (``lakefs://`` by default) open through this filesystem too,
    over lakefs-spec's where it is installed (``clobber``)."""
    register_implementation(protocol, LakectlFileSystem, clobber=clobber)
