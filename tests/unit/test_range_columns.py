"""Journal batches' columns are built from Arrow buffers (the same arrays as ``pa.array``, without
pandas); range files need no pyarrow at all."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from lakectl.core.journal.form import column

texts = st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=20), max_size=50)
ints = st.lists(st.integers(-(2**63), 2**63 - 1), max_size=50)


@settings(max_examples=100, deadline=None)
@given(texts, ints)
def test_columns_equal_pyarrows_own(strings: list[str], numbers: list[int]) -> None:
    assert column(strings, pa.string()).equals(pa.array(strings, pa.string()))
    assert column(numbers, pa.int64()).equals(pa.array(numbers, pa.int64()))
    assert column(tuple(numbers), pa.int64()).equals(pa.array(numbers, pa.int64()))


def test_writing_and_reading_a_tree_imports_no_pyarrow() -> None:
    """A commit writes ranges, and every command that reads an object reads them: neither
    imports pyarrow (60-150 ms), nor pandas (0.3-0.7 s, which pa.array() imports on its first
    call)."""
    code = (
        "import sys\n"
        "from lakectl.core.graph.ranges import RangeStore\n"
        "class Blocks(dict):\n"
        "    def put(self, k, v): self[k] = bytes(v)\n"
        "store = RangeStore(Blocks())\n"
        "info = store.write_range(['a', 'b'], [(1, 'c', 'l', 2, 't', ''), (3, 'd', 'm', 4, 't', '{}')])\n"
        "store.write_root([store.write_page([info])])\n"
        "assert RangeStore(store.blocks).read_range(info.id).paths == ['a', 'b']  # decoded\n"
        "print('pandas' in sys.modules, 'pyarrow' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False", out.stderr


def test_sealing_the_journal_does_not_import_pandas() -> None:
    """Every command of a journalled lake seals what it did as it closes: no pandas there either."""
    code = (
        "import sys\n"
        "from lakectl.core.journal import journal, sealed  # what a journalled lake loads\n"
        "entry = sealed.Entry(1, 5, 'ada', 'repo', 'write-objects', {'rows': [['a', None]]})\n"
        "data = sealed.parquet([entry], {'first': 1})\n"
        "class Blocks(dict):\n"
        "    def get(self, k): return data\n"
        "assert list(sealed.read_batch(Blocks(), 'x')) == [entry]\n"
        "print('pandas' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr
