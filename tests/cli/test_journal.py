"""``lakectl journal``: on for a new lake, switched off and on per lake; every mutation made
through the CLI is an entry with its client, repository and type, in logical-timestamp order;
``tail --follow`` prints new entries as they are recorded (server-sent events against a
server) -- embedded and remote."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from server.config import load_settings
from tests.cli.both import Lakectl
from tests.server.conftest import Live, serve, unique


@pytest.fixture(scope="module")
def journal_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """A server of its own: the journal, once on, stays on for every later request."""
    with serve(load_settings(None, str(tmp_path_factory.mktemp("journal-server")), environ={})) as server:
        yield server


def embedded_cli(tmp_path: Path) -> Lakectl:
    """lakectl on an embedded lake of its own under ``tmp_path``."""
    env = {
        "LAKECTL_HOME": str(tmp_path / "lake"),
        "LAKECTL_CONFIG": str(tmp_path / "none.yaml"),
        "LAKECTL_SERVER_ENDPOINT_URL": "",
        "LAKECTL_BASE_URI": "",
        "LAKECTL_COMMITTER": "tester",
    }
    return Lakectl("embedded", env, tmp_path)


def either(request: pytest.FixtureRequest, tmp_path: Path, server_fixture: str) -> Lakectl:
    """The ``cli`` of a test parametrized embedded/remote, remote against ``server_fixture``."""
    if request.param == "embedded":
        return embedded_cli(tmp_path)
    server: Live = request.getfixturevalue(server_fixture)
    # The committer differs from the user on purpose: the server journals the authenticated user.
    env = {**server.cli_env(tmp_path), "LAKECTL_BASE_URI": "", "LAKECTL_COMMITTER": "tester"}
    return Lakectl("remote", env, tmp_path, live=server)


@pytest.fixture(params=["embedded", "remote"])
def cli(request: pytest.FixtureRequest, tmp_path: Path) -> Lakectl:
    return either(request, tmp_path, "journal_server")


def session(cli: Lakectl) -> str:
    repo = unique("jr")
    cli("repo", "create", f"lakefs://{repo}")
    cli("fs", "upload", f"lakefs://{repo}/main/a.csv", "-s", "-", input=b"1\n")
    cli("commit", f"lakefs://{repo}/main", "-m", "first")
    cli("branch", "create", f"lakefs://{repo}/dev", "--source", f"lakefs://{repo}/main")
    cli("fs", "upload", f"lakefs://{repo}/dev/b.csv", "-s", "-", input=b"2\n")
    cli("fs", "rm", f"lakefs://{repo}/dev/a.csv")
    cli("commit", f"lakefs://{repo}/dev", "-m", "second")
    cli("merge", f"lakefs://{repo}/dev", f"lakefs://{repo}/main")
    cli("tag", "create", f"lakefs://{repo}/v1", f"lakefs://{repo}/main")
    cli("branch", "delete", f"lakefs://{repo}/dev", "-y")
    return repo


EXPECTED = [
    "create-repository",
    "write-objects",
    "commit",
    "create-branch",
    "write-objects",
    "delete-objects",
    "commit",
    "merge",
    "create-tag",
    "delete-branch",
]


def test_every_mutation_is_an_entry_by_its_client(cli: Lakectl) -> None:
    assert cli.js("journal", "enable")["enabled"] is True
    assert cli.js("journal", "enable")["enabled"] is True  # idempotent
    repo = session(cli)
    cli("fs", "upload", f"lakefs://{unique('other')}/main/x", "-s", "-", input=b"x", code=None)
    found = cli.js("journal", "tail", "--repo", f"lakefs://{repo}", "--amount", "100")
    assert [e["event_type"] for e in found] == EXPECTED
    stamps = [e["logical_timestamp"] for e in found]
    assert stamps == sorted(set(stamps))
    client = "admin" if cli.mode == "remote" else "tester"
    assert {e["client_id"] for e in found} == {client}
    assert {e["repo_id"] for e in found} == {repo}
    shape = {"logical_timestamp", "time", "client_id", "repo_id", "event_type", "event_payload"}
    assert set(found[0]) == shape
    merge = found[7]["event_payload"]
    assert (merge["branch"], merge["source_ref"]) == ("main", "dev")
    assert json.loads(merge["commit"])["id"] == merge["commit_id"]
    assert found[5]["event_payload"]["rows"] == [["a.csv", None]]
    # The last two, in the same shape; the human form: one line per entry.
    assert cli.js("journal", "tail", "--repo", f"lakefs://{repo}", "-n", "2") == found[-2:]
    lines = cli("journal", "tail", "--repo", f"lakefs://{repo}", "-n", "2").stdout.splitlines()
    assert [line.split()[6] for line in lines] == ["create-tag", "delete-branch"]
    assert f"{found[-1]['logical_timestamp']} " in lines[-1] and client in lines[-1]


def test_a_new_lake_journals_until_disabled(tmp_path: Path) -> None:
    cli = embedded_cli(tmp_path)
    cli("repo", "create", "lakefs://noted")
    assert [e["event_type"] for e in cli.js("journal", "tail")] == ["create-repository"]
    off = cli.js("journal", "disable")
    assert off["enabled"] is False and off["since"] > 0
    assert cli("journal", "disable").stdout == "journal disabled\n"  # idempotent
    cli("branch", "create", "lakefs://noted/dev", "--source", "lakefs://noted/main")
    assert [e["event_type"] for e in cli.js("journal", "tail")] == ["create-repository"]
    assert cli.js("journal", "enable")["enabled"] is True
    cli("tag", "create", "lakefs://noted/v1", "lakefs://noted/main")
    assert [e["event_type"] for e in cli.js("journal", "tail")] == ["create-repository", "create-tag"]


@pytest.mark.parametrize("identity", [True, False], ids=["with-identity", "older-lake"])
def test_an_existing_lake_without_a_journal_keeps_it_off(tmp_path: Path, identity: bool) -> None:
    """A lake made before the journal was on by default (with or without its identity record)
    is opened with its journal off, as it was: opening a lake never switches it on."""
    from lakectl.core import keys
    from lakectl.core.kv.sqlite import SQLiteStore

    cli = embedded_cli(tmp_path)
    cli("repo", "create", "lakefs://older")
    kv = SQLiteStore(str(tmp_path / "lake" / "lake.db"))
    kv.delete(keys.LAKE, keys.JOURNAL_SETTING)  # as the lake was before: never switched on
    if not identity:
        kv.delete(keys.LAKE, keys.IDENTITY)
    kv.close()
    cli("branch", "create", "lakefs://older/dev", "--source", "lakefs://older/main")
    cli("tag", "create", "lakefs://older/v1", "lakefs://older/main")
    assert cli.js("journal", "tail")[1:] == []  # create-repository alone, from before
    empty = cli("journal", "tail", "--repo", "lakefs://older", "-n", "1")
    assert "tag" not in empty.stdout and "branch" not in empty.stdout


def test_disable_and_enable_against_a_server(cli: Lakectl) -> None:
    repo = unique("toggled")
    cli("journal", "enable")
    try:
        assert cli.js("journal", "disable")["enabled"] is False
        cli("repo", "create", f"lakefs://{repo}")
        assert cli.js("journal", "tail", "--repo", f"lakefs://{repo}") == []
    finally:
        cli("journal", "enable")
    cli("tag", "create", f"lakefs://{repo}/v1", f"lakefs://{repo}/main")
    assert [e["event_type"] for e in cli.js("journal", "tail", "--repo", f"lakefs://{repo}")] == [
        "create-tag"
    ]


def test_admin_rebuild_refuses_a_lake_without_a_journal(tmp_path: Path) -> None:
    cli = embedded_cli(tmp_path)
    cli("journal", "disable")
    cli("repo", "create", "lakefs://unjournaled")
    os.remove(tmp_path / "lake" / "lake.db")
    refused = cli("admin", "rebuild", "--from-journal", code=3)
    assert refused.stderr.startswith("error: no journal among the blocks")
    assert len(refused.stderr.splitlines()) == 1 and refused.stdout == ""
    assert not (tmp_path / "lake" / "lake.db").exists()


def test_bad_input_is_one_error_line(cli: Lakectl) -> None:
    bad = cli("journal", "tail", "--repo", "not-a-uri", code=None)
    assert bad.exit_code != 0 and bad.stderr.startswith("error:") and len(bad.stderr.splitlines()) == 1
    assert cli("journal", "tail", "--amount", "0", code=None).exit_code == 2


def test_the_feed_refuses_users_who_are_not_admins(journal_server: Live) -> None:
    with httpx.Client(base_url=journal_server.url, timeout=10) as anon:
        assert anon.get("/journal").status_code == 401
        assert anon.post("/journal/enable").status_code == 401


def _lines(proc: subprocess.Popen[str]) -> queue.Queue[str]:
    out: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return out


def test_follow_prints_new_entries_as_they_are_recorded(cli: Lakectl) -> None:
    cli("journal", "enable")
    repo = unique("fol")
    cli("repo", "create", f"lakefs://{repo}")
    args = ["journal", "tail", "--follow", "--repo", f"lakefs://{repo}", "--json"]
    code = "from lakectl.cli.app import main; main()"
    env = {**os.environ, **cli.env}
    proc = subprocess.Popen([sys.executable, "-c", code, *args], env=env, stdout=subprocess.PIPE, text=True)
    try:
        lines = _lines(proc)
        first: dict[str, Any] = json.loads(lines.get(timeout=30))
        assert first["event_type"] == "create-repository"
        cli("branch", "create", f"lakefs://{repo}/dev", "--source", f"lakefs://{repo}/main")
        cli("fs", "upload", f"lakefs://{repo}/dev/f", "-s", "-", input=b"f")
        later = [json.loads(lines.get(timeout=30)) for _ in range(2)]
        assert [e["event_type"] for e in later] == ["create-branch", "write-objects"]
        assert first["logical_timestamp"] < later[0]["logical_timestamp"] < later[1]["logical_timestamp"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def views(cli: Lakectl, repo: str) -> list[Any]:
    """What a user sees of a repository: its record, branches, tags, log, staged changes, bytes."""
    return [
        cli.js("repo", "list"),
        cli.js("branch", "list", f"lakefs://{repo}"),
        cli.js("tag", "list", f"lakefs://{repo}"),
        cli.js("log", f"lakefs://{repo}/main"),
        cli.js("diff", f"lakefs://{repo}/main"),
        cli.js("fs", "ls", f"lakefs://{repo}/main/", "--recursive"),
        cli("fs", "cat", f"lakefs://{repo}/main/b.csv").stdout,
        cli("fs", "cat", f"lakefs://{repo}/main/staged.csv").stdout,
    ]


def test_admin_rebuild_from_journal_restores_a_lost_database(tmp_path: Path) -> None:
    cli = embedded_cli(tmp_path)
    cli("journal", "enable")
    repo = session(cli)
    cli("fs", "upload", f"lakefs://{repo}/main/staged.csv", "-s", "-", input=b"staged\n")
    before = views(cli, repo)
    # Nothing reads the feed before the database goes: each command sealed what it did.
    # Refused while the database is there: a rebuild never overwrites metadata.
    kept = cli("admin", "rebuild", "--from-journal", code=4)
    assert kept.stderr.startswith("error:") and "move it aside" in kept.stderr
    assert cli("admin", "rebuild", code=2).stderr.startswith("error:")
    os.remove(tmp_path / "lake" / "lake.db")
    done = cli.js("admin", "rebuild", "--from-journal")
    entries = cli.js("journal", "tail", "-n", "1000")
    assert [e["event_type"] for e in entries] == [*EXPECTED, "write-objects"]
    assert (done["entries"], done["repositories"]) == (len(entries), 1)
    assert done["last_logical_timestamp"] == entries[-1]["logical_timestamp"]
    assert views(cli, repo) == before
    # The rebuilt lake journals on, numbering after the last entry.
    cli("tag", "create", f"lakefs://{repo}/v2", f"lakefs://{repo}/main")
    (newest,) = cli.js("journal", "tail", "-n", "1")
    assert (newest["event_type"], newest["logical_timestamp"]) == ("create-tag", len(entries) + 1)


def test_admin_rebuild_is_refused_against_a_server(journal_server: Live, tmp_path: Path) -> None:
    cli = Lakectl("remote", {**journal_server.cli_env(tmp_path), "LAKECTL_BASE_URI": ""}, tmp_path)
    refused = cli("admin", "rebuild", "--from-journal", code=2)
    assert refused.stderr.startswith("error:") and len(refused.stderr.splitlines()) == 1


def test_compact_drops_a_deleted_repository_and_keeps_timestamps(cli: Lakectl) -> None:
    cli("journal", "enable")
    gone, kept = unique("gone"), unique("kept")
    cli("repo", "create", f"lakefs://{gone}")
    cli("fs", "upload", f"lakefs://{gone}/main/a", "-s", "-", input=b"a")
    cli("repo", "delete", f"lakefs://{gone}", "-y")
    cli("repo", "create", f"lakefs://{kept}")
    mine = cli.js("journal", "tail", "--repo", f"lakefs://{kept}")
    done = cli.js("journal", "compact")
    assert done["dropped"] >= 3 and set(done) == {"entries", "dropped", "batches"}
    assert cli.js("journal", "tail", "--repo", f"lakefs://{gone}") == []
    assert cli.js("journal", "tail", "--repo", f"lakefs://{kept}") == mine
    assert "dropped" in cli("journal", "compact").stdout


def test_a_refused_verb_leaves_no_intent_behind(tmp_path: Path) -> None:
    from lakectl.core.journal import form, journal
    from lakectl.core.opening import open_lake

    env = {
        "LAKECTL_HOME": str(tmp_path / "lake"),
        "LAKECTL_CONFIG": str(tmp_path / "none.yaml"),
        "LAKECTL_SERVER_ENDPOINT_URL": "",
        "LAKECTL_BASE_URI": "",
    }
    cli = Lakectl("embedded", env, tmp_path)
    cli("journal", "enable")
    cli("repo", "create", "lakefs://refused")
    # Refused after the journal wrote its intent (nothing staged): the process ends, and with it
    # the verb; its intent is withdrawn as the lake closes.
    refused = cli("commit", "lakefs://refused/main", "-m", "nothing", code=None)
    assert refused.exit_code != 0 and refused.stderr.startswith("error:")
    lake = open_lake(str(tmp_path / "lake"))
    live = lake.kv.partitions("journal/live/")  # type: ignore[attr-defined]
    states = [form.read_live(raw)["state"] for part in live for _, raw in lake.kv.scan(part)]
    assert journal.PENDING not in states
    lake.close()
    assert [e["event_type"] for e in cli.js("journal", "tail")] == ["create-repository"]


def test_a_lake_set_up_for_a_server_journals(tmp_path: Path) -> None:
    """``lakectl server setup`` makes a new lake: its journal is on before any server opens it."""
    from lakectl.core.journal import journal
    from lakectl.core.kv.sqlite import SQLiteStore

    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAKECTL_SERVER_", "LAKECTL_HOME"))}
    env |= {"LAKECTL_SERVER_DATA_DIR": str(tmp_path), "LAKECTL_SERVER_LISTEN_ADDRESS": "127.0.0.1:1"}
    lakectl = Path(sys.executable).with_name("lakectl")
    done = subprocess.run(
        [str(lakectl), "server", "setup", "--json"], env=env, capture_output=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    kv = SQLiteStore(str(tmp_path / "lake.db"))
    try:
        assert journal.is_enabled(kv)
    finally:
        kv.close()
