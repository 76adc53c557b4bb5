"""An object's content type guessed from its name, for uploads that do not say one.

One place for the guess, so that every surface which wants it (the CLI's uploads, local and
remote, today) gives one object the same type. It is a guess from the last suffix of the name
alone, never from the bytes: Python's built-in table (:mod:`mimetypes` without this machine's
``/etc/mime.types``, so that one file gets one type whichever host uploads it) under a small
table of the formats of data lakes that Python lacks. A compressed file is typed by its
compression (``a.csv.gz`` is ``application/gzip``, not ``text/csv``): its bytes are gzip, and a
browser shown ``text/csv`` would display them as text. A name the tables do not know is
``application/octet-stream``, as before the guess.

What a client sends (``--content-type``, an S3 or REST ``Content-Type``) is recorded as sent:
the guess is for the uploads that send none, and only where the caller asks for it.
"""

from __future__ import annotations

import functools
import mimetypes
from typing import Final

from lakectl.core.limits import DEFAULT_CONTENT_TYPE

LAKE_TYPES: Final = {
    ".parquet": "application/vnd.apache.parquet",  # IANA, 2024
    ".avro": "application/avro",
    ".orc": "application/x-orc",  # no registered type
    ".arrow": "application/vnd.apache.arrow.file",  # IANA
    ".feather": "application/vnd.apache.arrow.file",  # Feather v2 is the Arrow IPC file
    ".jsonl": "application/x-ndjson",
    ".ndjson": "application/x-ndjson",
    ".csv": "text/csv",
    ".tsv": "text/tab-separated-values",
    ".json": "application/json",
    ".geojson": "application/geo+json",
    ".yaml": "application/yaml",  # RFC 9512
    ".yml": "application/yaml",
    ".md": "text/markdown",
    ".gz": "application/gzip",
    ".bz2": "application/x-bzip2",
    ".xz": "application/x-xz",
    ".zst": "application/zstd",
}
"""Suffixes (lowercase) whose type this table fixes, before Python's table is asked."""


@functools.cache
def _python_types() -> dict[str, str]:
    """Python's built-in suffix table, strict types over the common non-standard ones."""
    table = mimetypes.MimeTypes(filenames=())
    return {**table.types_map[False], **table.types_map[True]}


def guess_content_type(path: str) -> str:
    """The content type of an object named ``path`` (a lake path or a local file name), from
    the last suffix of its last segment, in any case: ``data/2024.CSV`` is ``text/csv``; a name
    without a known suffix is ``application/octet-stream``."""
    # As posixpath.splitext, at a third of its cost (it is asked once per file of an upload):
    # the leading dots of a name (``.bashrc``) start no suffix.
    name = path[path.rfind("/") + 1 :].lstrip(".")
    dot = name.rfind(".")
    if dot < 0:
        return DEFAULT_CONTENT_TYPE
    suffix = name[dot:].lower()
    return LAKE_TYPES.get(suffix) or _python_types().get(suffix) or DEFAULT_CONTENT_TYPE
