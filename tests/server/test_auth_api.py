"""Login tokens and the auth API (users, access keys, groups, policies) over HTTP, against the
world of ``tests.server.roles_world``."""

from __future__ import annotations

import base64
import logging
import time
from typing import Any

import httpx
import pytest

from lakectl.core import writes
from server.auth.store import Auth
from server.auth.tokens import TOKEN_TTL
from server.auth.users import Role, User
from tests.server.roles_world import (
    OBJ,
    REPO,
    REPOS,
    R,
    World,
    basic,
    bearer,
    snapshot,
    unique,
    world_fixture,  # noqa: F401 - the fixture `world`
)

# -- login tokens ------------------------------------------------------------------------------


def _login(w: World, key_id: str, secret: str) -> httpx.Response:
    with w.client() as http:
        return http.post("/api/v1/auth/login", json={"access_key_id": key_id, "secret_access_key": secret})


def test_login_returns_a_token_that_carries_the_role(world: World) -> None:
    user = world.user(Role.ANALYST)
    creds = world.auth.create_credentials(user)
    r = _login(world, creds.access_key_id, creds.secret_access_key)
    assert r.status_code == 200, r.text
    token, expiration = r.json()["token"], r.json()["token_expiration"]
    assert abs(expiration - (time.time() + TOKEN_TTL)) < 60
    with world.client(bearer(token)) as http:
        assert http.get("/api/v1/user").json()["user"]["id"] == user.id
        assert http.get(R + "/refs/main/objects", params=OBJ).content == b"id,value\n1,one\n"
        refused = http.post(R + "/branches", json={"name": "nope", "source": "main"})
        assert refused.status_code == 403 and refused.json()["code"] == "forbidden"
        # Roles are read at each request: a new group applies to tokens already issued.
        world.auth.set_role(user.id, Role.DEVELOPER)
        assert http.post(R + "/branches", json={"name": unique("tb"), "source": "main"}).status_code == 201


@pytest.mark.parametrize("key_id,secret", [("dev", "wrong"), ("AKIANOSUCHKEY", "x"), ("", "")])
def test_login_with_wrong_credentials_is_401_and_changes_nothing(
    world: World, key_id: str, secret: str
) -> None:
    if key_id == "dev":
        key_id = world.key(world.auth.get_user("dev"))
    before = snapshot(world)
    r = _login(world, key_id, secret)
    assert r.status_code == 401 and r.json()["code"] == "unauthenticated"
    assert snapshot(world) == before


def _tamper(token: str) -> str:
    header, payload, signature = token.split(".")
    claims = base64.urlsafe_b64decode(payload + "==").replace(b'"sub":"dev"', b'"sub":"admin"')
    return ".".join((header, base64.urlsafe_b64encode(claims).rstrip(b"=").decode(), signature))


def test_forged_expired_and_foreign_tokens_are_401(world: World) -> None:
    dev = world.auth.get_user("dev")
    good = world.auth.tokens.issue(dev).token
    bad = {
        "tampered claims": _tamper(good),
        "flipped signature": good[:-4] + ("AAAA" if not good.endswith("AAAA") else "BBBB"),
        "expired": world.auth.tokens.issue(dev, ttl=10, now=time.time() - 11).token,
        "other server's": Auth(world.lake.kv, "another secret").tokens.issue(dev).token,
        "garbage": "not-a-token",
        "alg none": "eyJhbGciOiJub25lIn0." + good.split(".")[1] + ".",
    }
    with world.client() as http:
        assert http.get("/api/v1/user", headers=bearer(good)).status_code == 200
        for name, token in bad.items():
            r = http.get("/api/v1/user", headers=bearer(token))
            assert r.status_code == 401 and r.json()["code"] == "unauthenticated", name
        before = snapshot(world)
        r = http.post(
            REPOS, headers=bearer(_tamper(good)), json={"name": "forged", "storage_namespace": "local://f"}
        )
        assert r.status_code == 401 and snapshot(world) == before


