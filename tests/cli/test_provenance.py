"""``lakectl provenance``, embedded and against a server: the tree of inputs and code, as text and
JSON, and ``--downstream``."""

from __future__ import annotations

import json

from tests.cli.both_json import Cli, cli, live

__all__ = ["cli", "live"]


def test_provenance_prints_the_tree_and_what_was_made_downstream(cli: Cli) -> None:
    cli("repo", "create", "lakefs://raw")
    cli("repo", "create", "lakefs://marts")
    cli("fs", "upload", "lakefs://raw/main/orders.csv", "--source", "-", input=b"id\n1\n")
    ingest = cli("commit", "lakefs://raw/main", "-m", "ingest")["id"]
    inputs = json.dumps([{"repository": "raw", "commit": ingest, "path": "orders.csv"}])
    code = json.dumps({"script": "daily.py", "git_commit": "0123456789abcdef", "dirty": False})
    cli("fs", "upload", "lakefs://marts/main/daily/part-0.csv", "--source", "-", input=b"n\n1\n")
    meta = ["--meta", f"lakectl_inputs={inputs}", "--meta", f"lakectl_code={code}"]
    daily = cli("commit", "lakefs://marts/main", "-m", "daily", *meta)["id"]

    tree = cli("provenance", "lakefs://marts/main/daily/")
    assert tree["commit"]["id"] == daily and tree["code"]["script"] == "daily.py"
    [raw] = tree["inputs"]
    assert (raw["repository"], raw["ref"], raw["commit"]["id"]) == ("raw", ingest, ingest)
    text = str(cli("provenance", "lakefs://marts/main/daily/", human=True))
    assert f"lakefs://marts/main/daily/  ← {daily[:12]} 'daily'  [daily.py @ 0123456789ab]" in text
    assert f"└── lakefs://raw/{ingest}/orders.csv  ← {ingest[:12]} 'ingest'" in text
    assert cli("provenance", "lakefs://marts/main/daily/", "--depth", "0")["more"] is True

    [made] = cli("provenance", "--downstream", f"lakefs://raw/{ingest}/")
    assert (made["repository"], made["commit"]["id"]) == ("marts", daily)
    assert cli("provenance", "--downstream", "lakefs://marts/main/") == []
    cli("provenance", "lakefs://nope/main/x", code=3)
