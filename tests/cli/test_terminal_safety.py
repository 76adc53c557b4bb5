"""What reaches a terminal: stored names that would drive it are escaped in human output, JSON
stays valid UTF-8 whatever was stored, and ``fs upload -r`` never waits on a FIFO."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lakectl.core import opening, writes
from lakectl.core.graph.commits import CommitRequest
from lakectl.core.model import BranchId, RepositoryId
from tests.cli.conftest import Run

# Values a lake written before lakectl refused them (or by another tool) may hold.
ESC_PATH = "logs/\x1b[2J\x1b]0;owned\x07.csv"
BIDI_PATH = "data/invoice\u202egpj.exe"
ESC_MESSAGE = "nightly\x1b[31m load\ncolumns:\tfixed"
SURROGATE_MESSAGE = "legacy \udcff bytes"


@pytest.fixture
def hostile(run: Run, home: Path) -> Path:
    """Repository ``demo``: a commit whose message holds ESC, with two objects whose paths hold an
    ESC sequence and a bidi override, staged and committed through plumbing (porcelain refuses
    them now), then one more staged change for ``diff``."""
    run("repo", "create", "lakefs://demo")
    lake = opening.open_lake(str(home))
    try:
        repo, main = RepositoryId("demo"), BranchId("main")
        entry = writes.upload(lake, "demo", "main", "plain.csv", b"a,b\n").entry
        assert entry is not None
        lake.staging.write(repo, main, [(ESC_PATH, entry.to_row()), (BIDI_PATH, entry.to_row())])
        lake.committer.commit(repo, main, CommitRequest(ESC_MESSAGE, "tester\x1b[8m", {"k\x1b": "v"}, 1))
        lake.committer.commit(repo, main, CommitRequest(SURROGATE_MESSAGE, "tester", {}, 2, allow_empty=True))
        lake.staging.write(repo, main, [(ESC_PATH, None)])
    finally:
        lake.close()
    return home


def _no_controls(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text, repr(text)


def test_listing_escapes_stored_names(run: Run, hostile: Path) -> None:
    out = run("fs", "ls", "-r", "lakefs://demo/main@/").stdout  # committed: ESC_PATH is staged gone
    _no_controls(out)
    assert "logs/\\x1b[2J\\x1b]0;owned\\x07.csv" in out
    assert "data/invoice\\u202egpj.exe" in out


def test_many_lines_written_at_once_are_escaped_as_one_by_one(capsys: pytest.CaptureFixture[str]) -> None:
    """``render.lines`` (``fs upload -r``'s line per object, in one write) escapes what
    ``render.line`` escapes, line breaks between the lines aside."""
    from lakectl.cli import render

    texts = [ESC_PATH, BIDI_PATH, "plain", SURROGATE_MESSAGE]
    for text in texts:
        render.line(text)
    one_by_one = capsys.readouterr().out
    render.lines(texts)
    at_once = capsys.readouterr().out
    assert at_once == one_by_one and len(at_once.splitlines()) == len(texts)
    _no_controls(at_once)
    render.lines([])
    assert capsys.readouterr().out == ""


def test_diff_escapes_stored_names(run: Run, hostile: Path) -> None:
    out = run("diff", "lakefs://demo/main").stdout
    _no_controls(out)
    assert "- logs/\\x1b[2J" in out


def test_log_escapes_messages_committers_and_metadata(run: Run, hostile: Path) -> None:
    out = run("log", "lakefs://demo/main").stdout
    _no_controls(out)
    assert "nightly\\x1b[31m load" in out
    assert "    columns:\tfixed" in out  # tabs and line breaks of a message stay
    assert "tester\\x1b[8m" in out and "k\\x1b = v" in out
    assert "legacy \\udcff bytes" in out


def test_stat_and_errors_escape_names(run: Run, hostile: Path) -> None:
    out = run("fs", "stat", f"lakefs://demo/main/{BIDI_PATH}").stdout
    _no_controls(out)
    err = run("fs", "stat", "lakefs://demo/main/data/invoice\u202exyz", code=3).stderr
    _no_controls(err)


def test_json_output_is_utf8_whatever_was_stored(run: Run, hostile: Path) -> None:
    raw = run("log", "lakefs://demo/main", "--json").stdout_bytes
    raw.decode("utf-8")  # valid UTF-8: the stored lone surrogate is a JSON escape
    commits = json.loads(raw)
    assert commits[0]["message"] == SURROGATE_MESSAGE
    assert commits[1]["message"] == ESC_MESSAGE


def _lakectl(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LAKECTL_HOME": str(home), "LAKECTL_CONFIG": str(home / "none.yaml")}
    env.pop("LAKECTL_SERVER_ENDPOINT_URL", None)
    lakectl = Path(sys.executable).with_name("lakectl")
    # Bounded: were the FIFO read, the upload would wait for a writer forever.
    return subprocess.run([str(lakectl), *args], capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture
def tree_with_fifo(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    (root / "sub").mkdir(parents=True)
    (root / "a.csv").write_text("1\n")
    (root / "sub" / "b.csv").write_text("2\n")
    os.mkfifo(root / "sub" / "pipe")
    (root / "dangling").symlink_to(tmp_path / "nowhere")
    return root


def test_upload_skips_a_fifo_with_a_warning(tmp_path: Path, tree_with_fifo: Path) -> None:
    home = tmp_path / "lake"
    assert _lakectl(home, "repo", "create", "lakefs://demo").returncode == 0
    done = _lakectl(home, "fs", "upload", "-r", "--source", str(tree_with_fifo), "lakefs://demo/main/in/")
    assert done.returncode == 0, done.stderr
    assert "skipped" in done.stderr and "a FIFO" in done.stderr and "dangling" in done.stderr
    listed = _lakectl(home, "fs", "ls", "-r", "--json", "lakefs://demo/main/in/")
    assert sorted(o["path"] for o in json.loads(listed.stdout)) == ["in/a.csv", "in/sub/b.csv"]


def test_strict_upload_refuses_a_fifo_and_stores_nothing(tmp_path: Path, tree_with_fifo: Path) -> None:
    home = tmp_path / "lake"
    assert _lakectl(home, "repo", "create", "lakefs://demo").returncode == 0
    blocks_before = sorted((home / "blocks").rglob("*"))
    done = _lakectl(
        home, "fs", "upload", "-r", "--strict", "--source", str(tree_with_fifo), "lakefs://demo/main/in/"
    )
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and "not a regular file" in done.stderr
    assert sorted((home / "blocks").rglob("*")) == blocks_before
    assert json.loads(_lakectl(home, "diff", "lakefs://demo/main", "--json").stdout) == []


def test_non_utf8_bytes_on_the_command_line_are_one_line(tmp_path: Path) -> None:
    """Real argv bytes (not str): Python hands them to lakectl as lone surrogates."""
    home = tmp_path / "lake"
    assert _lakectl(home, "repo", "create", "lakefs://demo").returncode == 0
    env = {**os.environ, "LAKECTL_HOME": str(home), "LAKECTL_CONFIG": str(home / "none.yaml")}
    lakectl = Path(sys.executable).with_name("lakectl")
    for argv in (
        [b"fs", b"upload", b"lakefs://demo/main/bad\xff.csv", b"--source", b"-"],
        [b"commit", b"lakefs://demo/main", b"-m", b"caf\xe9", b"--allow-empty"],
        [b"log", b"lakefs://demo/main", b"--objects", b"x\xfe"],
    ):
        done = subprocess.run([bytes(lakectl), *argv], capture_output=True, input=b"x", env=env, timeout=120)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith(b"error: ") and done.stderr.count(b"\n") == 1, done.stderr