def test_tokens_and_keys_of_a_deleted_user_stop_working(world: World) -> None:
    user = world.user(Role.DEVELOPER)
    creds = world.auth.create_credentials(user)
    token = world.auth.tokens.issue(user).token
    with world.client(basic(*world.admin_key)) as admin:
        assert admin.delete(f"/api/v1/auth/users/{user.id}").status_code == 204
        # A new user of the same name is another user: the old key and token are not its.
        assert admin.post("/api/v1/auth/users", json={"id": user.id}).status_code == 201
        assert admin.put(f"/api/v1/auth/groups/Admins/members/{user.id}").status_code == 201
    with world.client() as http:
        assert http.get("/api/v1/user", headers=bearer(token)).status_code == 401
        assert (
            http.get("/api/v1/user", headers=basic(creds.access_key_id, creds.secret_access_key)).status_code
            == 401
        )


# -- the auth API ------------------------------------------------------------------------------


def test_users_manage_their_own_access_keys_only(world: World) -> None:
    ann = world.user(Role.ANALYST)
    first = world.auth.create_credentials(ann)
    own = f"/api/v1/auth/users/{ann.id}/credentials"
    with world.client(basic(first.access_key_id, first.secret_access_key)) as http:
        created = http.post(own)
        assert created.status_code == 201
        second = created.json()
        assert second["secret_access_key"] and second["access_key_id"] != first.access_key_id
        listed = http.get(own).json()
        assert sorted(c["access_key_id"] for c in listed["results"]) == sorted(
            [first.access_key_id, second["access_key_id"]]
        )
        assert "secret_access_key" not in str(listed)
        assert http.get(f"{own}/{second['access_key_id']}").json()["access_key_id"] == second["access_key_id"]
        assert http.delete(f"{own}/{second['access_key_id']}").status_code == 204
        assert http.get(f"{own}/{second['access_key_id']}").status_code == 404
        assert http.get("/api/v1/auth/users/dev/credentials").status_code == 403
        assert http.get(f"/api/v1/auth/users/{ann.id}").status_code == 403  # the user record: admins only
    with world.client() as http:
        assert (
            http.get(
                "/api/v1/user", headers=basic(second["access_key_id"], second["secret_access_key"])
            ).status_code
            == 401
        )


def test_groups_give_roles_and_membership_changes_apply_at_once(world: World) -> None:
    user = world.user()
    creds = world.auth.create_credentials(user)
    members = f"/api/v1/auth/groups/Developers/members/{user.id}"
    with (
        world.client(basic(*world.admin_key)) as admin,
        world.client(basic(creds.access_key_id, creds.secret_access_key)) as http,
    ):
        assert http.get("/api/v1/user").json()["user"] == {**user.to_dict(), "role": None}
        assert http.get(R).status_code == 403  # no group, no policy: nothing but its own account
        assert admin.put(members).status_code == 201
        assert http.get(R).status_code == 200
        assert http.post(R + "/branches", json={"name": unique("gb"), "source": "main"}).status_code == 201
        listed = admin.get("/api/v1/auth/groups/Developers/members").json()["results"]
        assert user.id in [u["id"] for u in listed]
        assert admin.get(f"/api/v1/auth/users/{user.id}/groups").json()["results"][0]["id"] == "Developers"
        # Groups add up, as in lakeFS: in Viewers and Developers, it still writes.
        assert admin.put(f"/api/v1/auth/groups/Viewers/members/{user.id}").status_code == 201
        assert http.post(R + "/branches", json={"name": unique("gb"), "source": "main"}).status_code == 201
        assert admin.delete(members).status_code == 204
        assert admin.delete(members).status_code == 404  # no longer a member
        assert http.post(R + "/branches", json={"name": unique("gb"), "source": "main"}).status_code == 403
        assert http.get(R).status_code == 200
        assert admin.delete(f"/api/v1/auth/groups/Viewers/members/{user.id}").status_code == 204
        assert http.get(R).status_code == 403
        assert admin.put(f"/api/v1/auth/groups/Wizards/members/{user.id}").status_code == 404
        assert admin.put("/api/v1/auth/groups/Viewers/members/nobody-at-all").status_code == 404


