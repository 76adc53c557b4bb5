"""A repository-scoped policy confines its holder on every surface: the REST API, the block API
(signed locators, links, manifests) and the S3 gateway (with presigned URLs and copy sources).

One live server for the module: repositories ``a`` and ``b`` (unique names), a reader whose only
policy allows ``fs:ReadObject`` on ``arn:lakefs:fs:::repository/<a>/*`` (lakeFS's form), and a
writer allowed ``fs:ReadObject``, ``fs:WriteObject`` and ``fs:List*`` there the same way. Each
may do its operations in ``a`` and nothing in ``b``; refused requests leave ``b`` as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.server.conftest import Live, commit, unique, upload
from tests.ui.conftest import sign_in

A_PATH, B_PATH = "data/a.bin", "data/b.bin"
Keys = tuple[str, str]


@dataclass(frozen=True)
class Scene:
    live: Live
    a: str
    b: str
    a_data: bytes
    b_data: bytes
    admin: Keys
    reader: Keys
    writer: Keys

    @property
    def blocks(self) -> str:
        """The block API's URL prefix (it is not under ``/api/v1``)."""
        return self.live.url.removesuffix("/api/v1") + "/blocks/"

    def rest(self, keys: Keys) -> httpx.Client:
        return self.live.client(keys)

    def s3(self, keys: Keys) -> Any:
        return boto3.client(
            "s3",
            endpoint_url=self.live.s3_endpoint,
            aws_access_key_id=keys[0],
            aws_secret_access_key=keys[1],
            region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
        )


def confined(repo: str, *actions: str) -> list[dict[str, Any]]:
    """The issue's form of a per-repository policy: ``actions`` on everything in ``repo``."""
    return [{"effect": "allow", "resource": f"arn:lakefs:fs:::repository/{repo}/*", "action": list(actions)}]


def user_with(admin: httpx.Client, statements: list[dict[str, Any]], *builtin: str) -> Keys:
    """A new user (in no group) holding a policy of ``statements`` and the ``builtin`` policies."""
    name, policy = unique("confined"), unique("only")
    assert admin.post("/auth/users", json={"id": name}).status_code == 201
    r = admin.post("/auth/policies", json={"id": policy, "statement": statements})
    assert r.status_code == 201, r.text
    for attached in (policy, *builtin):
        assert admin.put(f"/auth/users/{name}/policies/{attached}").status_code == 201
    creds = admin.post(f"/auth/users/{name}/credentials").json()
    return creds["access_key_id"], creds["secret_access_key"]


@pytest.fixture(scope="module")
def scene(live: Live) -> Iterator[Scene]:
    admin_keys = (live.key_id, live.secret)
    with live.client(admin_keys) as admin:
        names = {}
        for stem, path in (("pol-a", A_PATH), ("pol-b", B_PATH)):
            name = unique(stem)
            r = admin.post("/repositories", json={"name": name, "storage_namespace": f"local://{name}"})
            assert r.status_code == 201, r.text
            data = os.urandom(64)  # blocks of their own: nothing in a shares a block with b
            upload(admin, name, "main", path, data)
            commit(admin, name, "main", "seed")
            names[stem] = (name, data)
        (a, a_data), (b, b_data) = names["pol-a"], names["pol-b"]
        reader = user_with(admin, confined(a, "fs:ReadObject"))
        writer = user_with(admin, confined(a, "fs:ReadObject", "fs:WriteObject", "fs:List*"))
    yield Scene(live, a, b, a_data, b_data, admin_keys, reader, writer)


def state(scene: Scene, repo: str) -> dict[str, Any]:
    """What a repository holds, as the admin sees it: branches, objects on main (committed and
    staged) with their checksums, main's uncommitted changes and open multipart uploads."""
    with scene.rest(scene.admin) as admin:
        branches = admin.get(f"/repositories/{repo}/branches").json()["results"]
        listed = admin.get(f"/repositories/{repo}/refs/main/objects/ls", params={"amount": 1000}).json()
        diff = admin.get(f"/repositories/{repo}/branches/main/diff").json()["results"]
    uploads = scene.s3(scene.admin).list_multipart_uploads(Bucket=repo).get("Uploads", [])
    objects = [(o["path"], o["checksum"]) for o in listed["results"]]
    return {"branches": branches, "objects": objects, "diff": diff, "uploads": uploads}


