"""Which files of the host a lake may read for imported objects: a :class:`Confinement` a server
builds from its settings, checked on resolved paths and on the files it opens.

An embedded lake has none (``Lake.confinement`` is ``None``): its user imports files they own.
A server's users do not own its host, so a local source must lie under one of the prefixes the
operator allows (``blockstore.local.allowed_external_prefixes``, none by default), and never
under, or around, the server's own files (its data directory, block volumes, metadata
database, configuration), whatever that list says. Paths are compared once resolved
(``os.path.realpath``), so neither ``..`` nor a symbolic link crosses the line; a file is
checked again once opened (the path of the open descriptor, without following a link at its
last component), so a file swapped for a link after the check reads nothing outside either.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from lakectl.errors import Forbidden

SETTING = "blockstore.local.allowed_external_prefixes"
"""The server setting that lists the allowed prefixes (named in refusals)."""

_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
"""A link at the last component is not followed (ELOOP), and a FIFO swapped in does not block."""


def _under(path: str, root: str) -> bool:
    """Whether resolved ``path`` is ``root`` or lies inside it."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


@dataclass(frozen=True, slots=True)
class Confinement:
    """The host paths a server may read imported objects from."""

    allowed: tuple[str, ...] = ()
    """Resolved directories under which a local source may lie; empty: no local source at all."""
    forbidden: tuple[str, ...] = ()
    """Resolved paths never read (nor a source holding one), whatever ``allowed`` says."""
    stores: tuple[tuple[str, str], ...] = ()
    """``(bucket, key prefix)`` of the lake's own blocks on S3: never imported either."""

    @staticmethod
    def of(
        allowed: Iterable[str], forbidden: Iterable[str], stores: Iterable[tuple[str, str]] = ()
    ) -> Confinement:
        """A confinement of the given paths, resolved now (they need not exist)."""
        real = (os.path.realpath(os.path.abspath(os.path.expanduser(p))) for p in forbidden)
        return Confinement(
            tuple(os.path.realpath(os.path.abspath(os.path.expanduser(p))) for p in allowed),
            tuple(real),
            tuple(stores),
        )

    def check_object_store(self, bucket: str, key: str, what: str) -> None:
        """``Forbidden`` when the S3 prefix or key ``key`` of ``bucket`` may list or name one of
        the lake's own blocks: S3 prefixes are lexical, so ``lake/b`` lists ``lake/blocks/...``."""
        for store_bucket, store_prefix in self.stores:
            if bucket == store_bucket and (key.startswith(store_prefix) or store_prefix.startswith(key)):
                raise Forbidden(
                    f"{what} may not be read by this server: it holds the lake's own blocks "
                    f"(s3://{store_bucket}/{store_prefix}), which are never imported",
                    path=f"s3://{bucket}/{key}",
                )

    def refusal(self, real: str, tree: bool = False) -> str | None:
        """Why resolved ``real`` may not be read (``None``: it may). With ``tree``, ``real`` is a
        directory read whole: one holding a forbidden path is refused too."""
        for root in self.forbidden:
            if _under(real, root) or (tree and _under(root, real)):
                return (
                    "it is, or holds, the server's own files (its data directory, block store, "
                    "metadata database or configuration), which are never imported"
                )
        if not any(_under(real, prefix) for prefix in self.allowed):
            allowed = ", ".join(self.allowed) if self.allowed else "none are set"
            return f"it is outside the prefixes this server may import from ({SETTING}: {allowed})"
        return None

    def check(self, path: str, what: str, tree: bool = False) -> str:
        """The resolved ``path`` of a source (``what`` names it in the refusal) that may be read;
        else ``Forbidden``. Checked before the path is looked at, so a refusal tells nothing of
        whether it exists."""
        real = os.path.realpath(path)
        why = self.refusal(real, tree)
        if why is not None:
            raise Forbidden(f"{what} may not be read by this server: {why}", path=path)
        return real

    def open(self, path: str) -> int:
        """A descriptor of ``path`` opened for reading, whose opened file lies where it may be
        read; ``Forbidden`` otherwise. A symbolic link at the last component is not followed
        (``OSError`` ELOOP, as every other failure to open, is the caller's to translate)."""
        fd = os.open(path, _OPEN_FLAGS)
        try:
            real = _opened_path(fd, path)
            why = self.refusal(real) if real is not None else "it changed while it was opened"
            if why is not None:
                raise Forbidden(f"{path} may not be read by this server: {why}", path=path)
        except BaseException:
            os.close(fd)
            raise
        return fd


def _opened_path(fd: int, path: str) -> str | None:
    """The resolved path of the file open as ``fd``: its ``/proc/self/fd`` link where there is one;
    else ``path`` resolved, when it still names that same file (``None`` when it does not)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        pass
    real = os.path.realpath(path)
    try:
        now, opened = os.stat(real), os.fstat(fd)
    except OSError:
        return None
    return real if (now.st_dev, now.st_ino) == (opened.st_dev, opened.st_ino) else None
