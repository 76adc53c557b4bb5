"""The server's auth secret (configured, or generated once into the data dir) and the keys derived from it.

One secret seals both the stored access key secrets (:mod:`server.auth.store`) and the login
tokens (:mod:`server.auth.tokens`), each under its own key derived with HKDF-SHA256, so that a
key learnt for one purpose opens nothing of the other.
"""

from __future__ import annotations

import os
import secrets

from lakectl.errors import StorageError

SECRET_FILE = "auth-secret"
"""Where the generated encryption secret lives in the data directory when none is configured."""


def derive_key(secret_key: str, purpose: bytes) -> bytes:
    """The 32-byte key for ``purpose`` (a constant naming its use and version) under ``secret_key``."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    return HKDF(hashes.SHA256(), 32, salt=None, info=purpose).derive(secret_key.encode())


JOURNAL_PURPOSE = b"lakectl journal auth records v1"
"""Under which the key signing the journal's auth entries is derived
(:mod:`lakectl.core.journal.records`)."""


def journal_seal(secret_key: str) -> bytes:
    """The key the server signs its users' journal entries with, and a rebuild verifies them."""
    return derive_key(secret_key, JOURNAL_PURPOSE)


def existing_secret_key(configured: str, data_dir: str) -> str | None:
    """The server's secret as :func:`load_secret_key` finds it, but None where there is none yet
    (nothing is generated: a rebuild must verify with the secret the journal was signed with)."""
    if configured or os.path.exists(os.path.join(data_dir, SECRET_FILE)):
        return load_secret_key(configured, data_dir)
    return None


def load_secret_key(configured: str, data_dir: str) -> str:
    """``auth.encrypt.secret_key`` when configured; else a random key generated once into
    ``<data dir>/auth-secret`` (mode 0600). Several servers sharing one database must share it."""
    if configured:
        return configured
    path = os.path.join(data_dir, SECRET_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            key = f.read().strip()
    except FileNotFoundError:
        pass
    except OSError as e:
        raise StorageError(f"cannot read {path}: {e.strerror or e}") from e
    else:
        if not key:
            raise StorageError(f"{path} is empty: remove it, or set auth.encrypt.secret_key")
        return key
    # Written aside, then linked into place: readers never see a partial file, and of two
    # processes generating a key at once the first link wins and both use its key.
    key = secrets.token_urlsafe(32)
    tmp = f"{path}.{os.getpid()}.{secrets.token_hex(4)}"
    try:
        os.makedirs(data_dir, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(key + "\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return load_secret_key("", data_dir)
        finally:
            os.unlink(tmp)
    except OSError as e:
        raise StorageError(f"cannot create {path}: {e.strerror or e}") from e
    return key
