"""Administration in the browser: users (create, delete, their role, groups, policies and access
keys), groups (create, delete, members), the roles and who holds each; and every user's own
access keys ("My access keys"). Every action is a method of :class:`server.auth.store.Auth` (groups
and policies: its ``directory``), as the REST API's ``server/api/auth.py`` calls them; the
administration pages need ``MANAGE_AUTH``, a user's own keys only its session (as the API's
``require_own_or``)."""

from __future__ import annotations

from itertools import islice
from typing import Annotated

from fastapi import Form, Request, Response

from lakectl.errors import InvalidArgument
from server.api.deps import AuthDep
from server.auth.store import Auth
from server.auth.users import ROLE_PERMISSIONS, NewCredentials, Role, User
from server.policies import Permission
from server.ui.render import page, redirect, url
from server.ui.session import SignedIn, can, ui_router

router = ui_router()
MANAGE = can(Permission.MANAGE_AUTH)
PAGE = 100


def _role(value: str) -> Role | None:
    """A role from a form's select ("" is none)."""
    if not value:
        return None
    try:
        return Role(value)
    except ValueError:
        raise InvalidArgument(f"role {value!r} is not one of {', '.join(r.value for r in Role)}") from None


def _key_created(request: Request, creds: NewCredentials, back: str, area: str) -> Response:
    """The new key's secret, shown in this answer only (not stored in clear anywhere; the page
    is ``no-store``, and reloading it posts nothing again: the browser asks first)."""
    return page(request, "key_created.html", 201, creds=creds, back=back, area=area, admin_area="users")


# -- users --------------------------------------------------------------------------------------


@router.get("/admin", dependencies=[MANAGE])
def admin_home() -> Response:
    return redirect(url("admin", "users"))


@router.get("/admin/users", dependencies=[MANAGE])
def users(request: Request, auth: AuthDep, after: str = "") -> Response:
    found = list(islice(auth.list_users("", after), PAGE + 1))
    return page(
        request,
        "admin_users.html",
        users=found[:PAGE],
        next_after=found[PAGE - 1].id if len(found) > PAGE else "",
        roles=list(Role),
        area="admin",
        admin_area="users",
    )


@router.post("/admin/users", dependencies=[MANAGE])
def create_user(auth: AuthDep, id: Annotated[str, Form()], role: Annotated[str, Form()] = "") -> Response:
    """A user in its role's group (none: in no group, so it may do nothing yet), as the API's."""
    made = auth.create_user(id.strip(), _role(role))
    return redirect(url("admin", "users", made.id))


@router.get("/admin/users/{user_id}", dependencies=[MANAGE])
def user(request: Request, user_id: str, auth: AuthDep) -> Response:
    shown = auth.get_user(user_id)
    groups = auth.groups_of(user_id)
    member_of = {g.id for g in groups}
    attached = auth.policies_of(user_id)
    attached_ids = {p.id for p in attached}
    return page(
        request,
        "admin_user.html",
        shown=shown,
        groups=groups,
        other_groups=[g for g in auth.directory.list_groups() if g.id not in member_of],
        attached=attached,
        effective=auth.policies_of(user_id, effective=True),
        other_policies=[p for p in auth.directory.list_policies() if p.id not in attached_ids],
        keys=list(auth.list_credentials(shown)),
        roles=list(Role),
        area="admin",
        admin_area="users",
    )


@router.post("/admin/users/{user_id}/delete", dependencies=[MANAGE])
def delete_user(user_id: str, auth: AuthDep, caller: SignedIn) -> Response:
    auth.delete_user(user_id, by=caller.id)
    return redirect(url("admin", "users"))


@router.post("/admin/users/{user_id}/role", dependencies=[MANAGE])
def set_role(user_id: str, auth: AuthDep, caller: SignedIn, role: Annotated[str, Form()] = "") -> Response:
    auth.set_role(user_id, _role(role), by=caller.id)
    return redirect(url("admin", "users", user_id))


@router.post("/admin/users/{user_id}/groups", dependencies=[MANAGE])
def join_group(user_id: str, auth: AuthDep, group: Annotated[str, Form()]) -> Response:
    auth.add_member(group, user_id)
    return redirect(url("admin", "users", user_id) + "#groups")


@router.post("/admin/users/{user_id}/policies", dependencies=[MANAGE])
def attach_policy(user_id: str, auth: AuthDep, policy: Annotated[str, Form()]) -> Response:
    auth.attach_policy(user_id, policy)
    return redirect(url("admin", "users", user_id) + "#policies")


@router.post("/admin/users/{user_id}/policies/{policy_id}/detach", dependencies=[MANAGE])
def detach_policy(user_id: str, policy_id: str, auth: AuthDep) -> Response:
    auth.detach_policy(user_id, policy_id)
    return redirect(url("admin", "users", user_id) + "#policies")


@router.post("/admin/users/{user_id}/keys", dependencies=[MANAGE])
def create_key(request: Request, user_id: str, auth: AuthDep) -> Response:
    creds = auth.create_credentials(auth.get_user(user_id))
    return _key_created(request, creds, url("admin", "users", user_id) + "#keys", "admin")


