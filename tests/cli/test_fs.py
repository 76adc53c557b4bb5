"""``lakectl fs``: upload (file, stdin, directory), download, cat, stat, ls, rm."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from tests.cli.conftest import Run


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)).replace(os.sep, "/"): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_upload_a_file_then_stat_cat_download(run: Run, js, repo: str, tmp_path: Path) -> None:
    src = tmp_path / "data.csv"
    src.write_bytes(b"id,name\n1,Ada\n")
    info = js(
        "fs", "upload", "lakefs://demo/main/t/data.csv", "--source", str(src), "--content-type", "text/csv"
    )
    assert info["path"] == "t/data.csv" and info["path_type"] == "object"
    assert info["size_bytes"] == 14 and info["content_type"] == "text/csv"
    assert info["checksum"] == hashlib.md5(b"id,name\n1,Ada\n").hexdigest()
    assert set(info) == {
        "path",
        "path_type",
        "physical_address",
        "checksum",
        "size_bytes",
        "mtime",
        "content_type",
        "metadata",
    }
    # A destination ending in / takes the file's name.
    assert js("fs", "upload", "lakefs://demo/main/u/", "-s", str(src))["path"] == "u/data.csv"

    assert js("fs", "stat", "lakefs://demo/main/t/data.csv") == info
    human = run("fs", "stat", "lakefs://demo/main/t/data.csv").stdout
    assert "t/data.csv" in human and "text/csv" in human and info["checksum"] in human
    assert run("fs", "cat", "lakefs://demo/main/t/data.csv").stdout_bytes == b"id,name\n1,Ada\n"

    out = tmp_path / "out"
    out.mkdir()
    done = js("fs", "download", "lakefs://demo/main/t/data.csv", str(out))
    assert done == [{"path": "t/data.csv", "local_path": str(out / "data.csv"), "size_bytes": 14}]
    assert (out / "data.csv").read_bytes() == b"id,name\n1,Ada\n"
    run("fs", "download", "lakefs://demo/main/a/x.csv", str(out / "renamed.csv"))
    assert (out / "renamed.csv").read_bytes() == b"1,2,3\n"
    stdout = run("fs", "download", "lakefs://demo/main/a/x.csv", "-")
    assert stdout.stdout_bytes == b"1,2,3\n"
    assert sorted(os.listdir(out)) == ["data.csv", "renamed.csv"]


def test_upload_from_stdin(run: Run, js, repo: str) -> None:
    data = bytes(range(256)) * 100
    info = js("fs", "upload", "lakefs://demo/main/bin/blob", "--source", "-", input=data)
    assert info["size_bytes"] == len(data)
    assert run("fs", "cat", "lakefs://demo/main/bin/blob").stdout_bytes == data
    # stdin needs a full object path.
    run("fs", "upload", "lakefs://demo/main/bin/", "--source", "-", input=b"x", code=2)


def test_recursive_upload_and_download_round_trip(run: Run, js, repo: str, tmp_path: Path) -> None:
    src = tmp_path / "src"
    files = {
        "top.csv": b"a,b\n",
        "sales/2024/01.csv": b"1\n" * 1000,
        "sales/2024/02.csv": b"2\n",
        "sales/empty.csv": b"",
        "name with spaces.txt": "naïve ✓\n".encode(),
    }
    for rel, data in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(data)
    uploaded = js("fs", "upload", "lakefs://demo/main/ds", "--source", str(src), "-r")
    assert sorted(o["path"] for o in uploaded) == sorted("ds/" + rel for rel in files)
    said = run("fs", "upload", "lakefs://demo/main/copy/", "-s", str(src), "-r").stdout
    assert said.startswith("uploaded 5 objects (2.0 KiB, 0 B new) to lakefs://demo/main/copy/ in ")

    listed = js("fs", "ls", "lakefs://demo/main/ds/", "--recursive")
    assert [o["path"] for o in listed] == sorted("ds/" + rel for rel in files)
    assert [d["path"] for d in js("diff", "lakefs://demo/main", "--prefix", "ds/")] == [
        o["path"] for o in listed
    ]

    dest = tmp_path / "dest"
    got = js("fs", "download", "lakefs://demo/main/ds", str(dest), "-r")
    assert len(got) == len(files)
    assert _tree(dest) == files
    # A prefix is a directory: ds does not take in dsx/.
    run("fs", "upload", "lakefs://demo/main/dsx/other", "-s", "-", input=b"o")
    again = tmp_path / "again"
    run("fs", "download", "-r", "lakefs://demo/main/ds/", str(again))
    assert _tree(again) == files


def test_recursive_upload_says_each_object_in_path_order(run: Run, js, repo: str, tmp_path: Path) -> None:
    """The walk lists directories as they come and the lines are written at once: with -v the
    output is still one line per object in path order, then the summary. A symbolic link to a
    directory is not followed (as ``os.walk``); one to a file is uploaded as the file."""
    src = tmp_path / "src"
    for rel, data in {"b/2.csv": b"22", "a/z.csv": b"1", "a/b/c.csv": b"333", "top": b""}.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(data)
    (src / "link-to-a").symlink_to(src / "a", target_is_directory=True)
    (src / "link-to-top").symlink_to(src / "top")
    result = run("fs", "upload", "-r", "-v", "-s", str(src), "lakefs://demo/main/in/")
    *each, summary = result.stdout.splitlines()
    assert each == [
        "uploaded in/a/b/c.csv (3 B)",
        "uploaded in/a/z.csv (1 B)",
        "uploaded in/b/2.csv (2 B)",
        "uploaded in/link-to-top (0 B)",
        "uploaded in/top (0 B)",
    ]
    assert summary.startswith("uploaded 5 objects (6 B, 6 B new) to lakefs://demo/main/in/ in ")
    assert result.stderr == ""
    listed = js("fs", "upload", "-r", "-s", str(src), "lakefs://demo/main/again/")
    assert [o["path"] for o in listed] == [line.split()[1].replace("in/", "again/", 1) for line in each]


def test_directory_upload_needs_recursive(run: Run, repo: str, tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    result = run("fs", "upload", "lakefs://demo/main/d", "--source", str(tmp_path / "d"), code=2)
    assert "--recursive" in result.stderr
    missing = run("fs", "upload", "lakefs://demo/main/d", "--source", str(tmp_path / "nope"), code=3)
    assert missing.stderr.startswith("error: cannot read")


def test_ls_one_level_and_recursive(run: Run, js, repo: str) -> None:
    top = js("fs", "ls", "lakefs://demo/main/")
    assert top == [{"path": "a/", "path_type": "common_prefix"}, {"path": "b/", "path_type": "common_prefix"}]
    assert [o["path"] for o in js("fs", "ls", "lakefs://demo/main/a")] == ["a/x.csv", "a/y.csv"]
    assert [o["path"] for o in js("fs", "ls", "lakefs://demo/main", "-r")] == [
        "a/x.csv",
        "a/y.csv",
        "b/z.csv",
    ]
    human = run("fs", "ls", "lakefs://demo/main/").stdout.splitlines()
    assert [line.split() for line in human] == [["common_prefix", "a/"], ["common_prefix", "b/"]]
    line = run("fs", "ls", "lakefs://demo/main/a/").stdout.splitlines()[0]
    assert line.startswith("object") and line.endswith("6 B  a/x.csv")
    assert js("fs", "ls", "lakefs://demo/main/nothing/") == []


def test_rm_object_and_prefix(run: Run, js, repo: str) -> None:
    assert js("fs", "rm", "lakefs://demo/main/a/x.csv") == {
        "type": "object",
        "deleted": ["a/x.csv"],
        "message": "Deleted 1 object(s) from branch 'main'",
    }
    assert run("fs", "rm", "lakefs://demo/main/b", "-r").stdout == "deleted b/z.csv\n"
    assert [o["path"] for o in js("fs", "ls", "lakefs://demo/main", "-r")] == ["a/y.csv"]
    assert js("diff", "lakefs://demo/main") == [
        {"type": "removed", "path": "a/x.csv", "path_type": "object", "size_bytes": 6},
        {"type": "removed", "path": "b/z.csv", "path_type": "object", "size_bytes": 6},
    ]
    assert js("fs", "rm", "lakefs://demo/main/a/x.csv", code=3)["code"] == "object_not_found"
    assert js("fs", "rm", "-r", "lakefs://demo/main/zzz", code=3)["code"] == "object_not_found"
    # Objects are removed from branches only.
    run("tag", "create", "lakefs://demo/v1", "lakefs://demo/main")
    run("fs", "rm", "lakefs://demo/v1/a/y.csv", code=2)  # a tag is no branch: invalid ref


def test_missing_objects_and_refs(run: Run, js, repo: str, tmp_path: Path) -> None:
    assert js("fs", "stat", "lakefs://demo/main/none", code=3)["code"] == "object_not_found"
    assert js("fs", "cat", "lakefs://demo/main/none", code=3)["code"] == "object_not_found"
    assert js("fs", "ls", "lakefs://demo/nobranch/", code=3)["code"] == "ref_not_found"
    result = run("fs", "download", "lakefs://demo/main/none", str(tmp_path / "f"), code=3)
    assert result.stderr.startswith("error: object 'none' not found")
    assert not (tmp_path / "f").exists()


@pytest.mark.parametrize("path", ["a/../etc/passwd", "../x", "./x", "/abs", "a/./b", "with\x00nul"], ids=repr)
def test_bad_paths_are_refused_and_change_nothing(run: Run, js, repo: str, tmp_path: Path, path: str) -> None:
    src = tmp_path / "f"
    src.write_bytes(b"data")
    before = js("fs", "ls", "lakefs://demo/main", "-r")
    result = run("fs", "upload", f"lakefs://demo/main/{path}", "--source", str(src), code=2)
    assert result.stderr.startswith("error: invalid"), result.stderr
    run("fs", "upload", f"lakefs://demo/main/{path}", "--source", "-", input=b"x", code=2)
    assert js("fs", "ls", "lakefs://demo/main", "-r") == before
    assert js("diff", "lakefs://demo/main") == []


def test_recursive_upload_is_all_or_nothing_on_bad_names(run: Run, js, repo: str, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "good.csv").write_bytes(b"ok")
    (src / "sub").mkdir()
    (src / "sub" / "more.csv").write_bytes(b"ok")
    result = run("fs", "upload", "lakefs://demo/main/..", "-s", str(src), "-r", code=2)
    assert "invalid path" in result.stderr
    assert js("diff", "lakefs://demo/main") == []


def test_progress_only_for_people(
    run: Run, repo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lakectl.cli import render

    calls: list[tuple[int, bool]] = []
    real = render.progress

    def spy(total: int, label: str, enabled: bool):  # type: ignore[no-untyped-def]
        calls.append((total, enabled))
        return real(total, label, enabled)

    monkeypatch.setattr(render, "progress", spy)
    src = tmp_path / "src"
    src.mkdir()
    for i in range(3):
        (src / f"{i}.csv").write_bytes(b"x")
    run("fs", "upload", "-r", "-s", str(src), "lakefs://demo/main/p/")
    run("fs", "upload", "-r", "-s", str(src), "lakefs://demo/main/q/", "--json")
    run("fs", "download", "-r", "lakefs://demo/main/p/", str(tmp_path / "out"))
    assert calls == [(3, True), (3, False), (3, True)]


def test_progress_bar_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from lakectl.cli import render

    terminal = io.StringIO()
    terminal.isatty = lambda: True  # type: ignore[method-assign]
    monkeypatch.setattr(render.sys, "stdout", terminal)
    done = []
    with render.progress(3, "uploading", True) as advance:
        for _ in range(3):
            advance(1)
            done.append(1)
    assert done == [1, 1, 1]


def test_local_file_errors(run: Run, js, repo: str, tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_bytes(b"x")
    not_a_dir = str(afile / "child")
    assert js("fs", "upload", "lakefs://demo/main/s", "-s", not_a_dir, code=2)["code"] == "invalid_argument"
    result = js("fs", "download", "lakefs://demo/main/a/x.csv", str(afile / "out"), code=2)
    assert result["code"] == "invalid_argument" and "cannot write" in result["message"]
    assert js("manifest", "import", "lakefs://demo/main/m", not_a_dir, code=2)["code"] == "invalid_argument"
