"""Previews on an object's page, each reading only what it shows: text, CSV and TSV (the first rows
of a ranged read), JSON (pretty-printed when small) and JSON Lines, images (shown from the UI's own
download route; never SVG, which can carry script), and Parquet (its footer and the first rows of
its first row group, read by ranges through the block layer).

A malformed object (bad CSV, JSON or Parquet) or one whose blocks cannot be read is a preview
that says why it is not shown, never an error page: the rest of the object's page still holds.
"""

from __future__ import annotations

import codecs
import csv
import enum
import io
import json
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lakectl.core import objectfile
from lakectl.core import porcelain as p
from lakectl.core.lake import Lake
from lakectl.core.reads import ObjectRead
from lakectl.errors import LakectlError
from server.ui.render import basename, size

TEXT_BYTES = 64 * 1024
"""Objects up to this size that are UTF-8 text are shown whole."""
TABLE_BYTES = 256 * 1024
"""What a CSV, TSV or JSON Lines preview reads from the start of the object, at most."""
TABLE_ROWS = 50
"""Rows of a CSV or TSV, lines of JSON Lines, shown at most."""
JSON_BYTES = 1024 * 1024
"""JSON objects up to this size are parsed and pretty-printed; larger ones shown raw, cut."""
RAW_JSON_BYTES = 64 * 1024
IMAGE_BYTES = 20 * 1024 * 1024
"""Images up to this size are shown (the browser fetches them whole)."""
PARQUET_ROWS = 20
"""Rows of a Parquet file's first row group shown."""
MAX_COLUMNS = 50
"""Columns of a table shown at most."""
MAX_CELL = 200
"""Characters of one cell shown at most."""
MAX_SCHEMA = 500
"""Columns of a Parquet schema listed at most."""


class Kind(enum.Enum):
    """How an object is previewed."""

    TEXT = "text"
    CSV = "csv"
    TSV = "tsv"
    JSON = "json"
    JSON_LINES = "jsonl"
    IMAGE = "image"
    PARQUET = "parquet"


IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
"""The images shown inline, by extension; SVG is not one of them (it can carry script)."""
_BY_TYPE = {
    "text/csv": Kind.CSV,
    "application/csv": Kind.CSV,
    "text/tab-separated-values": Kind.TSV,
    "application/json": Kind.JSON,
    "application/x-ndjson": Kind.JSON_LINES,
    "application/jsonl": Kind.JSON_LINES,
    "application/x-jsonlines": Kind.JSON_LINES,
    "application/vnd.apache.parquet": Kind.PARQUET,
    "application/x-parquet": Kind.PARQUET,
    **{media: Kind.IMAGE for media in IMAGE_TYPES.values()},
}
_BY_EXTENSION = {
    ".csv": Kind.CSV,
    ".tsv": Kind.TSV,
    ".json": Kind.JSON,
    ".jsonl": Kind.JSON_LINES,
    ".ndjson": Kind.JSON_LINES,
    ".parquet": Kind.PARQUET,
    ".svg": Kind.TEXT,  # whatever type it was stored with
    **{ext: Kind.IMAGE for ext in IMAGE_TYPES},
}


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: str
    nullable: bool


@dataclass(frozen=True, slots=True)
class Preview:
    """What the page shows of an object: ``text`` (TEXT, JSON, JSON_LINES), ``header`` and
    ``rows`` (CSV, TSV, PARQUET; a None cell is a null), ``columns`` and ``facts`` (PARQUET);
    ``note`` says what was left out; ``problem`` why nothing is shown (then ``kind`` is None)."""

    kind: Kind | None
    text: str = ""
    header: tuple[str, ...] = ()
    rows: tuple[tuple[str | None, ...], ...] = ()
    columns: tuple[Column, ...] = ()
    facts: tuple[tuple[str, str], ...] = ()
    note: str = ""
    problem: str = ""


class CannotPreview(Exception):
    """The object is not what its name or type says (malformed), or cannot be read."""


