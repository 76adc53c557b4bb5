"""The matrix of tests/server/test_roles.py: every route of the app (``ROUTES``) with the
requirement it must declare and a builder of a valid request, and the outcome each kind of
caller must get (:func:`expected`)."""

from __future__ import annotations

import base64
import enum
import hashlib
import io
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from fastapi.routing import iter_route_contexts

from lakectl.core import backing, blockaccess, manifests, presign, protection
from lakectl.core.importing import tasks
from lakectl.core.workflow import pulls
from server.api.deps import Access, Requirement
from server.auth.users import ROLE_PERMISSIONS, Role
from server.policies import Permission
from tests.server.roles_world import (
    OBJ,
    REPO,
    REPOS,
    RP,
    V1,
    Caller,
    R,
    World,
    unique,
)

# -- the matrix --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    path: str
    params: dict[str, str] | None = None
    json: Any = None
    content: bytes | None = None
    headers: dict[str, str] | None = None


Builder = Callable[[World, Caller], Call]


def need(permission: Permission) -> Requirement:
    return Requirement(Access.PERMISSION, permission)


PUBLIC = Requirement(Access.PUBLIC)
ANY_USER = Requirement(Access.AUTHENTICATED)
READ, WRITE = need(Permission.READ_REPO), need(Permission.WRITE_REPO)
CREATE, DELETE = need(Permission.CREATE_REPO), need(Permission.DELETE_REPO)
UPDATE, MANAGE = need(Permission.UPDATE_REPO), need(Permission.MANAGE_AUTH)
OWN_OR_MANAGE = Requirement(Access.OWN_OR_PERMISSION, Permission.MANAGE_AUTH)


def fixed(path: str, **kw: Any) -> Builder:
    return lambda w, c: Call(path, **kw)


def _link(w: World, c: Caller) -> Call:
    _, _, signed = w.block(c)
    return Call(f"{R}/branches/{w.branch()}/objects/link", json={"path": "linked.bin", "segments": [signed]})


def _links(w: World, c: Caller) -> Call:
    _, _, signed = w.block(c)
    body = {
        "objects": [{"path": "linked-1.bin", "segments": [signed]}, {"path": "linked-2.bin", "segments": []}]
    }
    return Call(f"{R}/branches/{w.branch()}/objects/links", json=body)


def _put_block(w: World, c: Caller) -> Call:
    data = os.urandom(64)
    return Call(f"/blocks/{hashlib.md5(data).hexdigest()}", content=data)


def _put_blocks(w: World, c: Caller) -> Call:
    data = os.urandom(64)
    return Call(
        "/blocks/batch", content=data, headers={"X-Lakectl-Blocks": f"{hashlib.md5(data).hexdigest()}+64"}
    )


def _prove(w: World, c: Caller) -> Call:
    bare, data, _ = w.block(c)
    nonce = blockaccess.challenge(w.lake, bare, w.token(c))
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
route("GET", V1 + "/config/garbage-collection", READ, fixed(V1 + "/config/garbage-collection"))
# telemetry: answered, nothing sent or kept
route(
    "POST",
    V1 + "/statistics",
    ANY_USER,
    fixed(V1 + "/statistics", json={"events": [{"class": "ui", "name": "x", "count": 1}]}),
    (204,),
)
route("GET", V1 + "/usage-report/summary", READ, fixed(V1 + "/usage-report/summary"))
route(
    "POST",
    V1 + "/setup_comm_prefs",
    PUBLIC,
    fixed(V1 + "/setup_comm_prefs", json={"featureUpdates": False, "securityUpdates": False}),
    (200,),
)
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
route("GET", RP + "/metadata", READ, fixed(R + "/metadata"))
route("POST", RP + "/metadata", UPDATE, fixed(R + "/metadata", json={"metadata": {"team": "data"}}), (204,))
route("DELETE", RP + "/metadata", UPDATE, fixed(R + "/metadata", json={"keys": ["team"]}), (204,))
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
route(
    "POST",
    RP + "/gc/rules",
    DELETE,
    fixed(R + "/gc/rules", json={"default_retention_days": 7, "branches": []}),
    (204,),
)
route("GET", RP + "/gc/rules", READ, fixed(R + "/gc/rules"), (200, 404))
route("DELETE", RP + "/gc/rules", DELETE, fixed(R + "/gc/rules"))
route("GET", RP + "/gc/rules/set_allowed", DELETE, fixed(R + "/gc/rules/set_allowed"), (204,))
route("POST", RP + "/gc/run", DELETE, fixed(R + "/gc/run?dry_run=true"))
# lakeFS's metadata, commit records and gc preparation (server/api/internal.py)


