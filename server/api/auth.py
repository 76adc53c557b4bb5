"""Auth: login tokens, the current user, users, access keys, external principals (AWS IAM
login), groups, policies and their attachments (lakeFS's paths, JSON shapes and pagination)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response
from pydantic import Field, SecretStr

from lakectl.errors import InvalidArgument, NotFound, Unauthenticated
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
from server.auth.tokens import TOKEN_TTL
from server.aws_iam import StsLogin, parse_identity_request, principal_ids
from server.config import Settings
from server.external_principals import parse_settings
from server.groups import Group, Policy
from server.policies import Permission

router = APIRouter(route_class=AuthFirstRoute)
MANAGE = require(Permission.MANAGE_AUTH)
OWN_OR_MANAGE = require_own_or(Permission.MANAGE_AUTH)
USER = "/auth/users/{userId}"
GROUP = "/auth/groups/{groupId}"
POLICY = "/auth/policies/{policyId}"
# lakeFS's camel-case path parameter names
UserId = Annotated[str, Path(alias="userId")]
AccessKeyId = Annotated[str, Path(alias="accessKeyId")]
GroupId = Annotated[str, Path(alias="groupId")]
PolicyId = Annotated[str, Path(alias="policyId")]
PrincipalId = Annotated[str, Query(alias="principalId")]


class LoginInformation(Body):
    access_key_id: str
    secret_access_key: SecretStr  # never shown by repr, validation errors or logs


class ExternalPrincipalCreation(Body):
    settings: list[dict[str, str]] | None = None


class ExternalLoginInformation(Body):
    token_expiration_duration: int | None = None
    identity_request: dict[str, Any] = Field(alias="identityRequest")


class UserCreation(Body):
    id: str
    invite_user: bool = False


class GroupCreation(Body):
    id: str
    description: str | None = None


class PolicyBody(Body):
    """lakeFS ``Policy``; its statements are checked by :func:`server.policies.parse_statements`."""

    id: str
    statement: list[Any]
    creation_date: int | None = None  # set by the server, as lakeFS does


def _group(g: Group) -> dict[str, Any]:
    return g.to_dict()


def _policy(p: Policy) -> dict[str, Any]:
    return p.to_dict()


@router.post("/auth/login", dependencies=[PUBLIC])
async def login(body: LoginInformation, auth: AuthDep) -> dict[str, Any]:
    """A login token for an access key: send it as ``Authorization: Bearer <token>``."""
    user = auth.authenticate(body.access_key_id, body.secret_access_key.get_secret_value())
    return auth.tokens.issue(user).to_dict()


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
    """A user in no group and without policies: it may do nothing until given some."""
    if body.invite_user:
        raise unsupported("invite_user")
    return auth.create_user(body.id).to_dict()


@router.get(USER, dependencies=[MANAGE])
async def get_user(user_id: UserId, auth: AuthDep) -> dict[str, Any]:
    return auth.get_user(user_id).to_dict()


@router.delete(USER, status_code=204, dependencies=[MANAGE])
async def delete_user(user_id: UserId, auth: AuthDep, caller: UserDep) -> Response:
    """Delete a user and its access keys; an admin cannot delete itself (nor lock everyone out)."""
    auth.delete_user(user_id, by=caller.id)
    return Response(status_code=204)


@router.get(USER + "/groups", dependencies=[MANAGE])
async def list_user_groups(
    user_id: UserId, auth: AuthDep, prefix: Prefix = "", after: After = "", amount: Amount = None
) -> dict[str, Any]:
    groups = by_name(auth.groups_of(user_id), lambda g: g.id, prefix, after)
    return page(groups, amount, lambda g: g.id, _group)


@router.get(USER + "/policies", dependencies=[MANAGE])
async def list_user_policies(
    user_id: UserId,
    auth: AuthDep,
    prefix: Prefix = "",
    after: After = "",
    amount: Amount = None,
    effective: bool = False,
) -> dict[str, Any]:
    """The policies attached to the user; with ``effective``, those of its groups too."""
    policies = by_name(auth.policies_of(user_id, effective), lambda p: p.id, prefix, after)
    return page(policies, amount, lambda p: p.id, _policy)


@router.put(USER + "/policies/{policyId}", status_code=201, dependencies=[MANAGE])
async def attach_policy_to_user(user_id: UserId, policy_id: PolicyId, auth: AuthDep) -> Response:
    auth.attach_policy(user_id, policy_id)
    return Response(status_code=201)


@router.delete(USER + "/policies/{policyId}", status_code=204, dependencies=[MANAGE])
async def detach_policy_from_user(user_id: UserId, policy_id: PolicyId, auth: AuthDep) -> Response:
    auth.detach_policy(user_id, policy_id)
    return Response(status_code=204)


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


# -- external principals (AWS IAM login) -----------------------------------------------------
# Binding an identity to a user decides who logs in as whom: ManageAuth, as lakeFS's
# auth:CreateUserExternalPrincipal, which its own-credentials policy does not grant. A user may
# list its own, as it may its access keys.


@router.post(USER + "/external/principals", status_code=201, dependencies=[MANAGE])
async def create_user_external_principal(
    user_id: UserId, principal_id: PrincipalId, auth: AuthDep, body: ExternalPrincipalCreation | None = None
) -> Response:
    """Bind an AWS IAM identity (an ARN) to the user: who signs as it logs in as the user. 409
    when the identity is bound already (to any user)."""
    user = auth.get_user(user_id)
    settings = parse_settings(body.settings if body is not None else None)
    auth.principals.bind(user.id, user.incarnation, principal_id, settings)
    return Response(status_code=201)


@router.delete(USER + "/external/principals", status_code=204, dependencies=[MANAGE])
async def delete_user_external_principal(
    user_id: UserId, principal_id: PrincipalId, auth: AuthDep
) -> Response:
    user = auth.get_user(user_id)
    auth.principals.unbind(user.id, user.incarnation, principal_id)
    return Response(status_code=204)


@router.get(USER + "/external/principals/ls", dependencies=[OWN_OR_MANAGE])
async def list_user_external_principals(
    user_id: UserId, auth: AuthDep, prefix: Prefix = "", after: After = "", amount: Amount = None
) -> dict[str, Any]:
    user = auth.get_user(user_id)
    principals = auth.principals.of_user(user.id, user.incarnation, prefix, after)
    return page(principals, amount, lambda p: p.id, lambda p: p.to_dict())


@router.get("/auth/external/principals", dependencies=[MANAGE])
async def get_external_principal(principal_id: PrincipalId, auth: AuthDep) -> dict[str, Any]:
    return auth.principals.get(principal_id).to_dict()


@router.post("/auth/external/principal/login", dependencies=[PUBLIC])
def external_principal_login(
    body: ExternalLoginInformation, request: Request, auth: AuthDep
) -> dict[str, Any]:
    """A login token for whoever signed ``identityRequest``'s presigned STS GetCallerIdentity,
    as the user its ARN (or its role) is bound to; 401 when STS does not vouch for it or it is
    bound to no user. Run in the thread pool: it waits for STS."""
    identity = parse_identity_request(body.identity_request)
    ttl = body.token_expiration_duration
    if ttl is not None and ttl <= 0:
        raise InvalidArgument("token_expiration_duration is a positive number of seconds")
    if not auth.principals.any_bound():  # nothing to log in as: ask STS nothing
        raise Unauthenticated("no external principal is bound to a user")
    settings: Settings = request.app.state.settings
    sts = StsLogin(settings.aws_iam.sts_endpoint, settings.aws_iam.server_id)
    arn = sts.caller_arn(identity, addressed=request.url.hostname or "")
    principal = auth.principals.find(principal_ids(arn))
    try:
        user = auth.get_user(principal.user_id) if principal is not None else None
    except NotFound:
        user = None
    if user is None or principal is None or user.incarnation != principal.user_incarnation:
        raise Unauthenticated(f"{arn} is bound to no user")
    return auth.tokens.issue(user, min(ttl or TOKEN_TTL, TOKEN_TTL)).to_dict()


# -- groups ---------------------------------------------------------------------------------


@router.get("/auth/groups", dependencies=[MANAGE])
async def list_groups(
    auth: AuthDep, prefix: Prefix = "", after: After = "", amount: Amount = None
) -> dict[str, Any]:
    return page(auth.directory.list_groups(prefix, after), amount, lambda g: g.id, _group)


@router.post("/auth/groups", status_code=201, dependencies=[MANAGE])
async def create_group(body: GroupCreation, auth: AuthDep) -> dict[str, Any]:
    return auth.directory.create_group(body.id, body.description or "").to_dict()


@router.get(GROUP, dependencies=[MANAGE])
async def get_group(group_id: GroupId, auth: AuthDep) -> dict[str, Any]:
    return auth.directory.get_group(group_id).to_dict()


@router.delete(GROUP, status_code=204, dependencies=[MANAGE])
async def delete_group(group_id: GroupId, auth: AuthDep) -> Response:
    """Delete a group: what it gave its members is gone at once."""
    auth.directory.delete_group(group_id)
    return Response(status_code=204)


@router.get(GROUP + "/members", dependencies=[MANAGE])
async def list_group_members(
    group_id: GroupId,
    auth: AuthDep,
    prefix: Prefix = "",
    after: After = "",
    amount: Amount = None,
) -> dict[str, Any]:
    members = auth.members(group_id, prefix, after)
    return page(members, amount, lambda u: u.id, lambda u: u.to_dict())


@router.put(GROUP + "/members/{userId}", status_code=201, dependencies=[MANAGE])
async def add_group_member(group_id: GroupId, user_id: UserId, auth: AuthDep) -> Response:
    """Add the user to the group: it may do what the group's policies allow, from its next request."""
    auth.add_member(group_id, user_id)
    return Response(status_code=201)


