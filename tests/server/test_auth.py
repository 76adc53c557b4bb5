"""Users, roles, access keys and login tokens: set-up once, secrets encrypted at rest,
authentication refusals, the role table, token codec properties."""

from __future__ import annotations

import base64
import hmac
import json
import os
import stat
import string
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakectl.core.kv.memory import MemoryStore
from lakectl.errors import AlreadyExists, InvalidArgument, NotFound, StorageError, Unauthenticated
from server.auth.secret import derive_key, load_secret_key
from server.auth.store import CREDENTIALS, USERS, Auth
from server.auth.tokens import REVOKED, TOKEN_TTL
from server.auth.users import ROLE_PERMISSIONS, Role, User
from server.policies import Permission


def test_setup_creates_an_admin_once() -> None:
    auth = Auth(MemoryStore(), "secret")
    assert not auth.is_set_up()
    creds = auth.setup("ada")
    assert auth.is_set_up() and creds.user.role is Role.ADMIN
    assert auth.authenticate(creds.access_key_id, creds.secret_access_key).id == "ada"
    with pytest.raises(AlreadyExists):
        auth.setup("bob")


def test_secrets_are_encrypted_at_rest() -> None:
    kv = MemoryStore()
    creds = Auth(kv, "secret").setup("ada", "AKIAEXAMPLE", "wJalrXUtnFEMI/K7MDENG")
    raw = kv.get(CREDENTIALS, "AKIAEXAMPLE")
    assert b"wJalrXUtnFEMI" not in raw
    assert creds.secret_access_key == "wJalrXUtnFEMI/K7MDENG"
    # Another server secret cannot decrypt them: a clear error, not a wrong answer.
    with pytest.raises(StorageError, match="secret_key"):
        Auth(kv, "other").authenticate("AKIAEXAMPLE", "wJalrXUtnFEMI/K7MDENG")


@pytest.mark.parametrize(
    "key,secret", [("AKIAEXAMPLE", "wrong"), ("AKIANOPE", "s"), ("", ""), ("AKIAEXAMPLE", "")]
)
def test_wrong_credentials_are_unauthenticated(key: str, secret: str) -> None:
    auth = Auth(MemoryStore(), "secret")
    auth.setup("ada", "AKIAEXAMPLE", "right")
    with pytest.raises(Unauthenticated):
        auth.authenticate(key, secret)


