"""lakeFS configuration keys naming parts lakectl does not have: each ignored with a warning, or refused.

A lakeFS configuration file should start this server unchanged where it can, and stop it where
running on would surprise. So each key (or whole section) lakeFS documents and lakectl has no
part for gets one fate here, with the reason the warning or the error gives:

- ``IGNORE``: tuning, telemetry and knobs of parts lakectl does not run; one warning line names
  the keys, and the server starts.
- ``REFUSE``: settings whose silent omission would change what the user gets (another database
  or blockstore, external authentication, encryption, TLS): an error naming the key and why,
  before anything listens.

A refused key with a ``harmless`` value (``tls.enabled: false``) is ignored instead when it has
that value: it asks for what lakectl does anyway. The longest matching prefix decides.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Fate(enum.Enum):
    IGNORE = "ignore"
    REFUSE = "refuse"


@dataclass(frozen=True, slots=True)
class Foreign:
    """A lakeFS key, or a section of keys (every key under ``prefix``), lakectl has no part for."""

    prefix: str
    fate: Fate
    reason: str
    harmless: str | None = None
    """For a refused key: the value (as lower-case text) that is ignored instead."""


_IGNORE, _REFUSE = Fate.IGNORE, Fate.REFUSE
_BADGER = "badger is not supported: set metadata.db.type: sqlite (or local) and metadata.db.path"
_NO_PRESIGN = "the server signs its own read URLs (lakectl fs presign), never the blockstore's"
_TELEMETRY = "lakectl collects and sends no usage data"
_CACHE = "tuning of a lakeFS cache lakectl does not have"

FOREIGN: tuple[Foreign, ...] = (
    Foreign("logging.audit_log_level", _IGNORE, "lakectl writes no separate audit log"),
    Foreign("logging.file_max_size_mb", _IGNORE, "lakectl does not rotate log files (use logrotate)"),
    Foreign("logging.files_keep", _IGNORE, "lakectl does not rotate log files (use logrotate)"),
    Foreign("logging.trace_request_headers", _IGNORE, "lakectl does not trace request headers"),
    Foreign("actions", _IGNORE, "lakectl runs webhook and command hooks only (no Lua or Airflow hooks)"),
    Foreign("database.local.sync_writes", _IGNORE, "SQLite syncs every commit to disk"),
    Foreign("database.local.prefetch_size", _IGNORE, "tuning of lakeFS's embedded store"),
    Foreign("database.local.enable_logging", _IGNORE, "tuning of lakeFS's embedded store"),
    Foreign("database.postgres.max_open_connections", _IGNORE, "connection pool tuning"),
    Foreign("database.postgres.max_idle_connections", _IGNORE, "connection pool tuning"),
    Foreign("database.postgres.connection_max_lifetime", _IGNORE, "connection pool tuning"),
    Foreign("database.dynamodb", _REFUSE, "DynamoDB is not supported: use database.type local or postgres"),
    Foreign("database.cosmosdb", _REFUSE, "CosmosDB is not supported: use database.type local or postgres"),
    Foreign("metadata.db.badger", _REFUSE, _BADGER),
    Foreign("metadata.badger", _REFUSE, _BADGER),
    Foreign("blockstore.default_namespace_prefix", _IGNORE, "storage namespaces here are local://<name>"),
    Foreign(
        "blockstore.local.import_enabled",
        _IGNORE,
        "local import is limited by blockstore.local.allowed_external_prefixes (none by default)",
    ),
    Foreign("blockstore.local.import_hidden", _IGNORE, "hidden files are imported like the others"),
    Foreign(
        "blockstore.gs", _REFUSE, "Google Cloud Storage is not supported: use blockstore.type local or s3"
    ),
    Foreign(
        "blockstore.azure", _REFUSE, "Azure Blob Storage is not supported: use blockstore.type local or s3"
    ),
    Foreign("blockstore.s3.discover_bucket_region", _IGNORE, "the region is blockstore.s3.region"),
    Foreign("blockstore.s3.streaming_chunk_size", _IGNORE, "blocks are written whole, up to 64 MiB"),
    Foreign("blockstore.s3.streaming_chunk_timeout", _IGNORE, "blocks are written whole, up to 64 MiB"),
    Foreign("blockstore.s3.skip_verify_certificate_test_only", _IGNORE, "certificates are always verified"),
    Foreign("blockstore.s3.client_log_request", _IGNORE, "S3 client tracing is not configurable"),
    Foreign("blockstore.s3.client_log_retries", _IGNORE, "S3 client tracing is not configurable"),
    Foreign("blockstore.s3.pre_signed_expiry", _IGNORE, _NO_PRESIGN),
    Foreign("blockstore.s3.disable_pre_signed", _IGNORE, _NO_PRESIGN),
    Foreign("blockstore.s3.disable_pre_signed_ui", _IGNORE, _NO_PRESIGN),
    Foreign("blockstore.s3.disable_pre_signed_multipart", _IGNORE, _NO_PRESIGN),
    Foreign(
        "blockstore.s3.server_side_encryption",
        _REFUSE,
        "blocks are written without server-side encryption headers: use the bucket's default encryption",
    ),
    Foreign(
        "blockstore.s3.server_side_encryption_kms_key_id",
        _REFUSE,
        "blocks are written without server-side encryption headers: use the bucket's default encryption",
    ),
    Foreign("auth.cache", _IGNORE, _CACHE),
    Foreign("auth.cookie_domain", _IGNORE, "lakectl sets no login cookies"),
    Foreign("auth.ui_config", _IGNORE, "lakectl has no web UI yet"),
    Foreign("auth.login_duration", _REFUSE, "login tokens are valid 168h, as lakeFS's default", "168h"),
    Foreign("auth.api", _REFUSE, "external authorization services are not supported"),
    Foreign("auth.remote_authenticator", _REFUSE, "remote authenticators are not supported"),
    Foreign("auth.ldap", _REFUSE, "LDAP authentication is not supported"),
    Foreign("auth.oidc", _REFUSE, "OIDC logins are not supported"),
    Foreign("auth.cookie_auth_verification", _REFUSE, "external logins are not supported"),
    Foreign(
        "gateways.s3.fallback_url",
        _REFUSE,
        "requests for unknown buckets answer NoSuchBucket: there is no fallback",
    ),
    Foreign("gateways.s3.verify_unsupported", _IGNORE, "unsupported S3 requests are always refused"),
    Foreign("committed", _IGNORE, "tuning of lakeFS's committed-data files and their cache"),
    Foreign("graveler", _IGNORE, "tuning of lakeFS's caches"),
    Foreign("ugc", _IGNORE, "uncommitted data is collected by `lakectl gc`"),
    Foreign("stats", _IGNORE, _TELEMETRY),
    Foreign("usage_report", _IGNORE, _TELEMETRY),
    Foreign("email_subscription", _IGNORE, _TELEMETRY),
    Foreign("security", _IGNORE, "lakectl runs no security audit or version checks"),
    Foreign("email", _IGNORE, "lakectl sends no email"),
    Foreign("ui", _IGNORE, "lakectl has no web UI yet"),
    Foreign("tls", _IGNORE, "TLS is off (tls.enabled false)"),
    Foreign("tls.enabled", _REFUSE, "the server speaks plain HTTP: put a TLS proxy in front of it", "false"),
    Foreign("installation", _IGNORE, "lakectl keeps no installation id"),
)


def foreign(key: str) -> Foreign | None:
    """The entry for the dotted ``key``: the longest prefix of it in ``FOREIGN``, or ``None``."""
    best: Foreign | None = None
    for entry in FOREIGN:
        if (key == entry.prefix or key.startswith(entry.prefix + ".")) and (
            best is None or len(entry.prefix) > len(best.prefix)
        ):
            best = entry
    return best


def has_deeper(key: str) -> bool:
    """Whether some entry lies strictly under ``key`` (so a mapping there must be walked into)."""
    return any(e.prefix.startswith(key + ".") for e in FOREIGN)
