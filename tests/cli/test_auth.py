"""``lakectl auth`` against a live server: an admin creates a user, a group and a policy and gives
keys; the user may do exactly what the policy says, until membership, attachment or key is taken
away. On the embedded lake every auth command is one error, exit 2. lakeFS's own SDK reads what
the CLI made."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from lakectl.cli.app import app
from tests.cli.conftest import Run
from tests.server.conftest import Live, live, unique

__all__ = ["live"]


class Cli:
    """lakectl in remote mode as one user of the live server."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    def __call__(self, *args: str, code: int = 0, input: bytes | None = None) -> Result:
        result = CliRunner().invoke(app, list(args), env=self.env, input=input)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        assert result.exit_code == code, (args, result.exit_code, result.stdout, result.stderr)
        if code and "--json" not in args:
            lines = [line for line in result.stderr.splitlines() if line.strip()]
            assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
        return result

    def js(self, *args: str, code: int = 0, input: bytes | None = None) -> Any:
        return json.loads(self(*args, "--json", code=code, input=input).stdout)

    def as_user(self, key_id: str, secret: str) -> Cli:
        return Cli(
            {
                **self.env,
                "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": key_id,
                "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": secret,
            }
        )


@pytest.fixture
def admin(live: Live, tmp_path: Path) -> Cli:
    return Cli(live.cli_env(tmp_path))


def _read_only_policy(tmp_path: Path, repo: str) -> tuple[Path, list[dict[str, Any]]]:
    statement = [
        {
            "effect": "allow",
            "resource": f"arn:lakefs:fs:::repository/{repo}",
            "action": ["fs:Read*", "fs:List*"],
        }
    ]
    doc = tmp_path / "read-only.json"
    doc.write_text(json.dumps({"statement": statement}))
    return doc, statement


