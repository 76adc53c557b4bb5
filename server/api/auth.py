"""Auth: login tokens, the current user, users, access keys, built-in groups and policies
(lakeFS paths and shapes, as far as the three roles need)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Response
from pydantic import SecretStr

from lakectl.errors import InvalidArgument
from server.api.bodies import Body, unsupported
from server.api.deps import (
    AUTHENTICATED,
    PUBLIC,
    AuthDep,
    AuthFirstRoute,
    UserDep,
    require,
    require_own_or,
)
from server.api.pagination import After, Amount, Prefix, by_name, page
from server.auth import Permission, Role, group_dict, policy_dict, role_of_group, role_of_policy

router = APIRouter(route_class=AuthFirstRoute)
MANAGE = require(Permission.MANAGE_AUTH)
OWN_OR_MANAGE = require_own_or(Permission.MANAGE_AUTH)
USER = "/auth/users/{userId}"
GROUP = "/auth/groups/{groupId}"
# lakeFS's camel-case path parameter names
UserId = Annotated[str, Path(alias="userId")]
AccessKeyId = Annotated[str, Path(alias="accessKeyId")]
GroupId = Annotated[str, Path(alias="groupId")]
PolicyId = Annotated[str, Path(alias="policyId")]


class LoginInformation(Body):
    access_key_id: str
    secret_access_key: SecretStr  # never shown by repr, validation errors or logs


class UserCreation(Body):
    id: str
    invite_user: bool = False


@router.post("/auth/login", dependencies=[PUBLIC])
async def login(body: LoginInformation, auth: AuthDep) -> dict[str, Any]:
    """A login token for an access key: send it as ``Authorization: Bearer <token>``."""
    user = auth.authenticate(body.access_key_id, body.secret_access_key.get_secret_value())
    return auth.issue_token(user).to_dict()


@router.get("/user", dependencies=[AUTHENTICATED])
async def get_current_user(user: UserDep) -> dict[str, Any]:
    return {"user": user.to_dict()}


# -- users ----------------------------------------------------------------------------------


@router.get("/auth/users", dependencies=[MANAGE])
async def list_users(
    auth: AuthDep, prefix: Prefix = "", after: After = "", amount: Amount = None
) -> dict[str, Any]:
    return page(auth.list_users(prefix, after), amount, lambda u: u.id, lambda u: u.to_dict())


@router.post("/auth/users", status_code=201, dependencies=[MANAGE])
async def create_user(body: UserCreation, auth: AuthDep) -> dict[str, Any]:
    """A user without a role: add it to a group to give it one."""
    if body.invite_user:
        raise unsupported("invite_user")
    return auth.create_user(body.id).to_dict()


@router.get(USER, dependencies=[MANAGE])
async def get_user(user_id: UserId, auth: AuthDep) -> dict[str, Any]:
    return auth.get_user(user_id).to_dict()


@router.delete(USER, status_code=204, dependencies=[MANAGE])
async def delete_user(user_id: UserId, auth: AuthDep, caller: UserDep) -> Response:
    """Delete a user and its access keys; an admin cannot delete itself (nor lock everyone out)."""
    if user_id == caller.id:
        raise InvalidArgument("you cannot delete your own user: ask another admin")
    auth.delete_user(user_id)
    return Response(status_code=204)


@router.get(USER + "/groups", dependencies=[MANAGE])
async def list_user_groups(user_id: UserId, auth: AuthDep) -> dict[str, Any]:
    role = auth.get_user(user_id).role
    return page([role] if role is not None else [], None, lambda r: r.group, group_dict)


# -- credentials ----------------------------------------------------------------------------


@router.get(USER + "/credentials", dependencies=[OWN_OR_MANAGE])
async def list_credentials(
    user_id: UserId,
    auth: AuthDep,
    prefix: Prefix = "",
    after: After = "",
    amount: Amount = None,
) -> dict[str, Any]:
    creds = auth.list_credentials(auth.get_user(user_id), prefix, after)
    return page(creds, amount, lambda c: c.access_key_id, lambda c: c.to_dict())


@router.post(USER + "/credentials", status_code=201, dependencies=[OWN_OR_MANAGE])
async def create_credentials(user_id: UserId, auth: AuthDep) -> dict[str, Any]:
    """A new access key; its secret is in this answer only."""
    return auth.create_credentials(auth.get_user(user_id)).to_dict()


@router.get(USER + "/credentials/{accessKeyId}", dependencies=[OWN_OR_MANAGE])
async def get_credentials(user_id: UserId, access_key_id: AccessKeyId, auth: AuthDep) -> dict[str, Any]:
    return auth.get_credentials(auth.get_user(user_id), access_key_id).to_dict()


@router.delete(USER + "/credentials/{accessKeyId}", status_code=204, dependencies=[OWN_OR_MANAGE])
async def delete_credentials(user_id: UserId, access_key_id: AccessKeyId, auth: AuthDep) -> Response:
    auth.delete_credentials(auth.get_user(user_id), access_key_id)
    return Response(status_code=204)


# -- built-in groups and policies -----------------------------------------------------------


@router.get("/auth/groups", dependencies=[MANAGE])
async def list_groups(prefix: Prefix = "", after: After = "", amount: Amount = None) -> dict[str, Any]:
    roles = by_name(sorted(Role, key=lambda r: r.group), lambda r: r.group, prefix, after)
    return page(roles, amount, lambda r: r.group, group_dict)


@router.get(GROUP, dependencies=[MANAGE])
async def get_group(group_id: GroupId) -> dict[str, Any]:
    return group_dict(role_of_group(group_id))


@router.get(GROUP + "/members", dependencies=[MANAGE])
async def list_group_members(
    group_id: GroupId,
    auth: AuthDep,
    prefix: Prefix = "",
    after: After = "",
    amount: Amount = None,
) -> dict[str, Any]:
    members = auth.members(role_of_group(group_id), prefix, after)
    return page(members, amount, lambda u: u.id, lambda u: u.to_dict())


@router.put(GROUP + "/members/{userId}", status_code=201, dependencies=[MANAGE])
async def add_group_member(group_id: GroupId, user_id: UserId, auth: AuthDep, caller: UserDep) -> Response:
    """Give the user the group's role. A user has one role: it leaves its previous group."""
    role = role_of_group(group_id)
    if user_id == caller.id and role is not Role.ADMIN:
        raise InvalidArgument("you cannot leave the Admins group yourself: ask another admin")
    auth.set_role(user_id, role)
    return Response(status_code=201)


