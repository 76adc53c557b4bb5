"""What executors use without Spark: block files written block by block, and large objects read
by range. No JVM needed."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from lakectl.spark.lake import BlockWriter, LakeFile, LocalBlocks, SegmentFile, segments_of


class Counting(LocalBlocks):
    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.fetched = 0

    def get(self, locator: str, offset: int = 0, length: int | None = None) -> bytes:
        data = super().get(locator, offset, length)
        self.fetched += len(data)
        return data


def test_a_writer_cuts_blocks_as_they_fill_and_a_reader_seeks_across_them(tmp_path: Path) -> None:
    (tmp_path / "blocks").mkdir()
    blocks = Counting(str(tmp_path / "blocks"))
    rows = 50_000
    table = pa.table({"k": pa.array(range(rows), pa.int64()), "pad": [f"{i:0>60}" for i in range(rows)]})
    sink = BlockWriter(blocks, block_size=256 * 1024)
    pq.write_table(table, pa.PythonFile(sink, mode="w"), row_group_size=10_000, compression="none")
    locators = sink.finish()
    whole = io.BytesIO()
    pq.write_table(table, whole, row_group_size=10_000, compression="none")
    assert sink.size == len(whole.getvalue())
    assert len(locators) == -(-sink.size // (256 * 1024))  # every block full but the last
    assert all(int(loc.split("+")[1]) == 256 * 1024 for loc in locators[:-1])

    file = LakeFile("data.parquet", tuple(segments_of(locators)))
    assert file.read_all(blocks) == whole.getvalue()
    blocks.fetched = 0
    got = pq.ParquetFile(pa.PythonFile(SegmentFile(file, blocks), mode="r")).read(columns=["k"])
    assert got.column("k").to_pylist() == list(range(rows))
    assert blocks.fetched < file.size / 4  # the footer and the k column chunks, not the padding


def test_segment_file_reads_any_range_of_segments_within_blocks(tmp_path: Path) -> None:
    (tmp_path / "blocks").mkdir()
    blocks = LocalBlocks(str(tmp_path / "blocks"))
    a = blocks.put(b"0123456789")
    b = blocks.put(b"abcdefghij")
    file = LakeFile("x", ((a, 2, 5), (b, 0, 10), (a, 9, 1)))  # "23456" + "abcdefghij" + "9"
    expected = b"23456abcdefghij9"
    f = SegmentFile(file, blocks)
    for start in range(len(expected)):
        for size in (1, 3, 7, 40):
            f.seek(start)
            assert f.read(size) == expected[start : start + size]
    f.seek(-2, io.SEEK_END)
    assert f.read() == b"j9"
