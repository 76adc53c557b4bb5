"""The block API's rules: signed locators prove a client wrote (or was granted) a block."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from lakectl.core import blockaccess as ba
from lakectl.core import changes, manifests, opening, porcelain
from lakectl.core.lake import Lake
from lakectl.errors import BlockNotFound, InvalidArgument, InvalidLocator, SignatureError


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    lk = opening.open_lake(str(tmp_path / "lake"))
    porcelain.create_repo(lk, "blocks")
    return lk


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def test_put_link_and_read_back(lake: Lake) -> None:
    parts = [b"a" * 1000, b"b" * 500]
    signed = [ba.put_block(lake, md5(p), p, "alice") for p in parts]
    assert all("+A" in s for s in signed)
    info = ba.link_object(lake, "blocks", "main", "x.bin", signed, "alice", "text/plain", {"k": "v"})
    assert info.entry is not None and info.entry.size == 1500
    assert info.entry.checksum.endswith("-2")
    assert b"".join(porcelain.read(lake, "blocks", "main", "x.bin")) == b"".join(parts)
    assert ba.get_block(lake, signed[1], "alice", 10, 5) == b"b" * 5


def test_link_of_a_segment_of_a_block(lake: Lake) -> None:
    signed = ba.put_block(lake, md5(b"0123456789"), b"0123456789", "alice")
    info = ba.link_object(lake, "blocks", "main", "part", [f"{signed}:2:5"], "alice")
    assert info.entry is not None and info.entry.checksum == md5(b"23456")
    assert b"".join(porcelain.read(lake, "blocks", "main", "part")) == b"23456"
    with pytest.raises(InvalidLocator):
        ba.link_object(lake, "blocks", "main", "bad", [f"{signed}:8:5"], "alice")


def test_many_objects_link_as_one_change_each_block_read_once(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    pack = b"".join(bytes([i]) * 10 for i in range(20))
    signed = ba.put_block(lake, md5(pack), pack, "alice")
    whole = ba.put_block(lake, md5(b"whole"), b"whole", "alice")
    reads: list[str] = []
    get = lake.blocks.get
    monkeypatch.setattr(lake.blocks, "get", lambda loc, *a: reads.append(loc) or get(loc, *a))
    links = [ba.Link(f"p/{i:02d}", (f"{signed}:{i * 10}:10",), "text/plain") for i in reversed(range(20))]
    links += [ba.Link("w", (whole,)), ba.Link("empty", ())]
    infos = ba.link_objects(lake, "blocks", "main", links, "alice")
    assert [i.path for i in infos] == [link.path for link in links]
    assert reads == [f"{md5(pack)}+{len(pack)}"]  # the pack read (and its md5 checked) once
    for i in range(20):
        data = b"".join(porcelain.read(lake, "blocks", "main", f"p/{i:02d}"))
        assert data == bytes([i]) * 10
        stat = porcelain.stat(lake, "blocks", "main", f"p/{i:02d}")
        assert stat.entry is not None and stat.entry.checksum == md5(data)
        assert stat.entry.content_type == "text/plain"
    assert b"".join(porcelain.read(lake, "blocks", "main", "w")) == b"whole"
    assert b"".join(porcelain.read(lake, "blocks", "main", "empty")) == b""
    assert len(changes.diff_uncommitted(lake, "blocks", "main")) == 22


def test_one_bad_link_stages_none_of_the_batch(lake: Lake) -> None:
    signed = ba.put_block(lake, md5(b"0123456789"), b"0123456789", "alice")
    good = ba.Link("good", (f"{signed}:0:5",))
    for bad in (
        ba.Link("stolen", (signed.replace("+A", "+A0"),)),
        ba.Link("past-the-end", (f"{signed}:8:5",)),
        ba.Link("good", (signed,)),  # the same path twice
    ):
        with pytest.raises((SignatureError, InvalidLocator, InvalidArgument)):
            ba.link_objects(lake, "blocks", "main", [good, bad], "alice")
    assert changes.diff_uncommitted(lake, "blocks", "main") == []


def test_receipted_segments_link_without_reading_their_pack(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pack stored (or proven) with its segments' lengths gets a receipt per segment; objects
    linked with their md5 and receipt are staged without a read of the pack, and read back."""
    parts = [b"alpha", b"be", b"gamma-gamma"]
    pack = b"".join(parts)
    stored = ba.put_pack(lake, md5(pack), pack, "alice", [len(p) for p in parts])
    nonce = ba.challenge(lake, f"{md5(pack)}+{len(pack)}", "bob")
    proven = ba.prove_pack(
        lake, f"{md5(pack)}+{len(pack)}", nonce, ba.prove_answer(nonce, pack), "bob", [5, 2, 11]
    )
    assert len(stored.receipts) == len(proven.receipts) == 3
    assert stored.receipts != proven.receipts  # each user's receipts are their own
    monkeypatch.setattr(lake.blocks, "get", lambda *a: pytest.fail("a receipted link read a block"))
    offsets = [0, 5, 7]
    links = [
        ba.Link(
            f"r/{i}", (f"{stored.locator}:{offsets[i]}:{len(p)}",), None, None, md5(p), stored.receipts[i]
        )
        for i, p in enumerate(parts)
    ]
    infos = ba.link_objects(lake, "blocks", "main", links, "alice")
    assert [i.entry.checksum for i in infos if i.entry] == [md5(p) for p in parts]
    monkeypatch.undo()
    for i, p in enumerate(parts):
        assert b"".join(porcelain.read(lake, "blocks", "main", f"r/{i}")) == p


