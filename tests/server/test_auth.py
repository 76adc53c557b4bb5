"""Users, roles, access keys and login tokens: set-up once, secrets encrypted at rest,
authentication refusals, the role table, token codec properties."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakectl.core.kv.memory import MemoryStore
from lakectl.errors import AlreadyExists, InvalidArgument, NotFound, StorageError, Unauthenticated
from server.auth import (
    CREDENTIALS,
    REVOKED,
    ROLE_PERMISSIONS,
    TOKEN_TTL,
    USERS,
    Auth,
    Permission,
    Role,
    load_secret_key,
)


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
    token = auth.issue_token(creds.user)
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
    token = auth.issue_token(user, ttl=ttl, now=1_000_000)
    assert token.expiration == 1_000_000 + ttl
    assert auth.user_of_token(token.token, now=1_000_000 + ttl - 1) == user
    with pytest.raises(Unauthenticated, match="expired"):
        auth.user_of_token(token.token, now=1_000_000 + ttl)


@settings(max_examples=200, deadline=None)
@given(junk=st.text(max_size=300) | st.binary(max_size=300).map(lambda b: b.decode("latin-1")))
def test_bad_tokens_raise_only_unauthenticated(junk: str) -> None:
    with pytest.raises(Unauthenticated):
        _AUTH.user_of_token(junk)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_any_change_to_a_token_is_refused(data: st.DataObject) -> None:
    token = _AUTH.issue_token(_AUTH.get_user("ada")).token
    i = data.draw(st.integers(min_value=0, max_value=len(token) - 1))
    c = data.draw(st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.="))
    tampered = token[:i] + c + token[i + 1 :]
    if tampered != token:
        with pytest.raises(Unauthenticated):
            _AUTH.user_of_token(tampered)


def test_tokens_of_another_secret_or_a_gone_user_are_refused() -> None:
    kv = MemoryStore()
    auth = Auth(kv, "secret")
    user = auth.create_user("bob", Role.ANALYST)
    token = auth.issue_token(user).token
    with pytest.raises(Unauthenticated):
        Auth(kv, "another secret").user_of_token(token)
    auth.delete_user("bob")
    with pytest.raises(Unauthenticated):
        auth.user_of_token(token)
    auth.create_user("bob", Role.ADMIN)
    with pytest.raises(Unauthenticated):
        auth.user_of_token(token)


def test_a_revoked_token_is_refused_until_it_would_expire_then_forgotten() -> None:
    kv = MemoryStore()
    auth = Auth(kv, "secret")
    user = auth.create_user("bob", Role.ANALYST)
    first, second = (auth.issue_token(user, ttl=100, now=1_000_000).token for _ in range(2))
    assert first != second  # issued in the same second, still each its own (revoked alone)
    auth.revoke_token(first, now=1_000_010)
    with pytest.raises(Unauthenticated, match="signed out"):
        auth.user_of_token(first, now=1_000_020)
    assert auth.user_of_token(second, now=1_000_020) == user
    assert [int(raw) for _, raw in kv.scan(REVOKED)] == [1_000_100]
    # Forged, expired or revoked already: nothing to record. Once expired, the record is swept.
    for token in ("junk", first, auth.issue_token(user, ttl=5, now=1_000_000).token):
        auth.revoke_token(token, now=1_000_050)
    assert len(list(kv.scan(REVOKED))) == 1
    auth.revoke_token(auth.issue_token(user, now=1_000_200).token, now=1_000_200)
    assert [int(raw) for _, raw in kv.scan(REVOKED)] == [1_000_200 + TOKEN_TTL]


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
