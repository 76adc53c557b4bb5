"""The server's users, access keys, groups and policies, as the ``lakectl auth`` commands use them.

Only a lakectl server has users: :meth:`lakectl.client.Backend.auth` gives a :class:`RemoteAuth`
over the server's lakeFS auth API, and the embedded lake refuses (:data:`NO_USERS`). Results are
the API's JSON, in lakeFS's shapes (``User``, ``Group``, ``Policy``, ``Credentials``; lists as
``{pagination, results}``), with nothing added or renamed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from lakectl.errors import InvalidArgument

Data = dict[str, Any]
Call = Callable[..., Any]
"""``call(method, path, params=..., json=...)``: the parsed JSON answer (None for no body)."""

NO_USERS = (
    "the embedded lake has no users, groups or policies: lakectl auth manages a lakectl server's "
    "(set server.endpoint_url and credentials, as for lakeFS's lakectl)"
)


def embedded() -> InvalidArgument:
    return InvalidArgument(NO_USERS)


def _q(part: str) -> str:
    try:
        return quote(part, safe="")
    except UnicodeEncodeError as e:  # a lone surrogate: non-UTF-8 bytes from the command line
        raise InvalidArgument(f"{part!r} is not UTF-8 text") from e


def _page(amount: int | None, after: str, **extra: Any) -> dict[str, Any]:
    params: dict[str, Any] = {k: v for k, v in extra.items() if v is not None}
    if amount is not None:
        params["amount"] = amount
    if after:
        params["after"] = after
    return params


class RemoteAuth:
    """The auth verbs over a server's lakeFS API (``/api/v1/auth/...``, ``/api/v1/user``)."""

    def __init__(self, call: Call) -> None:
        self._call = call

    def _get(self, path: str, **params: Any) -> Data:
        result: Data = self._call("GET", "/api/v1" + path, params=params or None)
        return result

    def _send(self, method: str, path: str, body: Any = None) -> Any:
        return self._call(method, "/api/v1" + path, json=body)

    # -- users -----------------------------------------------------------------------------

    def current_user(self) -> Data:
        """The caller's ``User``."""
        user: Data = self._get("/user")["user"]
        return user

    def list_users(self, amount: int | None = None, after: str = "") -> Data:
        return self._get("/auth/users", **_page(amount, after))

    def create_user(self, user_id: str) -> Data:
        created: Data = self._send("POST", "/auth/users", {"id": user_id})
        return created

    def delete_user(self, user_id: str) -> None:
        self._send("DELETE", f"/auth/users/{_q(user_id)}")

    def list_user_groups(self, user_id: str, amount: int | None = None, after: str = "") -> Data:
        return self._get(f"/auth/users/{_q(user_id)}/groups", **_page(amount, after))

    def list_user_policies(
        self, user_id: str, effective: bool = False, amount: int | None = None, after: str = ""
    ) -> Data:
        params = _page(amount, after, effective="true" if effective else None)
        return self._get(f"/auth/users/{_q(user_id)}/policies", **params)

    def attach_user_policy(self, user_id: str, policy_id: str) -> None:
        self._send("PUT", f"/auth/users/{_q(user_id)}/policies/{_q(policy_id)}")

    def detach_user_policy(self, user_id: str, policy_id: str) -> None:
        self._send("DELETE", f"/auth/users/{_q(user_id)}/policies/{_q(policy_id)}")

    # -- credentials -----------------------------------------------------------------------

    def list_credentials(self, user_id: str, amount: int | None = None, after: str = "") -> Data:
        return self._get(f"/auth/users/{_q(user_id)}/credentials", **_page(amount, after))

    def create_credentials(self, user_id: str) -> Data:
        """A new access key: ``CredentialsWithSecret``, the secret in this answer only."""
        created: Data = self._send("POST", f"/auth/users/{_q(user_id)}/credentials")
        return created

    def delete_credentials(self, user_id: str, access_key_id: str) -> None:
        self._send("DELETE", f"/auth/users/{_q(user_id)}/credentials/{_q(access_key_id)}")

    # -- groups ----------------------------------------------------------------------------

    def list_groups(self, amount: int | None = None, after: str = "") -> Data:
        return self._get("/auth/groups", **_page(amount, after))

    def create_group(self, group_id: str, description: str | None = None) -> Data:
        body: Data = {"id": group_id}
        if description:
            body["description"] = description
        created: Data = self._send("POST", "/auth/groups", body)
        return created

    def delete_group(self, group_id: str) -> None:
        self._send("DELETE", f"/auth/groups/{_q(group_id)}")

    def list_members(self, group_id: str, amount: int | None = None, after: str = "") -> Data:
        return self._get(f"/auth/groups/{_q(group_id)}/members", **_page(amount, after))

    def add_member(self, group_id: str, user_id: str) -> None:
        self._send("PUT", f"/auth/groups/{_q(group_id)}/members/{_q(user_id)}")

    def remove_member(self, group_id: str, user_id: str) -> None:
        self._send("DELETE", f"/auth/groups/{_q(group_id)}/members/{_q(user_id)}")

    def list_group_policies(self, group_id: str, amount: int | None = None, after: str = "") -> Data:
        return self._get(f"/auth/groups/{_q(group_id)}/policies", **_page(amount, after))

    def attach_group_policy(self, group_id: str, policy_id: str) -> None:
        self._send("PUT", f"/auth/groups/{_q(group_id)}/policies/{_q(policy_id)}")

    def detach_group_policy(self, group_id: str, policy_id: str) -> None:
        self._send("DELETE", f"/auth/groups/{_q(group_id)}/policies/{_q(policy_id)}")

    # -- policies --------------------------------------------------------------------------

    def list_policies(self, amount: int | None = None, after: str = "") -> Data:
        return self._get("/auth/policies", **_page(amount, after))

    def create_policy(self, policy_id: str, statement: Any) -> Data:
        created: Data = self._send("POST", "/auth/policies", {"id": policy_id, "statement": statement})
        return created

    def get_policy(self, policy_id: str) -> Data:
        return self._get(f"/auth/policies/{_q(policy_id)}")

    def delete_policy(self, policy_id: str) -> None:
        self._send("DELETE", f"/auth/policies/{_q(policy_id)}")