def test_builtin_groups_and_policies_are_lakefs_s(world: World) -> None:
    with world.client(basic(*world.admin_key)) as admin:
        groups = admin.get("/api/v1/auth/groups").json()["results"]
        policies = {p["id"]: p for p in admin.get("/api/v1/auth/policies").json()["results"]}
        group_policies = admin.get("/api/v1/auth/groups/Developers/policies").json()["results"]
        assert admin.get("/api/v1/auth/policies/Nope").status_code == 404
        # Built-ins are fixed: not deleted, not changed.
        assert admin.delete("/api/v1/auth/groups/Admins").status_code == 400
        assert admin.delete("/api/v1/auth/policies/FSReadAll").status_code == 400
        assert admin.put("/api/v1/auth/groups/Viewers/policies/FSFullAccess").status_code == 400
        assert admin.post("/api/v1/auth/groups", json={"id": "Admins"}).status_code == 409
    builtin = [g["id"] for g in groups if g["creation_date"] == 0]
    assert builtin == ["Admins", "Developers", "SuperUsers", "Viewers"]
    for name in ("AdminAccess", "AuthFullAccess", "FSFullAccess", "FSReadAll", "FSReadWriteAll"):
        assert policies[name]["creation_date"] == 0
    assert policies["FSReadAll"]["statement"] == [
        {"effect": "allow", "resource": "*", "action": ["fs:List*", "fs:Read*"]}
    ]
    assert [p["id"] for p in group_policies] == [
        "AuthManageOwnCredentials",
        "FSReadWriteAll",
        "RepoManagementReadAll",
    ]


def _as(world: World, user: User) -> httpx.Client:
    creds = world.auth.create_credentials(user)
    return world.client(basic(creds.access_key_id, creds.secret_access_key))


def test_policies_decide_what_a_user_may_do(world: World) -> None:
    """A policy of one's own, attached to a user or through a group: lakeFS's evaluation (allow
    needed, deny wins, repository ARNs, wildcards), changes applied at the next request."""
    other = world.repo()
    writes.upload(world.lake, other, "main", "x.txt", b"x", "text/plain")
    user, group, policy = world.user(), world.group(), unique("only-matrix")
    statement = [
        {
            "effect": "allow",
            "resource": f"arn:lakefs:fs:::repository/{REPO}",
            "action": ["fs:Read*", "fs:List*"],
        }
    ]
    with world.client(basic(*world.admin_key)) as admin, _as(world, user) as http:
        r = admin.post("/api/v1/auth/policies", json={"id": policy, "statement": statement})
        assert r.status_code == 201 and r.json()["statement"] == statement, r.text
        assert admin.put(f"/api/v1/auth/groups/{group}/policies/{policy}").status_code == 201
        assert http.get(R + "/refs/main/objects", params=OBJ).status_code == 403
        assert admin.put(f"/api/v1/auth/groups/{group}/members/{user.id}").status_code == 201
        # Reads of its repository, nothing of another, no writes; it lists only its repository.
        listed = http.get(REPOS, params={"amount": 1000}).json()["results"]
        assert [r["id"] for r in listed] == [REPO]
        assert http.get(R + "/refs/main/objects", params=OBJ).content == b"id,value\n1,one\n"
        assert http.get(f"{REPOS}/{other}/refs/main/objects", params={"path": "x.txt"}).status_code == 403
        assert http.post(R + "/branches", json={"name": unique("pb"), "source": "main"}).status_code == 403
        effective = admin.get(f"/api/v1/auth/users/{user.id}/policies", params={"effective": "true"}).json()
        assert [x["id"] for x in effective["results"]] == [policy]
        assert admin.get(f"/api/v1/auth/users/{user.id}/policies").json()["results"] == []
        # Attached to the user: writes everywhere; a deny on the other repository wins there.
        assert admin.put(f"/api/v1/auth/users/{user.id}/policies/FSReadWriteAll").status_code == 201
        assert http.post(R + "/branches", json={"name": unique("pb"), "source": "main"}).status_code == 201
        deny = [{"effect": "deny", "resource": f"arn:lakefs:fs:::repository/{other}", "action": ["fs:*"]}]
        assert (
            admin.post("/api/v1/auth/policies", json={"id": f"{policy}-deny", "statement": deny}).status_code
            == 201
        )
        assert admin.put(f"/api/v1/auth/users/{user.id}/policies/{policy}-deny").status_code == 201
        assert http.get(f"{REPOS}/{other}/refs/main/objects", params={"path": "x.txt"}).status_code == 403
        assert http.get(R + "/refs/main/objects", params=OBJ).status_code == 200
        # Updating a policy applies to everyone it is attached to; deleting it takes it away.
        widened = [{**statement[0], "resource": "arn:lakefs:fs:::repository/*"}]
        r = admin.put(f"/api/v1/auth/policies/{policy}", json={"id": policy, "statement": widened})
        assert r.status_code == 200 and r.json()["statement"] == widened
        assert admin.delete(f"/api/v1/auth/users/{user.id}/policies/FSReadWriteAll").status_code == 204
        assert admin.delete(f"/api/v1/auth/users/{user.id}/policies/FSReadWriteAll").status_code == 404
        assert http.post(R + "/branches", json={"name": unique("pb"), "source": "main"}).status_code == 403
        assert admin.delete(f"/api/v1/auth/policies/{policy}").status_code == 204
        assert http.get(R + "/refs/main/objects", params=OBJ).status_code == 403
        # A policy of the same name later is another policy: the old attachment does not revive.
        assert (
            admin.post("/api/v1/auth/policies", json={"id": policy, "statement": widened}).status_code == 201
        )
        assert http.get(R + "/refs/main/objects", params=OBJ).status_code == 403
        # Deleting the group: its members lose what it gave.
        assert admin.put(f"/api/v1/auth/groups/{group}/policies/{policy}").status_code == 201
        assert http.get(R + "/refs/main/objects", params=OBJ).status_code == 200
        assert admin.delete(f"/api/v1/auth/groups/{group}").status_code == 204
        assert http.get(R + "/refs/main/objects", params=OBJ).status_code == 403
        assert admin.get(f"/api/v1/auth/users/{user.id}/groups").json()["results"] == []


