"""How a journal entry is stored while it is live (in its writer's KV partition): its state, a
one-line JSON header, a newline and the payload's JSON text (docs/decisions/0009-journal.md)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"))
"""One encoder for every record: ``json.dumps`` with options builds a new one a call."""


def _text(payload: Mapping[str, Any]) -> str:
    return _ENCODER.encode(payload)


def live(record: Mapping[str, Any]) -> bytes:
    """A live entry as its writer's partition stores it: its state, a space, the rest of the
    record but its payload (JSON, one line), a newline, then the payload's JSON. An outcome
    reuses its intent's header and payload text, and sealing copies the payload text into its
    batch as it is: a write of 100k paths is encoded once, and not parsed again before a
    reader asks (docs/decisions/0009-journal.md)."""
    return _live(record["state"], _header(record), _text(record.get("event_payload", {})))


def _header(record: Mapping[str, Any]) -> bytes:
    return _encode({k: v for k, v in record.items() if k not in ("state", "event_payload")})


def _live(state: str, header: bytes, text: str) -> bytes:
    return b"%s %s\n%s" % (state.encode(), header, text.encode())


def _split_live(raw: bytes) -> tuple[dict[str, Any], str]:
    if raw[:1] == b"{":  # a record written before the split form: one JSON object
        record = json.loads(raw)
        return record, _text(record.pop("event_payload", {}))
    state, _, rest = raw.partition(b" ")
    head, _, body = rest.partition(b"\n")
    header = json.loads(head)
    header["state"] = state.decode()
    return header, body.decode()


def read_live(raw: bytes) -> dict[str, Any]:
    """A live entry's whole record (the inverse of :func:`live`)."""
    record, text = _split_live(raw)
    record["event_payload"] = json.loads(text)
    return record


def _extended(text: str, announced_: Mapping[str, Any], ended: Mapping[str, Any]) -> str:
    """The JSON text of ``ended`` (an outcome's payload), reusing ``text``, the JSON of the
    intent's payload ``announced_``, when the outcome only adds keys to it: a staged write's
    outcome adds its tokens to 100k rows, which are then not encoded again."""
    for name, value in announced_.items():
        if name not in ended or not (ended[name] is value or ended[name] == value):
            return _text(ended)
    added = {k: v for k, v in ended.items() if k not in announced_}
    if not added:
        return text
    if not announced_:
        return _text(added)
    return text[:-1] + "," + _text(added)[1:]


def _encode(record: Mapping[str, Any]) -> bytes:
    return _ENCODER.encode(record).encode()
