"""The policy decision (lakeFS's: allow needed, deny wins, wildcards, ARNs), statement parsing,
and groups and policies kept by compare-and-swap, with incarnations."""

from __future__ import annotations

import pytest

from lakectl.core.kv.memory import MemoryStore
from lakectl.errors import AlreadyExists, InvalidArgument, NotFound
from server.auth.store import Auth
from server.auth.users import ROLE_PERMISSIONS, Role
from server.policies import (
    BUILTIN_POLICIES,
    Effect,
    Permission,
    Statement,
    allows,
    decide,
    matches,
    parse_statement,
    repository_arn,
)


def st(effect: str, resource: str | tuple[str, ...], *actions: str) -> Statement:
    resources = (resource,) if isinstance(resource, str) else resource
    return Statement(Effect(effect), resources, actions)


@pytest.mark.parametrize(
    "pattern,value,expected",
    [
        ("*", "anything at all", True),
        ("fs:Read*", "fs:ReadObject", True),
        ("fs:Read*", "fs:WriteObject", False),
        ("fs:Read?bject", "fs:ReadObject", True),
        ("arn:lakefs:fs:::repository/a", "arn:lakefs:fs:::repository/ab", False),
        ("arn:lakefs:fs:::repository/a*", "arn:lakefs:fs:::repository/ab", True),
        ("a.b", "axb", False),  # regular-expression characters are literal
        ("[x]", "[x]", True),
    ],
)
def test_wildcards(pattern: str, value: str, expected: bool) -> None:
    assert matches(pattern, value) is expected


def test_allow_is_needed_and_deny_wins() -> None:
    repo = repository_arn("r")
    assert not decide([], "fs:ReadObject", repo, "u")
    assert decide([st("allow", "*", "fs:*")], "fs:ReadObject", repo, "u")
    both = [st("allow", "*", "fs:*"), st("deny", repo, "fs:WriteObject")]
    assert decide(both, "fs:ReadObject", repo, "u")
    assert not decide(both, "fs:WriteObject", repo, "u")
    assert decide(both, "fs:WriteObject", repository_arn("other"), "u")
    # ${user} is the caller.
    own = [st("allow", "arn:lakefs:auth:::user/${user}", "auth:ReadCredentials")]
    assert decide(own, "auth:ReadCredentials", "arn:lakefs:auth:::user/ann", "ann")
    assert not decide(own, "auth:ReadCredentials", "arn:lakefs:auth:::user/bob", "ann")
    # Several resources in one statement.
    two = [st("allow", (repository_arn("a"), repository_arn("b")), "fs:ReadObject")]
    assert decide(two, "fs:ReadObject", repository_arn("b"), "u")


def test_policies_written_for_objects_and_branches() -> None:
    """lakeFS policies name objects (repository/r/object/...) and branches: an allow of all of a
    repository grants it, an allow of part does not, and a deny of any part refuses it (this
    server decides per repository)."""
    for whole in ("arn:lakefs:fs:::repository/r/*", "arn:lakefs:fs:::repository/r/object/*", "*"):
        assert allows([st("allow", whole, "fs:*")], Permission.READ_REPO, "u", "r"), whole
    part = [st("allow", "arn:lakefs:fs:::repository/r/object/data/*", "fs:*")]
    assert not allows(part, Permission.READ_REPO, "u", "r")
    assert allows(part, Permission.READ_REPO, "u", None)  # the block API: readable somewhere
    everything = st("allow", "*", "fs:*")
    for denied in ("arn:lakefs:fs:::repository/r/object/secret/*", "arn:lakefs:fs:::repository/r*"):
        assert not allows([everything, st("deny", denied, "fs:ReadObject")], Permission.READ_REPO, "u", "r")
    for elsewhere in (
        "arn:lakefs:fs:::repository/rx/*",
        "arn:lakefs:fs:::repository/other",
        "arn:lakefs:auth:::*",
    ):
        assert allows([everything, st("deny", elsewhere, "fs:*")], Permission.READ_REPO, "u", "r"), elsewhere


