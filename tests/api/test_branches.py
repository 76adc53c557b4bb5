"""Branches through the public API, embedded and against a server: transactions that merge on
success and leave nothing behind on failure, resets, reverts, cherry-picks, tags and listings."""

from __future__ import annotations

import pytest

import lakectl
from tests.server.conftest import unique


def test_a_transaction_merges_on_success_and_leaves_nothing_when_it_raises(client: lakectl.Client) -> None:
    repo = lakectl.Repository(unique("tx"), client=client).create()
    main = repo.branch("main")
    before = main.get_commit().id
    with main.transact(commit_message="load orders", commit_metadata={"job": "nightly"}) as tx:
        assert tx.id != "main" and [b.id for b in repo.branches()] == ["main"]  # hidden
        assert tx.id in [b.id for b in repo.branches(show_hidden=True)]
        tx.object("orders/2026.csv").upload("id\n1\n")
        assert not main.object("orders/2026.csv").exists()  # not before the merge
    assert main.object("orders/2026.csv").exists()
    loaded = [c for c in main.log(max_amount=5) if c.message == "load orders"]
    assert loaded and loaded[0].metadata == {"job": "nightly"}
    assert [b.id for b in repo.branches()] == ["main"]

    head = main.get_commit().id
    assert head != before
    with pytest.raises(ValueError, match="bad rows"), main.transact(commit_message="broken") as tx:
        tx.object("orders/2027.csv").upload("id\n2\n")
        raise ValueError("bad rows")
    assert main.get_commit().id == head
    assert not main.object("orders/2027.csv").exists() and list(main.uncommitted()) == []
    assert [b.id for b in repo.branches()] == ["main"]


def test_reset_revert_cherry_pick_and_tags(client: lakectl.Client) -> None:
    repo = lakectl.Repository(unique("br"), client=client).create()
    main = repo.branch("main")
    main.object("a.txt").upload("a")
    main.object("keep/b.txt").upload("b")
    main.reset_changes(path_type="object", path="a.txt")
    assert [c.path for c in main.uncommitted()] == ["keep/b.txt"]
    main.reset_changes()
    assert list(main.uncommitted()) == []

    main.object("a.txt").upload("a")
    added = main.commit("add a").get_commit()
    main.revert(added.id)
    assert not main.object("a.txt").exists()
    dev = repo.branch("dev").create(repo.commit(added.id))
    main.object("c.txt").upload("c")
    picked = main.commit("add c").get_commit()
    dev.cherry_pick(picked.id)
    assert dev.object("c.txt").exists() and dev.object("a.txt").exists()

    repo.tag("v1").create(dev)
    assert [t.id for t in repo.tags()] == ["v1"]
    assert repo.tag("v1").get_commit().id == dev.get_commit().id
    assert [c.path for c in repo.ref("v1").objects()] == ["a.txt", "c.txt"]
    assert [c.path for c in repo.ref("v1").objects(max_amount=1)] == ["a.txt"]
    assert [c.path for c in repo.ref("v1").objects(after="a.txt")] == ["c.txt"]
    repo.tag("v1").delete()
    assert list(repo.tags()) == []
    assert [b.id for b in repo.branches(prefix="d")] == ["dev"]