def refused(r: httpx.Response, code: str = "forbidden") -> None:
    """403: ``forbidden`` by the caller's policies, ``signature_error`` for a locator not its own."""
    assert r.status_code == 403 and r.json()["code"] == code, r.text


def access_denied(call: Any, **kwargs: Any) -> None:
    with pytest.raises(ClientError) as caught:
        call(**kwargs)
    error = caught.value.response
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 403, error
    # An answer to HEAD has no body: boto3 names its error by the status.
    assert error["Error"]["Code"] == ("403" if call.__name__.startswith("head") else "AccessDenied"), error


def signed_locators(http: httpx.Client, repo: str, path: str) -> httpx.Response:
    return http.get(f"/repositories/{repo}/refs/main/objects/signed", params={"path": path})


# -- the REST API ---------------------------------------------------------------------------------


@pytest.mark.parametrize("who", ["reader", "writer"])
def test_rest_reads_only_its_repository(scene: Scene, who: str) -> None:
    a, b = f"/repositories/{scene.a}", f"/repositories/{scene.b}"
    with scene.rest(getattr(scene, who)) as http, httpx.Client(timeout=30.0) as anon:
        assert [r["id"] for r in http.get("/repositories", params={"amount": 1000}).json()["results"]] == [
            scene.a
        ]
        assert http.get(f"{a}/refs/main/objects", params={"path": A_PATH}).content == scene.a_data
        assert http.get(f"{a}/refs/main/objects/stat", params={"path": A_PATH}).json()["path"] == A_PATH
        assert [
            o["path"]
            for o in http.get(f"{a}/refs/main/objects/ls", params={"prefix": "data/"}).json()["results"]
        ] == [A_PATH]
        stat = http.get(f"{a}/refs/main/objects/stat", params={"path": A_PATH, "presign": "true"}).json()
        assert anon.get(stat["physical_address"]).content == scene.a_data
        for route, params in (
            ("", {}),
            ("/branches", {}),
            ("/refs/main/objects", {"path": B_PATH}),
            ("/refs/main/objects/stat", {"path": B_PATH}),
            ("/refs/main/objects/stat", {"path": B_PATH, "presign": "true"}),
            ("/refs/main/objects", {"path": B_PATH, "presign": "true"}),
            ("/refs/main/objects/ls", {}),
        ):
            refused(http.get(b + route, params=params))


# -- the block API --------------------------------------------------------------------------------


@pytest.mark.parametrize("who", ["reader", "writer"])
def test_block_reads_only_through_its_own_locators_of_its_repository(scene: Scene, who: str) -> None:
    with scene.rest(getattr(scene, who)) as http, scene.rest(scene.admin) as admin:
        [own] = signed_locators(http, scene.a, A_PATH).json()["signed_locators"]
        assert http.get(scene.blocks + f"{own}").content == scene.a_data
        assert http.get(scene.blocks + f"{own}", headers={"Range": "bytes=0-3"}).content == scene.a_data[:4]
        manifest = http.get(f"/repositories/{scene.a}/refs/main/manifest", params={"signed": "true"})
        assert manifest.status_code == 200 and hashlib.md5(scene.a_data).hexdigest() in manifest.text
        refused(signed_locators(http, scene.b, B_PATH))
        refused(http.get(f"/repositories/{scene.b}/refs/main/manifest", params={"signed": "true"}))
        # A locator of b's block handed out to another user (the admin) is no use to it.
        [theirs] = signed_locators(admin, scene.b, B_PATH).json()["signed_locators"]
        assert admin.get(scene.blocks + f"{theirs}").content == scene.b_data
        refused(http.get(scene.blocks + f"{theirs}"), "signature_error")
        refused(http.get(scene.blocks + f"{theirs}", headers={"Range": "bytes=0-3"}), "signature_error")


def test_a_reader_stores_no_block(scene: Scene) -> None:
    data = os.urandom(32)
    md5 = hashlib.md5(data).hexdigest()
    with scene.rest(scene.reader) as http:
        refused(http.put(scene.blocks + f"{md5}", content=data))
        refused(http.post(scene.blocks + "missing", json={"locators": [f"{md5}+{len(data)}"]}))
        link = {"path": "new.bin", "segments": []}
        refused(http.post(f"/repositories/{scene.a}/branches/main/objects/link", json=link))


