"""What every import source keeps to: the Source protocol, the record its listing yields, the
chunk its reads are cut in, and the error a changed source raises.

Below :mod:`~lakectl.core.importing.sources` (which parses URIs and holds the local sources) and
:mod:`~lakectl.core.importing.s3` (the S3 source), so that neither imports the other for these.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from lakectl.core.model import External
from lakectl.errors import SourceChanged

CHUNK = 1024 * 1024
"""Bytes read from a source per chunk."""

Listed = tuple[str, int, External, int]
"""One object of a source: its key relative to the source prefix, its size, its address+guard,
its modification time (seconds)."""


class Source(Protocol):
    """Where imported objects come from."""

    @property
    def uri(self) -> str: ...

    def list(self) -> Iterator[Listed]:
        """Every object under the source, by relative key in code-point order."""
        ...


def changed(ext: External, why: str) -> SourceChanged:
    """``SourceChanged`` for an imported object whose source no longer holds the recorded
    version (``why``: what was found instead)."""
    return SourceChanged(
        f"the source of this imported object changed or vanished ({why}): {ext.address}; "
        "import it again to see its new version",
        address=ext.address,
    )
