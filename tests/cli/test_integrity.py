"""The embedded ``lakectl`` when stored blocks rot or go missing: uploading the same bytes heals
a rotten block; reading lost or damaged data exits 7 with one line, and leaves no partial file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cli.conftest import Run
from tests.rot import DAMAGE, cat_to_file, flip_byte, manifest_of_blocks


def test_upload_over_a_rotten_block_heals_it(run: Run, home: Path) -> None:
    data = os.urandom(100_000)
    run("repo", "create", "lakefs://heal")
    run("fs", "upload", "lakefs://heal/main/first", "--source", "-", input=data)
    flip_byte(home / "blocks", data, 5)
    run("fs", "upload", "lakefs://heal/main/again", "--source", "-", input=data)
    assert run("fs", "cat", "lakefs://heal/main/first").stdout_bytes == data
    assert run("fs", "cat", "lakefs://heal/main/again").stdout_bytes == data


@pytest.mark.parametrize("damage", ["lose", "flip"])
def test_cat_of_lost_or_damaged_data_exits_7_with_one_line(run: Run, home: Path, damage: str) -> None:
    data = os.urandom(100_000)
    run("repo", "create", "lakefs://lost")
    run("fs", "upload", "lakefs://lost/main/data.bin", "--source", "-", input=data)
    DAMAGE[damage](home / "blocks", data)
    result = run("fs", "cat", "lakefs://lost/main/data.bin", code=7)
    assert result.stdout_bytes == b""
    [line] = result.stderr.splitlines()
    assert line.startswith("error: block ")
    run("fs", "stat", "lakefs://lost/main/data.bin")  # the object is there: its data is not


@pytest.mark.parametrize("append", [False, True], ids=["write", "append"])
def test_cat_into_a_file_of_an_object_whose_second_block_is_damaged_leaves_none_of_it(
    run: Run, home: Path, tmp_path: Path, append: bool
) -> None:
    """The first block is written before the second fails its md5: the file is cut back to what
    it held before the command, and the exit code says the read failed."""
    parts = [os.urandom(512 * 1024) for _ in range(3)]
    run("repo", "create", "lakefs://big")
    run(
        "manifest",
        "import",
        "lakefs://big/main/",
        "-",
        input=manifest_of_blocks(home / "blocks", "big.bin", parts),
    )
    flip_byte(home / "blocks", parts[1], 100)
    target = tmp_path / "out.bin"
    target.write_bytes(b"kept\n")
    done = cat_to_file("lakefs://big/main/big.bin", target, os.environ, append=append)
    assert done.returncode == 7, done.stderr
    assert target.read_bytes() == (b"kept\n" if append else b"")
    assert done.stderr.decode().startswith("error: block ")


def test_download_of_an_object_whose_last_block_is_damaged_leaves_no_file(
    run: Run, home: Path, tmp_path: Path
) -> None:
    """A download large enough to be written around the page cache, its blocks verified ahead
    on threads: the same bytes when intact; when the last block fails its md5, exit 7 and
    nothing written (the target as it was, no temporary file)."""
    parts = [os.urandom(2 * 1024 * 1024 + 1001) for _ in range(3)]  # > directio.DIRECT_MIN, unaligned
    run("repo", "create", "lakefs://big")
    run(
        "manifest",
        "import",
        "lakefs://big/main/",
        "-",
        input=manifest_of_blocks(home / "blocks", "big.bin", parts),
    )
    out = tmp_path / "out"
    out.mkdir()
    run("fs", "download", "lakefs://big/main/big.bin", str(out / "big.bin"))
    assert (out / "big.bin").read_bytes() == b"".join(parts)
    flip_byte(home / "blocks", parts[2], 100)
    (out / "big.bin").write_bytes(b"kept\n")
    result = run("fs", "download", "lakefs://big/main/big.bin", str(out / "big.bin"), code=7)
    assert result.stderr.startswith("error: block ")
    assert sorted(p.name for p in out.iterdir()) == ["big.bin"]
    assert (out / "big.bin").read_bytes() == b"kept\n"