def test_block_writes_only_into_its_repository(scene: Scene) -> None:
    before = state(scene, scene.b)
    data = os.urandom(48)
    md5 = hashlib.md5(data).hexdigest()
    with scene.rest(scene.writer) as http, scene.rest(scene.admin) as admin:
        put = http.put(scene.blocks + f"{md5}", content=data)
        assert put.status_code == 200, put.text
        own = put.text.strip()
        link = {"path": unique("linked") + ".bin", "segments": [own]}
        links = {"objects": [link]}
        refused(http.post(f"/repositories/{scene.b}/branches/main/objects/link", json=link))
        refused(http.post(f"/repositories/{scene.b}/branches/main/objects/links", json=links))
        # b's manifest, signed for the admin, imported into a: b's blocks are not claimed that way.
        b_manifest = admin.get(f"/repositories/{scene.b}/refs/main/manifest", params={"signed": "true"}).text
        imported = http.post(
            f"/repositories/{scene.a}/branches/main/manifest",
            params={"prefix": "from-b/"},
            content=b_manifest,
        )
        refused(imported, "signature_error")
        [theirs] = signed_locators(admin, scene.b, B_PATH).json()["signed_locators"]
        stolen = {"path": "stolen.bin", "segments": [theirs]}
        refused(
            http.post(f"/repositories/{scene.a}/branches/main/objects/link", json=stolen), "signature_error"
        )
        refused(
            http.post(f"/repositories/{scene.a}/branches/main/objects/links", json={"objects": [stolen]}),
            "signature_error",
        )
        # Its own manifest of a goes into a, not into b.
        a_manifest = http.get(f"/repositories/{scene.a}/refs/main/manifest", params={"signed": "true"}).text
        for prefix in ("again/", ""):
            refused(
                http.post(
                    f"/repositories/{scene.b}/branches/main/manifest",
                    params={"prefix": prefix},
                    content=a_manifest,
                )
            )
        again = http.post(
            f"/repositories/{scene.a}/branches/main/manifest",
            params={"prefix": unique("again") + "/"},
            content=a_manifest,
        )
        assert again.status_code == 200 and len(again.json()["paths"]) >= 1, again.text
        linked = http.post(f"/repositories/{scene.a}/branches/main/objects/link", json=link)
        assert linked.status_code == 201, linked.text
        assert (
            http.get(f"/repositories/{scene.a}/refs/main/objects", params={"path": link["path"]}).content
            == data
        )
        paths = [
            o["path"] for o in http.get(f"/repositories/{scene.a}/refs/main/objects/ls").json()["results"]
        ]
    assert "stolen.bin" not in paths and not any(p.startswith("from-b/") for p in paths)
    assert state(scene, scene.b) == before


# -- the S3 gateway -------------------------------------------------------------------------------


@pytest.mark.parametrize("who", ["reader", "writer"])
def test_s3_reads_and_lists_only_its_repository(scene: Scene, who: str) -> None:
    s3 = scene.s3(getattr(scene, who))
    a_key, b_key = f"main/{A_PATH}", f"main/{B_PATH}"
    assert [x["Name"] for x in s3.list_buckets()["Buckets"]] == [scene.a]
    assert [x["Key"] for x in s3.list_objects_v2(Bucket=scene.a, Prefix="main/data/")["Contents"]] == [a_key]
    assert s3.get_object(Bucket=scene.a, Key=a_key)["Body"].read() == scene.a_data
    assert s3.head_object(Bucket=scene.a, Key=a_key)["ContentLength"] == len(scene.a_data)
    access_denied(s3.list_objects_v2, Bucket=scene.b, Prefix="main/")
    access_denied(s3.list_objects, Bucket=scene.b)
    access_denied(s3.get_object, Bucket=scene.b, Key=b_key)
    access_denied(s3.head_object, Bucket=scene.b, Key=b_key)
    access_denied(s3.head_bucket, Bucket=scene.b)
    access_denied(s3.list_multipart_uploads, Bucket=scene.b)
    with httpx.Client(timeout=30.0) as anon:
        url = s3.generate_presigned_url("get_object", Params={"Bucket": scene.a, "Key": a_key}, ExpiresIn=60)
        assert anon.get(url).content == scene.a_data
        url = s3.generate_presigned_url("get_object", Params={"Bucket": scene.b, "Key": b_key}, ExpiresIn=60)
        denied = anon.get(url)
    assert denied.status_code == 403 and b"<Code>AccessDenied</Code>" in denied.content, denied.text


