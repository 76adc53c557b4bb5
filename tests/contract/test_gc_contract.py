"""``lakectl gc`` against both backends on identical fresh lakes: the same reports, the same lake left."""

from __future__ import annotations

import time
from pathlib import Path

from lakectl.core import opening
from lakectl.core.journal import journal
from server.config import load_settings
from tests.contract.test_cli_contract import Session
from tests.server.conftest import serve, unique, without_journal


def scenario(run: Session) -> None:
    run("repo", "create", "lakefs://R")
    for version in ("one", "two", "three"):
        run(
            "fs", "upload", "lakefs://R/main/data.txt", "--source", "-", input=f"version {version}\n".encode()
        )
        run("commit", "lakefs://R/main", "-m", version)
    run("fs", "upload", "lakefs://R/main/staged.txt", "--source", "-", input=b"staged\n")
    rules = run.work / "rules.json"
    rules.write_text('{"default_retention_days": 0}')  # only the head stays
    time.sleep(1.1)  # commit dates have whole seconds: a commit of this second is not older than now
    run("gc", "run", "lakefs://R")  # without rules: every commit retained, young blocks spared
    run("gc", "set-config", "lakefs://R", "-f", str(rules))
    run("gc", "run", "lakefs://R", "--dry-run", "--grace-hours", "0")
    run("gc", "run", "lakefs://R", "--grace-hours", "0")
    run("gc", "run", "lakefs://R", "--grace-hours", "0")
    run("fs", "cat", "lakefs://R/main/data.txt", raw=True)
    run("fs", "cat", "lakefs://R/main/staged.txt", raw=True)
    run("fs", "cat", "lakefs://R/main~2/data.txt", raw=True)  # expired and collected: gone


def test_gc_behaves_the_same_embedded_and_remote(tmp_path: Path) -> None:
    repo = unique("gc")
    for side in ("l", "r", "server"):
        (tmp_path / side).mkdir()
    local = Session(
        {
            "LAKECTL_HOME": str(tmp_path / "l" / "lake"),
            "LAKECTL_CONFIG": str(tmp_path / "none.yaml"),
            "LAKECTL_SERVER_ENDPOINT_URL": "",
            "LAKECTL_COMMITTER": "admin",
        },
        repo,
        tmp_path / "l",
    )
    # Both lakes without their journal (a new lake has it on): each side seals its batches at
    # other moments, so the blocks gc counts would differ by the journal's.
    lake = opening.open_lake(str(tmp_path / "l" / "lake"))
    journal.disable(lake)
    lake.close()
    scenario(local)
    with serve(load_settings(None, str(tmp_path / "server"), environ={})) as live:
        without_journal(live)  # which seals the entries of the server's set-up first
        sealed = _sealed_batches(live.data_dir / "lake.db")
        remote = Session(live.cli_env(tmp_path), repo, tmp_path / "r")
        scenario(remote)
    for (cmd, code_l, out_l), (_, code_r, out_r) in zip(local.transcript, remote.transcript, strict=True):
        out_r = _without_batches(out_r, sealed)  # the server's users: the embedded lake has none
        assert (cmd, code_r, _same_size(out_r)) == (cmd, code_l, _same_size(out_l))
        if isinstance(out_l, dict) and "bytes_freed" in out_l:
            # Blocks freed include the trees' files, compressed text holding each upload's mtime:
            # the two sessions upload at other moments, so those files differ by a few bytes.
            assert abs(out_r["bytes_freed"] - out_l["bytes_freed"]) <= 0.05 * out_l["bytes_freed"]
    by_command = {cmd: (code, out) for cmd, code, out in local.transcript}
    collected = [
        out for cmd, _, out in local.transcript if cmd.startswith("gc run") and "--dry-run" not in cmd
    ]
    assert collected[0]["deleted"] == 0 and collected[1]["deleted"] > 0 and collected[2]["deleted"] == 0
    assert by_command["fs cat lakefs://R/main/data.txt"] == (0, b"version three\n")
    assert by_command["fs cat lakefs://R/main/staged.txt"] == (0, b"staged\n")
    assert by_command["fs cat lakefs://R/main~2/data.txt"][0] != 0, "an expired version is collected"


def _same_size(out: object) -> object:
    """A gc report without ``bytes_freed`` (compared apart, within a few bytes)."""
    if isinstance(out, dict) and "bytes_freed" in out:
        return {k: v for k, v in out.items() if k != "bytes_freed"}
    return out


def _sealed_batches(database: Path) -> int:
    """The journal's sealed batches in a lake's database: blocks a collection keeps."""
    from lakectl.core.kv.sqlite import SQLiteStore

    kv = SQLiteStore(str(database))
    try:
        return len(journal.batches(kv))
    finally:
        kv.close()


def _without_batches(out: object, sealed: int) -> object:
    """A gc report as if the lake held no journal batch (the blocks it counted, less those)."""
    if isinstance(out, dict) and "live" in out and "blocks" in out:
        return {**out, "blocks": out["blocks"] - sealed, "live": out["live"] - sealed}
    return out
