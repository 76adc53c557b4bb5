"""``lakectl import``: zero-copy import of a local directory and of an S3 prefix (moto's server),
embedded and against a live server; reads through the version guard; status, cancel, bad input."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config

from lakectl.core.importing import sources, tasks
from tests import moto_s3
from tests.cli.both import Lakectl, both, live

__all__ = ["both", "live"]

s3_endpoint = moto_s3.s3_endpoint

INTEGRITY, NOT_FOUND, INVALID, CONFLICT, UNAUTHENTICATED, FORBIDDEN = 7, 3, 2, 5, 10, 8


def tree(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def du(root: Path) -> int:
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file())


def blocks_dir(cli: Lakectl) -> Path:
    if cli.live is not None:
        return cli.live.data_dir
    return Path(cli.env["LAKECTL_HOME"]) / "blocks"


FILES = {
    "a/x.csv": b"1,2,3\n",
    "a/b/c/deep.bin": os.urandom(300_000),
    "big.bin": os.urandom(3 * 1024 * 1024),
    "z.txt": b"last\n",
}


@pytest.fixture
def src(tmp_path: Path) -> Path:
    root = tree(tmp_path / "src", FILES)
    (root / "empty-dir").mkdir()
    return root


def test_a_local_directory_is_versioned_without_a_byte_copied(both: Lakectl, src: Path) -> None:
    cli, repo = both, both.repo
    before = du(blocks_dir(cli))
    st = cli.js(
        "import", "--from", str(src), "--to", f"lakefs://{repo}/main/data/", "-m", "imp", "--meta", "k=v"
    )
    assert st["completed"] is True and st["error"] is None
    assert st["ingested_objects"] == len(FILES)
    assert st["import_branch"] == "_main_imported" and st["merged"] is False
    assert st["commit"]["message"] == "imp" and st["commit"]["metadata"] == {"k": "v"}
    # Without --merge the import waits on _main_imported; main is untouched.
    assert cli.js("fs", "ls", "-r", f"lakefs://{repo}/main/data/") == []
    listed = cli.js("fs", "ls", "-r", f"lakefs://{repo}/_main_imported/data/")
    assert sorted(o["path"] for o in listed) == sorted(f"data/{k}" for k in FILES)
    for rel, data in FILES.items():
        got = cli(*("fs", "cat", f"lakefs://{repo}/_main_imported/data/{rel}")).stdout_bytes
        assert got == data
    stat = cli.js("fs", "stat", f"lakefs://{repo}/_main_imported/data/big.bin")
    assert stat["physical_address"] == str(src / "big.bin") and stat["size_bytes"] == len(FILES["big.bin"])
    assert du(blocks_dir(cli)) - before < 200_000  # range files only; the data is 3.3 MB
    if cli.live is not None:  # a presigned URL reads the source too, through its guard
        url = cli("fs", "presign", f"lakefs://{repo}/_main_imported/data/a/x.csv").stdout.strip()
        assert httpx.get(url).content == FILES["a/x.csv"]
    # --merge: the same import lands on main as a merge commit; a.csv committed before stays.
    merged = cli.js("import", "--from", f"local://{src}", "--to", f"lakefs://{repo}/main/data", "--merge")
    assert merged["merged"] is True and len(merged["commit"]["parents"]) == 2
    assert cli(*("fs", "cat", f"lakefs://{repo}/main/data/a/x.csv")).stdout_bytes == b"1,2,3\n"
    assert cli(*("fs", "cat", f"lakefs://{repo}/main/a/x.csv")).stdout_bytes == b"1,2\n"
    status = cli.js("import", "status", f"lakefs://{repo}/main", merged["id"])
    assert status["completed"] is True and status["commit"]["id"] == merged["commit"]["id"]


def test_an_import_replaces_its_destination_prefix(both: Lakectl, tmp_path: Path) -> None:
    cli, repo = both, both.repo
    cli("fs", "upload", f"lakefs://{repo}/main/data/old.txt", "-s", "-", input=b"old")
    cli("fs", "upload", f"lakefs://{repo}/main/keep/k.txt", "-s", "-", input=b"keep")
    cli("commit", f"lakefs://{repo}/main", "-m", "before")
    one = tree(tmp_path / "one", {"only.txt": b"one file"})
    cli("import", "--from", str(one), "--to", f"lakefs://{repo}/main/data/", "--merge")
    paths = [o["path"] for o in cli.js("fs", "ls", "-r", f"lakefs://{repo}/main/")]
    assert paths == ["a/x.csv", "data/only.txt", "keep/k.txt"]


def test_a_changed_or_vanished_source_fails_the_read(both: Lakectl, src: Path) -> None:
    cli, repo = both, both.repo
    cli("import", "--from", str(src), "--to", f"lakefs://{repo}/main/d/", "--merge")
    target = src / "a" / "x.csv"
    target.write_bytes(b"9,9,9\n")  # same size, new mtime
    os.utime(target, ns=(time.time_ns(), time.time_ns() + 5_000_000_000))
    failed = cli("fs", "cat", f"lakefs://{repo}/main/d/a/x.csv", code=INTEGRITY)
    assert failed.stdout_bytes == b"" and failed.stderr.count("\n") == 1
    assert failed.stderr.startswith("error: the source of this imported object changed or vanished")
    assert cli.js("fs", "cat", f"lakefs://{repo}/main/d/a/x.csv", code=INTEGRITY)["code"] == "source_changed"
    (src / "z.txt").unlink()
    gone = cli("fs", "cat", f"lakefs://{repo}/main/d/z.txt", code=INTEGRITY)
    assert gone.stdout_bytes == b"" and "vanished" in gone.stderr
    # the others still read
    assert cli(*("fs", "cat", f"lakefs://{repo}/main/d/big.bin")).stdout_bytes == FILES["big.bin"]


def test_import_copy_turns_imported_objects_into_owned_blocks(both: Lakectl, src: Path) -> None:
    cli, repo = both, both.repo
    cli("import", "--from", str(src), "--to", f"lakefs://{repo}/main/d/", "--merge")
    before = du(blocks_dir(cli))
    copied = cli.js("import", "copy", f"lakefs://{repo}/main/d/a/")
    assert copied == {"paths": ["d/a/b/c/deep.bin", "d/a/x.csv"], "count": 2}
    assert du(blocks_dir(cli)) - before >= len(FILES["a/b/c/deep.bin"])  # the bytes are in the lake now
    cli("commit", f"lakefs://{repo}/main", "-m", "own d/a")
    stat = cli.js("fs", "stat", f"lakefs://{repo}/main/d/a/b/c/deep.bin")
    assert stat["physical_address"].startswith("local://")
    (src / "a" / "b" / "c" / "deep.bin").unlink()  # the source may go: the copy is the lake's
    assert (
        cli(*("fs", "cat", f"lakefs://{repo}/main/d/a/b/c/deep.bin")).stdout_bytes == FILES["a/b/c/deep.bin"]
    )
    assert cli.js("import", "copy", f"lakefs://{repo}/main/d/a/") == {"paths": [], "count": 0}
    # a changed source fails the copy, and nothing is staged
    (src / "z.txt").write_bytes(b"other bytes")
    cli("import", "copy", f"lakefs://{repo}/main/d/", code=INTEGRITY)
    assert cli.js("diff", f"lakefs://{repo}/main") == []


def test_a_manifest_of_imported_objects_is_refused(both: Lakectl, src: Path) -> None:
    """A Keep manifest (and the Spark source, which reads by manifest) names blocks of the lake:
    imported objects have none, so the export is refused in one line, never a wrong manifest."""
    cli, repo = both, both.repo
    cli("import", "--from", str(src), "--to", f"lakefs://{repo}/main/d/", "--merge")
    r = cli("manifest", "export", f"lakefs://{repo}/main/d/", code=INVALID)
    assert r.stderr.startswith("error: object 'd/a/b/c/deep.bin' is imported") and r.stderr.count("\n") == 1
    cli("import", "copy", f"lakefs://{repo}/main/d/")
    exported = cli("manifest", "export", f"lakefs://{repo}/main/d/").stdout  # owned blocks now
    assert "./a/b/c " in exported and exported.endswith(":deep.bin\n")


def test_gc_and_fsck_leave_the_source_alone(both: Lakectl, src: Path) -> None:
    cli, repo = both, both.repo
    cli("import", "--from", str(src), "--to", f"lakefs://{repo}/feat/ext/")
    checked = cli.js("fsck", f"lakefs://{repo}")  # imported entries name no blocks of the lake
    assert checked["ok"] is True and checked["missing"] == []
    cli("branch", "delete", f"lakefs://{repo}/_feat_imported", "--yes")
    cli("gc", "run", f"lakefs://{repo}", "--grace-hours", "0")
    assert {str(p.relative_to(src)): p.read_bytes() for p in src.rglob("*") if p.is_file()} == FILES


def test_bad_input_is_one_error_line_and_stores_nothing(both: Lakectl, tmp_path: Path, src: Path) -> None:
    cli, repo = both, both.repo
    cases: list[tuple[list[str], int]] = [
        (["--from", "ftp://host/x", "--to", f"lakefs://{repo}/main/"], INVALID),
        (["--from", str(tmp_path / "missing"), "--to", f"lakefs://{repo}/main/"], NOT_FOUND),
        (["--from", str(src / "z.txt"), "--to", f"lakefs://{repo}/main/"], INVALID),  # a file
        (["--from", str(src), "--to", f"lakefs://{repo}/v1/"], INVALID),  # a tag, not a branch
        (["--from", str(src), "--to", f"lakefs://{repo}/nope/"], NOT_FOUND),
        (["--from", str(src), "--to", f"lakefs://{repo}/_main_imported/"], INVALID),
        (["--from", str(src), "--to", "not-a-uri"], INVALID),
        (["--from", str(src)], INVALID),
    ]
    for args, code in cases:
        r = cli("import", *args, code=code)
        assert r.stderr.startswith("error: ") and r.stderr.count("\n") == 1, (args, r.stderr)
    assert [b["id"] for b in cli.js("branch", "list", f"lakefs://{repo}")] == ["feat", "main"]
    assert (
        cli("import", "status", f"lakefs://{repo}/main", "nosuchid", code=NOT_FOUND).stderr.count("\n") == 1
    )


def test_links_out_of_the_source_embedded_and_on_a_server(both: Lakectl, tmp_path: Path, src: Path) -> None:
    """The embedded CLI imports its user's files, links out of the source included; a server
    follows none, and refuses its own data directory with one error line (exit 8)."""
    cli, repo = both, both.repo
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"elsewhere\n")
    os.symlink(outside, src / "link.txt")
    cli("import", "--from", str(src), "--to", f"lakefs://{repo}/main/in/", "-m", "links", "--merge")
    listed = [o["path"] for o in cli.js("fs", "ls", "-r", f"lakefs://{repo}/main/in/")]
    assert ("in/link.txt" in listed) is (cli.live is None), listed
    if cli.live is not None:
        r = cli(
            "import", "--from", str(cli.live.data_dir), "--to", f"lakefs://{repo}/main/x/", code=FORBIDDEN
        )
        assert r.stderr.startswith("error: ") and "server's own files" in r.stderr, r.stderr
        assert "read on the server, not where the client runs" in r.stderr
        assert r.stderr.count("\n") == 1


def test_a_dirty_branch_is_refused_before_a_merging_import(both: Lakectl, src: Path) -> None:
    cli, repo = both, both.repo
    cli("fs", "upload", f"lakefs://{repo}/main/wip.txt", "-s", "-", input=b"wip")
    r = cli("import", "--from", str(src), "--to", f"lakefs://{repo}/main/d/", "--merge", code=6)
    assert "uncommitted" in r.stderr


# -- status, cancel, a dead process ---------------------------------------------------------


@pytest.fixture
def slow_listing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Local listings yield one object per 20 ms: an import runs long enough to be canceled."""
    real = sources.LocalSource.list

    def slow(self: sources.LocalSource) -> Iterator[Any]:
        for item in real(self):
            time.sleep(0.02)
            yield item

    monkeypatch.setattr(sources.LocalSource, "list", slow)
    monkeypatch.setattr(tasks, "HEARTBEAT", 0.05)


def backend_of(cli: Lakectl, monkeypatch: pytest.MonkeyPatch) -> Any:
    for k, v in cli.env.items():
        monkeypatch.setenv(k, v)
    from lakectl.client import get_backend

    return get_backend()


def test_status_and_cancel_of_a_running_import(
    both: Lakectl, tmp_path: Path, slow_listing: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli, repo = both, both.repo
    many = tree(tmp_path / "many", {f"f{i:04d}": b"x" for i in range(1000)})
    b = backend_of(cli, monkeypatch)
    try:
        st = b.import_start(repo, "main", [{"path": str(many), "destination": "m/", "type": "common_prefix"}])
        deadline = time.monotonic() + 20
        while cli.js("import", "status", f"lakefs://{repo}/main", st["id"])["ingested_objects"] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        running = cli.js("import", "status", f"lakefs://{repo}/main", st["id"])
        assert running["completed"] is False and running["error"] is None
        assert "Canceled" in cli("import", "cancel", f"lakefs://{repo}/main", st["id"]).stdout
        while (done := cli.js("import", "status", f"lakefs://{repo}/main", st["id"]))["error"] is None:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert done["error"]["message"] == "import canceled" and done["completed"] is False
        human = cli("import", "status", f"lakefs://{repo}/main", st["id"]).stdout
        assert "failed: import canceled" in human
        # nothing of it was committed, and a finished import cannot be canceled again
        assert cli.js("fs", "ls", "-r", f"lakefs://{repo}/main/m/") == []
        cli("import", "cancel", f"lakefs://{repo}/main", st["id"], code=CONFLICT)
    finally:
        b.close()


def test_an_import_whose_process_died_is_reported_failed_and_runs_again(
    both: Lakectl, src: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli, repo = both, both.repo
    from lakectl.core import opening

    # What a killed process leaves: a running record whose heartbeat stopped long ago.
    if cli.live is not None:
        from server.app import open_lake
        from server.config import load_settings

        lake = open_lake(load_settings(None, str(cli.live.data_dir), environ={}))
    else:
        lake = opening.open_lake(cli.env["LAKECTL_HOME"])
    try:
        dead = tasks.Status("deadbeef", repo, "main", "_main_imported", True, ingested=10)
        dead.update_time = time.time() - 3600
        tasks._save(lake, dead)
    finally:
        lake.close()
    st = cli.js("import", "status", f"lakefs://{repo}/main", "deadbeef")
    assert st["completed"] is False and "ended before it completed" in st["error"]["message"]
    again = cli.js("import", "--from", str(src), "--to", f"lakefs://{repo}/main/d/", "--merge")
    assert again["completed"] is True


# -- S3 (moto's server) ----------------------------------------------------------------------


@pytest.fixture
def bucket(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, str]:
    """A bucket with objects, and boto3's usual chain pointed at moto (env, as a user sets it)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    client = boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}),
    )
    name = f"src-{os.getpid()}-{time.time_ns() % 10**9}"
    client.create_bucket(Bucket=name)
    for key, data in FILES.items():
        client.put_object(Bucket=name, Key=f"tables/{key}", Body=data)
    client.put_object(Bucket=name, Key="tables/empty-dir/", Body=b"")  # a directory marker
    client.put_object(Bucket=name, Key="other/x", Body=b"not imported")
    return client, name


def test_an_s3_prefix_is_versioned_without_a_byte_copied(both: Lakectl, bucket: tuple[Any, str]) -> None:
    cli, repo = both, both.repo
    client, name = bucket
    before = du(blocks_dir(cli))
    st = cli.js("import", "--from", f"s3://{name}/tables/", "--to", f"lakefs://{repo}/main/t/", "--merge")
    assert st["completed"] is True and st["ingested_objects"] == len(FILES)
    listed = cli.js("fs", "ls", "-r", f"lakefs://{repo}/main/t/")
    assert sorted(o["path"] for o in listed) == sorted(f"t/{k}" for k in FILES)
    for rel, data in FILES.items():
        assert cli(*("fs", "cat", f"lakefs://{repo}/main/t/{rel}")).stdout_bytes == data
    stat = cli.js("fs", "stat", f"lakefs://{repo}/main/t/a/x.csv")
    head = client.head_object(Bucket=name, Key="tables/a/x.csv")
    etag = head["ETag"].strip('"')
    assert stat["physical_address"] == f"s3://{name}/tables/a/x.csv" and stat["checksum"] == etag
    assert stat["mtime"] == int(head["LastModified"].timestamp())
    assert du(blocks_dir(cli)) - before < 200_000
    # overwritten at the source: the read fails, never serving the new bytes
    client.put_object(Bucket=name, Key="tables/a/x.csv", Body=b"4,5,6\n")
    r = cli("fs", "cat", f"lakefs://{repo}/main/t/a/x.csv", code=INTEGRITY)
    assert r.stdout_bytes == b"" and "changed or vanished" in r.stderr
    client.delete_object(Bucket=name, Key="tables/z.txt")
    cli("fs", "cat", f"lakefs://{repo}/main/t/z.txt", code=INTEGRITY)
    # a single object (lakeFS's type: object), through the Backend
    assert cli(*("fs", "cat", f"lakefs://{repo}/main/t/big.bin")).stdout_bytes == FILES["big.bin"]


def test_a_listing_of_several_pages_is_read_whole_in_order_and_a_failure_midway_is_raised(
    bucket: tuple[Any, str],
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from lakectl.core.importing import s3
    from lakectl.errors import NotFound

    client, name = bucket
    keys = [f"many/{i:05d}.csv" for i in range(5 * 1000 + 17)]  # six pages of 1,000
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda k: client.put_object(Bucket=name, Key=k, Body=k.encode()), keys))
    source = s3.parse(f"s3://{name}/many/")
    listed = list(source.list())
    assert [path for path, *_ in listed] == [k[len("many/") :] for k in keys]
    assert all(size == len(f"many/{path}") for path, size, *_ in listed)
    first = next(iter(source.list()))  # stopping after one object stops the fetching
    assert first[0] == "00000.csv"
    # The bucket goes away while the pages already fetched are read: the import fails, it does
    # not end with the objects listed so far. The listing's request for page 2 waits until the
    # bucket is gone (else it may come between the objects' deletion and the bucket's, and
    # find an empty last page: S3 lists no snapshot).
    gone = threading.Event()
    requests: list[str] = []

    def hold_page_two(**_: Any) -> None:
        requests.append("list")
        if len(requests) == 2:
            assert gone.wait(30)

    listing_client = s3.client()
    listing_client.meta.events.register("before-call.s3.ListObjectsV2", hold_page_two)
    found = []
    try:
        with pytest.raises(NotFound):
            for path, *_ in source.list():
                found.append(path)
                if len(found) == 1:
                    for start in range(0, len(keys), 1000):
                        chunk = [{"Key": k} for k in keys[start : start + 1000]]
                        client.delete_objects(Bucket=name, Delete={"Objects": chunk})
                    for k in client.list_objects_v2(Bucket=name).get("Contents", ()):
                        client.delete_object(Bucket=name, Key=k["Key"])
                    client.delete_bucket(Bucket=name)
                    gone.set()
        assert len(requests) == 2 and 1 <= len(found) <= 1000  # page 2 was asked for, and failed
    finally:
        gone.set()
        listing_client.meta.events.unregister("before-call.s3.ListObjectsV2", hold_page_two)
    assert 1 <= len(found) < len(keys)


def test_s3_bad_input(both: Lakectl, bucket: tuple[Any, str], monkeypatch: pytest.MonkeyPatch) -> None:
    cli, repo = both, both.repo
    _, name = bucket
    r = cli("import", "--from", "s3://no-such-bucket-x/p/", "--to", f"lakefs://{repo}/main/", code=NOT_FOUND)
    assert r.stderr.count("\n") == 1
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(k)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    r = cli(
        "import", "--from", f"s3://{name}/tables/", "--to", f"lakefs://{repo}/main/", code=UNAUTHENTICATED
    )
    assert "credentials" in r.stderr and r.stderr.count("\n") == 1


def test_an_import_is_journalled_and_rebuilt(tmp_path: Path, src: Path) -> None:
    """The import's branch, commit and merge are journal entries: a lake rebuilt from the journal
    and the blocks has them, and reads its imported objects (embedded: a rebuild runs on the
    lake's own directory)."""
    from tests.cli.test_journal import embedded_cli

    cli = embedded_cli(tmp_path)
    cli("journal", "enable")
    cli("repo", "create", "lakefs://jrnl")
    done = cli.js("import", "--from", str(src), "--to", "lakefs://jrnl/main/d/", "--merge")
    home = Path(cli.env["LAKECTL_HOME"])
    (home / "lake.db").rename(home.parent / "lake.db.lost")
    for leftover in home.glob("lake.db-*"):
        leftover.unlink()
    cli("admin", "rebuild", "--from-journal")
    assert cli.js("show", "commit", "lakefs://jrnl/main")["id"] == done["commit"]["id"]
    assert cli(*("fs", "cat", "lakefs://jrnl/main/d/a/x.csv")).stdout_bytes == FILES["a/x.csv"]
    assert [b["id"] for b in cli.js("branch", "list", "lakefs://jrnl")] == ["_main_imported", "main"]


def test_a_lake_on_s3_reads_s3_sources_with_its_block_stores_credentials(
    s3_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server whose blockstore is S3 lists and reads imported S3 objects with that store's
    endpoint and keys (`blockstore.s3.*`), whatever boto3's usual chain says in the process."""
    from lakectl.core import porcelain as p
    from lakectl.core.blocks.s3 import S3Adapter
    from lakectl.core.importing.tasks import Location
    from lakectl.core.kv.sqlite import SQLiteStore
    from lakectl.core.lake import Lake

    keys = {"access_key_id": "testing", "secret_access_key": "testing"}
    client = boto3.client(
        "s3", endpoint_url=s3_endpoint, region_name="us-east-1", aws_access_key_id="testing",
        aws_secret_access_key="testing", config=Config(s3={"addressing_style": "path"}),
    )  # fmt: skip
    store, source = f"blocks-{time.time_ns() % 10**9}", f"data-{time.time_ns() % 10**9}"
    for name in (store, source):
        client.create_bucket(Bucket=name)
    client.put_object(Bucket=source, Key="raw/a.csv", Body=b"a\n")
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # the chain would go nowhere
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    blocks = S3Adapter(store, endpoint_url=s3_endpoint, region="us-east-1", **keys)
    lake = Lake(kv=SQLiteStore(str(tmp_path / "lake.db")), blocks=blocks)
    try:
        p.create_repo(lake, "ons3")
        location = Location.from_dict(
            {"type": "common_prefix", "path": f"s3://{source}/raw/", "destination": "r/"}
        )
        done = tasks.start(lake, "ons3", "main", [location], "import", background=False)
        assert done.completed and done.ingested == 1, done.error
        assert b"".join(p.read(lake, "ons3", "main", "r/a.csv")) == b"a\n"
    finally:
        lake.close()
