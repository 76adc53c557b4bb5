"""Acceptance: the official lakeFS Python SDK (``lakefs`` over ``lakefs-sdk``) works against this server.

The ``lakefs`` package is imported from where it is kept apart from site-packages (see
:mod:`tests.server.wrapped`).
"""

from __future__ import annotations

from types import ModuleType

from tests.server.conftest import Live, unique
from tests.server.wrapped import wrapped


def _lakefs() -> ModuleType:
    module = wrapped("lakefs")
    assert hasattr(module, "Client"), module
    return module


def test_the_lakefs_sdk_round_trip(live: Live) -> None:
    lakefs = _lakefs()
    client = lakefs.Client(host=live.url.removesuffix("/api/v1"), username=live.key_id, password=live.secret)
    assert client.version
    name = unique("sdk")

    repo = lakefs.Repository(name, client=client).create(
        storage_namespace=f"local://{name}", default_branch="main"
    )
    assert repo.properties.default_branch == "main"
    assert name in [r.id for r in lakefs.repositories(client=client, prefix=name)]

    main = repo.branch("main")
    dev = repo.branch("dev").create(source_reference="main")
    assert [b.id for b in repo.branches()] == ["dev", "main"]

    dev.object("data/a.csv").upload(
        data=b"id,value\n1,one\n", content_type="text/csv", metadata={"owner": "sdk"}
    )
    dev.object("data/b.csv").upload(data=b"id,value\n2,two\n")
    dev.object("readme.txt").upload(data="hello lake", mode="w")
    assert [o.path for o in dev.objects(prefix="data/")] == ["data/a.csv", "data/b.csv"]
    top = list(dev.objects(delimiter="/"))
    assert [o.path for o in top] == ["data/", "readme.txt"]

    obj = dev.object("data/a.csv")
    assert obj.exists() and obj.stat().size_bytes == 15 and obj.stat().content_type == "text/csv"
    assert obj.stat().metadata == {"owner": "sdk"}
    with obj.reader(mode="rb") as f:
        assert f.read() == b"id,value\n1,one\n"
    with obj.reader(mode="rb") as f:  # ranged reads
        f.seek(9)
        assert f.read(5) == b"1,one"
    with dev.object("readme.txt").reader(mode="r") as f:
        assert f.read() == "hello lake"
    assert not dev.object("nope").exists()

    assert sorted(c.path for c in dev.uncommitted()) == ["data/a.csv", "data/b.csv", "readme.txt"]
    ref = dev.commit(message="add data", metadata={"source": "sdk"})
    commit = ref.get_commit()
    assert commit.message == "add data" and commit.metadata == {"source": "sdk"}
    assert list(dev.uncommitted()) == []

    changes = list(main.diff(dev))
    assert [(c.path, c.type) for c in changes] == [
        ("data/a.csv", "added"),
        ("data/b.csv", "added"),
        ("readme.txt", "added"),
    ]
    merged = dev.merge_into(main, message="merge dev")
    assert main.get_commit().id == merged
    with main.object("data/b.csv").reader(mode="rb") as f:
        assert f.read() == b"id,value\n2,two\n"

    log = list(main.log(max_amount=10))
    assert [c.message for c in log] == ["merge dev", "add data", "Repository created"]
    assert log[0].id == merged

    main.object("data/b.csv").delete()
    dev.delete_objects(["data/a.csv", "readme.txt"])
    tag = repo.tag("v1").create(merged)
    assert tag.get_commit().id == merged
    dev.delete()
    assert [b.id for b in repo.branches()] == ["main"]
    repo.delete()
