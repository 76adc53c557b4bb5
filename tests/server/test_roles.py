"""Who may call what over HTTP: every route of the app for every kind of caller, login tokens,
and the auth API (users, access keys, groups, policies).

The matrix enumerates the app's routes: a route added without a declared requirement, or
without a row in ``ROUTES`` below, fails ``test_every_route_declares_its_requirement``. Each row
builds a valid request, so that allowed callers succeed; a refused call (401 or 403) must leave
the metadata database and the data directory exactly as they were.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import itertools
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.routing import APIRoute, iter_route_contexts

from lakectl.core import blockaccess, journal, keys, manifests, presign, protection, refsdump
from lakectl.core import porcelain as p
from lakectl.core.importing import tasks
from server.api.deps import Access, AuthFirstRoute, Requirement
from server.app import create_app
from server.auth import ROLE_PERMISSIONS, TOKEN_TTL, Auth, Permission, Role, User
from server.config import load_settings
from tests.server.conftest import START_TIMEOUT_S, free_port

REPO = "matrix"
R = f"/api/v1/repositories/{REPO}"
_names = itertools.count()


def unique(stem: str) -> str:
    return f"{stem}-{next(_names)}"


# -- the server, its users and a small repository ----------------------------------------------


@dataclass(frozen=True)
class Caller:
    name: str
    role: Role | None
    """None: the server cannot authenticate this caller."""
    token: str
    """Whom the caller's signed block locators are for (its user's ``signing_token``)."""
    headers: dict[str, str]


def basic(key_id: str, secret: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{key_id}:{secret}".encode()).decode()}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@dataclass
class World:
    url: str
    app: FastAPI
    auth: Auth
    lake: p.Lake
    data_dir: Path
    admin_key: tuple[str, str]
    commit_id: str
    """The head of ``main`` (it added data/a.txt)."""
    callers: dict[str, Caller] = field(default_factory=dict)

    def client(self, headers: dict[str, str] | None = None) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=headers, timeout=30.0)

    # Fresh resources, made through the plumbing (fast, and not under test here).

    def branch(self, dirty: bool = False) -> str:
        name = unique("b")
        p.create_branch(self.lake, REPO, name, "main")
        if dirty:
            p.upload(self.lake, REPO, name, "data/new.txt", os.urandom(16), "text/plain")
        return name

    def side_branch(self) -> str:
        """A branch one commit ahead of main."""
        name = self.branch(dirty=True)
        p.commit(self.lake, REPO, name, "side", committer="admin")
        return name

    def tag(self) -> str:
        name = unique("t")
        p.create_tag(self.lake, REPO, name, "main")
        return name

    def repo(self) -> str:
        name = unique("r")
        p.create_repo(self.lake, name, "main", f"local://{name}")
        return name

    def bare(self) -> str:
        name = unique("bare")
        p.create_repo(self.lake, name, "main", f"local://{name}", bare=True)
        return name

    def refs(self) -> dict[str, str]:
        return refsdump.dump(self.lake, REPO).to_dict()

    def task(self, kind: str) -> str:
        refs = refsdump.dump(self.lake, REPO) if kind == "dump" else None
        return str(refsdump.record_task(self.lake, REPO, kind, refs)["id"])

    def user(self, role: Role | None = None) -> User:
        return self.auth.create_user(unique("u"), role)

    def group(self, *policies: str) -> str:
        name = unique("g")
        self.auth.directory.create_group(name)
        for policy in policies:
            self.auth.directory.attach_to_group(name, policy)
        return name

    def policy(self) -> str:
        name = unique("p")
        self.auth.directory.create_policy(
            name, [{"effect": "allow", "resource": "*", "action": ["fs:Read*"]}]
        )
        return name

    def key(self, user: User) -> str:
        return self.auth.create_credentials(user).access_key_id

    def block(self, caller: Caller) -> tuple[str, bytes, str]:
        """A stored block: bare locator, bytes, locator signed for ``caller``."""
        data = os.urandom(64)
        md5 = hashlib.md5(data).hexdigest()
        signed = blockaccess.put_block(self.lake, md5, data, caller.token)
        return f"{md5}+{len(data)}", data, signed


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    data_dir = tmp_path_factory.mktemp("roles")
    app = create_app(load_settings(None, str(data_dir), environ={}))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning"))
    thread = threading.Thread(target=server.run, name="lakectl-roles-server", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "the test server did not start"
            time.sleep(0.02)
        url = f"http://127.0.0.1:{server.config.port}"
        with httpx.Client(base_url=url) as anon:
            admin = anon.post("/api/v1/setup_lakefs", json={"username": "admin"}).json()
        key = (admin["access_key_id"], admin["secret_access_key"])
        lake, auth = app.state.lake, app.state.auth
        p.create_repo(lake, REPO, "main", f"local://{REPO}")
        p.upload(lake, REPO, "main", "data/a.txt", b"id,value\n1,one\n", "text/csv")
        head = p.commit(lake, REPO, "main", "add data", committer="admin")
        p.create_tag(lake, REPO, "v1", "main")
        blockaccess.signing_key(lake)  # created on first use: before any snapshot
        w = World(url + "", app, auth, lake, data_dir, key, head.id)
        w.callers = _callers(w)
        yield w
    finally:
        server.should_exit = True
        thread.join(timeout=START_TIMEOUT_S)


def _callers(w: World) -> dict[str, Caller]:
    """Users made through the auth API (as an admin would), one caller per way of calling."""
    admin = w.auth.get_user("admin").signing_token
    out = {"admin": Caller("admin", Role.ADMIN, admin, basic(*w.admin_key))}
    with w.client(basic(*w.admin_key)) as api:
        for user_id, group in (("dev", "Developers"), ("ann", "Viewers")):
            assert api.post("/api/v1/auth/users", json={"id": user_id}).status_code == 201
            assert api.put(f"/api/v1/auth/groups/{group}/members/{user_id}").status_code == 201
            creds = api.post(f"/api/v1/auth/users/{user_id}/credentials").json()
            role = Role.DEVELOPER if user_id == "dev" else Role.ANALYST
            token = w.auth.get_user(user_id).signing_token
            out[user_id] = Caller(
                user_id, role, token, basic(creds["access_key_id"], creds["secret_access_key"])
            )
            if user_id == "dev":
                login = {
                    "access_key_id": creds["access_key_id"],
                    "secret_access_key": creds["secret_access_key"],
                }
                login_token = api.post("/api/v1/auth/login", json=login).json()["token"]
                out["dev-token"] = Caller("dev-token", role, token, bearer(login_token))
                out["wrong-secret"] = Caller(
                    "wrong-secret", None, token, basic(creds["access_key_id"], "x" * 40)
                )
    expired = w.auth.issue_token(w.auth.get_user("dev"), now=time.time() - TOKEN_TTL - 60).token
    out["expired-token"] = Caller("expired-token", None, out["dev"].token, bearer(expired))
    out["anonymous"] = Caller("anonymous", None, "nobody", {})
    return out


# -- the matrix --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    path: str
    params: dict[str, str] | None = None
    json: Any = None
    content: bytes | None = None


Builder = Callable[[World, Caller], Call]


def need(permission: Permission) -> Requirement:
    return Requirement(Access.PERMISSION, permission)


PUBLIC = Requirement(Access.PUBLIC)
ANY_USER = Requirement(Access.AUTHENTICATED)
READ, WRITE = need(Permission.READ_REPO), need(Permission.WRITE_REPO)
CREATE, DELETE = need(Permission.CREATE_REPO), need(Permission.DELETE_REPO)
MANAGE = need(Permission.MANAGE_AUTH)
OWN_OR_MANAGE = Requirement(Access.OWN_OR_PERMISSION, Permission.MANAGE_AUTH)
OBJ = {"path": "data/a.txt"}


def fixed(path: str, **kw: Any) -> Builder:
    return lambda w, c: Call(path, **kw)


def _link(w: World, c: Caller) -> Call:
    _, _, signed = w.block(c)
    return Call(f"{R}/branches/{w.branch()}/objects/link", json={"path": "linked.bin", "segments": [signed]})


def _put_block(w: World, c: Caller) -> Call:
    data = os.urandom(64)
    return Call(f"/blocks/{hashlib.md5(data).hexdigest()}", content=data)


def _prove(w: World, c: Caller) -> Call:
    bare, data, _ = w.block(c)
    nonce = blockaccess.challenge(w.lake, bare, c.token)
    return Call(
        "/blocks/prove",
        json={"locator": bare, "nonce": nonce, "answer": blockaccess.prove_answer(nonce, data)},
    )


def _import_body(w: World) -> dict[str, Any]:
    src = w.data_dir.parent / "import-src"
    src.mkdir(exist_ok=True)
    (src / "f.csv").write_text("7,8\n")
    return {
        "paths": [{"type": "common_prefix", "path": str(src), "destination": "imp/"}],
        "commit": {"message": "m"},
    }


def _import_call(w: World, running: bool) -> Call:
    """An import into a fresh branch: done (status), or still running (cancel)."""
    branch = w.branch()
    if running:
        st = tasks.Status(unique("imp").replace("-", ""), REPO, branch, f"_{branch}_imported", False)
        tasks._save(w.lake, st)
    else:
        body = _import_body(w)["paths"]
        locations = [tasks.Location.from_dict(d) for d in body]
        st = tasks.start(w.lake, REPO, branch, locations, "m", merge=False, background=False)
    return Call(f"{R}/branches/{branch}/import", params={"id": st.id})


def _missing(w: World, c: Caller) -> Call:
    data = os.urandom(64)
    return Call("/blocks/missing", json={"locators": [f"{hashlib.md5(data).hexdigest()}+64"]})


def _other_user(w: World, c: Caller) -> str:
    """A user that is not the caller: credentials routes then need ManageAuth."""
    return w.user(Role.ANALYST).id


def _other_key(w: World, c: Caller) -> str:
    user = w.user(Role.ANALYST)
    return f"/api/v1/auth/users/{user.id}/credentials/{w.key(user)}"


ROUTES: dict[tuple[str, str], tuple[Requirement, Builder, tuple[int, ...]]] = {}
"""(method, path) → (the requirement the route must declare, a request, success statuses
(empty: any 2xx))."""


def route(method: str, path: str, requirement: Requirement, build: Builder, ok: tuple[int, ...] = ()) -> None:
    ROUTES[(method, path)] = (requirement, build, ok)


V1, REPOS, RP = "/api/v1", "/api/v1/repositories", "/api/v1/repositories/{repository}"
route("GET", V1 + "/openapi.json", PUBLIC, fixed(V1 + "/openapi.json"))
route("HEAD", V1 + "/openapi.json", PUBLIC, fixed(V1 + "/openapi.json"))
route("GET", V1 + "/healthcheck", PUBLIC, fixed(V1 + "/healthcheck"))
route("GET", V1 + "/setup_lakefs", PUBLIC, fixed(V1 + "/setup_lakefs"))
route(
    "POST", V1 + "/setup_lakefs", PUBLIC, fixed(V1 + "/setup_lakefs", json={"username": "intruder"}), (409,)
)
route("GET", V1 + "/config", READ, fixed(V1 + "/config"))
route("GET", V1 + "/config/storage", READ, fixed(V1 + "/config/storage"))
route("GET", V1 + "/config/version", READ, fixed(V1 + "/config/version"))
# repositories
route("GET", REPOS, READ, fixed(REPOS))
route(
    "POST",
    REPOS,
    CREATE,
    lambda w, c: Call(REPOS, json={"name": (n := unique("new")), "storage_namespace": f"local://{n}"}),
)
route("GET", RP, READ, fixed(R))
route("DELETE", RP, DELETE, lambda w, c: Call(f"{REPOS}/{w.repo()}"))
# branches
route("GET", RP + "/branches", READ, fixed(R + "/branches"))
route(
    "POST",
    RP + "/branches",
    WRITE,
    lambda w, c: Call(R + "/branches", json={"name": unique("nb"), "source": "main"}),
)
route("GET", RP + "/branches/{branch}", READ, fixed(R + "/branches/main"))
route("DELETE", RP + "/branches/{branch}", WRITE, lambda w, c: Call(f"{R}/branches/{w.branch()}"))
route(
    "PUT",
    RP + "/branches/{branch}",
    WRITE,
    lambda w, c: Call(f"{R}/branches/{w.branch(True)}", json={"type": "reset"}),
)
route(
    "POST",
    RP + "/branches/{branch}/revert",
    WRITE,
    lambda w, c: Call(f"{R}/branches/{w.branch()}/revert", json={"ref": w.commit_id, "parent_number": 0}),
)
route(
    "POST",
    RP + "/branches/{branch}/cherry-pick",
    WRITE,
    lambda w, c: Call(f"{R}/branches/{w.branch()}/cherry-pick", json={"ref": w.side_branch()}),
)
# settings
route(
    "PUT",
    RP + "/settings/gc_rules",
    DELETE,
    fixed(R + "/settings/gc_rules", json={"default_retention_days": 7, "branches": []}),
)
route("GET", RP + "/settings/gc_rules", READ, fixed(R + "/settings/gc_rules"), (200, 404))
route("DELETE", RP + "/settings/gc_rules", DELETE, fixed(R + "/settings/gc_rules"))
route("POST", RP + "/gc/run", DELETE, fixed(R + "/gc/run?dry_run=true"))
# action runs: read access (no runs in the matrix's repository: 404 past the role check)
RUNS = RP + "/actions/runs"
route("GET", RUNS, READ, fixed(R + "/actions/runs"))
route("GET", RUNS + "/{run_id}", READ, fixed(R + "/actions/runs/ffff"), (404,))
route("GET", RUNS + "/{run_id}/hooks", READ, fixed(R + "/actions/runs/ffff/hooks"), (404,))
route(
    "GET",
    RUNS + "/{run_id}/hooks/{hook_run_id}/output",
    READ,
    fixed(R + "/actions/runs/ffff/hooks/0000_0000/output"),
    (404,),
)
# branch protection: rules only admins set (patterns that match no branch of the matrix)
route("GET", RP + "/settings/branch_protection", READ, fixed(R + "/settings/branch_protection"))
route(
    "PUT",
    RP + "/settings/branch_protection",
    DELETE,
    lambda w, c: Call(R + "/settings/branch_protection", json=[{"pattern": unique("zz-rule")}]),
)
route("GET", RP + "/branch_protection", READ, fixed(R + "/branch_protection"))
route(
    "POST",
    RP + "/branch_protection",
    DELETE,
    lambda w, c: Call(R + "/branch_protection", json={"pattern": unique("zz-rule")}),
)


def _rule(w: World, c: Caller) -> Call:
    pattern = unique("zz-rule")
    protection.add_rule(w.lake, REPO, pattern)
    return Call(R + "/branch_protection", json={"pattern": pattern})


route("DELETE", RP + "/branch_protection", DELETE, _rule)
route("GET", RP + "/branch_protection/set_allowed", DELETE, fixed(R + "/branch_protection/set_allowed"))
route(
    "GET",
    RP + "/branches/{branch}/objects/stage_allowed",
    WRITE,
    fixed(R + "/branches/main/objects/stage_allowed", params=OBJ),
)
# annotate (a lakectl extension) and presigned URLs, which any HTTP client may read through
route("GET", RP + "/refs/{ref}/annotate", READ, fixed(R + "/refs/main/annotate"))


def _presigned(w: World, c: Caller) -> Call:
    signer = w.user(Role.ANALYST)
    token, _ = presign.presign(w.lake, REPO, "main", OBJ["path"], signer.id, signer.signing_token)
    return Call(f"/presigned/{token}")


route("GET", "/presigned/{token}", PUBLIC, _presigned)
# fsck: admins only, as gc
route("POST", V1 + "/fsck", DELETE, fixed(V1 + "/fsck"))
route("POST", RP + "/fsck", DELETE, fixed(R + "/fsck"))
# the journal: admins only (it records every user's mutations)
route("GET", V1 + "/journal", DELETE, fixed(V1 + "/journal"))
route("POST", V1 + "/journal/enable", DELETE, fixed(V1 + "/journal/enable"))
route("POST", V1 + "/journal/compact", DELETE, fixed(V1 + "/journal/compact"))
# An accepted stream never ends: the admin's request names a bad repository, a 400 that shows it
# got past the permission check.
route(
    "GET", V1 + "/journal/stream", DELETE, fixed(V1 + "/journal/stream", params={"repo": "Bad Name!"}), (400,)
)
# zero-copy import (lakeFS's ImportApi); a started import runs in the server until it completes
IMPORT = RP + "/branches/{branch}/import"
route(
    "POST",
    IMPORT,
    WRITE,
    lambda w, c: Call(f"{R}/branches/{w.branch()}/import", json=_import_body(w)),
    (202,),
)
route("GET", IMPORT, READ, lambda w, c: _import_call(w, running=False))
route("DELETE", IMPORT, WRITE, lambda w, c: _import_call(w, running=True), (204,))
route("POST", IMPORT + "/copy", WRITE, lambda w, c: Call(f"{R}/branches/{w.branch()}/import/copy"))
# refs dump and restore (into a fresh bare repository)
route("POST", RP + "/dump", WRITE, fixed(R + "/dump"), (202,))
route("GET", RP + "/dump", READ, lambda w, c: Call(R + "/dump", params={"task_id": w.task("dump")}))
route("POST", RP + "/restore", WRITE, lambda w, c: Call(f"{REPOS}/{w.bare()}/restore", json=w.refs()), (202,))
route("GET", RP + "/restore", READ, lambda w, c: Call(R + "/restore", params={"task_id": w.task("restore")}))
route("PUT", RP + "/refs/dump", WRITE, fixed(R + "/refs/dump"), (201,))
route(
    "PUT", RP + "/refs/restore", WRITE, lambda w, c: Call(f"{REPOS}/{w.bare()}/refs/restore", json=w.refs())
)
# tags
route("GET", RP + "/tags", READ, fixed(R + "/tags"))
route("POST", RP + "/tags", WRITE, lambda w, c: Call(R + "/tags", json={"id": unique("nt"), "ref": "main"}))
route("GET", RP + "/tags/{tag}", READ, fixed(R + "/tags/v1"))
route("DELETE", RP + "/tags/{tag}", WRITE, lambda w, c: Call(f"{R}/tags/{w.tag()}"))
# commits
route(
    "POST",
    RP + "/branches/{branch}/commits",
    WRITE,
    lambda w, c: Call(f"{R}/branches/{w.branch(True)}/commits", json={"message": "m"}),
)
route("GET", RP + "/commits/{commit_id}", READ, lambda w, c: Call(f"{R}/commits/{w.commit_id}"))
route("GET", RP + "/refs/{ref}/commits", READ, fixed(R + "/refs/main/commits"))
# objects
route("GET", RP + "/refs/{ref}/objects", READ, fixed(R + "/refs/main/objects", params=OBJ))
route("HEAD", RP + "/refs/{ref}/objects", READ, fixed(R + "/refs/main/objects", params=OBJ))
route("GET", RP + "/refs/{ref}/objects/stat", READ, fixed(R + "/refs/main/objects/stat", params=OBJ))
route("GET", RP + "/refs/{ref}/objects/ls", READ, fixed(R + "/refs/main/objects/ls"))
route(
    "POST",
    RP + "/branches/{branch}/objects",
    WRITE,
    lambda w, c: Call(
        f"{R}/branches/{w.branch()}/objects", params={"path": "up.bin"}, content=os.urandom(32)
    ),
)
route(
    "DELETE",
    RP + "/branches/{branch}/objects",
    WRITE,
    lambda w, c: Call(f"{R}/branches/{w.branch(True)}/objects", params={"path": "data/new.txt"}),
)
route(
    "POST",
    RP + "/branches/{branch}/objects/delete",
    WRITE,
    lambda w, c: Call(f"{R}/branches/{w.branch(True)}/objects/delete", json={"paths": ["data/new.txt"]}),
)
route(
    "POST",
    RP + "/branches/{branch}/objects/copy",
    WRITE,
    lambda w, c: Call(
        f"{R}/branches/{w.branch()}/objects/copy",
        params={"dest_path": "copy.txt"},
        json={"src_path": "data/a.txt"},
    ),
)
# diff and merge
route("GET", RP + "/refs/{left_ref}/diff/{right_ref}", READ, fixed(R + "/refs/main/diff/v1"))
route("GET", RP + "/branches/{branch}/diff", READ, fixed(R + "/branches/main/diff"))
route(
    "POST",
    RP + "/refs/{source_ref}/merge/{destination_branch}",
    WRITE,
    lambda w, c: Call(f"{R}/refs/{w.side_branch()}/merge/{w.branch()}", json={"message": "merge"}),
)
# the block API
route("POST", RP + "/branches/{branch}/objects/link", WRITE, _link)
route("GET", RP + "/refs/{ref}/objects/signed", READ, fixed(R + "/refs/main/objects/signed", params=OBJ))
route("GET", RP + "/refs/{ref}/manifest", READ, fixed(R + "/refs/main/manifest"))
route(
    "POST",
    RP + "/branches/{branch}/manifest",
    WRITE,
    lambda w, c: Call(
        f"{R}/branches/{w.branch()}/manifest",
        params={"prefix": "imported"},
        # Signed for the caller, as a signed export hands them out (an unsigned one is refused).
        content=manifests.export_manifest(
            w.lake, REPO, "main", sign=lambda bare: blockaccess.sign_locator(w.lake, bare, c.token)
        ).encode(),
    ),
)
route("PUT", "/blocks/{md5}", WRITE, _put_block)
route("GET", "/blocks/{signed}", READ, lambda w, c: Call(f"/blocks/{w.block(c)[2]}"))
route("POST", "/blocks/missing", WRITE, _missing)
route("POST", "/blocks/prove", WRITE, _prove)
# auth
USERS, USER, GROUPS = V1 + "/auth/users", V1 + "/auth/users/{userId}", V1 + "/auth/groups"
route(
    "POST",
    V1 + "/auth/login",
    PUBLIC,
    lambda w, c: Call(
        V1 + "/auth/login", json={"access_key_id": w.admin_key[0], "secret_access_key": w.admin_key[1]}
    ),
)
route("GET", V1 + "/user", ANY_USER, fixed(V1 + "/user"))
route("GET", USERS, MANAGE, fixed(USERS))
route("POST", USERS, MANAGE, lambda w, c: Call(USERS, json={"id": unique("nu")}))
route("GET", USER, MANAGE, fixed(USERS + "/ann"))
route("DELETE", USER, MANAGE, lambda w, c: Call(f"{USERS}/{w.user().id}"))
route("GET", USER + "/groups", MANAGE, fixed(USERS + "/dev/groups"))
route(
    "GET", USER + "/credentials", OWN_OR_MANAGE, lambda w, c: Call(f"{USERS}/{_other_user(w, c)}/credentials")
)
route(
    "POST",
    USER + "/credentials",
    OWN_OR_MANAGE,
    lambda w, c: Call(f"{USERS}/{_other_user(w, c)}/credentials"),
)
route("GET", USER + "/credentials/{accessKeyId}", OWN_OR_MANAGE, lambda w, c: Call(_other_key(w, c)))
route("DELETE", USER + "/credentials/{accessKeyId}", OWN_OR_MANAGE, lambda w, c: Call(_other_key(w, c)))
route("GET", USER + "/policies", MANAGE, fixed(USERS + "/dev/policies"))
route(
    "PUT",
    USER + "/policies/{policyId}",
    MANAGE,
    lambda w, c: Call(f"{USERS}/{w.user().id}/policies/FSReadAll"),
)
route(
    "DELETE",
    USER + "/policies/{policyId}",
    MANAGE,
    lambda w, c: Call(f"{USERS}/{_with_policy(w)}/policies/FSReadAll"),
)
route("GET", GROUPS, MANAGE, fixed(GROUPS))
route("POST", GROUPS, MANAGE, lambda w, c: Call(GROUPS, json={"id": unique("ng")}))
route("GET", GROUPS + "/{groupId}", MANAGE, fixed(GROUPS + "/Developers"))
route("DELETE", GROUPS + "/{groupId}", MANAGE, lambda w, c: Call(f"{GROUPS}/{w.group()}"))
route("GET", GROUPS + "/{groupId}/members", MANAGE, fixed(GROUPS + "/Developers/members"))
route(
    "PUT",
    GROUPS + "/{groupId}/members/{userId}",
    MANAGE,
    lambda w, c: Call(f"{GROUPS}/Developers/members/{w.user().id}"),
)
route(
    "DELETE",
    GROUPS + "/{groupId}/members/{userId}",
    MANAGE,
    lambda w, c: Call(f"{GROUPS}/Viewers/members/{w.user(Role.ANALYST).id}"),
)
route("GET", GROUPS + "/{groupId}/policies", MANAGE, fixed(GROUPS + "/Viewers/policies"))
route(
    "PUT",
    GROUPS + "/{groupId}/policies/{policyId}",
    MANAGE,
    lambda w, c: Call(f"{GROUPS}/{w.group()}/policies/FSReadAll"),
)
route(
    "DELETE",
    GROUPS + "/{groupId}/policies/{policyId}",
    MANAGE,
    lambda w, c: Call(f"{GROUPS}/{w.group('FSReadAll')}/policies/FSReadAll"),
)
POLICIES = V1 + "/auth/policies"
READ_ALL = [{"effect": "allow", "resource": "*", "action": ["fs:Read*"]}]
route("GET", POLICIES, MANAGE, fixed(POLICIES))
route("POST", POLICIES, MANAGE, lambda w, c: Call(POLICIES, json={"id": unique("np"), "statement": READ_ALL}))
route("GET", POLICIES + "/{policyId}", MANAGE, fixed(POLICIES + "/FSReadWriteAll"))
route(
    "PUT",
    POLICIES + "/{policyId}",
    MANAGE,
    lambda w, c: Call(f"{POLICIES}/{(p := w.policy())}", json={"id": p, "statement": READ_ALL}),
)
route("DELETE", POLICIES + "/{policyId}", MANAGE, lambda w, c: Call(f"{POLICIES}/{w.policy()}"))


def _with_policy(w: World) -> str:
    user = w.user()
    w.auth.attach_policy(user.id, "FSReadAll")
    return user.id


class Outcome(enum.Enum):
    OK = "allowed"
    FORBIDDEN = "403"
    UNAUTHENTICATED = "401"


def expected(requirement: Requirement, caller: Caller) -> Outcome:
    if requirement.access is Access.PUBLIC:
        return Outcome.OK
    if caller.role is None:
        return Outcome.UNAUTHENTICATED
    if requirement.access is Access.AUTHENTICATED:
        return Outcome.OK
    return Outcome.OK if requirement.permission in ROLE_PERMISSIONS[caller.role] else Outcome.FORBIDDEN


def declared(app: FastAPI) -> dict[tuple[str, str], list[Requirement] | None]:
    """Every (method, path) the app serves, with the requirements it declares (None: a plain
    Starlette route, which cannot declare any)."""
    out: dict[tuple[str, str], list[Requirement] | None] = {}
    for rc in iter_route_contexts(app.routes):
        dependant = getattr(rc, "dependant", None)
        reqs = (
            None
            if dependant is None
            else [d.call for d in dependant.dependencies if isinstance(d.call, Requirement)]
        )
        for method in rc.methods or ():
            out[(method, str(rc.path))] = reqs
    return out


def snapshot(w: World) -> tuple[list[tuple[str, str, bytes]], list[tuple[str, int]]]:
    """Every KV row and every file of the data directory (but the database's own files), once
    the journal sealed what earlier requests did (else its keeper would, within a second, in the
    middle of the next request); the journal's writer records are left out (their heartbeat is
    renewed every few seconds, whatever is asked)."""
    tasks.wait_all(w.lake)  # an import a request started runs in a thread of the server
    journal.flush(w.lake)
    with closing(sqlite3.connect(f"file:{w.data_dir / 'lake.db'}?mode=ro", uri=True)) as db:
        rows = db.execute(
            "SELECT partition, key, value FROM kv WHERE NOT (partition = ? AND key LIKE ?)"
            " ORDER BY partition, key",
            (keys.JOURNAL, keys.JOURNAL_WRITER_PREFIX + "%"),
        ).fetchall()
    files = sorted(
        (str(f.relative_to(w.data_dir)), f.stat().st_size)
        for f in w.data_dir.rglob("*")
        if f.is_file() and not f.name.startswith("lake.db")
    )
    return rows, files


def changes(before: Any, after: Any) -> str:
    rows = {r[:2] for r in set(before[0]) ^ set(after[0])}
    files = set(before[1]) ^ set(after[1])
    return f"KV rows changed: {sorted(rows)[:5]}; files changed: {sorted(files)[:5]}"


def test_the_snapshot_sees_metadata_and_block_writes(world: World) -> None:
    """The guard of the matrix: a staged object, a branch or a bare block changes the snapshot."""
    before = snapshot(world)
    world.branch()
    assert snapshot(world) != before
    before = snapshot(world)
    data = os.urandom(64)
    blockaccess.put_block(world.lake, hashlib.md5(data).hexdigest(), data, "admin")
    assert snapshot(world)[1] != before[1]


def test_every_route_declares_its_requirement(world: World) -> None:
    served = declared(world.app)
    assert sorted(set(served) - set(ROUTES)) == [], "routes without a row in the matrix"
    assert sorted(set(ROUTES) - set(served)) == [], "matrix rows without a route"
    for key, reqs in served.items():
        if reqs is None:  # the OpenAPI document: FastAPI's own route, public
            assert ROUTES[key][0] == PUBLIC and key[1].endswith("/openapi.json"), key
            continue
        assert reqs == [ROUTES[key][0]], f"{key}: declares {reqs}, the matrix expects {ROUTES[key][0]}"
    for rc in iter_route_contexts(world.app.routes):
        if isinstance(rc.original_route, APIRoute):  # checks its requirement before the body
            assert isinstance(rc.original_route, AuthFirstRoute), rc.path


def test_credentials_are_checked_before_the_body_is_read(world: World) -> None:
    """A malformed body gets 401 or 403 like any other, not a 400 that reveals the route parsed it."""
    junk, json_type = b"{not json", {"content-type": "application/json"}
    with world.client() as http:
        for caller, status in (("anonymous", 401), ("wrong-secret", 401), ("ann", 403), ("admin", 400)):
            r = http.post(REPOS, content=junk, headers={**json_type, **world.callers[caller].headers})
            assert r.status_code == status, (caller, r.text)


@pytest.mark.parametrize("method,path", sorted(ROUTES), ids=[f"{m} {p}" for m, p in sorted(ROUTES)])
def test_matrix(world: World, method: str, path: str) -> None:
    requirement, build, ok = ROUTES[(method, path)]
    with world.client() as http:
        for caller in world.callers.values():
            call = build(world, caller)
            outcome = expected(requirement, caller)
            before = snapshot(world) if outcome is not Outcome.OK else None
            r = http.request(
                method,
                call.path,
                params=call.params,
                json=call.json,
                content=call.content,
                headers=caller.headers,
            )
            where = f"{caller.name}: {method} {call.path} → {r.status_code} {r.text[:300]}"
            if outcome is Outcome.OK:
                assert r.status_code in ok or (not ok and 200 <= r.status_code < 300), where
                continue
            assert r.status_code == int(outcome.value), where
            if method != "HEAD":
                body = r.json()
                code = "forbidden" if outcome is Outcome.FORBIDDEN else "unauthenticated"
                assert body["code"] == code and body["message"], where
            if outcome is Outcome.UNAUTHENTICATED:
                assert r.headers["www-authenticate"].startswith("Basic"), where
            after = snapshot(world)
            assert after == before, f"{where}: {changes(before, after)}"


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
    good = world.auth.issue_token(dev).token
    bad = {
        "tampered claims": _tamper(good),
        "flipped signature": good[:-4] + ("AAAA" if not good.endswith("AAAA") else "BBBB"),
        "expired": world.auth.issue_token(dev, ttl=10, now=time.time() - 11).token,
        "other server's": Auth(world.lake.kv, "another secret").issue_token(dev).token,
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
    token = world.auth.issue_token(user).token
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
    p.upload(world.lake, other, "main", "x.txt", b"x", "text/plain")
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