def test_an_admin_grants_and_takes_away_access(admin: Cli, tmp_path: Path) -> None:
    repo, user, group, policy = unique("authrepo"), unique("ann"), unique("readers"), unique("read-only")
    admin("repo", "create", f"lakefs://{repo}")
    admin("fs", "upload", f"lakefs://{repo}/main/x.csv", "--source", "-", input=b"1,2\n")
    admin("commit", f"lakefs://{repo}/main", "-m", "data")
    doc, statement = _read_only_policy(tmp_path, repo)

    created = admin.js("auth", "users", "create", "--id", user)
    assert created["id"] == user and created["role"] is None and created["creation_date"] > 0
    assert admin.js("auth", "groups", "create", "--id", group, "--description", "reads")["id"] == group
    made = admin.js("auth", "policies", "create", "--id", policy, "--statement-document", str(doc))
    assert made["id"] == policy and made["statement"] == statement
    admin("auth", "groups", "policies", "attach", "--id", group, "--policy", policy)
    admin("auth", "groups", "members", "add", "--id", group, "--user", user)
    keys = admin.js("auth", "users", "credentials", "create", "--id", user)
    assert set(keys) >= {"access_key_id", "secret_access_key", "creation_date"}
    ann = admin.as_user(keys["access_key_id"], keys["secret_access_key"])

    # What the policy says: reads of its repository, nothing else.
    assert ann("fs", "cat", f"lakefs://{repo}/main/x.csv").stdout == "1,2\n"
    assert [o["path"] for o in ann.js("fs", "ls", f"lakefs://{repo}/main/")] == ["x.csv"]
    ann("fs", "upload", f"lakefs://{repo}/main/y.csv", "--source", "-", input=b"no", code=8)
    ann("branch", "create", f"lakefs://{repo}/b", "--source", f"lakefs://{repo}/main", code=8)
    ann("repo", "create", f"lakefs://{unique('nope')}", code=8)
    # A user who is not an admin manages no one's auth, only its own keys.
    for argv in (
        ["auth", "users", "list"],
        ["auth", "users", "create", "--id", unique("x")],
        ["auth", "groups", "members", "add", "--id", group, "--user", user],
        ["auth", "policies", "create", "--id", unique("p"), "--statement-document", str(doc)],
        ["auth", "users", "policies", "attach", "--id", user, "--policy", "AdminAccess"],
    ):
        assert ann.js(*argv, code=8)["code"] == "forbidden"
    own = ann.js("auth", "users", "credentials", "list")["results"]
    assert [c["access_key_id"] for c in own] == [keys["access_key_id"]]

    # What an admin sees.
    assert [u["id"] for u in admin.js("auth", "groups", "members", "list", "--id", group)["results"]] == [
        user
    ]
    assert [g["id"] for g in admin.js("auth", "users", "groups", "list", "--id", user)["results"]] == [group]
    effective = admin.js("auth", "users", "policies", "list", "--id", user, "--effective")["results"]
    assert [p["id"] for p in effective] == [policy]
    assert admin.js("auth", "users", "policies", "list", "--id", user)["results"] == []
    assert [p["id"] for p in admin.js("auth", "groups", "policies", "list", "--id", group)["results"]] == [
        policy
    ]
    assert admin.js("auth", "policies", "show", "--id", policy)["statement"] == statement
    listed = admin.js("auth", "policies", "list", "--amount", "1000")["results"]
    assert {policy, "FSReadAll", "AdminAccess"} <= {p["id"] for p in listed}
    listed_groups = admin.js("auth", "groups", "list", "--amount", "1000")["results"]
    assert {"Admins", "SuperUsers", "Developers", "Viewers", group} <= {g["id"] for g in listed_groups}

    # Out of the group: the access goes, at the next request.
    admin("auth", "groups", "members", "remove", "--id", group, "--user", user)
    ann("fs", "cat", f"lakefs://{repo}/main/x.csv", code=8)
    admin("auth", "groups", "members", "remove", "--id", group, "--user", user, code=3)
    # A policy attached to the user itself, then detached.
    admin("auth", "users", "policies", "attach", "--id", user, "--policy", "FSReadWriteAll")
    ann("fs", "upload", f"lakefs://{repo}/main/y.csv", "--source", "-", input=b"ok")
    admin("auth", "users", "policies", "detach", "--id", user, "--policy", "FSReadWriteAll")
    ann("fs", "cat", f"lakefs://{repo}/main/x.csv", code=8)
    # A deleted key no longer authenticates.
    admin("auth", "users", "policies", "attach", "--id", user, "--policy", "FSReadAll")
    ann("fs", "cat", f"lakefs://{repo}/main/x.csv")
    deleted = admin.js(
        "auth", "users", "credentials", "delete", "--id", user, "--access-key-id", keys["access_key_id"]
    )
    assert deleted == {
        "type": "credentials",
        "deleted": [keys["access_key_id"]],
        "message": "Credentials deleted successfully.",
    }
    assert ann.js("fs", "cat", f"lakefs://{repo}/main/x.csv", code=10)["code"] == "unauthenticated"

    admin("auth", "groups", "delete", "--id", group)
    admin("auth", "policies", "delete", "--id", policy)
    admin("auth", "users", "delete", "--id", user)
    admin("auth", "users", "delete", "--id", user, code=3)
    admin("auth", "policies", "show", "--id", policy, code=3)


def test_human_output_shows_the_secret_once(admin: Cli, live: Live) -> None:
    user = unique("bob")
    assert "User created successfully." in admin("auth", "users", "create", "--id", user).stdout
    out = admin("auth", "users", "credentials", "create", "--id", user).stdout
    secret = next(line.split()[-1] for line in out.splitlines() if line.startswith("Secret Access Key"))
    key_id = next(line.split()[-1] for line in out.splitlines() if line.startswith("Access Key ID"))
    assert len(secret) == 40 and "not be able to see the secret key again" in out
    listed = admin("auth", "users", "credentials", "list", "--id", user).stdout
    assert key_id in listed and secret not in listed
    # The caller's own keys without --id; a page that has more says how to see them.
    assert live.key_id in admin("auth", "users", "credentials", "list").stdout
    first = admin("auth", "users", "list", "--amount", "1")
    assert "--after" in first.stderr and len(first.stdout.splitlines()) == 2  # header and one user
    shown = admin("auth", "policies", "show", "--id", "FSReadAll").stdout
    assert "ID:" in shown and '"fs:Read*"' in shown
    assert "FSReadAll" in admin("auth", "groups", "policies", "list", "--id", "Viewers").stdout
    admin("auth", "users", "delete", "--id", user)


@pytest.mark.parametrize(
    "document,message",
    [
        ("not json", "could not parse"),
        ('{"statements": []}', "statement"),
        ('{"statement": [{"effect": "allow", "resource": "*", "action": ["ReadObject"]}]}', "invalid action"),
        ('{"statement": []}', "non-empty"),
    ],
)
def test_bad_policy_documents_are_one_error(admin: Cli, document: str, message: str) -> None:
    policy = unique("bad")
    result = admin(
        "auth",
        "policies",
        "create",
        "--id",
        policy,
        "--statement-document",
        "-",
        input=document.encode(),
        code=2,
    )
    assert message in result.stderr
    admin("auth", "policies", "show", "--id", policy, code=3)


