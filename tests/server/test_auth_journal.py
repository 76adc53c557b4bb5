"""A server's users in its lake's journal: every change the server makes of its auth records is
journalled as stored (access key secrets as encrypted, never in clear), a lake rebuilt from the
journal has them back for a server with the same secret (keys, grants, sign-outs, deletions as
they were), and the journal's API shows them only to users who may manage users
(docs/decisions/0024-auth-records-in-the-journal.md)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakectl.core import opening
from lakectl.core.blocks.local import LocalAdapter
from lakectl.core.journal import journal, rebuild
from lakectl.core.kv import KVStore
from lakectl.core.kv.helpers import partitions
from lakectl.core.kv.sqlite import SQLiteStore
from lakectl.core.lake import Lake
from lakectl.errors import StorageError, Unauthenticated
from server.auth.secret import journal_seal
from server.auth.store import Auth, lake_auth
from server.config import load_settings
from server.policies import Permission
from tests.server.conftest import Live, serve

SECRET = "the server's secret"
READ_DATA = [
    {
        "effect": "allow",
        "action": ["fs:Read*", "fs:List*"],
        "resource": ["arn:lakefs:fs:::repository/data", "arn:lakefs:fs:::repository/data/*"],
    }
]
ARN = "arn:aws:iam::123456789012:role/bob"


@pytest.fixture
def lake(tmp_path: Path) -> Iterator[Lake]:
    opened = opening.open_lake(str(tmp_path / "lake"))  # a new lake: its journal is on
    yield opened
    opened.close()


def stored(kv: KVStore) -> dict[str, dict[str, bytes]]:
    return {part: dict(kv.scan(part)) for part in partitions(kv, "auth/") or []}


def people(auth: Auth) -> dict[str, str]:
    """Who is who on a server (the clear secrets of the keys made): ``name`` → key id, and
    ``name:secret`` → its secret; ``token`` and ``revoked``: login tokens of bob."""
    admin = auth.setup("admin")
    bob = auth.create_user("bob")
    bob_key = auth.create_credentials(bob)
    auth.directory.create_policy("read-data", READ_DATA)
    auth.directory.create_group("readers")
    auth.directory.attach_to_group("readers", "read-data")
    auth.add_member("readers", "bob")
    auth.attach_policy("bob", "FSReadAll")
    auth.principals.bind("bob", bob.incarnation, ARN)
    carol_key = auth.create_credentials(auth.create_user("carol"))
    auth.delete_user("carol")
    dave = auth.create_user("dave")
    dave_key, dave_gone = auth.create_credentials(dave), auth.create_credentials(dave)
    auth.delete_credentials(dave, dave_gone.access_key_id)
    revoked = auth.tokens.issue(auth.get_user("bob")).token
    auth.tokens.revoke(revoked)
    made = {"admin": admin, "bob": bob_key, "carol": carol_key, "dave": dave_key, "dave-gone": dave_gone}
    out = {name: c.access_key_id for name, c in made.items()}
    out |= {f"{name}:secret": c.secret_access_key for name, c in made.items()}
    return out | {"token": auth.tokens.issue(auth.get_user("bob")).token, "revoked": revoked}


def test_a_lake_rebuilt_from_its_journal_has_the_servers_users_back(lake: Lake, tmp_path: Path) -> None:
    made = people(lake_auth(lake, SECRET))
    journal.flush(lake)
    texts = [json.dumps(e.to_dict()) for e in journal.entries(lake.kv, lake.blocks)]
    assert sum('"event_type": "auth"' in t for t in texts) > 10
    secrets = [v for k, v in made.items() if k.endswith(":secret")]
    assert not [s for s in secrets if any(s in t for t in texts)]  # never in clear
    fresh = SQLiteStore(str(tmp_path / "rebuilt.db"))
    try:
        rebuild.rebuild(LocalAdapter(os.path.join(lake.home, "blocks")), fresh, journal_seal(SECRET))
        assert stored(fresh) == stored(lake.kv)
        check_users(Auth(fresh, SECRET), made)
        with pytest.raises(StorageError, match="secret_key"):  # another secret reads no key
            Auth(fresh, "another secret").authenticate(made["bob"], made["bob:secret"])
    finally:
        fresh.close()


def check_users(auth: Auth, made: dict[str, str]) -> None:
    """The server's users as :func:`people` left them."""
    assert auth.is_set_up()
    assert auth.authenticate(made["admin"], made["admin:secret"]).allows(Permission.MANAGE_AUTH)
    bob = auth.authenticate(made["bob"], made["bob:secret"])
    assert bob.effective == ("FSReadAll", "read-data")
    assert bob.allows(Permission.READ_REPO, "data") and not bob.allows(Permission.WRITE_REPO, "data")
    assert auth.principals.get(ARN).user_id == "bob"
    assert auth.tokens.user_of(made["token"]).id == "bob"
    with pytest.raises(Unauthenticated, match="revoked"):
        auth.tokens.user_of(made["revoked"])
    assert auth.authenticate(made["dave"], made["dave:secret"]).id == "dave"
    for gone in ("carol", "dave-gone"):
        with pytest.raises(Unauthenticated):
            auth.authenticate(made[gone], made[f"{gone}:secret"])
    assert [u.id for u in auth.list_users()] == ["admin", "bob", "dave"]


@pytest.fixture(scope="module")
def journalled_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """A server of its own, its journal on (as a new lake's)."""
    with serve(load_settings(None, str(tmp_path_factory.mktemp("auth-journal")), environ={})) as server:
        yield server


def test_the_journal_shows_auth_records_only_to_those_who_manage_users(journalled_server: Live) -> None:
    live = journalled_server
    with live.client((live.key_id, live.secret)) as admin:
        admin.post("/auth/users", json={"id": "fs-admin"}).raise_for_status()
        admin.put("/auth/users/fs-admin/policies/FSFullAccess").raise_for_status()
        key = admin.post("/auth/users/fs-admin/credentials").json()
        admin.post("/repositories", json={"name": "seen", "storage_namespace": "local://seen"})
        everything = admin.get("/journal", params={"amount": 1000}).json()["results"]
    types = {e["event_type"] for e in everything}
    assert {"auth", "create-repository"} <= types
    with live.client((key["access_key_id"], key["secret_access_key"])) as fs_admin:
        found = fs_admin.get("/journal", params={"amount": 1000})
        assert found.status_code == 200  # the data's admin reads the journal...
        shown = found.json()["results"]
        # ... but not the records of who may use the server
        assert [e for e in everything if e["event_type"] != "auth"] == shown
        assert not fs_admin.get("/auth/users").is_success
