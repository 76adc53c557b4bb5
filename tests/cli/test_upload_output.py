"""What ``lakectl fs upload`` says and records, embedded and against a server: one summary line
(objects, bytes, bytes new after deduplication, time), a line per object with -v, --json as
documented; each object's content type guessed from its name unless --content-type says it;
a progress bar of files done out of all and their rate on a terminal, none in a pipe."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.cli.both_json import Cli, cli, live
from tests.cli.terminal import lakectl, on_a_terminal
from tests.server.conftest import Live, unique

__all__ = ["cli", "live"]

ROOT = Path(__file__).resolve().parents[2]
SUMMARY = re.compile(
    r"uploaded (?P<objects>[\d,]+) objects? \((?P<size>[\d.]+ \w+), (?P<new>[\d.]+ \w+) new\) "
    r"to lakefs://(?P<repo>[^/]+)/main/(?P<where>\S*) in \d+(\.\d)?m?s"
)
OBJECT_KEYS = {
    "path",
    "path_type",
    "physical_address",
    "checksum",
    "size_bytes",
    "mtime",
    "content_type",
    "metadata",
}


def _files(root: Path) -> dict[str, bytes]:
    """Four small files (packed together) and one large one (blocks of its own), new bytes
    each time: the live server is shared, and old bytes would be deduplicated."""
    files = {
        "a.csv": b"id\n" + os.urandom(8).hex().encode(),
        "b.parquet": os.urandom(1000),
        "c.json": b'{"k": "%s"}' % os.urandom(4).hex().encode(),
        "sub/d.unknownext": os.urandom(100),
        "sub/big.bin": os.urandom(200_000),
    }
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return files


def _summary(out: str) -> re.Match[str]:
    """The one line an upload prints, parsed."""
    assert out.endswith("\n") and out.count("\n") == 1, out
    found = SUMMARY.fullmatch(out.rstrip("\n"))
    assert found is not None, out
    return found


def test_upload_prints_one_summary_line_and_dedup_makes_a_second_one_new_free(
    cli: Cli, tmp_path: Path
) -> None:
    cli("repo", "create", "lakefs://R")
    files = _files(tmp_path / "src")
    total = sum(map(len, files.values()))  # 201,1xx bytes: 196.x KiB
    first = _summary(cli("fs", "upload", "-r", "-s", str(tmp_path / "src"), "lakefs://R/main/in", human=True))
    assert first["objects"] == "5" and first["where"] == "in/"
    assert first["size"] == f"{total / 1024:.1f} KiB" and first["new"] == first["size"]
    # The same bytes again, elsewhere: every block is stored already.
    again = _summary(
        cli("fs", "upload", "-r", "-s", str(tmp_path / "src"), "lakefs://R/main/copy/", human=True)
    )
    assert again["objects"] == "5" and again["size"] == first["size"] and again["new"] == "0 B"

    one = _summary(
        cli("fs", "upload", "-s", str(tmp_path / "src" / "sub" / "big.bin"), "lakefs://R/main/x/", human=True)
    )
    assert (one["objects"], one["where"], one["size"], one["new"]) == ("1", "x/big.bin", "195.3 KiB", "0 B")
    fresh = tmp_path / "fresh.bin"
    fresh.write_bytes(os.urandom(3000))
    one = _summary(cli("fs", "upload", "-s", str(fresh), "lakefs://R/main/fresh.bin", human=True))
    assert one.group(0).startswith("uploaded 1 object (2.9 KiB, 2.9 KiB new) to lakefs://")


def test_verbose_lists_each_object_and_json_keeps_its_shape(cli: Cli, tmp_path: Path) -> None:
    cli("repo", "create", "lakefs://R")
    files = _files(tmp_path / "src")
    out = cli("fs", "upload", "-r", "-v", "-s", str(tmp_path / "src"), "lakefs://R/main/v/", human=True)
    *each, summary = out.splitlines()
    assert each == [f"uploaded v/{rel} ({_size(len(files[rel]))})" for rel in sorted(files)]
    assert _summary(summary + "\n")["objects"] == "5"
    # One file with -v: its stat, then the summary.
    out = cli(
        "fs", "upload", "-v", "-s", str(tmp_path / "src" / "a.csv"), "lakefs://R/main/one.csv", human=True
    )
    *stat, summary = out.splitlines()
    assert stat[0] == "Path:             one.csv" and "Content-Type:     text/csv" in stat
    assert summary.startswith("uploaded 1 object (")

    listed = cli("fs", "upload", "-r", "-s", str(tmp_path / "src"), "lakefs://R/main/j/")
    assert [o["path"] for o in listed] == [f"j/{rel}" for rel in sorted(files)]
    assert all(set(o) == OBJECT_KEYS for o in listed)
    assert [o["size_bytes"] for o in listed] == [len(files[rel]) for rel in sorted(files)]
    single = cli("fs", "upload", "-s", str(tmp_path / "src" / "c.json"), "lakefs://R/main/one.json")
    assert set(single) == OBJECT_KEYS and single["path"] == "one.json"
    assert (
        cli("fs", "upload", "-r", "-q", "-s", str(tmp_path / "src"), "lakefs://R/main/q/", human=True) == ""
    )


def _size(n: int) -> str:
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KiB"


GUESSED = {
    "a.csv": "text/csv",
    "b.parquet": "application/vnd.apache.parquet",
    "c.json": "application/json",
    "sub/d.unknownext": "application/octet-stream",
    "sub/big.bin": "application/octet-stream",
}


def test_each_object_gets_a_content_type_from_its_name_unless_one_is_given(cli: Cli, tmp_path: Path) -> None:
    cli("repo", "create", "lakefs://R")
    _files(tmp_path / "src")
    cli("fs", "upload", "-r", "-s", str(tmp_path / "src"), "lakefs://R/main/r/")
    listed = cli("fs", "ls", "-r", "lakefs://R/main/r/")
    assert {o["path"]: o["content_type"] for o in listed} == {f"r/{rel}": t for rel, t in GUESSED.items()}
    for rel, expected in GUESSED.items():
        cli("fs", "upload", "-s", str(tmp_path / "src" / rel), f"lakefs://R/main/one/{rel}")
        assert cli("fs", "stat", f"lakefs://R/main/one/{rel}")["content_type"] == expected
    cli("fs", "upload", "lakefs://R/main/stdin.csv", "-s", "-", input=b"1\n")
    assert cli("fs", "stat", "lakefs://R/main/stdin.csv")["content_type"] == "text/csv"

    # Said explicitly, a type wins: for every file of a directory, and for one file.
    cli(
        "fs",
        "upload",
        "-r",
        "-s",
        str(tmp_path / "src"),
        "lakefs://R/main/t/",
        "--content-type",
        "text/plain",
    )
    assert {o["content_type"] for o in cli("fs", "ls", "-r", "lakefs://R/main/t/")} == {"text/plain"}
    cli(
        "fs",
        "upload",
        "-s",
        str(tmp_path / "src" / "a.csv"),
        "lakefs://R/main/x.csv",
        "--content-type",
        "image/png",
    )
    assert cli("fs", "stat", "lakefs://R/main/x.csv")["content_type"] == "image/png"


# -- the progress bar, on a pseudo-terminal --------------------------------------------------------


def _env(tmp_path: Path, remote: Live | None) -> dict[str, str]:
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    out = {k: v for k, v in os.environ.items() if not k.startswith("LAKECTL_") and k != "NO_COLOR"}
    out.update(PYTHONPATH=path, TERM="xterm-256color", COLUMNS="120")
    out.update(LAKECTL_HOME=str(tmp_path / "lake"), LAKECTL_CONFIG=str(tmp_path / "none.yaml"))
    out.update(LAKECTL_COMMITTER="tester")
    if remote is not None:
        out.update(remote.cli_env(tmp_path))
    return out


@pytest.mark.parametrize("mode", ["embedded", "remote"])
def test_the_progress_bar_shows_files_done_of_all_and_the_rate_on_a_terminal_only(
    mode: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    remote: Live | None = request.getfixturevalue("live") if mode == "remote" else None
    env = _env(tmp_path, remote)
    repo = unique("bar")
    subprocess.run(
        lakectl("repo", "create", f"lakefs://{repo}"), env=env, check=True, timeout=120, capture_output=True
    )
    _files(tmp_path / "src")
    args = ("fs", "upload", "-r", "-s", str(tmp_path / "src"), f"lakefs://{repo}/main/in/")
    drawn = on_a_terminal(env, *args)
    assert "5/5" in drawn and re.search(r"\d[\d,]* files/s", drawn), drawn[-2000:]
    assert "uploaded 5 objects" in drawn

    piped = subprocess.run(
        lakectl(*args[:-1], f"lakefs://{repo}/main/again/"),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert piped.returncode == 0, piped.stderr
    assert piped.stderr == "" and _summary(piped.stdout)["new"] == "0 B"
    quiet = on_a_terminal(env, *args[:-1], f"lakefs://{repo}/main/quiet/", "--no-progress")
    assert "files/s" not in quiet and "5/5" not in quiet and "uploaded 5 objects" in quiet


def test_parallelism_as_lakefs_lakectl_takes_it(cli: Cli, tmp_path: Path) -> None:
    """``fs upload -r -p N`` (and ``--parallelism``, lakeFS's spelling) uploads every file, one
    request at a time at ``-p 1``; a parallelism below 1 is refused before anything is sent."""
    cli("repo", "create", "lakefs://R")
    files = _files(tmp_path / "src")
    for flag, where in (("-p", "one/"), ("--parallelism", "many/")):
        n = "1" if flag == "-p" else "25"
        infos = cli("fs", "upload", "-r", flag, n, "-s", str(tmp_path / "src"), f"lakefs://R/main/{where}")
        assert sorted(i["path"] for i in infos) == sorted(where + rel for rel in files)
        for rel, data in files.items():
            stat = cli("fs", "stat", f"lakefs://R/main/{where}{rel}")
            assert (stat["size_bytes"], stat["checksum"]) == (len(data), hashlib.md5(data).hexdigest())
    cli("fs", "upload", "-r", "-p", "0", "-s", str(tmp_path / "src"), "lakefs://R/main/none/", code=2)
    assert cli("fs", "ls", "lakefs://R/main/none/") == []
