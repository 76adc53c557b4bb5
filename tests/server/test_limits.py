"""The documented limits (docs/concepts.md), at the boundary, on every surface: a value at the
limit is stored, one byte more is refused as ``InvalidArgument`` (HTTP 400, exit 2, S3
``InvalidArgument``) and nothing is stored. REST on SQLite and PostgreSQL servers, the S3
gateway, the UI's forms, and the CLI embedded and against a server: each stores through the
same core verb, which checks.

A name is checked whole: a trailing newline is no part of a valid repository, branch or tag
name (a ``$`` in a pattern would have let one through)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from botocore.exceptions import ClientError
from typer.testing import CliRunner

from lakectl.cli.app import app
from lakectl.core.graph.refs import commit_id_of
from lakectl.core.limits import (
    MAX_MESSAGE_BYTES,
    MAX_METADATA_KEY_BYTES,
    MAX_METADATA_VALUE_BYTES,
    MAX_NAME_BYTES,
    MAX_NAMESPACE_BYTES,
    MAX_PATH_BYTES,
)
from lakectl.core.workflow.pulls import MAX_TEXT_BYTES, MAX_TITLE_BYTES
from lakectl.errors import InvalidArgument, from_code
from tests.server.conftest import Live, unique
from tests.ui.conftest import csrf_of, sign_in

MESSAGE = "m" * MAX_MESSAGE_BYTES
PATH = "p/" + "é" * ((MAX_PATH_BYTES - 2) // 2)  # two-byte characters: bytes are what count
assert len(PATH.encode()) == MAX_PATH_BYTES
BRANCH = "b" * 255
TAG = "t" * 255
REPO = "r" * 63
TITLE = "t" * MAX_TITLE_BYTES
CONTENT_TYPE = "text/" + "x" * (MAX_NAME_BYTES - 1 - len("text/"))


def _refused(r: httpx.Response) -> bool:
    if r.status_code != 400:
        return False
    body = r.json()
    return isinstance(from_code(body["code"], body["message"]), InvalidArgument)


def _boundary(
    what: str,
    send: Callable[[str], httpx.Response],
    stored: Callable[[str], bool],
    at: str,
    over: list[str],
) -> list[str]:
    """Problems of one field: ``at`` refused or not stored; a value of ``over`` not refused
    with ``InvalidArgument``, or stored."""
    problems = []
    for value in over:
        r = send(value)
        if not _refused(r):
            problems.append(f"{what} {value[-8:]!r} (len {len(value)}): {r.status_code} {r.text[:200]}")
        if stored(value):
            problems.append(f"{what} {value[-8:]!r} (len {len(value)}): stored")
    r = send(at)
    if r.status_code >= 300 or not stored(at):
        problems.append(f"{what} at the limit: {r.status_code} {r.text[:200]}")
    return problems


@pytest.fixture(params=["live", "live_pg"])
def server(request: pytest.FixtureRequest) -> Live:
    return request.getfixturevalue(request.param)


@pytest.fixture
def rest(server: Live) -> Iterator[httpx.Client]:
    with server.client((server.key_id, server.secret)) as c:
        yield c


def _repo(api: httpx.Client) -> tuple[str, dict[str, Any]]:
    """A repository with an object on main, one commit past the first, and a branch feat with a
    commit of its own; and main's head commit."""
    name = unique("limits")
    r = api.post("/repositories", json={"name": name, "storage_namespace": f"local://{name}"})
    assert r.status_code == 201, r.text
    objects = f"/repositories/{name}/branches/{{}}/objects"
    assert api.post(objects.format("main"), params={"path": "a"}, content=b"a").status_code == 201
    head = api.post(f"/repositories/{name}/branches/main/commits", json={"message": "a"}).json()
    assert (
        api.post(f"/repositories/{name}/branches", json={"name": "feat", "source": "main"}).status_code == 201
    )
    assert api.post(objects.format("feat"), params={"path": "f"}, content=b"f").status_code == 201
    assert api.post(f"/repositories/{name}/branches/feat/commits", json={"message": "f"}).status_code == 201
    return name, head


