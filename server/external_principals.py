"""External principals: AWS IAM identities (ARNs) bound to users, who then log in as them.

Key layout (beside :mod:`server.auth`'s):

    auth/external_principals  key <principal id>  → {"id", "user_id", "user_incarnation",
                                                      "creation_date", "settings": [{...}]}

A principal id belongs to one user at most: keyed by the id, a second binding is refused by
compare-and-swap. A binding names its user's incarnation, so one left over from a deleted user
never logs anyone in as a later user of the same name (and may be bound again).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from lakectl.core.kv import KVStore
from lakectl.core.kv.retry import AGAIN, PRINCIPAL, Again, retry
from lakectl.errors import (
    AlreadyExists,
    InvalidArgument,
    KeyNotFound,
    NotFound,
    PredicateFailed,
)

PRINCIPALS = "auth/external_principals"
MAX_ID_CHARS = 2048
"""AWS's longest ARN."""
MAX_SETTINGS = 100
MAX_SETTING_CHARS = 1024

Settings = tuple[tuple[tuple[str, str], ...], ...]
"""lakeFS's ``settings``: a list of string maps, kept in order, each map sorted by key."""

Alive = Callable[[str, str], bool]
"""Whether the user ``(user id, incarnation)`` still exists."""


@dataclass(frozen=True, slots=True)
class ExternalPrincipal:
    id: str
    user_id: str
    user_incarnation: str
    creation_date: int
    settings: Settings = ()

    def to_dict(self) -> dict[str, Any]:
        """lakeFS ``ExternalPrincipal``."""
        return {"id": self.id, "user_id": self.user_id, "settings": [dict(s) for s in self.settings]}

    def record(self) -> bytes:
        return json.dumps(
            {
                "id": self.id,
                "user_id": self.user_id,
                "user_incarnation": self.user_incarnation,
                "creation_date": self.creation_date,
                "settings": [dict(s) for s in self.settings],
            }
        ).encode()

    @staticmethod
    def parse(raw: bytes) -> ExternalPrincipal:
        d = json.loads(raw)
        settings = tuple(tuple(sorted(s.items())) for s in d.get("settings") or ())
        return ExternalPrincipal(d["id"], d["user_id"], d["user_incarnation"], d["creation_date"], settings)


def check_principal_id(principal_id: str) -> None:
    if not principal_id or len(principal_id) > MAX_ID_CHARS or not principal_id.isprintable():
        raise InvalidArgument(
            f"invalid external principal id {principal_id[:80]!r}: 1-{MAX_ID_CHARS} printable characters"
        )


def parse_settings(raw: object) -> Settings:
    """lakeFS's ``ExternalPrincipalCreation.settings``: a list of maps of strings (or none)."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) > MAX_SETTINGS:
        raise InvalidArgument(f"an external principal's settings are a list of at most {MAX_SETTINGS} maps")
    out = []
    for item in raw:
        if not isinstance(item, Mapping) or not all(
            isinstance(v, str)
            and len(k) + len(v) <= MAX_SETTING_CHARS
            and k.isprintable()
            and v.isprintable()
            for k, v in item.items()
        ):
            raise InvalidArgument("each external principal setting is a map of printable strings")
        out.append(tuple(sorted(item.items())))
    return tuple(out)


class ExternalPrincipals:
    """The bindings of one server (shared by every server process on the same KV)."""

    def __init__(
        self, kv: KVStore, alive: Alive, changed: Callable[[str], None] = lambda user_id: None
    ) -> None:
        self.kv = kv
        self._alive = alive
        self._changed = changed
        """Told the id of a user whose bindings changed (``server.auth.store`` renews its grant epoch)."""

    def _live(self, raw: bytes) -> ExternalPrincipal | None:
        principal = ExternalPrincipal.parse(raw)
        return principal if self._alive(principal.user_id, principal.user_incarnation) else None

    def bind(
        self, user_id: str, incarnation: str, principal_id: str, settings: Settings = ()
    ) -> ExternalPrincipal:
        """Bind ``principal_id`` to the user; ``AlreadyExists`` when it is bound to a user, this
        one included (a binding left from a deleted user is replaced)."""
        check_principal_id(principal_id)
        principal = ExternalPrincipal(principal_id, user_id, incarnation, int(time.time()), settings)
        expected: bytes | None = None

        def attempt() -> ExternalPrincipal | Again:
            nonlocal expected
            try:
                self.kv.set_if(PRINCIPALS, principal_id, principal.record(), expected)
            except PredicateFailed:
                try:
                    expected = self.kv.get(PRINCIPALS, principal_id)
                except KeyNotFound:
                    expected = None
                    return AGAIN
                holder = self._live(expected)
                if holder is not None:
                    raise AlreadyExists(
                        f"external principal {principal_id!r} is already bound to user {holder.user_id!r}"
                    ) from None
                return AGAIN
            self._changed(user_id)
            return principal

        return retry(PRINCIPAL, attempt, f"external principal {principal_id!r} kept changing")

    def get(self, principal_id: str) -> ExternalPrincipal:
        """The binding of ``principal_id``; ``NotFound`` when there is none."""
        found = self.find([principal_id])
        if found is None:
            raise NotFound(f"external principal {principal_id!r} not found")
        return found

    def find(self, principal_ids: Iterable[str]) -> ExternalPrincipal | None:
        """The live binding of the first of ``principal_ids`` that has one, or None."""
        for principal_id in principal_ids:
            try:
                found = self._live(self.kv.get(PRINCIPALS, principal_id))
            except KeyNotFound:
                continue
            if found is not None:
                return found
        return None

    def any_bound(self) -> bool:
        """Whether some principal is bound at all (a login with none bound can only fail)."""
        for _ in self.kv.scan(PRINCIPALS):
            return True
        return False

    def of_user(
        self, user_id: str, incarnation: str, prefix: str = "", after: str = ""
    ) -> Iterator[ExternalPrincipal]:
        """The user's bindings whose id starts with ``prefix`` and comes after ``after``, in id order."""
        for key, raw in self.kv.scan(PRINCIPALS, max(prefix, after)):
            if not key.startswith(prefix):
                return
            if key <= after:
                continue
            principal = ExternalPrincipal.parse(raw)
            if principal.user_id == user_id and principal.user_incarnation == incarnation:
                yield principal

    def unbind(self, user_id: str, incarnation: str, principal_id: str) -> None:
        """Remove the user's binding of ``principal_id``; ``NotFound`` when the user has none."""
        try:
            principal = ExternalPrincipal.parse(self.kv.get(PRINCIPALS, principal_id))
        except KeyNotFound:
            principal = None
        if principal is None or (principal.user_id, principal.user_incarnation) != (user_id, incarnation):
            raise NotFound(f"external principal {principal_id!r} of user {user_id!r} not found")
        self.kv.delete(PRINCIPALS, principal_id)
        self._changed(user_id)

    def unbind_all(self, user_id: str, incarnation: str) -> None:
        """Remove every binding of the user (when it is deleted)."""
        for principal in list(self.of_user(user_id, incarnation)):
            self.kv.delete(PRINCIPALS, principal.id)
