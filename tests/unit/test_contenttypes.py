"""An object's content type guessed from its name: lake formats Python's table lacks, its table
for the rest, compression by its own type, the default for a name that says nothing."""

from __future__ import annotations

import pytest

from lakectl.core.contenttypes import guess_content_type


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("a.csv", "text/csv"),
        ("dir.v2/2024/A.CSV", "text/csv"),
        ("t/part-0.parquet", "application/vnd.apache.parquet"),
        ("e.avro", "application/avro"),
        ("e.orc", "application/x-orc"),
        ("log.jsonl", "application/x-ndjson"),
        ("log.ndjson", "application/x-ndjson"),
        ("c.json", "application/json"),
        ("notes.txt", "text/plain"),
        ("pic.png", "image/png"),
        ("a.csv.gz", "application/gzip"),
        ("d.unknownext", "application/octet-stream"),
        ("README", "application/octet-stream"),
        (".bashrc", "application/octet-stream"),
        ("..a", "application/octet-stream"),
        ("x/.b.csv", "text/csv"),
        ("a.", "application/octet-stream"),
        ("dir.csv/data", "application/octet-stream"),
        ("", "application/octet-stream"),
    ],
)
def test_a_name_gives_its_type(path: str, expected: str) -> None:
    assert guess_content_type(path) == expected