def test_s3_reader_writes_nothing(scene: Scene) -> None:
    s3 = scene.s3(scene.reader)
    for bucket in (scene.a, scene.b):
        access_denied(s3.put_object, Bucket=bucket, Key="main/new.bin", Body=b"new")
        access_denied(s3.delete_object, Bucket=bucket, Key=f"main/{A_PATH}")
        access_denied(s3.create_multipart_upload, Bucket=bucket, Key="main/parts.bin")


def test_s3_writes_only_into_its_repository(scene: Scene) -> None:
    before = state(scene, scene.b)
    s3, admin = scene.s3(scene.writer), scene.s3(scene.admin)
    b_key = f"main/{B_PATH}"
    mine = f"main/{unique('put')}.bin"
    s3.put_object(Bucket=scene.a, Key=mine, Body=b"mine")
    s3.copy_object(Bucket=scene.a, Key=mine + ".copy", CopySource={"Bucket": scene.a, "Key": mine})
    assert s3.get_object(Bucket=scene.a, Key=mine + ".copy")["Body"].read() == b"mine"
    access_denied(s3.put_object, Bucket=scene.b, Key="main/new.bin", Body=b"new")
    access_denied(s3.delete_object, Bucket=scene.b, Key=b_key)
    access_denied(s3.delete_objects, Bucket=scene.b, Delete={"Objects": [{"Key": b_key}]})
    access_denied(
        s3.copy_object, Bucket=scene.b, Key="main/copy.bin", CopySource={"Bucket": scene.a, "Key": mine}
    )
    # Multipart into b: not started, nor carried on where another user started one.
    access_denied(s3.create_multipart_upload, Bucket=scene.b, Key="main/parts.bin")
    theirs = admin.create_multipart_upload(Bucket=scene.b, Key="main/theirs.bin")["UploadId"]
    try:
        part = {"Bucket": scene.b, "Key": "main/theirs.bin", "UploadId": theirs}
        access_denied(s3.upload_part, **part, PartNumber=1, Body=b"x" * 16)
        access_denied(s3.list_parts, **part)
        access_denied(
            s3.complete_multipart_upload,
            **part,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": '"x"'}]},
        )
        access_denied(s3.abort_multipart_upload, **part)
    finally:
        admin.abort_multipart_upload(Bucket=scene.b, Key="main/theirs.bin", UploadId=theirs)
    assert state(scene, scene.b) == before


def test_s3_copy_source_in_another_repository_is_refused(scene: Scene) -> None:
    """Writing to ``a`` is no way to read ``b``: a copy (or a part copied) from ``b`` is refused."""
    s3 = scene.s3(scene.writer)
    source = {"Bucket": scene.b, "Key": f"main/{B_PATH}"}
    access_denied(s3.copy_object, Bucket=scene.a, Key="main/copied.bin", CopySource=source)
    access_denied(
        s3.copy_object,
        Bucket=scene.a,
        Key="main/copied.bin",
        CopySource=source,
        MetadataDirective="REPLACE",
        ContentType="text/plain",
    )
    # A bucket that does not exist is refused the same way: no hint of which repositories exist.
    access_denied(
        s3.copy_object,
        Bucket=scene.a,
        Key="main/copied.bin",
        CopySource={"Bucket": unique("nope"), "Key": "main/x"},
    )
    upload_id = s3.create_multipart_upload(Bucket=scene.a, Key="main/parts.bin")["UploadId"]
    try:
        part = {"Bucket": scene.a, "Key": "main/parts.bin", "UploadId": upload_id, "PartNumber": 1}
        access_denied(s3.upload_part_copy, **part, CopySource=source)
        access_denied(s3.upload_part_copy, **part, CopySource=source, CopySourceRange="bytes=0-3")
        assert s3.list_parts(Bucket=scene.a, Key="main/parts.bin", UploadId=upload_id).get("Parts", []) == []
    finally:
        s3.abort_multipart_upload(Bucket=scene.a, Key="main/parts.bin", UploadId=upload_id)
    with scene.rest(scene.writer) as http:
        stat = http.get(f"/repositories/{scene.a}/refs/main/objects/stat", params={"path": "copied.bin"})
    assert stat.status_code == 404, stat.text


