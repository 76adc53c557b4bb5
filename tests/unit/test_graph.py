"""The commit graph, table first: ref expressions, merge bases, log, content-hashed commits,
merge/revert/cherry-pick/reset rules and their refusals (tree costs: test_tree.py)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lakectl.core import changes as lake_changes
from lakectl.core import lake as lake_floor
from lakectl.core import merging, porcelain, writes
from lakectl.core.graph.commits import CommitRequest, make_commit, merge_base
from lakectl.core.graph.refs import commit_id_of
from lakectl.core.lake import Lake
from lakectl.core.model import Commit, CommitId, MetaRangeId
from lakectl.errors import (
    DirtyBranch,
    InvalidArgument,
    InvalidRef,
    MergeConflict,
    ObjectNotFound,
    RefNotFound,
)
from tests.unit.graphkit import (
    REPO,
    T0,
    cid,
    commit,
    log_messages,
    make_lake,
    noop_reset_object,
    noop_reset_prefix,
    noop_reupload_same,
    noop_upload_delete,
    put,
    view,
)

# -- a small history used by the ref, log and revert tests ----------------------------------


REFS = [
    ("main", "C3"),
    ("main@", "C3"),
    ("main~0", "C3"),
    ("main^0", "C3"),
    ("main^", "M"),
    ("main~1", "M"),
    ("main~2", "C2"),
    ("main~3", "C1"),
    ("main~4", "C0"),
    ("main~1^1", "C2"),
    ("main~1^2", "D1"),
    ("main^^2", "D1"),
    ("main~1^2~1", "C1"),
    ("main@~2", "C2"),
    ("dev", "D1"),
    ("dev~1", "C1"),
    ("v1", "C2"),
    ("v1~1", "C1"),
    ("v1^", "C1"),
]


@pytest.mark.parametrize(("ref", "name"), REFS)
def test_ref_expressions(lake: Lake, history: dict[str, Commit], ref: str, name: str) -> None:
    assert cid(lake, ref) == history[name].id


@pytest.mark.parametrize("length", [4, 7, 12, 40, 64])
def test_commit_ids_and_their_prefixes_resolve(lake: Lake, history: dict[str, Commit], length: int) -> None:
    for name in ("C1", "M", "C3"):
        full = history[name].id
        assert cid(lake, full[:length]) == full
        assert cid(lake, f"{full[:length]}~1") == history[name].parents[0]
    assert cid(lake, f"{history['M'].id}^2") == history["D1"].id


@pytest.mark.parametrize(
    "ref",
    [
        "",
        "~1",
        "^2",
        "-main",
        "main~x",
        "main^x",
        "main@@",
        "main~1@",
        "main/x",
        "v1@",
        "main:x",
        "ma in",
        "@",
    ],
)
def test_malformed_refs_raise_invalid_ref(lake: Lake, history: dict[str, Commit], ref: str) -> None:
    with pytest.raises(InvalidRef):
        porcelain.get_commit(lake, REPO, ref)


@pytest.mark.parametrize("ref", ["nope", "main~5", "main^2", "main~1^3", "dev~3", "deadbeef", "abc"])
def test_refs_that_name_nothing_raise_ref_not_found(lake: Lake, history: dict[str, Commit], ref: str) -> None:
    with pytest.raises(RefNotFound):
        porcelain.get_commit(lake, REPO, ref)


def test_ambiguous_commit_prefix_raises_invalid_ref(lake: Lake, history: dict[str, Commit]) -> None:
    base = history["C1"]
    by_prefix: dict[str, Commit] = {}
    for i in itertools.count():
        req = CommitRequest(f"m{i}", "tester", {}, T0)
        c = make_commit((base.id,), [base], base.meta_range_id, req)
        if c.id[:4] in by_prefix:
            other = by_prefix[c.id[:4]]
            break
        by_prefix[c.id[:4]] = c
    lake.refs.put_commit(lake.refs.get_repo(REPO).name, c)  # type: ignore[arg-type]
    lake.refs.put_commit(lake.refs.get_repo(REPO).name, other)  # type: ignore[arg-type]
    with pytest.raises(InvalidRef, match="ambiguous"):
        porcelain.get_commit(lake, REPO, c.id[:4])
    unique = next(n for n in range(4, 65) if c.id[:n] != other.id[:n])
    assert cid(lake, c.id[:unique]) == c.id
    assert cid(lake, other.id[:unique]) == other.id


@pytest.mark.parametrize("ref", ["main..dev", "main.", "v1.lock"])
def test_refs_no_tag_may_have_are_invalid(lake: Lake, history: dict[str, Commit], ref: str) -> None:
    with pytest.raises(InvalidRef):
        porcelain.get_commit(lake, REPO, ref)


def test_branch_at_excludes_staged_changes(lake: Lake, history: dict[str, Commit]) -> None:
    put(lake, "main", staged="s")
    assert porcelain.stat(lake, REPO, "main", "staged").entry is not None
    with pytest.raises(ObjectNotFound):
        porcelain.stat(lake, REPO, "main@", "staged")
    assert "staged" not in view(lake, "main@")
    assert "staged" not in view(lake, history["C3"].id)


def test_branch_shadows_tag_and_commit_prefix_of_the_same_name(
    lake: Lake, history: dict[str, Commit]
) -> None:
    prefix = history["C1"].id[:8]
    porcelain.create_branch(lake, REPO, prefix, "dev")
    assert cid(lake, prefix) == history["D1"].id
    porcelain.create_tag(lake, REPO, "dev-tag", "main~2")
    assert cid(lake, "dev-tag") == history["C2"].id


# -- generations, content-hashed ids ---------------------------------------------------------


def test_generation_numbers(lake: Lake, history: dict[str, Commit]) -> None:
    gens = {name: c.generation for name, c in history.items()}
    assert gens == {"C0": 1, "C1": 2, "C2": 3, "D1": 3, "M": 4, "C3": 5}


def test_merge_generation_is_max_of_parents_plus_one(lake: Lake, history: dict[str, Commit]) -> None:
    for i in range(3):
        commit(lake, "dev", f"dev {i}", **{f"f{i}": "x"})
    porcelain.create_branch(lake, REPO, "short", "main")
    commit(lake, "short", "s", s="1")
    merged = merging.merge(lake, REPO, "dev", "short").commit
    assert merged.generation == max(history["D1"].generation + 3, history["C3"].generation + 1) + 1


def _same_history(tmp_path: Path) -> list[Commit]:
    lk = make_lake(tmp_path)
    porcelain.create_repo(lk, REPO)
    commit(lk, "main", "one", a="1", b="2")
    porcelain.create_branch(lk, REPO, "dev", "main")
    commit(lk, "dev", "two", c="3")
    merging.merge(lk, REPO, "dev", "main", committer="tester")
    return list(lake_changes.log(lk, REPO, "main"))


def test_commit_ids_are_content_hashes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lake_floor, "clock", lambda: T0)
    first = _same_history(tmp_path / "one")
    second = _same_history(tmp_path / "two")
    assert [(c.id, c.meta_range_id) for c in first] == [(c.id, c.meta_range_id) for c in second]
    monkeypatch.setattr(lake_floor, "clock", lambda: T0 + 1)
    third = _same_history(tmp_path / "three")
    # Another date changes every id (and, rows carrying mtime, every non-empty tree too).
    assert not {c.id for c in third} & {c.id for c in first}


BASE_ID_FIELDS = {
    "parents": (CommitId("p" * 64),),
    "meta_range_id": MetaRangeId("m+1"),
    "message": "msg",
    "committer": "me",
    "metadata": {"a": "1", "b": "2"},
    "creation_date": T0,
}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("parents", ()),
        ("parents", (CommitId("p" * 64), CommitId("q" * 64))),
        ("meta_range_id", MetaRangeId("n+1")),
        ("message", "msg "),
        ("committer", "you"),
        ("metadata", {"a": "1"}),
        ("metadata", {"a": "1", "b": "3"}),
        ("creation_date", T0 + 1),
    ],
)
def test_commit_id_depends_on_every_field(field: str, value: object) -> None:
    base = commit_id_of(**BASE_ID_FIELDS)  # type: ignore[arg-type]
    changed = commit_id_of(**{**BASE_ID_FIELDS, field: value})  # type: ignore[arg-type]
    assert changed != base
    assert len(base) == 64 and int(base, 16) >= 0


def test_commit_id_ignores_metadata_order() -> None:
    a = commit_id_of(**BASE_ID_FIELDS)  # type: ignore[arg-type]
    b = commit_id_of(**{**BASE_ID_FIELDS, "metadata": {"b": "2", "a": "1"}})  # type: ignore[arg-type]
    assert a == b


def test_parent_order_matters_for_the_id() -> None:
    p, q = CommitId("p" * 64), CommitId("q" * 64)
    a = commit_id_of(**{**BASE_ID_FIELDS, "parents": (p, q)})  # type: ignore[arg-type]
    b = commit_id_of(**{**BASE_ID_FIELDS, "parents": (q, p)})  # type: ignore[arg-type]
    assert a != b


# -- merge bases ------------------------------------------------------------------------------


def _base(lake: Lake, a: str, b: str) -> CommitId | None:
    rid = lake.refs.get_repo(REPO).name  # type: ignore[arg-type]
    found = merge_base(
        lake.refs, rid, porcelain.get_commit(lake, REPO, a), porcelain.get_commit(lake, REPO, b)
    )
    return None if found is None else found.id


def test_merge_base_simple_cases(lake: Lake, history: dict[str, Commit]) -> None:
    h = {k: c.id for k, c in history.items()}
    assert _base(lake, "main", "main") == h["C3"]
    assert _base(lake, "main", "dev") == h["D1"]  # dev is an ancestor of main
    assert _base(lake, "dev", "main") == h["D1"]
    assert _base(lake, "v1", "dev") == h["C1"]
    assert _base(lake, "main~2", "main") == h["C2"]
    assert _base(lake, h["C0"], "main") == h["C0"]


def test_merge_base_ignores_the_length_of_either_side(lake: Lake) -> None:
    fork = commit(lake, "main", "fork", f="0")
    porcelain.create_branch(lake, REPO, "side", "main")
    for i in range(8):
        commit(lake, "main", f"main {i}", f=str(i + 1))
    commit(lake, "side", "side", s="1")
    assert _base(lake, "main", "side") == fork.id
    assert _base(lake, "side", "main") == fork.id


@pytest.fixture
def criss_cross(lake: Lake) -> dict[str, Commit]:
    """A criss-cross: X1 and Y1 are both best common ancestors of MX and MY.

        A -- X1 -- MX      x
         \\     \\ /
          \\     X
           \\   / \\
            Y1 --- MY      y
    """
    c = {"A": commit(lake, "main", "a", shared="0", x="0", y="0")}
    porcelain.create_branch(lake, REPO, "x", "main")
    porcelain.create_branch(lake, REPO, "y", "main")
    c["X1"] = commit(lake, "x", "x1", x="1")
    c["Y1"] = commit(lake, "y", "y1", y="1")
    c["MX"] = merging.merge(lake, REPO, c["Y1"].id, "x").commit
    c["MY"] = merging.merge(lake, REPO, c["X1"].id, "y").commit
    return c


def test_merge_base_of_criss_cross_is_one_of_the_best_bases(
    lake: Lake, criss_cross: dict[str, Commit]
) -> None:
    c = criss_cross
    found = _base(lake, "x", "y")
    assert found in {c["X1"].id, c["Y1"].id}
    assert _base(lake, "y", "x") in {c["X1"].id, c["Y1"].id}
    assert _base(lake, "x", "y") == found  # deterministic


def test_merges_after_a_criss_cross(lake: Lake, criss_cross: dict[str, Commit]) -> None:
    # Only paths that X1 and Y1 did not touch change afterwards, so either best base gives the
    # same clean merge. (Changing x or y again would conflict with either single base, as in
    # lakeFS, which has no recursive merge.)
    commit(lake, "y", "y2", shared="y")
    commit(lake, "x", "x2", other="x")
    result = merging.merge(lake, REPO, "y", "x")
    assert result.changed
    assert view(lake, "x") == {"shared": b"y", "x": b"1", "y": b"1", "other": b"x"}
    assert merging.merge(lake, REPO, "x", "y").changed
    assert view(lake, "y") == view(lake, "x")
    # y now contains x: nothing left to merge from x.
    assert not merging.merge(lake, REPO, "x", "y").changed


# -- log --------------------------------------------------------------------------------------


MERGE_MSG = "Merge 'dev' into 'main'"


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, ["c3", MERGE_MSG, "d1", "c2", "c1", "Repository created"]),
        ({"amount": 2}, ["c3", MERGE_MSG]),
        ({"amount": 0}, []),
        ({"first_parent": True}, ["c3", MERGE_MSG, "c2", "c1", "Repository created"]),
        ({"no_merges": True}, ["c3", "d1", "c2", "c1", "Repository created"]),
        ({"no_merges": True, "amount": 2}, ["c3", "d1"]),
        ({"objects": ["a"]}, ["c2", "c1"]),
        ({"objects": ["d"]}, [MERGE_MSG, "d1"]),
        ({"objects": ["d"], "first_parent": True}, [MERGE_MSG]),
        ({"objects": ["d"], "no_merges": True}, ["d1"]),
        ({"objects": ["nothing"]}, []),
        ({"prefixes": ["b/"]}, ["c3", "c1"]),
        ({"prefixes": ["b/y"]}, ["c3"]),
        ({"prefixes": ["zz/"]}, []),
        ({"objects": ["a"], "prefixes": ["b/"]}, ["c3", "c2", "c1"]),
        ({"objects": ["a"], "amount": 1}, ["c2"]),
    ],
)
def test_log_order_and_filters(
    lake: Lake, history: dict[str, Commit], kwargs: dict[str, Any], expected: list[str]
) -> None:
    assert log_messages(lake, **kwargs) == expected


def test_log_is_newest_first_by_generation_then_date(lake: Lake, history: dict[str, Commit]) -> None:
    commits = list(lake_changes.log(lake, REPO, "main"))
    keys = [(c.generation, c.creation_date) for c in commits]
    assert keys == sorted(keys, reverse=True)
    assert log_messages(lake, "dev") == ["d1", "c1", "Repository created"]
    assert log_messages(lake, "v1") == ["c2", "c1", "Repository created"]
    assert log_messages(lake, "main~1^2") == ["d1", "c1", "Repository created"]


# -- merge ------------------------------------------------------------------------------------


@pytest.fixture
def forked(lake: Lake) -> Lake:
    """main and dev share base {same, both, del-src, del-dst, mod-del}, then diverge."""
    commit(lake, "main", "base", same="0", both="0", del_src="0", del_dst="0", mod_del="0", keep="0")
    porcelain.create_branch(lake, REPO, "dev", "main")
    return lake


# (case, changes on dev (source), changes on main (dest), conflicts, merged main)
# A change is path -> content, or None to delete.
MERGE_TABLE: list[
    tuple[str, dict[str, str | None], dict[str, str | None], list[str], dict[str, str | None]]
] = [
    ("source only", {"same": "1"}, {}, [], {"same": "1"}),
    ("dest only", {}, {"same": "1"}, [], {"same": "1"}),
    ("both, same change", {"same": "1"}, {"same": "1"}, [], {"same": "1"}),
    ("both, different change", {"both": "s"}, {"both": "d"}, ["both"], {}),
    ("added on both, same content", {"new": "x"}, {"new": "x"}, [], {"new": "x"}),
    ("added on both, different content", {"new": "s"}, {"new": "d"}, ["new"], {}),
    ("deleted on both", {"del_src": None}, {"del_src": None}, [], {"del_src": None}),
    ("deleted on source only", {"del_src": None}, {}, [], {"del_src": None}),
    ("deleted on dest only", {}, {"del_dst": None}, [], {"del_dst": None}),
    ("changed on source, deleted on dest", {"mod_del": "s"}, {"mod_del": None}, ["mod_del"], {}),
    ("deleted on source, changed on dest", {"mod_del": None}, {"mod_del": "d"}, ["mod_del"], {}),
    (
        "several conflicts are all reported, in path order",
        {"both": "s", "new": "s", "mod_del": None, "same": "1"},
        {"both": "d", "new": "d", "mod_del": "d"},
        ["both", "mod_del", "new"],
        {},
    ),
]


def _apply(lake: Lake, branch: str, changes: dict[str, str | None]) -> None:
    for path, content in changes.items():
        if content is None:
            writes.delete_objects(lake, REPO, branch, [path])
        else:
            put(lake, branch, **{path: content})
    if changes:
        porcelain.commit(lake, REPO, branch, f"change {branch}")


BASE_TREE = {"same": "0", "both": "0", "del_src": "0", "del_dst": "0", "mod_del": "0", "keep": "0"}


@pytest.mark.parametrize(
    ("src", "dst", "conflicts", "expected"),
    [pytest.param(s, d, c, e, id=case) for case, s, d, c, e in MERGE_TABLE],
)
def test_merge_rules(
    forked: Lake,
    src: dict[str, str | None],
    dst: dict[str, str | None],
    conflicts: list[str],
    expected: dict[str, str | None],
) -> None:
    lake = forked
    _apply(lake, "dev", src)
    _apply(lake, "main", dst)
    head = cid(lake, "main")
    if conflicts:
        with pytest.raises(MergeConflict) as e:
            merging.merge(lake, REPO, "dev", "main")
        assert e.value.paths == conflicts
        assert e.value.details["conflicts"] == conflicts
        assert cid(lake, "main") == head
        return
    result = merging.merge(lake, REPO, "dev", "main")
    if not src:  # dev is an ancestor of main: already up to date
        assert not result.changed and result.commit.id == head
    else:
        assert result.changed and result.commit.parents == (head, cid(lake, "dev"))
    want = {**BASE_TREE, **expected}
    assert view(lake, "main") == {p: v.encode() for p, v in want.items() if v is not None}


@pytest.mark.parametrize(
    ("strategies", "expected"),
    [
        (["dest-wins"], {"both": "d", "mod_del": None, "new": "d"}),
        (["source-wins"], {"both": "s", "mod_del": "s", "new": "s"}),
        (["both=source-wins"], None),  # the other conflicts remain
        (["dest-wins", "both=source-wins"], {"both": "s", "mod_del": None, "new": "d"}),
        (["source-wins", "mod_*=dest-wins"], {"both": "s", "mod_del": None, "new": "s"}),
        (["**=dest-wins"], {"both": "d", "mod_del": None, "new": "d"}),
    ],
)
def test_merge_strategies_decide_only_conflicts(
    forked: Lake, strategies: list[str], expected: dict[str, str | None] | None
) -> None:
    lake = forked
    _apply(lake, "dev", {"both": "s", "new": "s", "mod_del": "s", "same": "1", "del_src": None})
    _apply(lake, "main", {"both": "d", "new": "d", "mod_del": None, "keep": "k"})
    if expected is None:
        with pytest.raises(MergeConflict) as e:
            merging.merge(lake, REPO, "dev", "main", strategies)
        assert e.value.paths == ["mod_del", "new"]
        return
    merging.merge(lake, REPO, "dev", "main", strategies)
    # Non-conflicting changes merge as usual whatever the strategy.
    want = {**BASE_TREE, "same": "1", "del_src": None, "keep": "k", **expected}
    assert view(lake, "main") == {p: v.encode() for p, v in want.items() if v is not None}


@pytest.mark.parametrize("strategy", ["", "theirs", "=dest-wins", "x=", "x=ours"])
def test_unknown_merge_strategy_is_invalid(forked: Lake, strategy: str) -> None:
    with pytest.raises(InvalidArgument):
        merging.merge(forked, REPO, "dev", "main", [strategy])


def test_merge_already_up_to_date_and_fast_forward_shape(forked: Lake) -> None:
    lake = forked
    head = cid(lake, "main")
    assert merging.merge(lake, REPO, "dev", "main").changed is False  # same commit
    assert merging.merge(lake, REPO, "main", "main").changed is False
    commit(lake, "dev", "ahead", ahead="1")
    result = merging.merge(lake, REPO, "dev", "main")
    assert result.changed and result.commit.parents == (head, cid(lake, "dev"))
    assert merging.merge(lake, REPO, "dev", "main").changed is False  # dev is now an ancestor


def test_merge_from_tag_and_commit_id(forked: Lake) -> None:
    lake = forked
    c = commit(lake, "dev", "t", t="1")
    porcelain.create_tag(lake, REPO, "rel", "dev")
    commit(lake, "dev", "later", later="1")
    merging.merge(lake, REPO, "rel", "main")
    assert "t" in view(lake, "main") and "later" not in view(lake, "main")
    assert merging.merge(lake, REPO, c.id, "main").changed is False


def test_merge_refuses_a_dirty_destination(forked: Lake) -> None:
    lake = forked
    commit(lake, "dev", "x", x="1")
    put(lake, "main", staged="1")
    head = cid(lake, "main")
    with pytest.raises(DirtyBranch):
        merging.merge(lake, REPO, "dev", "main")
    assert cid(lake, "main") == head
    writes.delete_objects(lake, REPO, "main", ["same"])
    with pytest.raises(DirtyBranch):
        merging.merge(lake, REPO, "dev", "main")
    # Staged changes on the source do not matter: only its commit is merged.
    merging.reset(lake, REPO, "main")
    put(lake, "dev", uncommitted="1")
    merging.merge(lake, REPO, "dev", "main")
    assert "x" in view(lake, "main") and "uncommitted" not in view(lake, "main")


NOOP_STAGING: list[tuple[str, Callable[[Lake], None], str]] = [
    ("reset object", noop_reset_object, "x"),
    ("reset prefix", noop_reset_prefix, "x"),
    ("upload then delete", noop_upload_delete, "x"),
    ("re-upload committed bytes", noop_reupload_same, "same"),
]


@pytest.mark.parametrize(("make_noop", "path"), [pytest.param(f, p, id=case) for case, f, p in NOOP_STAGING])
def test_merge_into_branch_with_noop_staged_entries_shows_merged_tree(
    forked: Lake, make_noop: Callable[[Lake], None], path: str
) -> None:
    lake = forked
    commit(lake, "dev", "dev changes", x="from-dev", same="from-dev")
    make_noop(lake)
    assert lake_changes.diff_uncommitted(lake, REPO, "main") == []
    merging.merge(lake, REPO, "dev", "main")
    assert view(lake, "main") == view(lake, "main@")
    assert lake_changes.diff_uncommitted(lake, REPO, "main") == []


def test_revert_on_branch_with_noop_staged_entries_shows_reverted_tree(forked: Lake) -> None:
    lake = forked
    c = commit(lake, "main", "change same", same="1")
    put(lake, "main", same="1")  # re-upload the committed bytes: not a change
    assert lake_changes.diff_uncommitted(lake, REPO, "main") == []
    merging.revert(lake, REPO, "main", c.id)
    assert view(lake, "main")["same"] == b"0"


# -- revert, cherry-pick ----------------------------------------------------------------------


def test_revert_undoes_one_commit(lake: Lake, history: dict[str, Commit]) -> None:
    before = view(lake, "main")
    r = merging.revert(lake, REPO, "main", history["C3"].id)
    assert r.parents == (history["C3"].id,)
    assert r.message == 'Revert "c3"'
    assert view(lake, "main") == {k: v for k, v in before.items() if k != "b/y"}
    merging.revert(lake, REPO, "main", "main")  # revert the revert
    assert view(lake, "main") == before


@pytest.mark.parametrize("number", [0, 3, -1])
def test_revert_of_merge_commit_needs_a_valid_parent_number(
    lake: Lake, history: dict[str, Commit], number: int
) -> None:
    with pytest.raises(InvalidArgument):
        merging.revert(lake, REPO, "main", history["M"].id, parent_number=number)
    with pytest.raises(InvalidArgument):
        merging.cherry_pick(lake, REPO, "main", history["M"].id, parent_number=number)


def test_revert_of_merge_commit_relative_to_each_parent(lake: Lake, history: dict[str, Commit]) -> None:
    before = view(lake, "main")
    merging.revert(lake, REPO, "main", history["M"].id, parent_number=1)
    assert view(lake, "main") == {k: v for k, v in before.items() if k != "d"}
    merging.reset(lake, REPO, "main")
    porcelain.create_branch(lake, REPO, "r2", history["M"].id)
    merging.revert(lake, REPO, "r2", "r2", parent_number=2)
    # Relative to D1, M changed a (1 -> 2): reverting sets it back.
    assert view(lake, "r2")["a"] == b"1"


def test_cherry_pick_of_merge_commit(lake: Lake, history: dict[str, Commit]) -> None:
    porcelain.create_branch(lake, REPO, "pick", history["C0"].id)
    c = merging.cherry_pick(lake, REPO, "pick", history["M"].id, parent_number=1)
    assert c.message == history["M"].message
    assert view(lake, "pick") == {"d": b"1"}
    porcelain.create_branch(lake, REPO, "pick2", history["C0"].id)
    with pytest.raises(MergeConflict) as e:
        merging.cherry_pick(lake, REPO, "pick2", history["M"].id, parent_number=2)
    assert e.value.paths == ["a"]  # M changed a relative to D1; pick2 has no a at all


def test_cherry_pick_plain_commit_keeps_metadata(lake: Lake, history: dict[str, Commit]) -> None:
    commit(lake, "dev", "not picked", p="1")
    put(lake, "dev", m="1")
    src = porcelain.commit(lake, REPO, "dev", "with meta", metadata={"k": "v"})
    c = merging.cherry_pick(lake, REPO, "main", src.id)
    assert (c.message, dict(c.metadata)) == ("with meta", {"k": "v"})
    assert view(lake, "main")["m"] == b"1" and "p" not in view(lake, "main")


def test_revert_and_cherry_pick_refuse_a_dirty_branch(lake: Lake, history: dict[str, Commit]) -> None:
    put(lake, "main", staged="1")
    head = cid(lake, "main")
    with pytest.raises(DirtyBranch):
        merging.revert(lake, REPO, "main", history["C3"].id)
    with pytest.raises(DirtyBranch):
        merging.cherry_pick(lake, REPO, "main", history["D1"].id)
    assert cid(lake, "main") == head


def test_revert_conflict_is_reported_and_changes_nothing(lake: Lake, history: dict[str, Commit]) -> None:
    head = cid(lake, "main")
    with pytest.raises(MergeConflict) as e:
        merging.revert(lake, REPO, "main", history["C1"].id)
    assert e.value.paths == ["a"]  # C1 added a, C2 changed it since
    assert cid(lake, "main") == head