@router.delete(GROUP + "/members/{userId}", status_code=204, dependencies=[MANAGE])
async def remove_group_member(group_id: GroupId, user_id: UserId, auth: AuthDep, caller: UserDep) -> Response:
    """Take the user out of the group (404 when not a member)."""
    auth.remove_member(group_id, user_id, by=caller.id)
    return Response(status_code=204)


@router.get(GROUP + "/policies", dependencies=[MANAGE])
async def list_group_policies(
    group_id: GroupId, auth: AuthDep, prefix: Prefix = "", after: After = "", amount: Amount = None
) -> dict[str, Any]:
    attached = auth.directory.live_policies(auth.directory.get_group(group_id).policies)
    return page(by_name(attached, lambda p: p.id, prefix, after), amount, lambda p: p.id, _policy)


@router.put(GROUP + "/policies/{policyId}", status_code=201, dependencies=[MANAGE])
async def attach_policy_to_group(group_id: GroupId, policy_id: PolicyId, auth: AuthDep) -> Response:
    auth.directory.attach_to_group(group_id, policy_id)
    return Response(status_code=201)


@router.delete(GROUP + "/policies/{policyId}", status_code=204, dependencies=[MANAGE])
async def detach_policy_from_group(group_id: GroupId, policy_id: PolicyId, auth: AuthDep) -> Response:
    auth.directory.detach_from_group(group_id, policy_id)
    return Response(status_code=204)


