"""The declarations file of a repository's tables (``_lakectl/tables.yaml``): what it parses,
what it refuses, and which declared table (and key) a path belongs to."""

from __future__ import annotations

import pytest

from lakectl.core.tables import declared
from lakectl.errors import InvalidArgument


def test_render_parses_back_and_reads_like_a_person_wrote_it() -> None:
    tables = {"tables/orders": ("order_id",), "events/region=eu": ("day", "event id")}
    text = declared.render(tables)
    assert declared.parse(text, "f") == tables
    assert b"  tables/orders:\n    key: [order_id]\n" in text
    assert declared.parse(declared.render({}), "f") == {} == declared.parse(b"", "f")
    hand = b"tables:\n  /t/:\n    key: id\n  u:\n    key: [a, b]\n"  # a single column, slashes
    assert declared.parse(hand, "f") == {"t": ("id",), "u": ("a", "b")}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (b"- t\n", "expected `tables:`"),
        (b"tables: [t]\n", "expected `tables:`"),
        (b"tables:\n  t: {}\n", "table 't' needs `key:`"),
        (b"tables:\n  t: {key: [a, a]}\n", "named twice"),
        (b"tables:\n  t: {key: ''}\n", "column names"),
        (b"tables:\n  /: {key: a}\n", "not the repository's root"),
        (b"tables: {t: [\n", "not valid YAML"),
    ],
)
def test_what_is_refused_names_the_file(text: bytes, says: str) -> None:
    with pytest.raises(InvalidArgument) as e:
        declared.parse(text, "_lakectl/tables.yaml at main")
    assert e.value.message.startswith("_lakectl/tables.yaml at main") and says in e.value.message


def test_a_path_belongs_to_the_longest_declared_table_it_is_in() -> None:
    tables = {"t": ("id",), "t/inner": ("k",), "one.parquet": ("x",)}
    assert declared.key_for(tables, "t/day=1/p.parquet") == ("id",)
    assert declared.key_for(tables, "t/inner/p.parquet") == ("k",)
    assert declared.key_for(tables, "t/") == ("id",) == declared.key_for(tables, "/t")
    assert declared.key_for(tables, "tx/p.parquet") == ()  # a name that only starts alike
    assert declared.table_for(tables, "t/day=1/p.parquet") == "t/"
    assert declared.table_for(tables, "one.parquet") == "one.parquet"
    assert declared.table_for(tables, "other.parquet") == ""
    assert declared.table_for(tables, "t/2026-03.csv") == ""  # a CSV object is a table of its own
    assert declared.key_for(tables, "t/2026-03.csv") == ("id",)  # keyed as its prefix declares