def test_a_receipt_vouches_only_for_its_own_segment_checksum_and_user(lake: Lake) -> None:
    pack = b"0123456789"
    stored = ba.put_pack(lake, md5(pack), pack, "alice", [4, 6])
    first = f"{stored.locator}:0:4"
    for bad, error in (
        (ba.Link("lie", (first,), None, None, md5(b"xxxx"), stored.receipts[0]), SignatureError),
        (ba.Link("swap", (first,), None, None, md5(b"0123"), stored.receipts[1]), SignatureError),
        (
            ba.Link("moved", (f"{stored.locator}:1:4",), None, None, md5(b"0123"), stored.receipts[0]),
            SignatureError,
        ),
        (ba.Link("half", (first,), None, None, md5(b"0123"), None), InvalidArgument),
        (ba.Link("two", (first, first), None, None, md5(b"0123"), stored.receipts[0]), InvalidArgument),
        (ba.Link("bad-md5", (first,), None, None, "XYZ", stored.receipts[0]), InvalidArgument),
    ):
        with pytest.raises(error):
            ba.link_objects(lake, "blocks", "main", [bad], "alice")
    theirs = ba.put_pack(lake, md5(pack), pack, "bob", [4, 6])
    with pytest.raises(SignatureError):  # bob's receipt, alice's signed locator
        ba.link_objects(
            lake,
            "blocks",
            "main",
            [ba.Link("x", (first,), None, None, md5(b"0123"), theirs.receipts[0])],
            "alice",
        )
    assert changes.diff_uncommitted(lake, "blocks", "main") == []
    for lengths in ([4, 5], [4, 7], [0, 10], [-1, 11]):
        with pytest.raises(InvalidArgument):
            ba.put_pack(lake, md5(pack), pack, "alice", lengths)


def test_a_block_cannot_be_claimed_without_a_valid_signature(lake: Lake) -> None:
    data = b"secret data"
    signed = ba.put_block(lake, md5(data), data, "alice")
    bare = f"{md5(data)}+{len(data)}"
    before = changes.diff_uncommitted(lake, "blocks", "main")
    for claim, token in [(bare, "bob"), (signed, "bob"), (signed.replace("+A", "+A0"), "alice")]:
        with pytest.raises((SignatureError, InvalidLocator)):
            ba.link_object(lake, "blocks", "main", "stolen", [claim], token)
    with pytest.raises(SignatureError):
        ba.get_block(lake, signed, "bob")
    assert changes.diff_uncommitted(lake, "blocks", "main") == before