def test_rest_refuses_one_byte_past_each_limit_and_stores_nothing(rest: httpx.Client) -> None:
    repo, head = _repo(rest)
    r = f"/repositories/{repo}"
    problems: list[str] = []

    def found(url: str, **params: str) -> bool:
        return rest.get(url, params=params).status_code == 200

    def log_has(message: str) -> bool:
        log = rest.get(f"{r}/refs/main/commits", params={"amount": 5}).json()["results"]
        return any(c["message"] == message for c in log)

    problems += _boundary(
        "commit message",
        lambda m: rest.post(f"{r}/branches/main/commits", json={"message": m, "allow_empty": True}),
        log_has,
        MESSAGE,
        [MESSAGE + "m", "a\x1b[2J"],
    )

    def record(message: str) -> dict[str, Any]:
        cid = commit_id_of((head["id"],), head["meta_range_id"], message, "me", {}, 1)
        return {
            "commit_id": cid,
            "version": 1,
            "committer": "me",
            "message": message,
            "metarange_id": head["meta_range_id"],
            "creation_date": 1,
            "parents": [head["id"]],
            "metadata": {},
            "generation": 3,  # the repository's first commit, then head
        }

    def record_stored(message: str) -> bool:
        return found(f"{r}/commits/{record(message)['commit_id']}")

    problems += _boundary(
        "commit record message",
        lambda m: rest.post(f"{r}/commits", json=record(m)),
        record_stored,
        MESSAGE,
        [MESSAGE + "m", "x" * (3 << 20)],  # under the 4 MiB body cap, 48 times the limit
    )
    problems += _boundary(
        "merge message",
        lambda m: rest.post(f"{r}/refs/feat/merge/main", json={"message": m}),
        log_has,
        MESSAGE,
        [MESSAGE + "m"],
    )
    # feat is merged now: a merge with nothing to do still refuses what it was given
    if not _refused(rest.post(f"{r}/refs/feat/merge/main", json={"message": MESSAGE + "m"})):
        problems.append("merge message over the limit, nothing to merge: not refused")
    problems += _boundary(
        "object path",
        lambda path: rest.post(f"{r}/branches/main/objects", params={"path": path}, content=b"x"),
        lambda path: found(f"{r}/refs/main/objects/stat", path=path),
        PATH,
        [PATH + "p", "q" * (MAX_PATH_BYTES + 1)],
    )
    problems += _boundary(
        "metadata value",
        lambda v: rest.post(
            f"{r}/branches/main/objects",
            params={"path": f"meta-{len(v)}"},
            content=b"x",
            headers={"x-lakefs-meta-k": v},
        ),
        lambda v: found(f"{r}/refs/main/objects/stat", path=f"meta-{len(v)}"),
        "v" * MAX_METADATA_VALUE_BYTES,
        ["v" * (MAX_METADATA_VALUE_BYTES + 1)],
    )
    problems += _boundary(
        "metadata key",
        lambda k: rest.post(
            f"{r}/branches/main/commits",
            json={"message": f"key {len(k)}", "metadata": {k: "v"}, "allow_empty": True},
        ),
        lambda k: log_has(f"key {len(k)}"),
        "k" * MAX_METADATA_KEY_BYTES,
        ["k" * (MAX_METADATA_KEY_BYTES + 1)],
    )
    problems += _boundary(
        "content type",
        lambda t: rest.post(
            f"{r}/branches/main/objects",
            params={"path": f"ct-{len(t)}"},
            content=b"x",
            headers={"Content-Type": t},
        ),
        lambda t: found(f"{r}/refs/main/objects/stat", path=f"ct-{len(t)}"),
        CONTENT_TYPE,
        [CONTENT_TYPE + "x"],
    )
    problems += _boundary(
        "branch name",
        lambda n: rest.post(f"{r}/branches", json={"name": n, "source": "main"}),
        lambda n: found(f"{r}/branches/{quote(n, safe='')}"),
        BRANCH,
        [BRANCH + "b", "nl\n"],
    )
    problems += _boundary(
        "tag name",
        lambda n: rest.post(f"{r}/tags", json={"id": n, "ref": "main"}),
        lambda n: found(f"{r}/tags/{quote(n, safe='')}"),
        TAG,
        [TAG + "t", "nl\n"],
    )
    suffix = unique("")[-6:].replace("-", "0")
    problems += _boundary(
        "repository name",
        lambda n: rest.post("/repositories", json={"name": n, "storage_namespace": f"local://{n.strip()}"}),
        lambda n: found(f"/repositories/{quote(n, safe='')}"),
        REPO[:-6] + suffix,
        [REPO + "r", f"nl{suffix}\n"],
    )
    problems += _boundary(
        "pull request title",
        lambda t: rest.post(
            f"{r}/pulls", json={"title": t, "source_branch": "feat", "destination_branch": "main"}
        ),
        lambda t: any(
            pr["title"] == t for pr in rest.get(f"{r}/pulls", params={"status": "all"}).json()["results"]
        ),
        TITLE,
        [TITLE + "t"],
    )
    opened = rest.get(f"{r}/pulls").json()["results"]
    comments = f"{r}/pulls/{opened[0]['id'] if opened else 1}/comments"
    problems += _boundary(
        "pull request comment",
        lambda text: rest.post(comments, json={"body": text}),
        lambda text: any(c["body"] == text for c in rest.get(comments).json()["results"]),
        "c" * MAX_TEXT_BYTES,
        ["c" * (MAX_TEXT_BYTES + 1)],
    )
    user = unique("user")
    problems += _boundary(
        "user name",
        lambda name: rest.post("/auth/users", json={"id": name}),
        lambda name: found(f"/auth/users/{quote(name, safe='')}"),
        user + "u" * (MAX_NAME_BYTES - len(user)),
        [user + "u" * (MAX_NAME_BYTES + 1 - len(user)), user + "\n"],
    )
    problems += _boundary(
        "storage namespace",
        lambda ns: rest.post(
            "/repositories", json={"name": unique("ns")[-20:].strip("-"), "storage_namespace": ns}
        ),
        lambda ns: any(
            repo["storage_namespace"] == ns
            for repo in rest.get("/repositories", params={"amount": 1000}).json()["results"]
        ),
        "local://" + "n" * (MAX_NAMESPACE_BYTES - 8),
        ["local://" + "n" * (MAX_NAMESPACE_BYTES - 7)],
    )
    assert not problems, "\n".join(problems)