@router.delete(GROUP + "/members/{userId}", status_code=204, dependencies=[MANAGE])
async def remove_group_member(group_id: GroupId, user_id: UserId, auth: AuthDep, caller: UserDep) -> Response:
    """Take the group's role from the user, which then has none (404 when not a member)."""
    role = role_of_group(group_id)
    if user_id == caller.id and role is Role.ADMIN:
        raise InvalidArgument("you cannot leave the Admins group yourself: ask another admin")
    auth.set_role(user_id, None, only_from=role)
    return Response(status_code=204)


@router.get(GROUP + "/policies", dependencies=[MANAGE])
async def list_group_policies(group_id: GroupId) -> dict[str, Any]:
    return page([role_of_group(group_id)], None, lambda r: r.policy, policy_dict)


@router.get("/auth/policies", dependencies=[MANAGE])
async def list_policies(prefix: Prefix = "", after: After = "", amount: Amount = None) -> dict[str, Any]:
    roles = by_name(sorted(Role, key=lambda r: r.policy), lambda r: r.policy, prefix, after)
    return page(roles, amount, lambda r: r.policy, policy_dict)


@router.get("/auth/policies/{policyId}", dependencies=[MANAGE])
async def get_policy(policy_id: PolicyId) -> dict[str, Any]:
    return policy_dict(role_of_policy(policy_id))
