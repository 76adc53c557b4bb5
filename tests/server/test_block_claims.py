"""Claiming blocks over the server: a caller links or imports only blocks it holds a signature for
(docs/decisions/0006), and signatures die with the user they were made for.

Blocks are deduplicated lake-wide, so a block's md5 and size (from a log, a manifest, a guess)
name another user's data; these tests are the attacks that knowledge used to allow.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from lakectl.cli.app import app
from tests.server.conftest import Live, unique

BOGUS = "+A" + "0" * 40 + "@ffffffff"


@dataclass
class Dev:
    name: str
    http: httpx.Client


def _developer(live: Live, admin: httpx.Client, name: str) -> Dev:
    assert admin.post("/auth/users", json={"id": name}).status_code == 201
    assert admin.put(f"/auth/groups/Developers/members/{name}").status_code == 201
    creds = admin.post(f"/auth/users/{name}/credentials").json()
    return Dev(name, live.client((creds["access_key_id"], creds["secret_access_key"])))


@pytest.fixture
def admin(live: Live) -> Iterator[httpx.Client]:
    with live.client((live.key_id, live.secret)) as c:
        yield c


@pytest.fixture
def dev(live: Live, admin: httpx.Client) -> Iterator[Dev]:
    d = _developer(live, admin, unique("dev"))
    yield d
    d.http.close()


@pytest.fixture
def dev_repo(admin: httpx.Client) -> str:
    name = unique("claims")
    r = admin.post("/repositories", json={"name": name, "storage_namespace": f"local://{name}"})
    assert r.status_code == 201, r.text
    return name


def _put(client: httpx.Client, data: bytes) -> str:
    r = client.put(f"/blocks/{hashlib.md5(data).hexdigest()}", content=data)
    assert r.status_code == 200, r.text
    return r.text.strip()


def _blocks(live: Live, client: httpx.Client) -> httpx.Client:
    """The same credentials on the block API (served at the root, not under /api/v1)."""
    return httpx.Client(base_url=live.url.removesuffix("/api/v1"), auth=client.auth, timeout=30.0)


def _import(client: httpx.Client, repo: str, locator: str, size: int) -> httpx.Response:
    manifest = f". {locator} 0:{size}:stolen.bin\n"
    return client.post(
        f"/repositories/{repo}/branches/main/manifest", params={"prefix": "in"}, content=manifest.encode()
    )


def _staged(client: httpx.Client, repo: str) -> list[str]:
    r = client.get(f"/repositories/{repo}/branches/main/diff")
    assert r.status_code == 200, r.text
    return [d["path"] for d in r.json()["results"]]


def test_manifest_import_refuses_a_block_of_a_deleted_repository(
    live: Live, admin: httpx.Client, dev: Dev, dev_repo: str
) -> None:
    """Another user's object, in a repository since deleted: its blocks stay in the lake until
    garbage collection, but its md5 and size no longer open them to anyone."""
    secret = os.urandom(300)
    gone = unique("gone")
    assert admin.post("/repositories", json={"name": gone, "storage_namespace": f"local://{gone}"}).is_success
    r = admin.post(f"/repositories/{gone}/branches/main/objects", params={"path": "s.bin"}, content=secret)
    assert r.status_code == 201, r.text
    assert admin.delete(f"/repositories/{gone}").status_code == 204
    bare = f"{hashlib.md5(secret).hexdigest()}+{len(secret)}"

    refused = _import(dev.http, dev_repo, bare, len(secret))
    assert refused.status_code == 403, refused.text
    assert refused.json()["code"] == "signature_error" and "--signed" in refused.json()["message"]
    assert _staged(dev.http, dev_repo) == []
    read = dev.http.get(f"/repositories/{dev_repo}/refs/main/objects", params={"path": "in/stolen.bin"})
    assert read.status_code == 404


def test_manifest_import_refuses_bogus_and_borrowed_signatures(
    live: Live, admin: httpx.Client, dev: Dev, dev_repo: str
) -> None:
    data = os.urandom(200)
    with _blocks(live, admin) as blocks:
        admins = _put(blocks, data)  # stored by the admin, never linked: signed for the admin only
    bare = admins.split("+A")[0]
    for locator in (bare + BOGUS, admins):
        refused = _import(dev.http, dev_repo, locator, len(data))
        assert refused.status_code == 403, (locator, refused.text)
        assert refused.json()["code"] == "signature_error"
    assert _staged(dev.http, dev_repo) == []


def test_manifest_import_takes_locators_signed_for_the_caller(
    live: Live, admin: httpx.Client, dev: Dev, dev_repo: str
) -> None:
    """Signatures come from uploading, from proving knowledge of the bytes, or from a signed
    export; each imports."""
    data = os.urandom(200)
    with _blocks(live, admin) as blocks:
        _put(blocks, data)
    bare = f"{hashlib.md5(data).hexdigest()}+{len(data)}"
    with _blocks(live, dev.http) as blocks:
        nonce = blocks.post("/blocks/missing", json={"locators": [bare]}).json()["challenges"][bare]
        answer = hashlib.md5(nonce.encode() + data).hexdigest()
        proven = blocks.post("/blocks/prove", json={"locator": bare, "nonce": nonce, "answer": answer})
    signed = proven.json()["locator"]
    r = _import(dev.http, dev_repo, signed, len(data))
    assert r.status_code == 200 and r.json()["paths"] == ["in/stolen.bin"], r.text
    read = dev.http.get(f"/repositories/{dev_repo}/refs/main/objects", params={"path": "in/stolen.bin"})
    assert read.content == data
    exported = dev.http.get(f"/repositories/{dev_repo}/refs/main/manifest", params={"signed": "true"})
    again = dev.http.post(
        f"/repositories/{dev_repo}/branches/main/manifest",
        params={"prefix": "copy"},
        content=exported.content,
    )
    assert again.status_code == 200 and again.json()["paths"] == ["copy/in/stolen.bin"], again.text
    plain = dev.http.get(f"/repositories/{dev_repo}/refs/main/manifest").content
    refused = dev.http.post(
        f"/repositories/{dev_repo}/branches/main/manifest", params={"prefix": "plain"}, content=plain
    )
    assert refused.status_code == 403


def test_signatures_do_not_outlive_their_user(live: Live, admin: httpx.Client, dev_repo: str) -> None:
    """A user deleted and created again under the same name is a new user: the locators signed
    for the first one open nothing for the second."""
    name = unique("tmpu")
    data = os.urandom(100)
    first = _developer(live, admin, name)
    with _blocks(live, first.http) as blocks:
        signed = _put(blocks, data)
        assert blocks.get(f"/blocks/{signed}").content == data
    first.http.close()
    assert admin.delete(f"/auth/users/{name}").status_code == 204
    second = _developer(live, admin, name)
    with second.http, _blocks(live, second.http) as blocks:
        assert blocks.get(f"/blocks/{signed}").status_code == 403
        link = second.http.post(
            f"/repositories/{dev_repo}/branches/main/objects/link",
            json={"path": "x.bin", "segments": [signed]},
        )
        assert link.status_code == 403 and link.json()["code"] == "signature_error", link.text
        assert _import(second.http, dev_repo, signed, len(data)).status_code == 403
        assert _staged(second.http, dev_repo) == []
        # What the new user uploads itself is signed for it, as ever.
        assert blocks.get(f"/blocks/{_put(blocks, data)}").content == data


def test_remote_cli_imports_a_signed_export_only(live: Live, tmp_path: Path) -> None:
    env = live.cli_env(tmp_path)
    repo = unique("climan")

    def cli(*args: str, input: bytes | None = None) -> tuple[int, str, str]:
        result = CliRunner().invoke(app, list(args), input=input, env=env)
        return result.exit_code, result.stdout, result.stderr

    assert cli("repo", "create", f"lakefs://{repo}")[0] == 0
    assert cli("fs", "upload", f"lakefs://{repo}/main/a.txt", "--source", "-", input=b"alpha\n")[0] == 0
    code, signed, _ = cli("manifest", "export", "--signed", f"lakefs://{repo}/main")
    assert code == 0 and "+A" in signed
    code, out, _ = cli("manifest", "import", f"lakefs://{repo}/main/copy", "-", input=signed.encode())
    assert code == 0 and "staged copy/a.txt" in out
    assert cli("fs", "cat", f"lakefs://{repo}/main/copy/a.txt") == (0, "alpha\n", "")

    code, plain, _ = cli("manifest", "export", f"lakefs://{repo}/main")
    assert code == 0 and "+A" not in plain
    code, out, err = cli("manifest", "import", f"lakefs://{repo}/main/plain", "-", input=plain.encode())
    assert code == 8 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and "manifest export --signed" in err


def test_a_pack_put_with_its_layout_gets_receipts_that_link_only_their_own_checksums(
    live: Live, admin: httpx.Client, dev: Dev, dev_repo: str
) -> None:
    """``PUT /blocks/<md5>`` with ``X-Lakectl-Segments`` answers a receipt per segment; a link
    that carries one stages its object with that md5, and one that lies about it is refused."""
    parts = [os.urandom(300), os.urandom(200)]
    pack = b"".join(parts)
    md5 = hashlib.md5(pack).hexdigest()
    with _blocks(live, dev.http) as blocks:
        bad = blocks.put(f"/blocks/{md5}", content=pack, headers={"X-Lakectl-Segments": "300,201"})
        assert bad.status_code == 400 and bad.json()["code"] == "invalid_argument", bad.text
        junk = blocks.put(f"/blocks/{md5}", content=pack, headers={"X-Lakectl-Segments": "300;200"})
        assert junk.status_code == 400, junk.text
        r = blocks.put(f"/blocks/{md5}", content=pack, headers={"X-Lakectl-Segments": "300,200"})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json", r.text
    signed, receipts = r.json()["locator"], r.json()["receipts"]
    assert len(receipts) == 2
    url = f"/repositories/{dev_repo}/branches/main/objects/links"
    second = {"path": "b", "segments": [f"{signed}:300:200"], "receipt": receipts[1]}
    lie = dev.http.post(url, json={"objects": [{**second, "checksum": hashlib.md5(parts[0]).hexdigest()}]})
    assert lie.status_code == 403 and lie.json()["code"] == "signature_error", lie.text
    assert _staged(dev.http, dev_repo) == []
    ok = dev.http.post(url, json={"objects": [{**second, "checksum": hashlib.md5(parts[1]).hexdigest()}]})
    assert ok.status_code == 200, ok.text
    assert ok.json()["results"][0]["checksum"] == hashlib.md5(parts[1]).hexdigest()
    read = dev.http.get(f"/repositories/{dev_repo}/refs/main/objects", params={"path": "b"})
    assert read.content == parts[1]


def test_a_batch_of_blocks_signs_each_one_it_holds_and_nothing_when_one_lies(
    live: Live, admin: httpx.Client, dev: Dev, dev_repo: str
) -> None:
    """``POST /blocks/batch`` stores the body's blocks as ``PUT /blocks/<md5>`` stores one: each
    is checked against the md5 it is named by; a body that lies about one block, or whose sizes
    do not add up, gets no signature at all; a signed one links and reads back."""
    blocks_ = [os.urandom(1000), os.urandom(5), b""]
    names = [f"{hashlib.md5(b).hexdigest()}+{len(b)}" for b in blocks_]
    body = b"".join(blocks_)
    with _blocks(live, dev.http) as blocks:
        ok = blocks.post("/blocks/batch", content=body, headers={"X-Lakectl-Blocks": ",".join(names)})
        assert ok.status_code == 200, ok.text
        signed = ok.json()["locators"]
        assert [s.split("+A")[0] for s in signed] == names
        # a lie about the second block (another block's md5, same size): refused, nothing signed
        other = os.urandom(5)
        lie = [names[0], f"{hashlib.md5(other).hexdigest()}+5", names[2]]
        bad = blocks.post("/blocks/batch", content=body, headers={"X-Lakectl-Blocks": ",".join(lie)})
        assert bad.status_code == 400 and "does not match its hash" in bad.json()["message"], bad.text
        short = blocks.post("/blocks/batch", content=body[:-1], headers={"X-Lakectl-Blocks": ",".join(names)})
        assert short.status_code == 400 and "hold 1005 bytes" in short.json()["message"], short.text
        junk = blocks.post("/blocks/batch", content=body, headers={"X-Lakectl-Blocks": "../../etc/passwd+1"})
        assert junk.status_code == 400, junk.text
        assert blocks.post("/blocks/batch", content=body).status_code == 400  # no names
        many = ",".join([names[2]] * 1025)
        assert (
            blocks.post("/blocks/batch", content=b"", headers={"X-Lakectl-Blocks": many}).status_code == 400
        )
    url = f"/repositories/{dev_repo}/branches/main/objects/links"
    linked = dev.http.post(url, json={"objects": [{"path": "a", "segments": [signed[0]]}]})
    assert linked.status_code == 200, linked.text
    read = dev.http.get(f"/repositories/{dev_repo}/refs/main/objects", params={"path": "a"})
    assert read.content == blocks_[0]


def test_a_batch_of_packs_gets_a_receipt_per_segment_that_links_only_its_own_checksum(
    live: Live, admin: httpx.Client, dev: Dev, dev_repo: str
) -> None:
    """``POST /blocks/batch`` with ``X-Lakectl-Segments`` (each block's segment lengths, blocks
    apart by ``;``) receipts each segment's md5; a layout that does not add up is refused."""
    files = [os.urandom(300), os.urandom(200), os.urandom(50)]
    packs = [files[0] + files[1], files[2]]
    names = ",".join(f"{hashlib.md5(p).hexdigest()}+{len(p)}" for p in packs)
    with _blocks(live, dev.http) as blocks:
        wrong = {"X-Lakectl-Blocks": names, "X-Lakectl-Segments": "300,201;50"}
        bad = blocks.post("/blocks/batch", content=b"".join(packs), headers=wrong)
        assert bad.status_code == 400 and "add up" in bad.json()["message"], bad.text
        both = {"X-Lakectl-Blocks": names, "X-Lakectl-Segments": "300,200;50"}
        r = blocks.post("/blocks/batch", content=b"".join(packs), headers=both)
    assert r.status_code == 200, r.text
    signed, receipts = r.json()["locators"], r.json()["receipts"]
    assert [len(x) for x in receipts] == [2, 1]
    url = f"/repositories/{dev_repo}/branches/main/objects/links"
    second = {"path": "b", "segments": [f"{signed[0]}:300:200"], "receipt": receipts[0][1]}
    lie = dev.http.post(url, json={"objects": [{**second, "checksum": hashlib.md5(files[0]).hexdigest()}]})
    assert lie.status_code == 403 and lie.json()["code"] == "signature_error", lie.text
    ok = dev.http.post(url, json={"objects": [{**second, "checksum": hashlib.md5(files[1]).hexdigest()}]})
    assert ok.status_code == 200 and ok.json()["results"][0]["checksum"] == hashlib.md5(files[1]).hexdigest()
    read = dev.http.get(f"/repositories/{dev_repo}/refs/main/objects", params={"path": "b"})
    assert read.content == files[1]