@router.post("/admin/users/{user_id}/keys/{key_id}/delete", dependencies=[MANAGE])
def delete_key(user_id: str, key_id: str, auth: AuthDep) -> Response:
    auth.delete_credentials(auth.get_user(user_id), key_id)
    return redirect(url("admin", "users", user_id) + "#keys")


# -- groups -------------------------------------------------------------------------------------


@router.get("/admin/groups", dependencies=[MANAGE])
def groups(request: Request, auth: AuthDep, after: str = "") -> Response:
    found = list(islice(auth.directory.list_groups("", after), PAGE + 1))
    return page(
        request,
        "admin_groups.html",
        groups=found[:PAGE],
        next_after=found[PAGE - 1].id if len(found) > PAGE else "",
        area="admin",
        admin_area="groups",
    )


@router.post("/admin/groups", dependencies=[MANAGE])
def create_group(
    auth: AuthDep, id: Annotated[str, Form()], description: Annotated[str, Form()] = ""
) -> Response:
    made = auth.directory.create_group(id.strip(), description.strip())
    return redirect(url("admin", "groups", made.id))


@router.get("/admin/groups/{group_id}", dependencies=[MANAGE])
def group(request: Request, group_id: str, auth: AuthDep) -> Response:
    shown = auth.directory.get_group(group_id)
    members = list(auth.members(group_id))
    policies = auth.directory.live_policies(shown.policies)
    attached = {p.id for p in policies}
    return page(
        request,
        "admin_group.html",
        group=shown,
        members=members,
        policies=policies,
        other_policies=[p for p in auth.directory.list_policies() if p.id not in attached],
        user_ids=[u.id for u in islice(auth.list_users(), 1000)],
        area="admin",
        admin_area="groups",
    )


@router.post("/admin/groups/{group_id}/policies", dependencies=[MANAGE])
def attach_group_policy(group_id: str, auth: AuthDep, policy: Annotated[str, Form()]) -> Response:
    auth.directory.attach_to_group(group_id, policy)
    return redirect(url("admin", "groups", group_id))


@router.post("/admin/groups/{group_id}/policies/{policy_id}/detach", dependencies=[MANAGE])
def detach_group_policy(group_id: str, policy_id: str, auth: AuthDep) -> Response:
    auth.directory.detach_from_group(group_id, policy_id)
    return redirect(url("admin", "groups", group_id))


@router.post("/admin/groups/{group_id}/delete", dependencies=[MANAGE])
def delete_group(group_id: str, auth: AuthDep) -> Response:
    auth.directory.delete_group(group_id)
    return redirect(url("admin", "groups"))


@router.post("/admin/groups/{group_id}/members", dependencies=[MANAGE])
def add_member(group_id: str, auth: AuthDep, user: Annotated[str, Form()]) -> Response:
    auth.add_member(group_id, user.strip())
    return redirect(url("admin", "groups", group_id) + "#members")


@router.post("/admin/groups/{group_id}/members/{user_id}/remove", dependencies=[MANAGE])
def remove_member(
    group_id: str, user_id: str, auth: AuthDep, caller: SignedIn, back: Annotated[str, Form()] = ""
) -> Response:
    """Take the user out of the group; back to the user's page (``back=user``) or the group's."""
    auth.remove_member(group_id, user_id, by=caller.id)
    if back == "user":
        return redirect(url("admin", "users", user_id) + "#groups")
    return redirect(url("admin", "groups", group_id) + "#members")


# -- roles --------------------------------------------------------------------------------------


def _holders(auth: Auth) -> dict[Role, list[User]]:
    """Each role's users: the members of its built-in group (one pass over the users)."""
    held: dict[Role, list[User]] = {r: [] for r in Role}
    for u in auth.list_users():
        for r in Role:
            if r.group in dict(u.groups):
                held[r].append(u)
    return held


@router.get("/admin/roles", dependencies=[MANAGE])
def roles(request: Request, auth: AuthDep) -> Response:
    return page(
        request,
        "admin_roles.html",
        holders=_holders(auth),
        role_permissions={r: sorted(p.value for p in ROLE_PERMISSIONS[r]) for r in Role},
        area="admin",
        admin_area="roles",
    )


@router.post("/admin/roles", dependencies=[MANAGE])
def assign_role(
    auth: AuthDep, caller: SignedIn, user: Annotated[str, Form()], role: Annotated[str, Form()] = ""
) -> Response:
    auth.set_role(user.strip(), _role(role), by=caller.id)
    return redirect(url("admin", "roles"))


# -- a user's own access keys -------------------------------------------------------------------


@router.get("/account/keys")
def my_keys(request: Request, auth: AuthDep, user: SignedIn) -> Response:
    return page(request, "account_keys.html", keys=list(auth.list_credentials(user)), area="account")


@router.post("/account/keys")
def create_my_key(request: Request, auth: AuthDep, user: SignedIn) -> Response:
    return _key_created(request, auth.create_credentials(user), url("account", "keys"), "account")


@router.post("/account/keys/{key_id}/delete")
def delete_my_key(key_id: str, auth: AuthDep, user: SignedIn) -> Response:
    auth.delete_credentials(user, key_id)
    return redirect(url("account", "keys"))