# -- deny wins ------------------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["repository/{b}", "repository/{b}/*"])
def test_a_deny_on_one_repository_wins_over_allow_all(scene: Scene, form: str) -> None:
    deny = [{"effect": "deny", "resource": "arn:lakefs:fs:::" + form.format(b=scene.b), "action": ["fs:*"]}]
    before = state(scene, scene.b)
    with scene.rest(scene.admin) as admin:
        keys = user_with(admin, deny, "FSFullAccess")
    a, b = f"/repositories/{scene.a}", f"/repositories/{scene.b}"
    s3 = scene.s3(keys)
    with scene.rest(keys) as http:
        listed = [r["id"] for r in http.get("/repositories", params={"amount": 1000}).json()["results"]]
        assert scene.a in listed and scene.b not in listed
        assert http.get(f"{a}/refs/main/objects", params={"path": A_PATH}).content == scene.a_data
        [own] = signed_locators(http, scene.a, A_PATH).json()["signed_locators"]
        assert http.get(scene.blocks + f"{own}").content == scene.a_data
        refused(http.get(f"{b}/refs/main/objects", params={"path": B_PATH}))
        refused(signed_locators(http, scene.b, B_PATH))
        refused(http.get(f"{b}/refs/main/manifest", params={"signed": "true"}))
        refused(http.post(f"{b}/branches/main/objects/link", json={"path": "x.bin", "segments": [own]}))
        refused(http.post(f"{b}/branches", json={"name": unique("denied"), "source": "main"}))
    buckets = [x["Name"] for x in s3.list_buckets()["Buckets"]]
    assert scene.a in buckets and scene.b not in buckets
    assert s3.get_object(Bucket=scene.a, Key=f"main/{A_PATH}")["Body"].read() == scene.a_data
    access_denied(s3.get_object, Bucket=scene.b, Key=f"main/{B_PATH}")
    access_denied(s3.list_objects_v2, Bucket=scene.b)
    access_denied(s3.put_object, Bucket=scene.b, Key="main/new.bin", Body=b"new")
    source = {"Bucket": scene.b, "Key": f"main/{B_PATH}"}
    access_denied(s3.copy_object, Bucket=scene.a, Key="main/denied-copy.bin", CopySource=source)
    assert state(scene, scene.b) == before


def test_presigned_urls_follow_their_signers_policy_of_now(scene: Scene) -> None:
    """A presigned read or write URL acts with its signer's access when it is used: narrowing
    the signer's policy to ``a`` refuses its URLs into ``b`` at once, not when they expire."""
    with scene.rest(scene.admin) as admin:
        name, policy = unique("narrowed"), unique("both")
        assert admin.post("/auth/users", json={"id": name}).status_code == 201
        both = [
            {
                "effect": "allow",
                "resource": f"arn:lakefs:fs:::repository/{repo}/*",
                "action": ["fs:ReadObject", "fs:WriteObject"],
            }
            for repo in (scene.a, scene.b)
        ]
        assert admin.post("/auth/policies", json={"id": policy, "statement": both}).status_code == 201
        assert admin.put(f"/auth/users/{name}/policies/{policy}").status_code == 201
        creds = admin.post(f"/auth/users/{name}/credentials").json()
        keys = (creds["access_key_id"], creds["secret_access_key"])
        with scene.rest(keys) as http, httpx.Client(timeout=30.0) as anon:
            stats = {
                repo: http.get(
                    f"/repositories/{repo}/refs/main/objects/stat", params={"path": path, "presign": "true"}
                ).json()
                for repo, path in ((scene.a, A_PATH), (scene.b, B_PATH))
            }
            slot = http.get(
                f"/repositories/{scene.b}/branches/main/staging/backing", params={"path": "late.bin"}
            )
            assert slot.status_code == 200, slot.text
            assert anon.get(stats[scene.b]["physical_address"]).content == scene.b_data
            narrowed = [both[0]]
            r = admin.put(f"/auth/policies/{policy}", json={"id": policy, "statement": narrowed})
            assert r.status_code == 200, r.text
            assert anon.get(stats[scene.a]["physical_address"]).content == scene.a_data
            refused(anon.get(stats[scene.b]["physical_address"]))
            refused(anon.put(slot.json()["presigned_url"], content=b"after the narrowing"))


# -- what a user is reported as -------------------------------------------------------------------


