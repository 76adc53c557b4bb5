"""``lakectl auth``: a lakectl server's users, access keys, groups and policies (lakeFS's commands).

The commands, flags and JSON are lakeFS's lakectl's (``--id``, ``--user``, ``--policy``,
``--access-key-id``, ``--statement-document``, ``--amount``/``--after``); lists print lakeFS's
``{pagination, results}``. The embedded lake has no users: there every command is one error, exit 2.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lakectl.cli import render
from lakectl.cli.common import JsonFlag, backend, noun, read_input
from lakectl.errors import InvalidArgument

if TYPE_CHECKING:
    from lakectl.client.auth import RemoteAuth

Data = dict[str, Any]

app = noun("Manage a lakectl server's users, access keys, groups and policies.")
users = noun("Create, list and delete users; their access keys, groups and policies.")
credentials = noun("Create, list and delete a user's access keys.")
user_groups = noun("List the groups of a user.")
user_policies = noun("List, attach and detach the policies of a user.")
groups = noun("Create, list and delete groups; their members and policies.")
members = noun("Add, remove and list the members of a group.")
group_policies = noun("List, attach and detach the policies of a group.")
policies = noun("Create, list, show and delete policies.")
app.add_typer(users, name="users")
users.add_typer(credentials, name="credentials")
users.add_typer(user_groups, name="groups")
users.add_typer(user_policies, name="policies")
app.add_typer(groups, name="groups")
groups.add_typer(members, name="members")
groups.add_typer(group_policies, name="policies")
app.add_typer(policies, name="policies")

UserId = Annotated[str, typer.Option("--id", help="Username.", show_default=False)]
OwnId = Annotated[str, typer.Option("--id", help="Username (default: the current user).", show_default=False)]
GroupId = Annotated[str, typer.Option("--id", help="Group identifier.", show_default=False)]
PolicyId = Annotated[str, typer.Option("--id", help="Policy identifier.", show_default=False)]
PolicyOption = Annotated[str, typer.Option("--policy", help="Policy identifier.", show_default=False)]
UserOption = Annotated[str, typer.Option("--user", help="Username.", show_default=False)]
Amount = Annotated[int, typer.Option("--amount", help="How many results to return (at most 1000).", min=1)]
After = Annotated[str, typer.Option("--after", help="Show results after this value (for paging).")]
DEFAULT_AMOUNT = 100


def _auth() -> RemoteAuth:
    return backend().auth()


def _done(message: str, json_: bool, **ids: str) -> None:
    render.emit({**ids, "message": message}, json_, render.message)


def _page(data: Data, json_: bool, columns: tuple[str, ...], row: Callable[[Data], list[list[Any]]]) -> None:
    """A lakeFS list answer: its JSON as is, or a table and, when more follow, how to see them."""

    def human(d: Data) -> None:
        render.table(columns, (r for item in d["results"] for r in row(item)))
        pagination = d.get("pagination", {})
        if pagination.get("has_more"):
            amount = pagination.get("results", len(d["results"]))
            render.note(f"for more results run with --amount {amount} --after {pagination['next_offset']!r}")

    render.emit(data, json_, human)


def _when(ts: int | None) -> str:
    return render.when(ts) if ts else "-"


def _policy_rows(p: Data) -> list[list[Any]]:
    return [
        [p["id"], _when(p.get("creation_date")), i, s["resource"], s["effect"], ", ".join(s["action"])]
        for i, s in enumerate(p["statement"])
    ]


POLICY_COLUMNS = ("POLICY ID", "CREATION DATE", "STATEMENT #", "RESOURCE", "EFFECT", "ACTIONS")


def _policy(headline: str | None) -> Callable[[Data], None]:
    def human(p: Data) -> None:
        if headline:
            render.line(headline)
        render.fields([("ID", p["id"]), ("Creation Date", _when(p.get("creation_date")))])
        render.line("Statements:")
        render.line(json.dumps({"statement": p["statement"]}, indent=2, ensure_ascii=False))

    return human


# -- users --------------------------------------------------------------------------------------


@users.command("create")
def users_create(user_id: UserId, json_: JsonFlag = False) -> None:
    """Create a user (in no group, without policies: it may do nothing until given some)."""
    created = _auth().create_user(user_id)

    def human(u: Data) -> None:
        render.line("User created successfully.")
        render.fields([("ID", u["id"]), ("Creation Date", _when(u["creation_date"]))])

    render.emit(created, json_, human)


@users.command("list")
def users_list(amount: Amount = DEFAULT_AMOUNT, after: After = "", json_: JsonFlag = False) -> None:
    """List users."""
    data = _auth().list_users(amount, after)
    _page(data, json_, ("USER ID", "CREATION DATE"), lambda u: [[u["id"], _when(u["creation_date"])]])


@users.command("delete")
def users_delete(user_id: UserId, json_: JsonFlag = False) -> None:
    """Delete a user and its access keys."""
    _auth().delete_user(user_id)
    render.emit(render.deletion("user", [user_id], "User deleted successfully."), json_, render.message)


@credentials.command("create")
def credentials_create(user_id: OwnId = "", json_: JsonFlag = False) -> None:
    """Create an access key; its secret is shown this once."""
    auth = _auth()
    created = auth.create_credentials(user_id or auth.current_user()["id"])

    def human(c: Data) -> None:
        render.line("Credentials created successfully.")
        render.fields([("Access Key ID", c["access_key_id"]), ("Secret Access Key", c["secret_access_key"])])
        render.line()
        render.line("Keep these somewhere safe since you will not be able to see the secret key again")

    render.emit(created, json_, human)


@credentials.command("list")
def credentials_list(
    user_id: OwnId = "", amount: Amount = DEFAULT_AMOUNT, after: After = "", json_: JsonFlag = False
) -> None:
    """List the access keys of a user (never their secrets)."""
    auth = _auth()
    data = auth.list_credentials(user_id or auth.current_user()["id"], amount, after)
    _page(
        data,
        json_,
        ("ACCESS KEY ID", "ISSUED DATE"),
        lambda c: [[c["access_key_id"], _when(c["creation_date"])]],
    )


@credentials.command("delete")
def credentials_delete(
    access_key_id: Annotated[
        str, typer.Option("--access-key-id", help="Access key ID to delete.", show_default=False)
    ],
    user_id: OwnId = "",
    json_: JsonFlag = False,
) -> None:
    """Delete an access key: requests signed with it fail from then on."""
    auth = _auth()
    auth.delete_credentials(user_id or auth.current_user()["id"], access_key_id)
    render.emit(
        render.deletion("credentials", [access_key_id], "Credentials deleted successfully."),
        json_,
        render.message,
    )


@user_groups.command("list")
def user_groups_list(
    user_id: UserId, amount: Amount = DEFAULT_AMOUNT, after: After = "", json_: JsonFlag = False
) -> None:
    """List the groups a user is in."""
    data = _auth().list_user_groups(user_id, amount, after)
    _page(data, json_, ("GROUP ID", "CREATION DATE"), lambda g: [[g["id"], _when(g["creation_date"])]])


@user_policies.command("list")
def user_policies_list(
    user_id: UserId,
    effective: Annotated[
        bool,
        typer.Option("--effective", help="All distinct policies of the user, its groups' included."),
    ] = False,
    amount: Amount = DEFAULT_AMOUNT,
    after: After = "",
    json_: JsonFlag = False,
) -> None:
    """List the policies attached to a user (with --effective, through its groups too)."""
    data = _auth().list_user_policies(user_id, effective, amount, after)
    _page(data, json_, POLICY_COLUMNS, _policy_rows)


@user_policies.command("attach")
def user_policies_attach(user_id: UserId, policy_id: PolicyOption, json_: JsonFlag = False) -> None:
    """Attach a policy to a user."""
    _auth().attach_user_policy(user_id, policy_id)
    _done("Policy attached successfully.", json_, id=user_id, policy=policy_id)


@user_policies.command("detach")
def user_policies_detach(user_id: UserId, policy_id: PolicyOption, json_: JsonFlag = False) -> None:
    """Detach a policy from a user."""
    _auth().detach_user_policy(user_id, policy_id)
    _done("Policy detached successfully.", json_, id=user_id, policy=policy_id)


# -- groups -------------------------------------------------------------------------------------


@groups.command("create")
def groups_create(
    group_id: GroupId,
    description: Annotated[str, typer.Option("--description", help="What the group is for.")] = "",
    json_: JsonFlag = False,
) -> None:
    """Create a group (without policies: attach some to give its members access)."""
    created = _auth().create_group(group_id, description or None)

    def human(g: Data) -> None:
        render.line("Group created successfully.")
        render.fields([("ID", g["id"]), ("Creation Date", _when(g["creation_date"]))])

    render.emit(created, json_, human)


@groups.command("list")
def groups_list(amount: Amount = DEFAULT_AMOUNT, after: After = "", json_: JsonFlag = False) -> None:
    """List groups (lakeFS's built-in ones first made: Admins, SuperUsers, Developers, Viewers)."""
    data = _auth().list_groups(amount, after)
    _page(data, json_, ("GROUP ID", "CREATION DATE"), lambda g: [[g["id"], _when(g["creation_date"])]])


@groups.command("delete")
def groups_delete(group_id: GroupId, json_: JsonFlag = False) -> None:
    """Delete a group: what it gave its members is gone at once."""
    _auth().delete_group(group_id)
    render.emit(render.deletion("group", [group_id], "Group deleted successfully."), json_, render.message)


@members.command("add")
def members_add(group_id: GroupId, user_id: UserOption, json_: JsonFlag = False) -> None:
    """Add a user to a group."""
    _auth().add_member(group_id, user_id)
    _done("User successfully added.", json_, id=group_id, user=user_id)


@members.command("remove")
def members_remove(group_id: GroupId, user_id: UserOption, json_: JsonFlag = False) -> None:
    """Remove a user from a group."""
    _auth().remove_member(group_id, user_id)
    _done("User successfully removed.", json_, id=group_id, user=user_id)


@members.command("list")
def members_list(
    group_id: GroupId, amount: Amount = DEFAULT_AMOUNT, after: After = "", json_: JsonFlag = False
) -> None:
    """List the users of a group."""
    data = _auth().list_members(group_id, amount, after)
    _page(data, json_, ("USER ID",), lambda u: [[u["id"]]])


@group_policies.command("list")
def group_policies_list(
    group_id: GroupId, amount: Amount = DEFAULT_AMOUNT, after: After = "", json_: JsonFlag = False
) -> None:
    """List the policies attached to a group."""
    data = _auth().list_group_policies(group_id, amount, after)
    _page(data, json_, POLICY_COLUMNS, _policy_rows)


@group_policies.command("attach")
def group_policies_attach(group_id: GroupId, policy_id: PolicyOption, json_: JsonFlag = False) -> None:
    """Attach a policy to a group."""
    _auth().attach_group_policy(group_id, policy_id)
    _done("Policy attached successfully.", json_, id=group_id, policy=policy_id)


@group_policies.command("detach")
def group_policies_detach(group_id: GroupId, policy_id: PolicyOption, json_: JsonFlag = False) -> None:
    """Detach a policy from a group."""
    _auth().detach_group_policy(group_id, policy_id)
    _done("Policy detached successfully.", json_, id=group_id, policy=policy_id)


# -- policies -----------------------------------------------------------------------------------


def _statement_document(path: str) -> Any:
    """The ``statement`` of a JSON document ``{"statement": [...]}`` (a file, or ``-``: stdin)."""
    try:
        doc = json.loads(read_input(path))
    except (ValueError, UnicodeDecodeError) as e:
        raise InvalidArgument(f"could not parse statement JSON document {path!r}: {e}") from None
    if not isinstance(doc, dict) or "statement" not in doc:
        raise InvalidArgument(f'the statement document {path!r} is not {{"statement": [...]}}')
    return doc["statement"]


@policies.command("create")
def policies_create(
    policy_id: PolicyId,
    statement_document: Annotated[
        str,
        typer.Option(
            "--statement-document",
            help='JSON statement document path (or "-" for stdin).',
            show_default=False,
        ),
    ],
    json_: JsonFlag = False,
) -> None:
    """Create a policy from a document {"statement": [{"effect", "resource", "action"}, ...]}."""
    auth = _auth()  # the embedded lake's refusal comes before reading the document
    created = auth.create_policy(policy_id, _statement_document(statement_document))
    render.emit(created, json_, _policy("Policy created successfully."))


@policies.command("list")
def policies_list(amount: Amount = DEFAULT_AMOUNT, after: After = "", json_: JsonFlag = False) -> None:
    """List policies (lakeFS's built-in ones included)."""
    data = _auth().list_policies(amount, after)
    _page(data, json_, POLICY_COLUMNS, _policy_rows)


@policies.command("show")
def policies_show(policy_id: PolicyId, json_: JsonFlag = False) -> None:
    """Show a policy and its statements."""
    render.emit(_auth().get_policy(policy_id), json_, _policy(None))


@policies.command("delete")
def policies_delete(policy_id: PolicyId, json_: JsonFlag = False) -> None:
    """Delete a policy: what it gave the users and groups it was attached to is gone at once."""
    _auth().delete_policy(policy_id)
    render.emit(render.deletion("policy", [policy_id], "Policy deleted successfully."), json_, render.message)