def test_the_s3_gateway_refuses_one_byte_past_the_path_and_type_limits(live: Live) -> None:
    with live.client((live.key_id, live.secret)) as api:
        repo, _ = _repo(api)
    s3 = live.s3()

    def put(key: str, **extra: Any) -> str:
        try:
            s3.put_object(Bucket=repo, Key=key, Body=b"x", **extra)
        except ClientError as e:
            return str(e.response["Error"]["Code"])
        return "ok"

    def exists(key: str) -> bool:
        try:
            s3.head_object(Bucket=repo, Key=key)
        except ClientError:
            return False
        return True

    assert put(f"main/{PATH}") == "ok" and exists(f"main/{PATH}")
    assert put(f"main/{PATH}p") == "InvalidArgument" and not exists(f"main/{PATH}p")
    assert put("main/ct-at", ContentType=CONTENT_TYPE) == "ok" and exists("main/ct-at")
    assert put("main/ct-over", ContentType=CONTENT_TYPE + "x") == "InvalidArgument"
    assert not exists("main/ct-over")
    key = "k" * MAX_METADATA_KEY_BYTES
    assert put("main/mk-at", Metadata={key: "v"}) == "ok" and exists("main/mk-at")
    assert put("main/mk-over", Metadata={key + "k": "v"}) == "InvalidArgument"
    assert not exists("main/mk-over")