@pytest.mark.parametrize(
    "statement",
    [
        [],
        [{"effect": "maybe", "resource": "*", "action": ["fs:ReadObject"]}],
        [{"effect": "allow", "resource": "*", "action": []}],
        [{"effect": "allow", "resource": "*", "action": ["ReadObject"]}],
        [{"effect": "allow", "resource": "[not json", "action": ["fs:*"]}],
        [{"effect": "allow", "resource": "*", "action": ["fs:*"], "extra": 1}],
        [{"effect": "allow", "resource": "*", "action": ["fs:*"], "condition": {"IpAddress": {"x": ["1"]}}}],
        "allow everything",
    ],
)
def test_bad_policies_are_400_and_store_nothing(world: World, statement: Any) -> None:
    before = snapshot(world)
    with world.client(basic(*world.admin_key)) as admin:
        r = admin.post("/api/v1/auth/policies", json={"id": unique("bad"), "statement": statement})
    assert r.status_code == 400 and r.json()["code"] == "invalid_argument", r.text
    assert snapshot(world) == before


def test_users_api_shapes_and_errors(world: World) -> None:
    name = unique("shape")
    with world.client(basic(*world.admin_key)) as admin:
        created = admin.post("/api/v1/auth/users", json={"id": name})
        assert created.status_code == 201 and created.json()["id"] == name and created.json()["role"] is None
        assert admin.post("/api/v1/auth/users", json={"id": name}).status_code == 409
        assert admin.post("/api/v1/auth/users", json={"id": "a/b"}).status_code == 400
        assert admin.post("/api/v1/auth/users", json={"id": name, "invite_user": True}).status_code == 400
        page = admin.get("/api/v1/auth/users", params={"prefix": name}).json()
        assert [u["id"] for u in page["results"]] == [name] and not page["pagination"]["has_more"]
        first = admin.get("/api/v1/auth/users", params={"amount": 1}).json()
        assert (
            first["pagination"]["has_more"]
            and first["pagination"]["next_offset"] == first["results"][0]["id"]
        )
        assert admin.get("/api/v1/auth/users/nobody-at-all").status_code == 404
        # An admin cannot lock itself out.
        assert admin.delete("/api/v1/auth/users/admin").status_code == 400
        assert admin.delete("/api/v1/auth/groups/Admins/members/admin").status_code == 400
        assert admin.get("/api/v1/user").json()["user"]["role"] == "Admin"