def _tree_file(w: World, kind: str) -> str:
    """The metarange of the world's head commit, or one range of it."""
    from lakectl.core import porcelain

    mid = porcelain.get_commit(w.lake, REPO, w.commit_id).meta_range_id
    return mid if kind == "meta_range" else w.lake.trees.ranges(mid)[0].id


def _commit_record(w: World, c: Caller) -> Call:
    """A new record (a unique message) on the world's head commit."""
    from lakectl.core import porcelain
    from lakectl.core.graph.refs import commit_id_of

    head, message = porcelain.get_commit(w.lake, REPO, w.commit_id), unique("record")
    cid = commit_id_of((head.id,), head.meta_range_id, message, "m", {}, head.creation_date)
    record = {"commit_id": cid, "version": 1, "committer": "m", "message": message, "parents": [head.id]}
    record |= {"metarange_id": head.meta_range_id, "creation_date": head.creation_date, "metadata": {}}
    return Call(R + "/commits", json={**record, "generation": head.generation + 1})


def _gc_task(w: World, c: Caller) -> Call:
    from lakectl.core.upkeep import gcprepare

    return Call(R + "/gc/prepare_commits/status", params={"id": gcprepare.submit(w.lake, REPO).task_id})


MR, RG = RP + "/metadata/meta_range/{meta_range}", RP + "/metadata/range/{range}"
route("GET", MR, READ, lambda w, c: Call(f"{R}/metadata/meta_range/{_tree_file(w, 'meta_range')}"))
route("GET", RG, READ, lambda w, c: Call(f"{R}/metadata/range/{_tree_file(w, 'range')}"))
route(
    "GET",
    RP + "/metadata/object/{type}/{object_id}",
    READ,
    lambda w, c: Call(f"{R}/metadata/object/range/{_tree_file(w, 'range')}"),
)
route("POST", RP + "/commits", DELETE, _commit_record, (204,))
route("POST", RP + "/gc/prepare_commits", DELETE, fixed(R + "/gc/prepare_commits"), (201,))
route("POST", RP + "/gc/prepare_commits/async", DELETE, fixed(R + "/gc/prepare_commits/async"), (202,))
route("GET", RP + "/gc/prepare_commits/status", DELETE, _gc_task, (200,))
route("POST", RP + "/gc/prepare_uncommited", DELETE, fixed(R + "/gc/prepare_uncommited", json={}), (201,))
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
# pull requests: reading them is ReadRepo, everything else WriteRepo (each call on a fresh one)
PULLS = RP + "/pulls"


def _pull(w: World) -> str:
    """An open pull request from a fresh branch one commit ahead into main, by another user."""
    return pulls.create_pull(w.lake, REPO, "t", w.side_branch(), "main", author="someone-else").id


route("GET", PULLS, READ, fixed(R + "/pulls"))
route(
    "POST",
    PULLS,
    WRITE,
    lambda w, c: Call(
        R + "/pulls", json={"title": "t", "source_branch": w.branch(), "destination_branch": "main"}
    ),
)
route("GET", PULLS + "/{pull_request}", READ, lambda w, c: Call(f"{R}/pulls/{_pull(w)}"))
route(
    "PATCH", PULLS + "/{pull_request}", WRITE, lambda w, c: Call(f"{R}/pulls/{_pull(w)}", json={"title": "u"})
)
route("PUT", PULLS + "/{pull_request}/merge", WRITE, lambda w, c: Call(f"{R}/pulls/{_pull(w)}/merge"))
route(
    "POST", PULLS + "/{pull_request}/approvals", WRITE, lambda w, c: Call(f"{R}/pulls/{_pull(w)}/approvals")
)
route(
    "DELETE",
    PULLS + "/{pull_request}/approvals",
    WRITE,
    lambda w, c: Call(f"{R}/pulls/{_pull(w)}/approvals"),
    (404,),  # no approval of the caller's to withdraw, past the role check
)
route("GET", PULLS + "/{pull_request}/reviews", READ, lambda w, c: Call(f"{R}/pulls/{_pull(w)}/reviews"))
route(
    "POST",
    PULLS + "/{pull_request}/reviews",
    WRITE,
    lambda w, c: Call(f"{R}/pulls/{_pull(w)}/reviews", json={"verdict": "changes_requested", "body": "no"}),
)
route("GET", PULLS + "/{pull_request}/comments", READ, lambda w, c: Call(f"{R}/pulls/{_pull(w)}/comments"))
route(
    "POST",
    PULLS + "/{pull_request}/comments",
    WRITE,
    lambda w, c: Call(f"{R}/pulls/{_pull(w)}/comments", json={"body": "hello"}),
)
route("GET", PULLS + "/{pull_request}/status", READ, lambda w, c: Call(f"{R}/pulls/{_pull(w)}/status"))
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