def _media(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def _extension(path: str) -> str:
    name = basename(path).lower()
    return name[name.rfind(".") :] if "." in name else ""


def kind_of(path: str, content_type: str) -> Kind:
    """By the extension when it is one we know (stored content types are often generic, as
    S3 clients' ``binary/octet-stream``), else by the content type, else TEXT."""
    by_extension = _BY_EXTENSION.get(_extension(path))
    if by_extension is not None:
        return by_extension
    media = _media(content_type)
    if media in _BY_TYPE:
        return _BY_TYPE[media]
    if media.endswith("+json"):
        return Kind.JSON
    return Kind.TEXT  # SVG (image/svg+xml) among them: its escaped text, never an image


def image_type(path: str, content_type: str) -> str | None:
    """The content type an image is sent with when shown inline: one of :data:`IMAGE_TYPES`,
    never the stored type as such (a stored ``text/html`` must not render in the UI's origin)."""
    if kind_of(path, content_type) is not Kind.IMAGE:
        return None
    media = _media(content_type)
    return media if media in IMAGE_TYPES.values() else IMAGE_TYPES[_extension(path)]


def preview(lake: Lake, found: ObjectRead) -> Preview:
    """The preview of the object :func:`porcelain.open_object` found."""
    kind = kind_of(found.path, found.entry.content_type)
    try:
        return _PREVIEWS[kind](lake, found)
    except CannotPreview as e:
        return Preview(None, problem=f"Cannot preview: {e}")
    except LakectlError as e:
        return Preview(None, problem=f"Cannot preview: {e.message}")


def _head(lake: Lake, found: ObjectRead, limit: int) -> tuple[bytes, bool]:
    """The first ``limit`` bytes at most (one ranged read), and whether that is not all."""
    data = b"".join(p.read_opened(lake, found, 0, limit))
    return data, found.entry.size > len(data)


def _decode(data: bytes, cut: bool) -> str:
    """UTF-8 text (a BOM dropped); when ``cut``, a character split at the end is left out."""
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    try:
        return decoder.decode(data, final=not cut)
    except UnicodeDecodeError:
        raise CannotPreview("not UTF-8 text") from None


def _text(lake: Lake, found: ObjectRead) -> Preview:
    if found.entry.size > TEXT_BYTES:
        return Preview(None, problem=f"Not shown: larger than {TEXT_BYTES // 1024} KiB.")
    data, _ = _head(lake, found, TEXT_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return Preview(None, problem="Not shown: not UTF-8 text.")
    if any(ord(c) < 0x20 and c not in "\t\n\r" for c in text):
        return Preview(None, problem="Not shown: binary data.")
    return Preview(Kind.TEXT, text=text)


def _complete_lines(data: bytes, cut: bool) -> bytes:
    """Without the last line when the read stopped in it."""
    return data[: data.rfind(b"\n") + 1] if cut else data


def _cell(value: str) -> str:
    return value if len(value) <= MAX_CELL else value[:MAX_CELL] + "…"


def _table(lake: Lake, found: ObjectRead, kind: Kind) -> Preview:
    data, cut = _head(lake, found, TABLE_BYTES)
    if cut and b"\n" not in data:
        raise CannotPreview(f"no line ends in the first {TABLE_BYTES // 1024} KiB")
    text = _decode(_complete_lines(data, cut), cut)
    delimiter = "\t" if kind is Kind.TSV else ","
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    rows: list[list[str]] = []
    more = False
    try:
        for row in reader:
            if len(rows) > TABLE_ROWS:
                more = True
                break
            rows.append(row)
    except csv.Error as e:
        if not (cut and rows):  # a quoted field the read stopped in is not an error
            raise CannotPreview(f"line {reader.line_num}: {e}") from None
        more = True
    if not rows:
        return Preview(kind, note="No rows.")
    width = max(len(r) for r in rows)
    header, body = rows[0], rows[1:]
    notes = []
    if more or cut:
        notes.append(f"The first {len(body)} rows are shown.")
    if width > MAX_COLUMNS:
        notes.append(f"The first {MAX_COLUMNS} of {width} columns are shown.")
    return Preview(
        kind,
        header=tuple(_cell(h) for h in header[:MAX_COLUMNS]),
        rows=tuple(tuple(_cell(c) for c in r[:MAX_COLUMNS]) for r in body),
        note=" ".join(notes),
    )


def _json(lake: Lake, found: ObjectRead) -> Preview:
    if found.entry.size > JSON_BYTES:
        data, cut = _head(lake, found, RAW_JSON_BYTES)
        note = f"Larger than {JSON_BYTES >> 20} MiB: the first {RAW_JSON_BYTES >> 10} KiB as stored."
        return Preview(Kind.JSON, text=_decode(data, cut), note=note)
    data, _ = _head(lake, found, JSON_BYTES)
    try:
        value = json.loads(_decode(data, False))
    except RecursionError:
        raise CannotPreview("JSON nested too deeply") from None
    except ValueError as e:  # JSONDecodeError, or an integer too long to convert
        raise CannotPreview(f"not valid JSON: {e}") from None
    return Preview(Kind.JSON, text=json.dumps(value, indent=2, ensure_ascii=False))


def _json_lines(lake: Lake, found: ObjectRead) -> Preview:
    data, cut = _head(lake, found, TABLE_BYTES)
    lines = _decode(_complete_lines(data, cut), cut).splitlines()
    shown = [line for line in lines if line.strip()][:TABLE_ROWS]
    for number, line in enumerate(shown, 1):
        try:
            json.loads(line)
        except RecursionError:
            raise CannotPreview(f"line {number}: JSON nested too deeply") from None
        except ValueError as e:
            raise CannotPreview(f"line {number}: not valid JSON: {e}") from None
    more = cut or len(shown) < sum(1 for line in lines if line.strip())
    note = f"The first {len(shown)} lines are shown." if more else ""
    return Preview(Kind.JSON_LINES, text="\n".join(shown), note=note)


def _image(lake: Lake, found: ObjectRead) -> Preview:
    if found.entry.size > IMAGE_BYTES:
        return Preview(None, problem=f"Not shown: an image larger than {IMAGE_BYTES // 1024 // 1024} MiB.")
    return Preview(Kind.IMAGE)


def _value(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, dict | list):
        value = json.dumps(value, ensure_ascii=False, default=str)
    return _cell(str(value))


def _parquet(lake: Lake, found: ObjectRead) -> Preview:
    """The footer (schema, counts) and the first rows of the first row group: the only ranges
    read are the footer's and the first row group's column chunks (of the columns shown)."""
    with objectfile.open_read(lake, found) as f:
        try:
            f.prefetch(0, f.size - 1)  # the first row group starts at byte 4; the footer ends the file
            parquet = pq.ParquetFile(f)
            meta = parquet.metadata
            schema = parquet.schema_arrow
            names = schema.names[:MAX_COLUMNS]
            rows: list[tuple[str | None, ...]] = []
            if meta.num_row_groups and meta.row_group(0).num_rows:
                columns = names if len(schema.names) > MAX_COLUMNS else None
                batches = parquet.iter_batches(PARQUET_ROWS, row_groups=[0], columns=columns)
                batch = next(batches)
                cells = [[_value(v) for v in column.to_pylist()] for column in batch.columns[:MAX_COLUMNS]]
                rows = list(zip(*cells, strict=True))
            uncompressed = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
        except (pa.ArrowException, OSError, ValueError, OverflowError, StopIteration) as e:
            raise CannotPreview(f"not a readable Parquet file: {e}") from None
    facts = (
        ("Rows", f"{meta.num_rows:,}"),
        ("Row groups", f"{meta.num_row_groups:,}"),
        ("Columns", f"{len(schema.names):,}"),
        ("Size", f"{size(found.entry.size)} ({size(uncompressed)} uncompressed)"),
        ("Created by", meta.created_by or ""),
    )
    notes = []
    if meta.num_rows > len(rows):
        notes.append(f"The first {len(rows)} rows of the first row group are shown.")
    if len(schema.names) > MAX_COLUMNS:
        notes.append(f"The first {MAX_COLUMNS} of {len(schema.names)} columns are shown.")
    if len(schema.names) > MAX_SCHEMA:
        notes.append(f"The schema lists the first {MAX_SCHEMA} columns.")
    return Preview(
        Kind.PARQUET,
        header=tuple(names),
        rows=tuple(rows),
        columns=tuple(Column(f.name, str(f.type), f.nullable) for f in list(schema)[:MAX_SCHEMA]),
        facts=facts,
        note=" ".join(notes),
    )


_PREVIEWS = {
    Kind.TEXT: _text,
    Kind.CSV: lambda lake, found: _table(lake, found, Kind.CSV),
    Kind.TSV: lambda lake, found: _table(lake, found, Kind.TSV),
    Kind.JSON: _json,
    Kind.JSON_LINES: _json_lines,
    Kind.IMAGE: _image,
    Kind.PARQUET: _parquet,
}