def test_the_ui_forms_refuse_one_byte_past_the_limits(live: Live) -> None:
    with live.client((live.key_id, live.secret)) as api:
        repo, _ = _repo(api)
        with sign_in(live, live.key_id, live.secret) as ui:
            csrf = csrf_of(ui.get(f"/ui/repos/{repo}/branches").text)

            def post(url: str, **form: str) -> httpx.Response:
                return ui.post(f"/ui/repos/{repo}/{url}", data={"csrf": csrf, **form})

            assert post("branches", name=BRANCH, source="main").status_code == 303
            r = post("branches", name=BRANCH + "b", source="main")
            assert r.status_code == 400 and "invalid branch name" in r.text
            names = [b["id"] for b in api.get(f"/repositories/{repo}/branches").json()["results"]]
            assert BRANCH + "b" not in names
            api.post(f"/repositories/{repo}/branches/main/objects", params={"path": "u"}, content=b"u")
            r = post("branches/main/commit", message=MESSAGE + "m")
            assert r.status_code == 400 and "65537 bytes" in r.text
            log = api.get(f"/repositories/{repo}/refs/main/commits", params={"amount": 1}).json()["results"]
            assert log[0]["message"] == "a"  # nothing committed
            assert post("branches/main/commit", message=MESSAGE).status_code == 303
            r = post("pulls", source="feat", destination="main", title=TITLE + "t")
            assert r.status_code == 400 and "1025 bytes" in r.text
            assert api.get(f"/repositories/{repo}/pulls", params={"status": "all"}).json()["results"] == []


def _cli(env: dict[str, str], *argv: str, input: bytes | None = None) -> tuple[int, str]:
    """The exit code and what was written: stderr, or stdout when it succeeded."""
    result = CliRunner().invoke(app, list(argv), input=input, env=env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"lakectl {argv!r} raised {result.exception!r}") from result.exception
    return result.exit_code, result.stderr if result.exit_code else result.stdout


@pytest.mark.parametrize("where", ["embedded", "remote"])
def test_the_cli_refuses_one_byte_past_the_limits(
    where: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if where == "embedded":
        env = {
            "LAKECTL_HOME": str(tmp_path / "lake"),
            "LAKECTL_CONFIG": str(tmp_path / "none.yaml"),
            "LAKECTL_SERVER_ENDPOINT_URL": "",
            "LAKECTL_COMMITTER": "tester",
        }
    else:
        env = request.getfixturevalue("live").cli_env(tmp_path)
    d = f"lakefs://{unique('cli')}"
    assert _cli(env, "repo", "create", d)[0] == 0
    assert _cli(env, "fs", "upload", f"{d}/main/{PATH}", "-s", "-", input=b"x")[0] == 0
    code, err = _cli(env, "fs", "upload", f"{d}/main/{PATH}p", "-s", "-", input=b"x")
    assert code == 2 and err.startswith("error: ") and "longer than 1024 bytes" in err
    code, listed = _cli(env, "fs", "ls", "-r", f"{d}/main/", "--json")
    assert code == 0 and [o["path"] for o in json.loads(listed)] == [PATH]
    code, err = _cli(env, "commit", f"{d}/main", "-m", MESSAGE + "m")
    assert code == 2 and "65537 bytes" in err
    assert _cli(env, "commit", f"{d}/main", "-m", MESSAGE)[0] == 0
    code, err = _cli(env, "branch", "create", f"{d}/{BRANCH}b", "--source", f"{d}/main")
    assert code == 2 and "invalid branch name" in err
    assert _cli(env, "branch", "create", f"{d}/{BRANCH}", "--source", f"{d}/main")[0] == 0
    code, err = _cli(env, "tag", "create", f"{d}/nl\n", f"{d}/main")
    assert code == 2, err
    code, err = _cli(
        env,
        "commit",
        f"{d}/main",
        "-m",
        "x",
        "--meta",
        "k=" + "v" * (MAX_METADATA_VALUE_BYTES + 1),
        "--allow-empty",
    )
    assert code == 2 and "4097 bytes" in err
