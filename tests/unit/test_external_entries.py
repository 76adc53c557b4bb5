"""External (imported) entries in the model: their row encoding round-trips, every other entry's
encoding is byte-for-byte what it was (commit ids do not change), and GC names no block for them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lakectl.core.model import Entry, External, decode_row, is_external, same_row
from lakectl.core.upkeep.gc import bare_locators

OWN = Entry(17, "d41d8cd98f00b204e9800998ecf8427e", ("d41d8cd98f00b204e9800998ecf8427e+17",), 1700000000)


def test_an_owned_entry_encodes_as_before() -> None:
    # The bytes every existing range file and staging row holds: any change would change commit ids.
    assert OWN.encode() == (
        b"17\x00d41d8cd98f00b204e9800998ecf8427e\x00d41d8cd98f00b204e9800998ecf8427e+17"
        b"\x001700000000\x00application/octet-stream\x00"
    )
    assert OWN.identity() == (17, OWN.checksum, OWN.locators, OWN.content_type, ())
    assert not is_external(OWN.to_row())


def test_an_external_entry_names_its_source_and_no_block() -> None:
    s3 = Entry(5, "etag1", (), 1, external=External("s3://b/k with space", etag="etag1"))
    local = Entry(5, "x-5", (), 1, external=External("/data/a b.csv", mtime_ns=123456789))
    for e in (s3, local):
        row = e.to_row()
        assert is_external(row) and Entry.from_row(row) == e and Entry.decode(e.encode()) == e
        assert bare_locators(row[2]) == []
        assert e.physical_address == e.external.address  # type: ignore[union-attr]
    assert not same_row(
        s3.to_row(), Entry(5, "etag1", (), 1, external=External("s3://b/k", "etag1")).to_row()
    )
    assert not s3.same_as(Entry(5, "etag1", (), 1, external=External("s3://b/k with space", "etag2")))


@given(
    address=st.text(min_size=1).filter(lambda s: "\x00" not in s),
    etag=st.text(alphabet="0123456789abcdef-", max_size=40),
    mtime_ns=st.integers(min_value=0, max_value=2**63),
)
def test_external_rows_round_trip(address: str, etag: str, mtime_ns: int) -> None:
    ext = External(address, etag=etag) if etag else External(address, mtime_ns=mtime_ns)
    e = Entry(3, "c", (), 9, "text/csv", {"k": "v"}, external=ext)
    assert decode_row(e.encode()) == e.to_row() and Entry.decode(e.encode()) == e
