"""Users and access keys: set-up once, secrets encrypted at rest, authentication refusals."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from lakectl.core.kv.memory import MemoryStore
from lakectl.errors import AlreadyExists, StorageError, Unauthenticated
from server.auth import CREDENTIALS, Auth, Role, load_secret_key


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