def test_secrets_never_reach_the_log(world: World, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    user = world.user(Role.ANALYST)
    with world.client(basic(*world.admin_key)) as admin:
        secret = admin.post(f"/api/v1/auth/users/{user.id}/credentials").json()["secret_access_key"]
    token = _login(world, *world.admin_key).json()["token"]
    assert _login(world, world.key(user), "a wrong secret").status_code == 401
    with world.client() as http:
        http.get("/api/v1/user", headers=basic(world.admin_key[0], "another wrong secret"))
        http.get("/api/v1/user", headers=bearer(token + "x"))
        http.post("/api/v1/auth/login", json={"access_key_id": world.admin_key[0], "secret_access_key": 7})
    assert "unauthenticated" in caplog.text  # refusals are logged, without what was sent
    for needle in (secret, world.admin_key[1], "a wrong secret", "another wrong secret", token):
        assert needle not in caplog.text


def test_the_lakefs_sdk_reads_the_auth_api(world: World) -> None:
    """lakeFS's own client parses every auth answer (its models are strict about types)."""
    sdk = pytest.importorskip("lakefs_sdk")
    key_id, secret = world.admin_key
    host = world.url + "/api/v1"
    with sdk.ApiClient(sdk.Configuration(host=host, username=key_id, password=secret)) as client:
        api = sdk.AuthApi(client)
        token = api.login(sdk.LoginInformation(access_key_id=key_id, secret_access_key=secret))
        name, group, policy = unique("sdk"), unique("sdk-g"), unique("sdk-p")
        assert api.create_user(sdk.UserCreation(id=name)).id == name
        assert api.create_group(sdk.GroupCreation(id=group, description="d")).id == group
        statement = sdk.Statement(effect="allow", resource="*", action=["fs:Read*"])
        assert api.create_policy(sdk.Policy(id=policy, statement=[statement])).id == policy
        api.attach_policy_to_group(group, policy)
        api.attach_policy_to_user(name, "FSReadAll")
        api.add_group_membership(group, name)
        api.add_group_membership("Viewers", name)
        assert name in [u.id for u in api.list_group_members(group).results]
        assert [g.id for g in api.list_user_groups(name).results] == sorted([group, "Viewers"])
        assert [p.id for p in api.list_user_policies(name).results] == ["FSReadAll"]
        effective = [p.id for p in api.list_user_policies(name, effective=True).results]
        assert effective == sorted(["AuthManageOwnCredentials", "FSReadAll", policy])
        key = api.create_credentials(name)
        assert [c.access_key_id for c in api.list_user_credentials(name).results] == [key.access_key_id]
        assert api.get_credentials(name, key.access_key_id).access_key_id == key.access_key_id
        assert [p.id for p in api.list_group_policies(group).results] == [policy]
        assert api.get_policy(policy).statement[0].action == ["fs:Read*"]
        updated = sdk.Statement(effect="deny", resource="*", action=["fs:*"])
        assert (
            api.update_policy(policy, sdk.Policy(id=policy, statement=[updated])).statement[0].effect
            == "deny"
        )
        assert group in [g.id for g in api.list_groups(amount=1000).results]
        assert policy in [p.id for p in api.list_policies(amount=1000).results]
        assert api.get_group(group).id == group
        api.detach_policy_from_group(group, policy)
        api.detach_policy_from_user(name, "FSReadAll")
        api.delete_credentials(name, key.access_key_id)
        api.delete_group_membership(group, name)
        api.delete_group(group)
        api.delete_policy(policy)
        api.delete_user(name)
    with sdk.ApiClient(sdk.Configuration(host=host, access_token=token.token)) as client:
        assert sdk.AuthApi(client).get_current_user().user.id == "admin"
