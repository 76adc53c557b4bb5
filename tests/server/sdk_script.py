"""One script written for lakeFS's Python wrapper (``lakefs``), run unchanged but for the module
and client it is given: by lakeFS's own package against a lakectl server, and by lakectl's public
API (``import lakectl as lakefs``) embedded and against a server. It asserts as it goes and
returns what it saw, for the runs to be compared."""

from __future__ import annotations

from types import ModuleType
from typing import Any


def round_trip(lakefs: ModuleType, client: Any, name: str) -> list[Any]:
    """Create a repository ``name``, branch, write, read, commit, diff, merge, tag and delete."""
    seen: list[Any] = []
    assert client.version
    repo = lakefs.Repository(name, client=client).create(
        storage_namespace=f"local://{name}", default_branch="main"
    )
    assert repo.properties.default_branch == "main"
    assert name in [r.id for r in lakefs.repositories(client=client, prefix=name)]

    main = repo.branch("main")
    dev = repo.branch("dev").create(source_reference="main")
    seen.append([b.id for b in repo.branches()])

    dev.object("data/a.csv").upload(
        data=b"id,value\n1,one\n", content_type="text/csv", metadata={"owner": "sdk"}
    )
    dev.object("data/b.csv").upload(data=b"id,value\n2,two\n")
    dev.object("readme.txt").upload(data="hello lake", mode="w")
    seen.append([o.path for o in dev.objects(prefix="data/")])
    seen.append([o.path for o in dev.objects(delimiter="/")])

    obj = dev.object("data/a.csv")
    stat = obj.stat()
    seen.append((obj.exists(), stat.size_bytes, stat.content_type, stat.metadata))
    with obj.reader(mode="rb") as f:
        seen.append(f.read())
    with obj.reader(mode="rb") as f:  # ranged reads
        f.seek(9)
        seen.append(f.read(5))
    with dev.object("readme.txt").reader(mode="r") as f:
        seen.append(f.read())
    seen.append(dev.object("nope").exists())

    seen.append(sorted(c.path for c in dev.uncommitted()))
    ref = dev.commit(message="add data", metadata={"source": "sdk"})
    commit = ref.get_commit()
    seen.append((commit.message, commit.metadata))
    seen.append(list(dev.uncommitted()))

    seen.append([(c.path, c.type) for c in main.diff(dev)])
    merged = dev.merge_into(main, message="merge dev")
    assert main.get_commit().id == merged
    with main.object("data/b.csv").reader(mode="rb") as f:
        seen.append(f.read())

    log = list(main.log(max_amount=10))
    seen.append([c.message for c in log])
    assert log[0].id == merged

    main.object("data/b.csv").delete()
    dev.delete_objects(["data/a.csv", "readme.txt"])
    seen.append(sorted(c.path for c in main.uncommitted()))
    tag = repo.tag("v1").create(merged)
    assert tag.get_commit().id == merged
    dev.delete()
    seen.append([b.id for b in repo.branches()])
    repo.delete()
    return seen


EXPECTED: list[Any] = [
    ["dev", "main"],
    ["data/a.csv", "data/b.csv"],
    ["data/", "readme.txt"],
    (True, 15, "text/csv", {"owner": "sdk"}),
    b"id,value\n1,one\n",
    b"1,one",
    "hello lake",
    False,
    ["data/a.csv", "data/b.csv", "readme.txt"],
    ("add data", {"source": "sdk"}),
    [],
    [("data/a.csv", "added"), ("data/b.csv", "added"), ("readme.txt", "added")],
    b"id,value\n2,two\n",
    ["merge dev", "add data", "Repository created"],
    ["data/b.csv"],
    ["main"],
]
"""What every run of :func:`round_trip` sees."""