def test_a_confined_user_is_reported_with_the_policies_that_apply_not_a_role(scene: Scene) -> None:
    """A user allowed to read and write one repository may read and write *some* repository, which
    is not what the Developer role means (every repository): it has no role, and the API and the
    admin pages report the policies that apply to it, attached and through its groups."""
    with scene.rest(scene.admin) as admin:
        keys = user_with(admin, confined(scene.a, "fs:ReadObject", "fs:WriteObject", "fs:List*"))
        with scene.rest(keys) as http:
            me = http.get("/user").json()["user"]
            name, [policy] = me["id"], me["policies"]
            assert me["role"] is None, me
            assert admin.get(f"/auth/users/{name}").json() == me
            listed = admin.get(f"/auth/users/{name}/policies", params={"effective": "true"}).json()
            assert [p["id"] for p in listed["results"]] == [policy]
            with sign_in(scene.live, *scene.admin) as ui:
                shown = ui.get(f"/ui/admin/users/{name}")
                assert shown.status_code == 200 and "<dt>Role</dt><dd>none</dd>" in shown.text
                assert f"<code>{policy}</code>" in shown.text
            # Through a group, its policies add up: Viewers read every repository.
            assert admin.put(f"/auth/groups/Viewers/members/{name}").status_code == 201
            again = http.get("/user").json()["user"]
            assert again["role"] == "Analyst"
            assert again["policies"] == sorted([policy, "AuthManageOwnCredentials", "FSReadAll"])

        # Allowed everything but denied one repository: not a Developer either.
        deny_b = [
            {"effect": "deny", "resource": f"arn:lakefs:fs:::repository/{scene.b}/*", "action": ["fs:*"]}
        ]
        with scene.rest(user_with(admin, deny_b, "FSReadWriteAll")) as http:
            assert http.get("/user").json()["user"]["role"] is None
        with scene.rest(
            user_with(admin, [{"effect": "allow", "resource": "*", "action": ["fs:List*"]}], "FSReadWriteAll")
        ) as http:
            assert http.get("/user").json()["user"]["role"] == "Developer"


# -- provenance -----------------------------------------------------------------------------------


def test_provenance_follows_inputs_only_into_repositories_the_caller_may_read(scene: Scene) -> None:
    """A commit of ``a`` records an input in ``b``, and a commit of ``b`` records one in ``a``:
    the reader confined to ``a`` sees that ``a``'s output came from ``b`` (its own commit says
    so) but nothing of ``b`` itself, no commit of ``b`` made from ``a``'s data, and no
    provenance asked of ``b``."""
    with scene.rest(scene.admin) as admin:
        b_head = admin.get(f"/repositories/{scene.b}/refs/main/commits", params={"amount": 1}).json()
        b_commit = b_head["results"][0]["id"]
        secret = "b's secret commit message"
        upload(admin, scene.b, "main", "out/derived.bin", b"from a")
        a_inputs = json.dumps([{"repository": scene.b, "commit": b_commit, "path": B_PATH}])
        upload(admin, scene.a, "main", "out/report.bin", b"from b")
        a_out = commit(admin, scene.a, "main", "report from b", lakectl_inputs=a_inputs)["id"]
        b_inputs = json.dumps([{"repository": scene.a, "commit": a_out, "path": "out/"}])
        commit(admin, scene.b, "main", secret, lakectl_inputs=b_inputs)
        seen = admin.get(f"/repositories/{scene.a}/refs/main/provenance", params={"path": "out/report.bin"})
        assert seen.json()["inputs"][0]["commit"] is not None  # the admin sees into b
        made = admin.get(f"/repositories/{scene.a}/refs/{a_out}/downstream").json()["results"]
        assert [m["commit"]["message"] for m in made] == [secret]
    with scene.rest(scene.reader) as reader:
        tree = reader.get(f"/repositories/{scene.a}/refs/main/provenance", params={"path": "out/report.bin"})
        assert tree.status_code == 200, tree.text
        assert tree.json()["commit"]["id"] == a_out
        [hidden] = tree.json()["inputs"]
        assert hidden["repository"] == scene.b and hidden["readable"] is False
        assert hidden["commit"] is None and hidden["inputs"] == []
        assert secret not in tree.text and b_commit not in tree.text.replace(hidden["ref"], "")
        made = reader.get(f"/repositories/{scene.a}/refs/{a_out}/downstream")
        assert made.status_code == 200 and made.json()["results"] == [] and secret not in made.text
        refused(reader.get(f"/repositories/{scene.b}/refs/main/provenance", params={"path": B_PATH}))
        refused(reader.get(f"/repositories/{scene.b}/refs/main/downstream"))
