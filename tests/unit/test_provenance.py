"""Provenance: the inputs and code commits record, followed upstream across repositories to a
depth, and the reverse index of what was made from a commit, kept by a restore and a rebuild."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakectl.core import merging, opening, provenance, writes
from lakectl.core import porcelain as p
from lakectl.core.blocks.local import LocalAdapter
from lakectl.core.graph.inputs import INPUTS, Input, encode_inputs, inputs_of
from lakectl.core.journal import journal, rebuild
from lakectl.core.kv.sqlite import SQLiteStore
from lakectl.core.lake import Lake
from lakectl.core.model import Commit
from lakectl.core.upkeep import refsdump
from lakectl.errors import InvalidArgument


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lake]:
    monkeypatch.setenv("LAKECTL_COMMITTER", "ada")
    opened = opening.open_lake(str(tmp_path / "lake"))
    journal.enable(opened)
    yield opened
    opened.close()


def made(
    lake: Lake, repo: str, branch: str, path: str, message: str, *inputs: Input, code: str = ""
) -> Commit:
    """Write ``path`` on the branch and commit it, recording ``inputs`` (and ``code``)."""
    writes.upload(lake, repo, branch, path, message.encode())
    meta = {INPUTS: encode_inputs(list(inputs))} if inputs else {}
    if code:
        meta["lakectl_code"] = code
    return p.commit(lake, repo, branch, message, metadata=meta)


@pytest.fixture
def chain(lake: Lake) -> dict[str, Commit]:
    """raw/orders ingested in ``raw``; ``etl`` cleans it on a branch merged into main; ``marts``
    aggregates etl's clean table."""
    for repo in ("raw", "etl", "marts"):
        p.create_repo(lake, repo)
    ingest = made(lake, "raw", "main", "orders/1.csv", "ingest")
    p.create_branch(lake, "etl", "run-1", "main")
    code = json.dumps({"script": "clean.py", "git_commit": "9f8e7d6c5b4a", "dirty": True})
    clean = made(
        lake, "etl", "run-1", "clean/orders.parquet", "clean", Input("raw", ingest.id, "orders/"), code=code
    )
    merging.merge(lake, "etl", "run-1", "main")
    daily = made(lake, "marts", "main", "daily.parquet", "daily", Input("etl", clean.id, "clean/"))
    return {"ingest": ingest, "clean": clean, "daily": daily}


def test_upstream_follows_the_last_writer_of_each_input_across_repositories(
    lake: Lake, chain: dict[str, Commit]
) -> None:
    tree = provenance.upstream(lake, "marts", "main", "daily.parquet")
    assert tree.commit is not None and tree.commit.id == chain["daily"].id
    [etl] = tree.inputs
    assert (etl.repository, etl.ref, etl.path) == ("etl", chain["clean"].id, "clean/")
    assert etl.commit is not None and etl.commit.id == chain["clean"].id
    assert etl.code == {"script": "clean.py", "git_commit": "9f8e7d6c5b4a", "dirty": True}
    [raw] = etl.inputs
    assert raw.commit is not None and raw.commit.id == chain["ingest"].id and raw.inputs == []
    # On etl's main the writer of the clean table is the commit the merge brought, not the merge.
    on_main = provenance.upstream(lake, "etl", "main", "clean/orders.parquet")
    assert on_main.commit is not None and on_main.commit.id == chain["clean"].id


def test_depth_limits_the_walk_and_says_more_is_there(lake: Lake, chain: dict[str, Commit]) -> None:
    shallow = provenance.upstream(lake, "marts", "main", "daily.parquet", depth=1)
    assert shallow.inputs[0].inputs == [] and shallow.inputs[0].more
    assert provenance.upstream(lake, "marts", "main", "daily.parquet", depth=0).more
    with pytest.raises(InvalidArgument):
        provenance.upstream(lake, "marts", "main", "", depth=-1)


def test_a_cycle_of_recorded_inputs_ends(lake: Lake) -> None:
    p.create_repo(lake, "loop")
    first = made(lake, "loop", "main", "a", "a")
    second = made(lake, "loop", "main", "b", "b from a", Input("loop", first.id, "a"))
    made(lake, "loop", "main", "a", "a from b", Input("loop", second.id, "b"))
    tree = provenance.upstream(lake, "loop", "main", "a", depth=50)
    assert tree.inputs[0].inputs[0].commit is not None  # a's earlier version, no inputs: ends


def test_unreadable_repositories_and_odd_metadata_show_nothing_of_themselves(
    lake: Lake, chain: dict[str, Commit]
) -> None:
    tree = provenance.upstream(lake, "marts", "main", "daily.parquet", readable=lambda r: r != "etl")
    [hidden] = tree.inputs
    assert (hidden.readable, hidden.commit, hidden.inputs) == (False, None, [])
    for odd in ("not json", '{"a": 1}', '[{"repository": "a/b", "commit": "c"}, 7, {"commit": "x"}]'):
        commit = Commit("c", (), "x", "m", 0, "mr", {INPUTS: odd}, 1)  # type: ignore[arg-type]
        assert inputs_of(commit) == []


def test_downstream_lists_what_was_made_from_a_commit_and_follows_restores_and_rebuilds(
    lake: Lake, chain: dict[str, Commit], tmp_path: Path
) -> None:
    def made_from(on: Lake, repo: str, ref: str, path: str = "") -> list[tuple[str, str]]:
        return [(s.repository, s.ref) for s in provenance.downstream(on, repo, ref, path)]

    assert made_from(lake, "raw", chain["ingest"].id) == [("etl", chain["clean"].id)]
    assert made_from(lake, "raw", chain["ingest"].id, "orders/1.csv") == [("etl", chain["clean"].id)]
    assert made_from(lake, "raw", chain["ingest"].id, "customers/") == []
    assert provenance.downstream(lake, "raw", chain["ingest"].id, readable=lambda r: r != "etl") == []
    p.create_repo(lake, "etl-copy", "main", bare=True)
    refsdump.restore(lake, "etl-copy", refsdump.dump(lake, "etl"))
    expected = [("etl", chain["clean"].id), ("etl-copy", chain["clean"].id)]
    assert sorted(made_from(lake, "raw", chain["ingest"].id)) == expected
    p.delete_repo(lake, "etl")
    assert made_from(lake, "raw", chain["ingest"].id) == [("etl-copy", chain["clean"].id)]
    fresh = SQLiteStore(str(tmp_path / "rebuilt.db"))
    try:
        rebuild.rebuild(LocalAdapter(str(tmp_path / "lake" / "blocks")), fresh)
        rebuilt = Lake(kv=fresh, blocks=lake.blocks)
        assert made_from(rebuilt, "raw", chain["ingest"].id) == [("etl-copy", chain["clean"].id)]
    finally:
        fresh.close()