def test_missing_things_are_not_found(admin: Cli) -> None:
    for argv in (
        ["auth", "groups", "members", "add", "--id", "no-such-group", "--user", "admin"],
        ["auth", "users", "policies", "attach", "--id", "admin", "--policy", "no-such-policy"],
        ["auth", "users", "groups", "list", "--id", "no-such-user"],
        ["auth", "groups", "delete", "--id", "no-such-group"],
    ):
        assert admin.js(*argv, code=3)["code"] == "not_found"
    assert admin.js("auth", "groups", "delete", "--id", "Admins", code=2)["code"] == "invalid_argument"


@pytest.mark.parametrize(
    "argv",
    [
        ["auth", "users", "list"],
        ["auth", "users", "create", "--id", "u"],
        ["auth", "users", "credentials", "create"],
        ["auth", "groups", "members", "add", "--id", "g", "--user", "u"],
        ["auth", "policies", "create", "--id", "p", "--statement-document", "-"],
    ],
)
def test_the_embedded_lake_has_no_users(run: Run, home: Path, argv: list[str]) -> None:
    result = run(*argv, code=2, input=b"{}")
    assert (
        result.stderr.startswith("error: the embedded lake has no users") and result.stderr.count("\n") == 1
    )
    assert json.loads(run(*argv, "--json", code=2, input=b"{}").stdout)["code"] == "invalid_argument"
    assert not home.exists()  # nothing opened, nothing stored


def test_the_lakefs_sdk_lists_what_the_cli_made(admin: Cli, live: Live) -> None:
    sdk = pytest.importorskip("lakefs_sdk")
    user, group = unique("sdk-user"), unique("sdk-group")
    admin("auth", "users", "create", "--id", user)
    admin("auth", "groups", "create", "--id", group)
    admin("auth", "groups", "members", "add", "--id", group, "--user", user)
    config = sdk.Configuration(host=live.url, username=live.key_id, password=live.secret)
    with sdk.ApiClient(config) as client:
        api = sdk.AuthApi(client)
        assert user in [u.id for u in api.list_users(amount=1000).results]
        assert group in [g.id for g in api.list_groups(amount=1000).results]
        assert [u.id for u in api.list_group_members(group).results] == [user]
        assert [g.id for g in api.list_user_groups(user).results] == [group]


def test_the_s3_gateway_applies_the_same_policies(admin: Cli, live: Live, tmp_path: Path) -> None:
    """A policy on one repository's ARN: that bucket reads, another bucket and writes refused."""
    boto3 = pytest.importorskip("boto3")
    from botocore.config import Config
    from botocore.exceptions import ClientError

    mine, other, user, policy = unique("s3mine"), unique("s3other"), unique("s3user"), unique("s3read")
    for repo in (mine, other):
        admin("repo", "create", f"lakefs://{repo}")
        admin("fs", "upload", f"lakefs://{repo}/main/k.txt", "--source", "-", input=b"data")
    doc, _ = _read_only_policy(tmp_path, mine)
    admin("auth", "users", "create", "--id", user)
    admin("auth", "policies", "create", "--id", policy, "--statement-document", str(doc))
    admin("auth", "users", "policies", "attach", "--id", user, "--policy", policy)
    keys = admin.js("auth", "users", "credentials", "create", "--id", user)
    s3 = boto3.client(
        "s3",
        endpoint_url=live.s3_endpoint,
        aws_access_key_id=keys["access_key_id"],
        aws_secret_access_key=keys["secret_access_key"],
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )
    assert s3.get_object(Bucket=mine, Key="main/k.txt")["Body"].read() == b"data"
    assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == [mine]
    for call in (
        lambda: s3.get_object(Bucket=other, Key="main/k.txt"),
        lambda: s3.put_object(Bucket=mine, Key="main/new.txt", Body=b"no"),
    ):
        with pytest.raises(ClientError) as refused:
            call()
        assert refused.value.response["Error"]["Code"] == "AccessDenied"
    admin("auth", "users", "policies", "detach", "--id", user, "--policy", policy)
    with pytest.raises(ClientError):
        s3.get_object(Bucket=mine, Key="main/k.txt")
