"""``.lakefs_ref.yaml`` as written here reads back the same in YAML, whichever way it was written."""

from __future__ import annotations

from pathlib import Path

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from lakectl.client.workcopy.reffile import Ref, _dump_plain, read_ref, write_ref

VALUES = st.one_of(
    st.text(max_size=40),
    st.text(alphabet="0123456789abcdefe.-:x", max_size=12),  # near numbers, dates and times
    st.sampled_from(["true", "No", "NULL", "on", "1e5", "12e3", "0x1f", "2026-01-01", "1:20", "~", "="]),
    st.builds(lambda s: "lakefs://" + s, st.text(max_size=30)),
)


@settings(max_examples=400, deadline=None)
@given(src=VALUES, at_head=VALUES, operation=VALUES)
def test_a_ref_file_reads_back_as_written_by_yaml_and_by_lakectl(
    tmp_path_factory: object, src: str, at_head: str, operation: str
) -> None:
    root = tmp_path_factory.mktemp("wc")  # type: ignore[attr-defined]
    ref = Ref(src, at_head, operation)
    write_ref(str(root), ref)
    text = (Path(root) / ".lakefs_ref.yaml").read_text(encoding="utf-8")
    assert yaml.safe_load(text) == {"src": src, "at_head": at_head, "active_operation": operation}
    assert read_ref(str(root)) == ref


def test_what_lakectl_writes_is_written_plain_as_lakefs_writes_it() -> None:
    head = "c4a5e7d3b1f0" * 5 + "abcd"
    text = _dump_plain({"src": "lakefs://repo/main/data/", "at_head": head, "active_operation": ""})
    assert text == f'src: lakefs://repo/main/data/\nat_head: {head}\nactive_operation: ""\n'
    assert _dump_plain({"src": "lakefs://repo/main/a b/", "at_head": "", "active_operation": ""}) is None
    assert _dump_plain({"src": "lakefs://r/main/", "at_head": "1234e5", "active_operation": ""}) is None