def test_requests_that_name_no_repository() -> None:
    """Block reads and listings need the data permission on some repository; creating
    repositories and managing auth need it on every resource."""
    scoped = [st("allow", repository_arn("r"), "fs:*")]
    assert allows(scoped, Permission.READ_REPO, "u", None)
    assert allows(scoped, Permission.READ_REPO, "u", "r")
    assert not allows(scoped, Permission.READ_REPO, "u", "other")
    assert not allows(scoped, Permission.CREATE_REPO, "u", None)
    denied = [*scoped, st("deny", "*", "fs:ReadObject")]
    assert not allows(denied, Permission.READ_REPO, "u", None)
    partial = [st("allow", "*", "auth:CreateUser", "auth:DeleteUser")]
    assert not allows(partial, Permission.MANAGE_AUTH, "u", None)
    assert allows([st("allow", "*", "auth:*")], Permission.MANAGE_AUTH, "u", None)


def test_the_roles_are_the_builtin_groups_powers() -> None:
    assert ROLE_PERMISSIONS[Role.ADMIN] == frozenset(Permission)
    assert ROLE_PERMISSIONS[Role.DEVELOPER] == {Permission.READ_REPO, Permission.WRITE_REPO}
    assert ROLE_PERMISSIONS[Role.ANALYST] == {Permission.READ_REPO}
    superuser = [s for p in ("FSFullAccess", "AuthManageOwnCredentials") for s in BUILTIN_POLICIES[p]]
    assert not allows(superuser, Permission.MANAGE_AUTH, "u", None)
    assert allows(superuser, Permission.DELETE_REPO, "u", "r")


@pytest.mark.parametrize(
    "raw,message",
    [
        ({"effect": "allow", "resource": "*"}, "action"),
        ({"effect": "permit", "resource": "*", "action": ["fs:*"]}, "effect"),
        ({"effect": "allow", "resource": "", "action": ["fs:*"]}, "resource"),
        ({"effect": "allow", "resource": "*", "action": ["nocolon"]}, "invalid action"),
        ({"effect": "allow", "resource": "*", "action": ["fs:*"], "what": 1}, "unknown field"),
        ("allow", "object"),
    ],
)
def test_bad_statements_say_what_is_wrong(raw: object, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        parse_statement(raw)


def test_statement_round_trip() -> None:
    raw = {"effect": "deny", "resource": '["arn:a", "arn:b"]', "action": ["fs:ReadObject"]}
    parsed = parse_statement(raw)
    assert parsed.resources == ("arn:a", "arn:b") and parse_statement(parsed.to_dict()) == parsed


def test_groups_and_policies_with_incarnations() -> None:
    auth = Auth(MemoryStore(), "secret")
    d = auth.directory
    d.create_group("team")
    with pytest.raises(AlreadyExists):
        d.create_group("team")
    with pytest.raises(AlreadyExists):
        d.create_group("Viewers")
    with pytest.raises(InvalidArgument):
        d.create_group("a/b")
    d.create_policy("read", [{"effect": "allow", "resource": "*", "action": ["fs:Read*"]}])
    d.attach_to_group("team", "read")
    auth.create_user("bob")
    auth.add_member("team", "bob")
    assert auth.get_user("bob").permissions == {Permission.READ_REPO}
    assert [g.id for g in d.list_groups()] == ["Admins", "Developers", "SuperUsers", "Viewers", "team"]
    # A group deleted and made again is another group: bob is not in the new one.
    d.delete_group("team")
    d.create_group("team")
    d.attach_to_group("team", "read")
    assert auth.get_user("bob").permissions == frozenset()
    assert [u.id for u in auth.members("team")] == []
    with pytest.raises(NotFound):
        auth.remove_member("team", "bob")
    # The same for policies.
    auth.attach_policy("bob", "read")
    d.delete_policy("read")
    d.create_policy("read", [{"effect": "allow", "resource": "*", "action": ["fs:*"]}])
    assert auth.get_user("bob").permissions == frozenset()
    with pytest.raises(NotFound):
        auth.attach_policy("bob", "nope")
    with pytest.raises(NotFound):
        auth.add_member("nope", "bob")


def test_records_of_earlier_servers_keep_their_role() -> None:
    kv = MemoryStore()
    auth = Auth(kv, "secret")
    kv.set(
        "auth/users", "old", b'{"id": "old", "creation_date": 1, "role": "Developer", "incarnation": "ab"}'
    )
    old = auth.get_user("old")
    assert old.role is Role.DEVELOPER and [g.id for g in auth.groups_of("old")] == ["Developers"]
