"""A hidden branch's record: the flag survives encoding and the journal's branch records (so a
rebuild restores it), and every other record keeps the bytes it had before hidden branches."""

from __future__ import annotations

from lakectl.core.journal.replayorder import moved, record_of
from lakectl.core.model import Branch, BranchId, CommitId, StagingToken


def test_the_hidden_flag_round_trips_and_leaves_other_records_as_they_were() -> None:
    plain = Branch(BranchId("main"), CommitId("c1"), StagingToken("t1"), (StagingToken("t0"),))
    assert plain.encode() == b'{"name":"main","commit_id":"c1","staging_token":"t1","sealed_tokens":["t0"]}'
    hidden = Branch(BranchId("tx-1"), CommitId("c1"), StagingToken("t2"), hidden=True)
    assert Branch.decode(hidden.encode()) == hidden and Branch.decode(plain.encode()) == plain
    assert record_of("tx-1", moved(hidden)) == hidden
    assert record_of("main", moved(plain)) == plain
