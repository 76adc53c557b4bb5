"""The confinement of a server's host paths (lakectl.core.hostpaths) and the import sources that
use it, on real directories, symbolic links and files swapped after the check."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from lakectl.core.hostpaths import Confinement
from lakectl.core.importing.sources import parse_object, parse_source, read_external
from lakectl.core.model import Entry
from lakectl.errors import Forbidden, SourceChanged


@pytest.fixture
def host(tmp_path: Path) -> tuple[Path, Path, Confinement]:
    """``allowed`` holds the server's ``own`` directory; a confinement allowing the first only."""
    allowed, own = tmp_path / "allowed", tmp_path / "allowed" / "own"
    own.mkdir(parents=True)
    (own / "secret").write_bytes(b"s3cr3t")
    (allowed / "data").mkdir()
    (allowed / "data" / "f.csv").write_bytes(b"1,2\n")
    return allowed, own, Confinement.of([str(allowed)], [str(own)])


def test_paths_are_resolved_before_the_check(host: tuple[Path, Path, Confinement], tmp_path: Path) -> None:
    allowed, own, c = host
    assert c.check(str(allowed / "data" / ".." / "data"), "x") == str((allowed / "data").resolve())
    os.symlink(tmp_path, allowed / "up")
    os.symlink(own, allowed / "to-own")
    refused = [
        allowed / "data" / ".." / ".." / "elsewhere",
        allowed / "up",  # a link out of the allowed prefix
        allowed / "to-own" / "secret",  # a link into the forbidden root
        own,
        own / "secret",
        tmp_path / "missing" / "dir",  # refused without being looked at
        Path("/etc/passwd"),
    ]
    for path in refused:
        with pytest.raises(Forbidden, match="may not be read by this server"):
            c.check(str(path), "source")
    with pytest.raises(Forbidden, match="server's own files"):
        c.check(str(allowed), "source", tree=True)  # a directory holding the server's files
    assert c.check(str(allowed), "source") == str(allowed.resolve())  # fine as a prefix of a file
    nothing = Confinement.of([], [])
    with pytest.raises(Forbidden, match="none are set"):
        nothing.check(str(allowed / "data"), "source")


def test_an_open_file_is_checked_where_it_really_is(host: tuple[Path, Path, Confinement]) -> None:
    allowed, own, c = host
    os.close(c.open(str(allowed / "data" / "f.csv")))
    os.symlink(own / "secret", allowed / "data" / "link")
    with pytest.raises(OSError) as loop:  # a link at the last component is not followed
        c.open(str(allowed / "data" / "link"))
    assert loop.value.errno == errno.ELOOP
    os.symlink(own, allowed / "dir-link")
    with pytest.raises(Forbidden):  # nor one in the middle leads out
        c.open(str(allowed / "dir-link" / "secret"))


def test_a_confined_listing_follows_no_link_out_of_its_source(
    host: tuple[Path, Path, Confinement], tmp_path: Path
) -> None:
    allowed, own, c = host
    src = allowed / "data"
    os.symlink(src / "f.csv", src / "same")
    os.symlink(own / "secret", src / "secret")
    os.symlink(tmp_path, src / "dir-out")
    (tmp_path / "outside.txt").write_bytes(b"out")
    os.symlink(tmp_path / "outside.txt", src / "out")
    listed = {key: ext.address for key, _, ext, _ in parse_source(str(src), None, c).list()}
    assert listed == {"f.csv": str((src / "f.csv").resolve()), "same": str((src / "f.csv").resolve())}
    embedded = {key for key, _, _, _ in parse_source(str(src)).list()}
    assert embedded == {"f.csv", "same", "secret", "out"}  # the embedded lake: the user's own links
    with pytest.raises(Forbidden):
        parse_object(str(src / "secret"), None, c)


def test_a_directory_swapped_for_a_link_while_listed_is_left_out(
    host: tuple[Path, Path, Confinement],
) -> None:
    allowed, own, c = host
    src = allowed / "data"
    (src / "z").mkdir()
    (src / "z" / "secret").write_bytes(b"not secret")
    listing = parse_source(str(src), None, c).list()
    assert next(listing)[0] == "f.csv"  # the walk is done: z/secret is among the names
    (src / "z").rename(src / "z-gone")
    os.symlink(own, src / "z")  # z/secret now names the server's own secret
    assert list(listing) == []


def test_a_file_swapped_after_the_import_is_not_read(host: tuple[Path, Path, Confinement]) -> None:
    allowed, own, c = host
    target = own / "secret"
    src = allowed / "data" / "swap"
    src.write_bytes(b"x" * target.stat().st_size)
    st = target.stat()
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))  # the guard's size and mtime match
    [(_, size, ext, mtime)] = list(parse_object(str(src), None, c).list())
    entry = Entry(size, "x", (), mtime, external=ext)
    assert b"".join(read_external(entry, confinement=c)) == b"x" * size
    src.unlink()
    os.symlink(target, src)
    assert b"".join(read_external(entry)) == b"s3cr3t"  # unconfined, the guard alone lets it through
    with pytest.raises(SourceChanged, match="symbolic link"):
        read_external(entry, confinement=c)
    src.unlink()
    os.mkfifo(src)  # nor does a FIFO block the reader
    with pytest.raises(SourceChanged, match="regular file"):
        read_external(entry, confinement=c)


def test_the_lakes_block_prefix_on_s3_overlaps_lexically() -> None:
    c = Confinement.of([], [], [("lake", "prod/blocks/")])
    for key in ("prod/blocks/", "prod/blocks/abc/abcdef", "prod/b", "prod", ""):
        with pytest.raises(Forbidden, match="the lake's own blocks"):
            c.check_object_store("lake", key, "source")
    for bucket, key in (("lake", "prod/blocks2/x"), ("lake", "raw/"), ("other", "prod/blocks/")):
        c.check_object_store(bucket, key, "source")
    whole = Confinement.of([], [], [("lake", "")])
    with pytest.raises(Forbidden):
        whole.check_object_store("lake", "anything", "source")