# -- policies -------------------------------------------------------------------------------


@router.get("/auth/policies", dependencies=[MANAGE])
async def list_policies(
    auth: AuthDep, prefix: Prefix = "", after: After = "", amount: Amount = None
) -> dict[str, Any]:
    return page(auth.directory.list_policies(prefix, after), amount, lambda p: p.id, _policy)


@router.post("/auth/policies", status_code=201, dependencies=[MANAGE])
async def create_policy(body: PolicyBody, auth: AuthDep) -> dict[str, Any]:
    return auth.directory.create_policy(body.id, body.statement).to_dict()


@router.get(POLICY, dependencies=[MANAGE])
async def get_policy(policy_id: PolicyId, auth: AuthDep) -> dict[str, Any]:
    return auth.directory.get_policy(policy_id).to_dict()


@router.put(POLICY, dependencies=[MANAGE])
async def update_policy(policy_id: PolicyId, body: PolicyBody, auth: AuthDep) -> dict[str, Any]:
    """New statements for the policy: every user and group it is attached to gets them at once."""
    if body.id != policy_id:
        raise InvalidArgument(f"the policy's id {body.id!r} differs from the path's {policy_id!r}")
    return auth.directory.update_policy(policy_id, body.statement).to_dict()


@router.delete(POLICY, status_code=204, dependencies=[MANAGE])
async def delete_policy(policy_id: PolicyId, auth: AuthDep) -> Response:
    """Delete a policy: what it gave the users and groups it was attached to is gone at once."""
    auth.directory.delete_policy(policy_id)
    return Response(status_code=204)
