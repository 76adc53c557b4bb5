"""``lakectl annotate``, embedded and through a live server: each entry with the last commit that
changed it (one level or recursive, merges, staged objects), and a walk of the history that
stops once every entry has its commit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lakectl.core import annotate, opening, porcelain, writes
from tests.cli.both_json import Cli, cli, live

__all__ = ["cli", "live"]


def _by_path(out: list[dict[str, Any]]) -> dict[str, str | None]:
    return {a["path"]: (a["commit"]["message"] if a["commit"] else None) for a in out}


def test_last_commit_of_each_entry(cli: Cli) -> None:
    cli("repo", "create", "lakefs://R")
    cli("fs", "upload", "lakefs://R/main/a/x.csv", "--source", "-", input=b"x1")
    cli("fs", "upload", "lakefs://R/main/a/y.csv", "--source", "-", input=b"y1")
    cli("fs", "upload", "lakefs://R/main/b.csv", "--source", "-", input=b"b1")
    cli("commit", "lakefs://R/main", "-m", "first")
    cli("fs", "upload", "lakefs://R/main/a/y.csv", "--source", "-", input=b"y2")
    cli("commit", "lakefs://R/main", "-m", "second\nwith a body")
    cli("branch", "create", "lakefs://R/dev", "--source", "lakefs://R/main")
    cli("fs", "upload", "lakefs://R/dev/c.csv", "--source", "-", input=b"c")
    cli("commit", "lakefs://R/dev", "-m", "on dev")
    cli("fs", "upload", "lakefs://R/main/b.csv", "--source", "-", input=b"b2")
    cli("commit", "lakefs://R/main", "-m", "third")
    cli("merge", "lakefs://R/dev", "lakefs://R/main", "-m", "merge dev")
    cli("fs", "upload", "lakefs://R/main/staged.csv", "--source", "-", input=b"s")
    cli("fs", "upload", "lakefs://R/main/a/x.csv", "--source", "-", input=b"x-staged")

    recursive = cli("annotate", "lakefs://R/main/", "-r")
    assert [a["path"] for a in recursive] == ["a/x.csv", "a/y.csv", "b.csv", "c.csv", "staged.csv"]
    assert _by_path(recursive) == {
        "a/x.csv": "first",  # staged change on top: its last commit still is "first"
        "a/y.csv": "second\nwith a body",
        "b.csv": "third",
        "c.csv": "merge dev",  # brought in by the merge, as log --objects says
        "staged.csv": None,
    }
    assert all(a["path_type"] == "object" for a in recursive)
    assert recursive[0]["commit"]["committer"] and len(recursive[0]["commit"]["id"]) == 64

    level = cli("annotate", "lakefs://R/main/")
    assert [(a["path"], a["path_type"]) for a in level] == [
        ("a/", "common_prefix"),
        ("b.csv", "object"),
        ("c.csv", "object"),
        ("staged.csv", "object"),
    ]
    assert _by_path(level)["a/"] == "second\nwith a body"

    # A prefix, an object, a commit and an older ref.
    assert _by_path(cli("annotate", "lakefs://R/main/a/", "-r")) == {
        "a/x.csv": "first",
        "a/y.csv": "second\nwith a body",
    }
    assert _by_path(cli("annotate", "lakefs://R/main/b.csv")) == {"b.csv": "third"}
    assert _by_path(cli("annotate", "lakefs://R/main~1/", "-r"))["b.csv"] == "third"
    assert _by_path(cli("annotate", "lakefs://R/main~2/", "-r"))["b.csv"] == "first"
    assert cli("annotate", "lakefs://R/main/nothing/", "-r") == []

    human = cli("annotate", "lakefs://R/main/", "-r", human=True).splitlines()
    assert human[1].startswith("a/y.csv ") and human[1].endswith("  second")
    assert human[-1] == "staged.csv"


def test_bad_input(cli: Cli) -> None:
    cli("repo", "create", "lakefs://R")
    assert cli("annotate", "lakefs://R/nope/", code=3)["code"] in ("ref_not_found", "not_found")
    assert cli("annotate", "lakefs://R", code=2)["code"] == "invalid_uri"
    assert cli("annotate", "lakefs://no-such-repo/main/", code=3)["code"] == "repository_not_found"


def test_the_walk_stops_once_every_entry_is_found(tmp_path: Path, monkeypatch: Any) -> None:
    lake = opening.open_lake(str(tmp_path / "lake"))
    try:
        porcelain.create_repo(lake, "deep")
        writes.upload(lake, "deep", "main", "old.txt", b"old")
        porcelain.commit(lake, "deep", "main", "old")
        for i in range(40):
            writes.upload(lake, "deep", "main", "churn.txt", str(i).encode())
            porcelain.commit(lake, "deep", "main", f"churn {i}")
        writes.upload(lake, "deep", "main", "new/a.txt", b"a")
        porcelain.commit(lake, "deep", "main", "new")
        walked: list[str] = []
        real = lake.refs.get_commit

        def counting(repo: Any, cid: Any) -> Any:
            walked.append(cid)
            return real(repo, cid)

        monkeypatch.setattr(lake.refs, "get_commit", counting)
        found = annotate.annotate(lake, "deep", "main", "new/", recursive=True)
        assert [(a.path, a.commit.message if a.commit else None) for a in found] == [("new/a.txt", "new")]
        assert len(walked) <= 5, f"walked {len(walked)} commit reads for one change at the head"
        walked.clear()
        found = annotate.annotate(lake, "deep", "main", "", recursive=True)
        assert {a.path: a.commit.message if a.commit else None for a in found} == {
            "churn.txt": "churn 39",
            "new/a.txt": "new",
            "old.txt": "old",
        }
        assert len(walked) >= 40  # old.txt needs the whole history
    finally:
        lake.close()