def _presigned_write(w: World, c: Caller) -> Call:
    signer = w.user(Role.DEVELOPER)
    slot = backing.reserve(w.lake, REPO, w.branch(), "written.bin")
    token, _ = backing.sign_write(w.lake, REPO, slot, signer.id, signer.signing_token)
    return Call(f"/presigned/{token}", content=b"bytes of a presigned upload")


route("PUT", "/presigned/{token}", PUBLIC, _presigned_write, (200,))
# fsck: admins only, as gc
route("POST", V1 + "/fsck", DELETE, fixed(V1 + "/fsck"))
route("POST", RP + "/fsck", DELETE, fixed(R + "/fsck"))
# the journal: admins only (it records every user's mutations)
route("GET", V1 + "/journal", DELETE, fixed(V1 + "/journal"))
route("POST", V1 + "/journal/enable", DELETE, fixed(V1 + "/journal/enable"))
# (the admin's call switches the world's journal off; the route after it, enable, on again)
route("POST", V1 + "/journal/disable", DELETE, fixed(V1 + "/journal/disable"))
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
route(
    "POST", RP + "/restore", DELETE, lambda w, c: Call(f"{REPOS}/{w.bare()}/restore", json=w.refs()), (202,)
)
route("GET", RP + "/restore", READ, lambda w, c: Call(R + "/restore", params={"task_id": w.task("restore")}))
route("PUT", RP + "/refs/dump", WRITE, fixed(R + "/refs/dump"), (201,))
route(
    "PUT", RP + "/refs/restore", DELETE, lambda w, c: Call(f"{REPOS}/{w.bare()}/refs/restore", json=w.refs())
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
route(
    "PUT",
    RP + "/branches/{branch}/objects/stat/user_metadata",
    WRITE,
    lambda w, c: Call(
        f"{R}/branches/{w.branch()}/objects/stat/user_metadata", params=OBJ, json={"set": {"k": "v"}}
    ),
    (201,),
)
route(
    "GET",
    RP + "/refs/{ref}/objects/underlyingProperties",
    READ,
    fixed(R + "/refs/main/objects/underlyingProperties", params=OBJ),
)


def _written_slot(w: World, path: str) -> tuple[str, backing.Slot, dict[str, Any]]:
    """A fresh branch with a slot for ``path`` whose bytes are written, and the link's fields."""
    branch = w.branch()
    slot = backing.reserve(w.lake, REPO, branch, path)
    data = os.urandom(32)
    md5 = hashlib.md5(data).hexdigest()
    backing.write(w.lake, REPO, slot.upload_id, io.BytesIO(data), md5)
    return branch, slot, {"checksum": md5, "size_bytes": len(data)}


def _link_backing(w: World, c: Caller) -> Call:
    branch, slot, fields = _written_slot(w, "backed.bin")
    body = {"staging": {"physical_address": slot.address}, **fields}
    return Call(f"{R}/branches/{branch}/staging/backing", params={"path": "backed.bin"}, json=body)


def _stage_object(w: World, c: Caller) -> Call:
    branch, slot, fields = _written_slot(w, "staged.bin")
    body = {"physical_address": slot.address, **fields}
    return Call(f"{R}/branches/{branch}/objects", params={"path": "staged.bin"}, json=body)


route(
    "GET",
    RP + "/branches/{branch}/staging/backing",
    WRITE,
    lambda w, c: Call(f"{R}/branches/{w.branch()}/staging/backing", params={"path": "backed.bin"}),
)
route("PUT", RP + "/branches/{branch}/staging/backing", WRITE, _link_backing, (200,))
route("PUT", RP + "/branches/{branch}/objects", WRITE, _stage_object, (201,))
route(
    "POST",
    RP + "/refs/{branch}/symlink",
    WRITE,
    lambda w, c: Call(f"{R}/refs/{w.branch()}/symlink", params={"location": "data/"}),
    (201,),
)
# diff and merge
route("GET", RP + "/refs/{left_ref}/diff/{right_ref}", READ, fixed(R + "/refs/main/diff/v1"))
route(
    "GET",
    RP + "/refs/{left_ref}/diff/{right_ref}/table",
    READ,
    fixed(R + "/refs/main/diff/v1/table?path=data/a.txt"),  # an object, the same on both sides
)
route("GET", RP + "/branches/{branch}/diff", READ, fixed(R + "/branches/main/diff"))
route(
    "POST",
    RP + "/refs/{source_ref}/merge/{destination_branch}",
    WRITE,
    lambda w, c: Call(f"{R}/refs/{w.side_branch()}/merge/{w.branch()}", json={"message": "merge"}),
)
route("GET", RP + "/refs/{source_ref}/merge/{destination_branch}", READ, fixed(R + "/refs/v1/merge/main"))
route("GET", RP + "/refs/{ref}/ancestor-of/{other_ref}", READ, fixed(R + "/refs/v1/ancestor-of/main"))
route("GET", RP + "/refs/{ref}/provenance", READ, fixed(R + "/refs/main/provenance", params=OBJ))
route("GET", RP + "/refs/{ref}/downstream", READ, fixed(R + "/refs/v1/downstream"))
# the block API
route("POST", RP + "/branches/{branch}/objects/link", WRITE, _link)
route("POST", RP + "/branches/{branch}/objects/links", WRITE, _links)
route("GET", RP + "/refs/{ref}/objects/signed", READ, fixed(R + "/refs/main/objects/signed", params=OBJ))
route("GET", RP + "/refs/{ref}/manifest", READ, fixed(R + "/refs/main/manifest"))
route("GET", RP + "/refs/{ref}/changes", READ, fixed(R + "/refs/main/changes", params={"since": "v1"}))
route(
    "POST",
    RP + "/branches/{branch}/manifest",
    WRITE,
    lambda w, c: Call(
        f"{R}/branches/{w.branch()}/manifest",
        params={"prefix": "imported"},
        # Signed for the caller, as a signed export hands them out (an unsigned one is refused).
        content=manifests.export_manifest(
            w.lake, REPO, "main", sign=lambda bare: blockaccess.sign_locator(w.lake, bare, w.token(c))
        ).encode(),
    ),
)
route("PUT", "/blocks/{md5}", WRITE, _put_block)
route("POST", "/blocks/batch", WRITE, _put_blocks)
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


def _principal(w: World, bound: bool) -> tuple[str, dict[str, str]]:
    """Another user's external principals path, and an ARN (bound to that user, or not)."""
    user = w.user()
    arn = f"arn:aws:iam::123456789012:role/{unique('r')}"
    if bound:
        w.auth.principals.bind(user.id, user.incarnation, arn)
    return f"{USERS}/{user.id}/external/principals", {"principalId": arn}


def _foreign_identity(w: World, c: Caller) -> Call:
    """An AWS IAM login signed for a host that is no STS: refused (401) before anything is sent."""
    info = {
        "method": "POST",
        "host": "sts.attacker.example",
        "region": "us-east-1",
        "action": "GetCallerIdentity",
        "date": time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()),
        "expiration_duration": "60",
        "access_key_id": "AKIAIOSFODNN7EXAMPLE",
        "signature": "0" * 64,
        "signed_headers": ["host"],
        "version": "2011-06-15",
        "algorithm": "AWS4-HMAC-SHA256",
    }
    token = base64.b64encode(json.dumps(info).encode()).decode()
    return Call(V1 + "/auth/external/principal/login", json={"identityRequest": {"identity_token": token}})


route("POST", USER + "/external/principals", MANAGE, lambda w, c: Call(*_principal(w, bound=False)))
route("DELETE", USER + "/external/principals", MANAGE, lambda w, c: Call(*_principal(w, bound=True)))
route(
    "GET",
    USER + "/external/principals/ls",
    OWN_OR_MANAGE,
    lambda w, c: Call(f"{USERS}/{_other_user(w, c)}/external/principals/ls"),
)
route(
    "GET",
    V1 + "/auth/external/principals",
    MANAGE,
    lambda w, c: Call(V1 + "/auth/external/principals", params=_principal(w, bound=True)[1]),
)
route("POST", V1 + "/auth/external/principal/login", PUBLIC, _foreign_identity, (401,))
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
