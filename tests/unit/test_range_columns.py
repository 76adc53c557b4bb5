"""Range files are built from Arrow buffers: the same bytes as ``pa.array``, without pandas."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from lakectl.core.graph.ranges import column

texts = st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=20), max_size=50)
ints = st.lists(st.integers(-(2**63), 2**63 - 1), max_size=50)


@settings(max_examples=100, deadline=None)
@given(texts, ints)
def test_columns_equal_pyarrows_own(strings: list[str], numbers: list[int]) -> None:
    assert column(strings, pa.string()).equals(pa.array(strings, pa.string()))
    assert column(numbers, pa.int64()).equals(pa.array(numbers, pa.int64()))
    assert column(tuple(numbers), pa.int64()).equals(pa.array(numbers, pa.int64()))


def test_writing_a_range_does_not_import_pandas() -> None:
    """pa.array() imports pandas on its first call (0.3-0.7 s of every commit); range writes
    avoid it."""
    code = (
        "import sys\n"
        "from lakectl.core.graph.ranges import RangeStore\n"
        "class Blocks(dict):\n"
        "    def put(self, k, v): self[k] = bytes(v)\n"
        "store = RangeStore(Blocks())\n"
        "info = store.write_range(['a', 'b'], [(1, 'c', 'l', 2, 't', ''), (3, 'd', 'm', 4, 't', '{}')])\n"
        "store.write_metarange([info])\n"
        "assert RangeStore(store.blocks).read_range(info.id).paths == ['a', 'b']  # from Parquet\n"
        "print('pandas' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr


def test_sealing_the_journal_does_not_import_pandas() -> None:
    """Every command of a journalled lake seals what it did as it closes: no pandas there either."""
    code = (
        "import sys\n"
        "from lakectl.core import journal\n"
        "entry = journal.Entry(1, 5, 'ada', 'repo', 'write-objects', {'rows': [['a', None]]})\n"
        "data = journal._parquet([entry], {'first': 1})\n"
        "class Blocks(dict):\n"
        "    def get(self, k): return data\n"
        "assert list(journal._read_batch(Blocks(), 'x')) == [entry]\n"
        "print('pandas' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr
