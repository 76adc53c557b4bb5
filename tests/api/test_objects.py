"""Objects through the public API, embedded and against a server: readers that seek, writers of
any size that stage on close (and stage nothing when their block raises), modes, and lakeFS's
exception classes for what is missing or taken."""

from __future__ import annotations

import hashlib
import os

import pytest

import lakectl
from lakectl import errors
from lakectl.api import objects
from lakectl.exceptions import (
    BadRequestException,
    ConflictException,
    NotFoundException,
    ObjectExistsException,
    ObjectNotFoundException,
    UnsupportedOperationException,
)
from tests.api.spy import Recording
from tests.server.conftest import unique


def fresh(client: lakectl.Client) -> lakectl.Repository:
    return lakectl.Repository(unique("api"), client=client).create()


def test_a_reader_reads_seeks_and_tells(client: lakectl.Client) -> None:
    main = fresh(client).branch("main")
    data = bytes(range(256)) * 4000
    main.object("b.bin").upload(data)
    with main.object("b.bin").reader() as f:
        assert f.read(10) == data[:10]
        f.seek(500_000)
        assert f.read(7) == data[500_000:500_007] and f.tell() == 500_007
        f.seek(3)  # back: read again from the start
        assert f.read(4) == data[3:7]
        f.seek(-5, os.SEEK_END)
        assert f.read() == data[-5:]
    with main.object("t.txt").upload("é\nline two\n").reader("r") as text:
        assert text.readlines() == ["é\n", "line two\n"]


def test_a_writer_stages_any_size_on_close_and_nothing_when_it_raises(
    client: lakectl.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(objects, "SPOOL_BYTES", 1 << 20)  # spools to disk past 1 MiB
    main = fresh(client).branch("main")
    piece = os.urandom(256 * 1024)
    digest = hashlib.md5()
    with main.object("big.bin").writer("wb", content_type="application/x-test", metadata={"k": "v"}) as w:
        for _ in range(12):  # 3 MiB, past the spool's memory
            w.write(piece)
            digest.update(piece)
    stat = main.object("big.bin").stat()
    assert (stat.size_bytes, stat.content_type, stat.metadata) == (
        12 * len(piece),
        "application/x-test",
        {"k": "v"},
    )
    with main.object("big.bin").reader() as f:
        assert hashlib.md5(f.read()).digest() == digest.digest()
    with main.object("notes.txt").writer("w") as t:
        t.write("first\n")
        t.write("second\n")
    with main.object("notes.txt").reader("r") as f:
        assert f.read() == "first\nsecond\n"
    for mode in ("wb", "w"):
        with pytest.raises(RuntimeError), main.object(f"half-{mode}").writer(mode) as w:
            w.write(b"partial" if mode == "wb" else "partial")
            raise RuntimeError("the job failed")
        assert not main.object(f"half-{mode}").exists()


def test_appends_add_to_the_end_and_keep_the_type(client: lakectl.Client) -> None:
    main = fresh(client).branch("main")
    log = main.object("events/log.jsonl")
    log.upload('{"n": 1}\n', content_type="application/x-ndjson")
    log.append('{"n": 2}\n').append(b'{"n": 3}\n')
    with log.reader("r") as f:
        assert f.read().splitlines() == ['{"n": 1}', '{"n": 2}', '{"n": 3}']
    assert log.stat().content_type == "application/x-ndjson"
    main.object("events/new.jsonl").append("first\n")  # created by its first append
    assert main.object("events/new.jsonl").stat().size_bytes == 6


def test_modes_and_errors_are_lakefs_s(client: lakectl.Client) -> None:
    repo = fresh(client)
    main = repo.branch("main")
    main.object("a.txt").upload("one", mode="x")
    with pytest.raises(ObjectExistsException):
        main.object("a.txt").upload("two", mode="x")
    with pytest.raises(UnsupportedOperationException):
        main.object("a.txt").upload("two", mode="a")  # type: ignore[arg-type]
    with pytest.raises(ObjectNotFoundException) as missing:
        main.object("nope.txt").stat()
    assert isinstance(missing.value, FileNotFoundError) and missing.value.status_code == 404
    assert isinstance(missing.value.__cause__, errors.ObjectNotFound)
    with pytest.raises(NotFoundException):
        repo.branch("no-such-branch").get_commit()
    with pytest.raises(NotFoundException):
        lakectl.Repository(unique("missing"), client=client).properties  # noqa: B018
    with pytest.raises(ConflictException):
        lakectl.Repository(repo.id, client=client).create()
    assert (
        lakectl.Repository(repo.id, client=client).create(exist_ok=True).properties.default_branch == "main"
    )
    with pytest.raises(BadRequestException):
        lakectl.Repository("Not A Name!", client=client).create()
    with pytest.raises(ConflictException):
        repo.branch("dev").create("main").create("main")
    assert repo.branch("dev").create("main", exist_ok=True).id == "dev"


def test_a_reader_fetches_from_where_it_seeks_not_the_whole_object(client: lakectl.Client) -> None:
    main = fresh(client).branch("main")
    data = os.urandom(3 << 20)
    main.object("big.bin").upload(data)
    recording = Recording(client.backend)
    spied = lakectl.Client(backend=recording)  # type: ignore[arg-type]
    with lakectl.Repository(main.repo_id, client=spied).branch("main").object("big.bin").reader() as f:
        f.seek(-(256 << 10), os.SEEK_END)
        assert f.read(10) == data[-(256 << 10) : -(256 << 10) + 10]
        assert recording.handed <= 256 << 10  # the last 256 KiB at most, not 3 MiB
        f.seek(1000)
        assert f.read(4) == data[1000:1004]


def test_a_copy_shares_the_source_s_bytes_on_another_branch(client: lakectl.Client) -> None:
    repo = fresh(client)
    dev = repo.branch("dev").create("main")
    dev.object("raw/a.csv").upload("id\n1\n", content_type="text/csv", metadata={"owner": "etl"})
    dev.commit("raw")
    copied = repo.ref("dev").object("raw/a.csv").copy("main", "curated/a.csv")
    assert isinstance(copied, lakectl.WriteableObject) and copied.ref == "main"
    stat = copied.stat()
    assert (stat.content_type, stat.metadata, stat.checksum) == (
        "text/csv",
        {"owner": "etl"},
        dev.object("raw/a.csv").stat().checksum,
    )
    with copied.reader("r") as f:
        assert f.read() == "id\n1\n"
    assert [c.path for c in repo.branch("main").uncommitted()] == ["curated/a.csv"]
    with pytest.raises(ObjectNotFoundException):
        repo.ref("dev").object("raw/nope.csv").copy("main", "curated/nope.csv")
