"""``lakectl manifest``: export a tree as a Keep manifest and import it back, all or nothing."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import Run


def test_export_then_import_round_trip(run: Run, js, repo: str, tmp_path: Path) -> None:
    text = run("manifest", "export", "lakefs://demo/main").stdout
    assert text.endswith("\n") and "0:6:x.csv" in text and text.startswith("./a ")
    assert js("manifest", "export", "lakefs://demo/main") == {"ref": "main", "prefix": "", "manifest": text}
    only_a = run("manifest", "export", "lakefs://demo/main/a").stdout
    assert only_a.startswith(". ") and "z.csv" not in only_a

    file = tmp_path / "m.txt"
    file.write_text(text)
    staged = js("manifest", "import", "lakefs://demo/main/copy", str(file))
    assert staged == ["copy/a/x.csv", "copy/a/y.csv", "copy/b/z.csv"]
    for name in ("a/x.csv", "a/y.csv", "b/z.csv"):
        original = run("fs", "cat", f"lakefs://demo/main/{name}").stdout_bytes
        assert run("fs", "cat", f"lakefs://demo/main/copy/{name}").stdout_bytes == original
    assert run("manifest", "export", "lakefs://demo/main/copy/").stdout == text
    # From stdin too.
    assert (
        "staged again/x.csv"
        in run("manifest", "import", "lakefs://demo/main/again", "-", input=only_a).stdout
    )


def test_import_with_a_missing_block_stages_nothing(run: Run, js, repo: str, tmp_path: Path) -> None:
    missing = "0123456789abcdef0123456789abcdef+3"
    text = run("manifest", "export", "lakefs://demo/main/a").stdout
    bad = text.rstrip("\n").replace(". ", f". {missing} ", 1) + " 12:3:ghost.csv\n"
    file = tmp_path / "bad.txt"
    file.write_text(bad)
    result = js("manifest", "import", "lakefs://demo/main/in", str(file), code=3)
    assert result["code"] == "block_not_found" and missing in result["message"]
    assert js("diff", "lakefs://demo/main") == []


def test_import_rejects_bad_input(run: Run, js, repo: str, tmp_path: Path) -> None:
    file = tmp_path / "bad.txt"
    file.write_text("not a manifest\n")
    assert js("manifest", "import", "lakefs://demo/main/in", str(file), code=2)["code"] == "invalid_manifest"
    file.write_bytes(b"\xff\xfe")
    assert js("manifest", "import", "lakefs://demo/main/in", str(file), code=2)["code"] == "invalid_manifest"
    dotdot = run("manifest", "export", "lakefs://demo/main/a").stdout.replace("x.csv", "..", 1)
    file.write_text(dotdot)
    assert js("manifest", "import", "lakefs://demo/main/in", str(file), code=2)["code"] == "invalid_manifest"
    run("manifest", "import", "lakefs://demo/main/in", str(tmp_path / "absent"), code=3)
    assert js("diff", "lakefs://demo/main") == []
