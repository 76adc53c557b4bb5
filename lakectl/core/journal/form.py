"""How a journal entry is stored while it is live (in its writer's KV partition): its state, a
one-line JSON header, a newline and the payload's JSON text, compressed with Zstandard when it is
large (the header then says its size, ``z``) (docs/decisions/0009-journal.md); and the Arrow
columns a sealed batch is written from (:func:`column`)."""

from __future__ import annotations

import json
from array import array
from collections.abc import Callable, Mapping, Sequence
from itertools import accumulate
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

PENDING = "pending"
DONE = "done"
"""The states of a live entry: an intent still open, and an outcome waiting to be sealed."""

COMPRESS_FROM = 64 * 1024
"""Payload texts of at least this many bytes are stored compressed: a write of 100k paths is
16 MB of JSON, 2.3 MB compressed, and the database writes (and later deletes) every byte."""

_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"))
"""One encoder for every record: ``json.dumps`` with options builds a new one a call."""


def json_text(payload: Mapping[str, Any]) -> str:
    """A payload's JSON text, as every entry stores it (sorted keys, no spaces)."""
    return _ENCODER.encode(payload)


def live(record: Mapping[str, Any]) -> bytes:
    """A live entry as its writer's partition stores it: its state, a space, the rest of the
    record but its payload (JSON, one line), a newline, then the payload's JSON. An outcome
    reuses its intent's header and payload text, and sealing copies the payload text into its
    batch as it is: a write of 100k paths is encoded once, and not parsed again before a
    reader asks (docs/decisions/0009-journal.md)."""
    return live_from(record["state"], encode_header(record), json_text(record.get("event_payload", {})))


def header_fields(record: Mapping[str, Any]) -> dict[str, Any]:
    """What the header of a live entry says: the record but its state and payload."""
    return {k: v for k, v in record.items() if k not in ("state", "event_payload")}


def encode_header(record: Mapping[str, Any]) -> bytes:
    """A live entry's header line: :func:`header_fields` as JSON."""
    return json_bytes(header_fields(record))


def live_from(state: str, header: bytes, text: str) -> bytes:
    """A live entry from its parts, encoded already (:func:`live` encodes them first)."""
    body = text.encode()
    if len(body) >= COMPRESS_FROM:
        return _stored(state, header[:-1] + b',"z":%d}' % len(body), _compress(body))
    return _stored(state, header, body)


def _stored(state: str, header: bytes, body: bytes) -> bytes:
    return b"%s %s\n%s" % (state.encode(), header, body)


def open_ended(state: str, fields: Mapping[str, Any], text: str) -> Callable[[Mapping[str, Any]], bytes]:
    """A live entry whose payload is known but for some keys: the returned function makes the
    entry with them (``added``, not empty). The entry of a staged write of 100k rows is encoded
    (and compressed) once, before the write, and finished in the write's transaction with what
    the write learnt, at the cost of a few bytes there."""
    body = (text[:-1] if text == "{}" else text[:-1] + ",").encode()
    if len(body) < COMPRESS_FROM:
        header = json_bytes(fields)
        return lambda added: _stored(state, header, body + json_bytes(added)[1:])
    # Concatenated Zstandard frames decompress to the concatenation of their contents (RFC
    # 8878, section 3.1): the rows are compressed here, the closing keys alone in the write.
    frame = _compress(body)

    def close(added: Mapping[str, Any]) -> bytes:
        tail = json_bytes(added)[1:]
        return _stored(state, json_bytes({**fields, "z": len(body) + len(tail)}), frame + _compress(tail))

    return close


def _compress(data: bytes) -> bytes:
    import pyarrow as pa

    return bytes(pa.compress(data, codec="zstd", asbytes=True))


def _decompress(data: bytes, size: int) -> bytes:
    import pyarrow as pa

    return bytes(pa.decompress(data, size, codec="zstd", asbytes=True))


def split_live(raw: bytes) -> tuple[dict[str, Any], str]:
    """A live entry's record but its payload, and the payload's JSON text, left unparsed."""
    if raw[:1] == b"{":  # a record written before the split form: one JSON object
        record = json.loads(raw)
        return record, json_text(record.pop("event_payload", {}))
    state, _, rest = raw.partition(b" ")
    head, _, body = rest.partition(b"\n")  # a compressed body may hold newlines; the header not
    header = json.loads(head)
    size = header.pop("z", None)
    header["state"] = state.decode()
    return header, (_decompress(body, size) if size is not None else body).decode()


def read_live(raw: bytes) -> dict[str, Any]:
    """A live entry's whole record (the inverse of :func:`live`)."""
    record, text = split_live(raw)
    record["event_payload"] = json.loads(text)
    return record


def extended_text(text: str, announced_: Mapping[str, Any], ended: Mapping[str, Any]) -> str:
    """The JSON text of ``ended`` (an outcome's payload), reusing ``text``, the JSON of the
    intent's payload ``announced_``, when the outcome only adds keys to it: a staged write's
    outcome adds its tokens to 100k rows, which are then not encoded again."""
    for name, value in announced_.items():
        if name not in ended or not (ended[name] is value or ended[name] == value):
            return json_text(ended)
    added = {k: v for k, v in ended.items() if k not in announced_}
    if not added:
        return text
    if not announced_:
        return json_text(added)
    return text[:-1] + "," + json_text(added)[1:]


def json_bytes(record: Mapping[str, Any]) -> bytes:
    """A record as the journal stores it in the KV store: :func:`json_text`, encoded."""
    return _ENCODER.encode(record).encode()


def column(values: Sequence[Any], type_: pa.DataType) -> pa.Array:
    """A string or int64 Arrow array of ``values`` (no nulls), built from its buffers: the same
    array (and Parquet bytes) as ``pa.array(values, type_)``, which imports pandas on its first
    call in a process (0.3-0.7 s of every commit) to ask whether ``values`` is a pandas object."""
    import pyarrow as pa

    if type_ == pa.int64():
        return pa.Array.from_buffers(type_, len(values), [None, pa.py_buffer(array("q", values))])
    joined = "".join(values)
    data = joined.encode()
    if len(data) == len(joined):  # ASCII, as most keys are: a string's bytes are its characters
        lengths = map(len, values)
    else:
        encoded = [v.encode() for v in values]
        lengths, data = map(len, encoded), b"".join(encoded)
    if len(data) >= 2**31:  # pragma: no cover - past 32-bit offsets: pyarrow's way
        return pa.array(values, type_)
    offsets = array("i", [0])
    offsets.extend(accumulate(lengths))
    return pa.Array.from_buffers(type_, len(values), [None, pa.py_buffer(offsets), pa.py_buffer(data)])
