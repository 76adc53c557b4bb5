"""The world the role tests call into: a real server on SQLite with a user of each role, a
repository, and the callers (anonymous, each role, bad keys)."""

from __future__ import annotations

import base64
import hashlib
import itertools
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from lakectl.core import blockaccess, keys, writes
from lakectl.core import porcelain as p
from lakectl.core.importing import tasks
from lakectl.core.journal import journal
from lakectl.core.lake import Lake
from lakectl.core.upkeep import refsdump
from server.app import create_app
from server.auth.store import Auth
from server.auth.tokens import TOKEN_TTL
from server.auth.users import Role, User
from server.config import load_settings
from tests.server.conftest import (
    ALLOWED_EXTERNAL_PREFIXES,
    START_TIMEOUT_S,
    Snapshot,
    data_files,
    free_port,
    journal_entries,
)

REPO = "matrix"
R = f"/api/v1/repositories/{REPO}"
V1, REPOS, RP = "/api/v1", "/api/v1/repositories", "/api/v1/repositories/{repository}"
OBJ = {"path": "data/a.txt"}
_names = itertools.count()


def unique(stem: str) -> str:
    return f"{stem}-{next(_names)}"


# -- the server, its users and a small repository ----------------------------------------------


@dataclass(frozen=True)
class Caller:
    name: str
    role: Role | None
    """None: the server cannot authenticate this caller."""
    signer: str
    """The user whose signed block locators the caller carries ("": none); they are signed for
    its ``grant_token`` of the moment (:meth:`World.token`), which its key changes renew."""
    headers: dict[str, str]


def basic(key_id: str, secret: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{key_id}:{secret}".encode()).decode()}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@dataclass
class World:
    url: str
    app: FastAPI
    auth: Auth
    lake: Lake
    data_dir: Path
    admin_key: tuple[str, str]
    commit_id: str
    """The head of ``main`` (it added data/a.txt)."""
    callers: dict[str, Caller] = field(default_factory=dict)

    def client(self, headers: dict[str, str] | None = None) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=headers, timeout=30.0)

    # Fresh resources, made through the plumbing (fast, and not under test here).

    def branch(self, dirty: bool = False) -> str:
        name = unique("b")
        p.create_branch(self.lake, REPO, name, "main")
        if dirty:
            writes.upload(self.lake, REPO, name, "data/new.txt", os.urandom(16), "text/plain")
        return name

    def side_branch(self) -> str:
        """A branch one commit ahead of main."""
        name = self.branch(dirty=True)
        p.commit(self.lake, REPO, name, "side", committer="admin")
        return name

    def tag(self) -> str:
        name = unique("t")
        p.create_tag(self.lake, REPO, name, "main")
        return name

    def repo(self) -> str:
        name = unique("r")
        p.create_repo(self.lake, name, "main", f"local://{name}")
        return name

    def bare(self) -> str:
        name = unique("bare")
        p.create_repo(self.lake, name, "main", f"local://{name}", bare=True)
        return name

    def refs(self) -> dict[str, str]:
        return refsdump.dump(self.lake, REPO).to_dict()

    def task(self, kind: str) -> str:
        refs = refsdump.dump(self.lake, REPO) if kind == "dump" else None
        return str(refsdump.record_task(self.lake, REPO, kind, refs)["id"])

    def user(self, role: Role | None = None) -> User:
        return self.auth.create_user(unique("u"), role)

    def group(self, *policies: str) -> str:
        name = unique("g")
        self.auth.directory.create_group(name)
        for policy in policies:
            self.auth.directory.attach_to_group(name, policy)
        return name

    def policy(self) -> str:
        name = unique("p")
        self.auth.directory.create_policy(
            name, [{"effect": "allow", "resource": "*", "action": ["fs:Read*"]}]
        )
        return name

    def key(self, user: User) -> str:
        return self.auth.create_credentials(user).access_key_id

    def token(self, caller: Caller) -> str:
        """Whom the caller's block signatures are made for, now."""
        return self.auth.get_user(caller.signer).grant_token if caller.signer else "nobody"

    def block(self, caller: Caller) -> tuple[str, bytes, str]:
        """A stored block: bare locator, bytes, locator signed for ``caller``."""
        data = os.urandom(64)
        md5 = hashlib.md5(data).hexdigest()
        signed = blockaccess.put_block(self.lake, md5, data, self.token(caller))
        return f"{md5}+{len(data)}", data, signed