def test_concurrent_setups_have_one_winner() -> None:
    kv = MemoryStore()
    results: list[object] = []

    def attempt(name: str) -> None:
        try:
            results.append(Auth(kv, "secret").setup(name))
        except AlreadyExists as e:
            results.append(e)

    threads = [threading.Thread(target=attempt, args=(f"user{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    winners = [r for r in results if not isinstance(r, AlreadyExists)]
    assert len(results) == 8 and len(winners) == 1
    assert [k for k, _ in kv.scan(CREDENTIALS)] == [winners[0].access_key_id]  # type: ignore[attr-defined]


def test_generated_secret_is_kept_private_in_the_data_dir(tmp_path: Path) -> None:
    key = load_secret_key("", str(tmp_path))
    assert key and load_secret_key("", str(tmp_path)) == key
    assert stat.S_IMODE(os.stat(tmp_path / "auth-secret").st_mode) == 0o600
    assert load_secret_key("configured", str(tmp_path)) == "configured"
    assert [p.name for p in tmp_path.iterdir()] == ["auth-secret"]  # no temporary file left behind


# -- roles ------------------------------------------------------------------------------------


def test_the_role_table() -> None:
    """The decision in docs/server.md: Developers read and write every repository but do not
    create or delete repositories (lakeFS's Developers: FSReadWriteAll, without fs:CreateRepository
    or fs:DeleteRepository, nor fs:UpdateRepository for a repository's metadata, nor fs:Import
    for an import from S3 with the server's credentials); only Admins manage users, keys and
    groups."""
    table = {role.value: sorted(p.value for p in perms) for role, perms in ROLE_PERMISSIONS.items()}
    assert table == {
        "Admin": ["CreateRepo", "DeleteRepo", "Import", "ManageAuth", "ReadRepo", "UpdateRepo", "WriteRepo"],
        "Developer": ["ReadRepo", "WriteRepo"],
        "Analyst": ["ReadRepo"],
    }
    # Each role is membership of lakeFS's built-in group of the same powers.
    assert [r.group for r in Role] == ["Admins", "Developers", "Viewers"]


# -- users, groups and credentials ------------------------------------------------------------


def test_users_get_a_role_by_compare_and_swap() -> None:
    auth = Auth(MemoryStore(), "secret")
    user = auth.create_user("bob")
    assert user.role is None and user.permissions == frozenset()
    with pytest.raises(AlreadyExists):
        auth.create_user("bob")
    with pytest.raises(InvalidArgument):
        auth.create_user("a/b")
    assert auth.set_role("bob", Role.DEVELOPER).permissions == {Permission.READ_REPO, Permission.WRITE_REPO}
    with pytest.raises(NotFound):
        auth.remove_member("Viewers", "bob")  # not a member of Viewers
    assert auth.get_user("bob").role is Role.DEVELOPER
    assert [u.id for u in auth.members("Developers")] == ["bob"]
    with pytest.raises(NotFound):
        auth.set_role("nobody", Role.ADMIN)


def test_concurrent_role_changes_all_land_on_one_value() -> None:
    kv = MemoryStore()
    auth = Auth(kv, "secret")
    auth.create_user("bob")
    roles = [Role.ANALYST, Role.DEVELOPER] * 4
    errors: list[Exception] = []

    def change(role: Role) -> None:
        try:
            auth.set_role("bob", role)
        except Exception as e:  # pragma: no cover - the assertion below reports it
            errors.append(e)

    threads = [threading.Thread(target=change, args=(r,)) for r in roles]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert errors == [] and auth.get_user("bob").role in (Role.ANALYST, Role.DEVELOPER)


def test_credentials_belong_to_one_incarnation_of_a_user() -> None:
    kv = MemoryStore()
    auth = Auth(kv, "secret")
    bob = auth.create_user("bob", Role.ANALYST)
    creds = auth.create_credentials(bob)
    assert [c.access_key_id for c in auth.list_credentials(bob)] == [creds.access_key_id]
    assert auth.get_credentials(bob, creds.access_key_id).creation_date == creds.creation_date
    # A key left behind (a delete racing a key creation) must not open the next "bob".
    kv.delete(USERS, "bob")
    again = auth.create_user("bob", Role.ADMIN)
    with pytest.raises(Unauthenticated):
        auth.authenticate(creds.access_key_id, creds.secret_access_key)
    assert list(auth.list_credentials(again)) == []
    with pytest.raises(NotFound):
        auth.get_credentials(again, creds.access_key_id)


def test_deleting_a_user_deletes_its_keys() -> None:
    kv = MemoryStore()
    auth = Auth(kv, "secret")
    auth.setup("ada")
    bob = auth.create_user("bob", Role.DEVELOPER)
    keys = [auth.create_credentials(bob).access_key_id for _ in range(3)]
    auth.delete_user("bob")
    assert all(k not in dict(kv.scan(CREDENTIALS)) for k in keys)
    assert len(list(kv.scan(CREDENTIALS))) == 1  # ada's
    with pytest.raises(NotFound):
        auth.delete_user("bob")


def test_records_without_incarnation_still_authenticate() -> None:
    """Users and keys written before incarnations existed (role stored, no incarnation)."""
    kv = MemoryStore()
    auth = Auth(kv, "secret")
    creds = auth.setup("ada", "AKIAOLD", "old-secret")
    kv.set(USERS, "ada", json.dumps({"id": "ada", "creation_date": 1, "role": "Admin"}).encode())
    record = json.loads(kv.get(CREDENTIALS, "AKIAOLD"))
    del record["user_incarnation"]
    kv.set(CREDENTIALS, "AKIAOLD", json.dumps(record).encode())
    assert auth.authenticate("AKIAOLD", creds.secret_access_key).role is Role.ADMIN


def test_secrets_stay_out_of_reprs() -> None:
    auth = Auth(MemoryStore(), "secret")
    creds = auth.setup("ada")
    token = auth.tokens.issue(creds.user)
    assert creds.secret_access_key not in repr(creds) and token.token not in repr(token)


# -- login tokens -----------------------------------------------------------------------------

_user_ids = st.text(
    st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=40
).filter(lambda s: s.isprintable() and "/" not in s)


@settings(max_examples=50, deadline=None)
@given(user_id=_user_ids, ttl=st.integers(min_value=1, max_value=10**9))
def test_tokens_round_trip(user_id: str, ttl: int) -> None:
    auth = Auth(MemoryStore(), "secret")
    user = auth.create_user(user_id, Role.ANALYST)
    token = auth.tokens.issue(user, ttl=ttl, now=1_000_000)
    assert token.expiration == 1_000_000 + ttl
    assert auth.tokens.user_of(token.token, now=1_000_000 + ttl - 1) == user
    with pytest.raises(Unauthenticated, match="expired"):
        auth.tokens.user_of(token.token, now=1_000_000 + ttl)


@settings(max_examples=200, deadline=None)
@given(junk=st.text(max_size=300) | st.binary(max_size=300).map(lambda b: b.decode("latin-1")))
def test_bad_tokens_raise_only_unauthenticated(junk: str) -> None:
    with pytest.raises(Unauthenticated):
        _AUTH.tokens.user_of(junk)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_any_change_to_a_token_is_refused(data: st.DataObject) -> None:
    token = _AUTH.tokens.issue(_AUTH.get_user("ada")).token
    i = data.draw(st.integers(min_value=0, max_value=len(token) - 1))
    c = data.draw(st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.="))
    tampered = token[:i] + c + token[i + 1 :]
    if tampered != token:
        with pytest.raises(Unauthenticated):
            _AUTH.tokens.user_of(tampered)


def test_tokens_of_another_secret_or_a_gone_user_are_refused() -> None:
    kv = MemoryStore()
    auth = Auth(kv, "secret")
    user = auth.create_user("bob", Role.ANALYST)
    token = auth.tokens.issue(user).token
    with pytest.raises(Unauthenticated):
        Auth(kv, "another secret").tokens.user_of(token)
    auth.delete_user("bob")
    with pytest.raises(Unauthenticated):
        auth.tokens.user_of(token)
    auth.create_user("bob", Role.ADMIN)
    with pytest.raises(Unauthenticated):
        auth.tokens.user_of(token)


def test_a_revoked_token_is_refused_until_it_would_expire_then_forgotten() -> None:
    kv = MemoryStore()
    auth = Auth(kv, "secret")
    user = auth.create_user("bob", Role.ANALYST)
    first, second = (auth.tokens.issue(user, ttl=100, now=1_000_000).token for _ in range(2))
    assert first != second  # issued in the same second, still each its own (revoked alone)
    auth.tokens.revoke(first, now=1_000_010)
    with pytest.raises(Unauthenticated, match="signed out"):
        auth.tokens.user_of(first, now=1_000_020)
    assert auth.tokens.user_of(second, now=1_000_020) == user
    assert [int(raw) for _, raw in kv.scan(REVOKED)] == [1_000_100]
    # Forged, expired or revoked already: nothing to record. Once expired, the record is swept.
    for token in ("junk", first, auth.tokens.issue(user, ttl=5, now=1_000_000).token):
        auth.tokens.revoke(token, now=1_000_050)
    assert len(list(kv.scan(REVOKED))) == 1
    auth.tokens.revoke(auth.tokens.issue(user, now=1_000_200).token, now=1_000_200)
    assert [int(raw) for _, raw in kv.scan(REVOKED)] == [1_000_200 + TOKEN_TTL]


# The codec is PyJWT's: these pin what the hand-written codec before it did, at its edges.

_TOKEN_KEY = derive_key("secret", b"lakectl login tokens v1")
_HS256 = {"alg": "HS256", "typ": "JWT"}
_B64URL = string.ascii_uppercase + string.ascii_lowercase + string.digits + "-_"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _jws(
    header: dict[str, object], claims: dict[str, object], key: bytes = _TOKEN_KEY, digest: str = "sha256"
) -> str:
    """A token in JWS compact form built from its definition (RFC 7515), HMAC-signed."""
    signing_input = ".".join(
        _b64(json.dumps(part, separators=(",", ":"), sort_keys=True).encode()) for part in (header, claims)
    )
    return f"{signing_input}.{_b64(hmac.new(key, signing_input.encode(), digest).digest())}"


def _claims_of(user: User, **changed: object) -> dict[str, object]:
    claims: dict[str, object] = {"sub": user.id, "inc": user.incarnation, "aud": "login", "iat": 1_000_000}
    return {**claims, "exp": 1_000_100, "jti": "0123456789abcdef", **changed}


def _refused(auth: Auth, token: str, now: int) -> bool:
    try:
        auth.tokens.user_of(token, now=now)
    except Unauthenticated as e:
        return "invalid login token" in str(e)
    return False


def test_tokens_keep_the_wire_form_of_earlier_servers() -> None:
    """Tokens signed before PyJWT (standard HS256 JWS, sorted claims) stay valid, and new ones
    are written in the same form, byte for byte."""
    auth = Auth(MemoryStore(), "secret")
    user = auth.create_user("bob", Role.ANALYST)
    earlier = _jws(_HS256, _claims_of(user))
    assert auth.tokens.user_of(earlier, now=1_000_050) == user
    issued = auth.tokens.issue(user, ttl=100, now=1_000_000).token
    jti = json.loads(base64.urlsafe_b64decode(issued.split(".")[1] + "=="))["jti"]
    assert issued == _jws(_HS256, _claims_of(user, jti=jti))


def test_tokens_under_another_header_algorithm_or_key_are_refused() -> None:
    """Only HS256 under this server's key, with the header it writes: neither ``none`` nor another
    HMAC, even signed with the right key."""
    auth = Auth(MemoryStore(), "secret")
    claims = _claims_of(auth.create_user("bob", Role.ANALYST))
    tokens = {
        "alg none": _jws({"alg": "none", "typ": "JWT"}, claims).rsplit(".", 1)[0] + ".",
        "alg none, signed": _jws({"alg": "none", "typ": "JWT"}, claims),
        "HS384": _jws({"alg": "HS384", "typ": "JWT"}, claims, digest="sha384"),
        "HS512": _jws({"alg": "HS512", "typ": "JWT"}, claims, digest="sha512"),
        "another header": _jws({**_HS256, "kid": "x"}, claims),
        "another key": _jws(_HS256, claims, derive_key("another secret", b"lakectl login tokens v1")),
    }
    assert _refused(auth, _jws(_HS256, claims), 1_000_050) is False
    assert [name for name, token in tokens.items() if not _refused(auth, token, 1_000_050)] == []


@pytest.mark.parametrize(
    "changed",
    [
        {"aud": ["login"]},
        {"aud": "other"},
        {"exp": "1000100"},
        {"iat": 1_000_000.5},
        {"inc": None},
        {"sub": 7},
    ],
)
def test_tokens_with_claims_of_another_type_are_refused(changed: dict[str, object]) -> None:
    auth = Auth(MemoryStore(), "secret")
    user = auth.create_user("bob", Role.ANALYST)
    assert _refused(auth, _jws(_HS256, _claims_of(user, **changed)), 1_000_050)


def test_a_token_spelled_otherwise_is_refused_and_stays_revoked() -> None:
    """Base64 forgives padding and the two unused low bits of a signature's last character (256
    bits in 43 characters): such a spelling is another token to the revocation records, so none
    but the issued one is taken."""
    auth = Auth(MemoryStore(), "secret")
    user = auth.create_user("bob", Role.ANALYST)
    token = auth.tokens.issue(user, ttl=100, now=1_000_000).token
    respelled = (token + "=", token[:-1] + _B64URL[_B64URL.index(token[-1]) ^ 1])
    assert all(_refused(auth, t, 1_000_010) for t in respelled)
    auth.tokens.revoke(token, now=1_000_010)
    for t in (token, *respelled):
        with pytest.raises(Unauthenticated):
            auth.tokens.user_of(t, now=1_000_020)


def test_grant_epochs_change_with_their_users_grants_only() -> None:
    """Whatever changes what a user may do or how it signs in renews its grant epoch (its block
    signatures die); users the change does not concern keep theirs."""
    auth = Auth(MemoryStore(), "secret")
    d = auth.directory
    read = [{"effect": "allow", "resource": "*", "action": ["fs:Read*"]}]
    d.create_policy("p", read)
    d.create_group("g")
    user, bystander = auth.create_user("in"), auth.create_user("out")
    assert user.grant_token.startswith("in@") and user.epoch and user.epoch != bystander.epoch
    changes = [
        lambda: auth.add_member("g", "in"),
        lambda: d.attach_to_group("g", "p"),
        lambda: d.update_policy("p", [{"effect": "allow", "resource": "*", "action": ["fs:List*"]}]),
        lambda: d.detach_from_group("g", "p"),
        lambda: auth.attach_policy("in", "p"),
        lambda: auth.create_credentials(auth.get_user("in")),
        lambda: auth.delete_credentials(
            auth.get_user("in"), next(auth.list_credentials(auth.get_user("in"))).access_key_id
        ),
        lambda: d.delete_policy("p"),
        lambda: d.delete_group("g"),
        lambda: auth.set_role("in", Role.ANALYST),
    ]
    for change in changes:
        before = {u: auth.get_user(u).grant_token for u in ("in", "out")}
        change()
        after = {u: auth.get_user(u).grant_token for u in ("in", "out")}
        assert after["in"] != before["in"] and after["out"] == before["out"]


def _auth_with_ada() -> Auth:
    auth = Auth(MemoryStore(), "secret")
    auth.setup("ada")
    return auth


_AUTH = _auth_with_ada()