def test_a_manifest_import_with_a_token_claims_only_signed_blocks(lake: Lake) -> None:
    """The core verb behind the server's manifest route: with a token, every locator must verify
    for it; without one (the embedded lake), plain locators import as before."""
    data = b"secret data"
    signed = ba.put_block(lake, md5(data), data, "alice")
    bare = f"{md5(data)}+{len(data)}"
    bogus = bare + "+A" + "0" * 40 + "@ffffffff"
    for claim, token in [(bare, "bob"), (bogus, "bob"), (signed, "bob"), (signed, "alice@2")]:
        with pytest.raises(SignatureError):
            manifests.import_manifest(lake, "blocks", "main", "in", f". {claim} 0:11:x\n", token=token)
    assert changes.diff_uncommitted(lake, "blocks", "main") == []
    assert manifests.import_manifest(lake, "blocks", "main", "in", f". {signed} 0:11:x\n", token="alice") == [
        "in/x"
    ]
    assert manifests.import_manifest(lake, "blocks", "main", "plain", f". {bare} 0:11:x\n") == ["plain/x"]
    assert b"".join(porcelain.read(lake, "blocks", "main", "in/x")) == data


def test_bad_uploads_store_nothing(lake: Lake) -> None:
    before = set(lake.blocks.list())
    with pytest.raises(InvalidArgument):
        ba.put_block(lake, md5(b"full body"), b"truncated", "alice")
    with pytest.raises(InvalidLocator):
        ba.put_block(lake, "../../etc/passwd", b"x", "alice")
    assert set(lake.blocks.list()) == before


def test_missing_blocks_and_expired_signatures(lake: Lake) -> None:
    here = ba.put_block(lake, md5(b"here"), b"here", "alice")
    absent = f"{md5(b'absent')}+6"
    assert ba.missing_blocks(lake, [here.split("+A")[0], absent]) == [absent]
    expired = ba.sign_locator(lake, f"{md5(b'here')}+4", "alice", ttl=-10)
    with pytest.raises(SignatureError):
        ba.get_block(lake, expired, "alice")
    ghost = ba.sign_locator(lake, absent, "alice")
    with pytest.raises(BlockNotFound):
        ba.link_object(lake, "blocks", "main", "ghost", [ghost], "alice")


def test_the_signing_key_is_one_per_lake(lake: Lake, tmp_path: Path) -> None:
    again = opening.open_lake(lake.home)
    assert ba.signing_key(lake) == ba.signing_key(again)
    other = opening.open_lake(str(tmp_path / "other"))
    assert ba.signing_key(other) != ba.signing_key(lake)


def test_proof_of_knowledge_grants_a_signature_without_sending_the_block(lake: Lake) -> None:
    data = b"already on the server" * 100
    ba.put_block(lake, md5(data), data, "alice")
    bare = f"{md5(data)}+{len(data)}"
    nonce = ba.challenge(lake, bare, "bob")
    signed = ba.prove(lake, bare, nonce, ba.prove_answer(nonce, data), "bob")
    assert ba.get_block(lake, signed, "bob") == data
    # Knowing the locator is not enough: a wrong answer, or another user's nonce, is refused.
    for who, n, answer in [
        ("bob", nonce, ba.prove_answer(nonce, b"guess")),
        ("carol", nonce, ba.prove_answer(nonce, data)),
        ("bob", nonce.replace(nonce[-1], "0" if nonce[-1] != "0" else "1"), ba.prove_answer(nonce, data)),
    ]:
        with pytest.raises(SignatureError):
            ba.prove(lake, bare, n, answer, who)