@pytest.fixture(scope="module", name="world")
def world_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    data_dir = tmp_path_factory.mktemp("roles")
    env = {ALLOWED_EXTERNAL_PREFIXES: str(data_dir.parent / "import-src")}  # test_roles' import source
    app = create_app(load_settings(None, str(data_dir), environ=env))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning"))
    thread = threading.Thread(target=server.run, name="lakectl-roles-server", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "the test server did not start"
            time.sleep(0.02)
        url = f"http://127.0.0.1:{server.config.port}"
        with httpx.Client(base_url=url) as anon:
            admin = anon.post("/api/v1/setup_lakefs", json={"username": "admin"}).json()
        key = (admin["access_key_id"], admin["secret_access_key"])
        lake, auth = app.state.lake, app.state.auth
        p.create_repo(lake, REPO, "main", f"local://{REPO}")
        writes.upload(lake, REPO, "main", "data/a.txt", b"id,value\n1,one\n", "text/csv")
        head = p.commit(lake, REPO, "main", "add data", committer="admin")
        p.create_tag(lake, REPO, "v1", "main")
        blockaccess.signing_key(lake)  # created on first use: before any snapshot
        w = World(url + "", app, auth, lake, data_dir, key, head.id)
        w.callers = _callers(w)
        yield w
    finally:
        server.should_exit = True
        thread.join(timeout=START_TIMEOUT_S)


def _callers(w: World) -> dict[str, Caller]:
    """Users made through the auth API (as an admin would), one caller per way of calling."""
    out = {"admin": Caller("admin", Role.ADMIN, "admin", basic(*w.admin_key))}
    with w.client(basic(*w.admin_key)) as api:
        for user_id, group in (("dev", "Developers"), ("ann", "Viewers")):
            assert api.post("/api/v1/auth/users", json={"id": user_id}).status_code == 201
            assert api.put(f"/api/v1/auth/groups/{group}/members/{user_id}").status_code == 201
            creds = api.post(f"/api/v1/auth/users/{user_id}/credentials").json()
            role = Role.DEVELOPER if user_id == "dev" else Role.ANALYST
            token = user_id
            out[user_id] = Caller(
                user_id, role, token, basic(creds["access_key_id"], creds["secret_access_key"])
            )
            if user_id == "dev":
                login = {
                    "access_key_id": creds["access_key_id"],
                    "secret_access_key": creds["secret_access_key"],
                }
                login_token = api.post("/api/v1/auth/login", json=login).json()["token"]
                out["dev-token"] = Caller("dev-token", role, token, bearer(login_token))
                out["wrong-secret"] = Caller(
                    "wrong-secret", None, token, basic(creds["access_key_id"], "x" * 40)
                )
    expired = w.auth.tokens.issue(w.auth.get_user("dev"), now=time.time() - TOKEN_TTL - 60).token
    out["expired-token"] = Caller("expired-token", None, "dev", bearer(expired))
    out["anonymous"] = Caller("anonymous", None, "", {})
    return out


def snapshot(w: World) -> Snapshot:
    """Every KV row and every file of the data directory (but the database's own files), once
    the journal sealed what earlier requests did (else its keeper would, within a second, in the
    middle of the next request); the journal's writer records are left out (their heartbeat is
    renewed every few seconds, whatever is asked)."""
    tasks.wait_all(w.lake)  # an import a request started runs in a thread of the server
    journal.flush(w.lake)
    with closing(sqlite3.connect(f"file:{w.data_dir / 'lake.db'}?mode=ro", uri=True)) as db:
        rows = db.execute(
            "SELECT partition, key, value FROM kv WHERE NOT (partition = ? AND key LIKE ?)"
            " ORDER BY partition, key",
            (keys.JOURNAL, keys.JOURNAL_WRITER_PREFIX + "%"),
        ).fetchall()
    return rows, data_files(w.data_dir), journal_entries(rows)
