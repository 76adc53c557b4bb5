"""Server settings: a YAML file in the lakeFS 0.1 layout, every key overridable by environment variable.

Precedence, highest first: explicit arguments (``--data-dir``), ``LAKECTL_SERVER_<KEY>``
environment variables (the dotted key upper-cased, dots as ``_``: ``database.connection_string``
is ``LAKECTL_SERVER_DATABASE_CONNECTION_STRING``), the YAML file, defaults. The defaults give an
embedded lake under the data directory: SQLite metadata in ``<data dir>/lake.db`` and blocks in
``<data dir>/blocks``.

Most keys hold one string. ``blockstore.local.volumes`` holds a list of directories (a YAML list;
in the environment, directories separated by ``os.pathsep`` as in ``PATH``),
``blockstore.local.replicas`` a whole number and ``blockstore.s3.force_path_style`` a boolean
(YAML ``true``/``false``; in the environment also ``1``/``0``, ``yes``/``no``, ``on``/``off``).
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from lakectl.errors import InvalidArgument

ENV_PREFIX = "LAKECTL_SERVER_"
CONFIG_ENV = "LAKECTL_SERVER_CONFIG"
"""Environment variable naming the YAML file when ``--config`` is not given."""


class LogFormat(enum.Enum):
    TEXT = "text"
    JSON = "json"


class DatabaseType(enum.Enum):
    SQLITE = "sqlite"
    POSTGRES = "postgres"
    MEMORY = "memory"


class BlockstoreType(enum.Enum):
    LOCAL = "local"
    S3 = "s3"


LOG_LEVELS = {
    "trace": "DEBUG",
    "debug": "DEBUG",
    "info": "INFO",
    "warn": "WARNING",
    "warning": "WARNING",
    "error": "ERROR",
    "fatal": "CRITICAL",
    "panic": "CRITICAL",
}
"""lakeFS level names (case-insensitive) to Python logging levels."""

KEYS: dict[str, str] = {
    "data_dir": "",
    "listen_address": "127.0.0.1:8000",
    "logging.format": LogFormat.TEXT.value,
    "logging.level": "info",
    "logging.output": "-",
    "database.type": DatabaseType.SQLITE.value,
    "database.connection_string": "",
    "blockstore.type": BlockstoreType.LOCAL.value,
    "blockstore.local.path": "",
    "blockstore.local.volumes": "",
    "blockstore.local.replicas": "1",
    "blockstore.s3.bucket": "",
    "blockstore.s3.prefix": "",
    "blockstore.s3.endpoint": "",
    "blockstore.s3.region": "",
    "blockstore.s3.access_key_id": "",
    "blockstore.s3.secret_access_key": "",
    "blockstore.s3.force_path_style": "true",
    "auth.encrypt.secret_key": "",
    "gateways.s3.listen_address": "",
    "gateways.s3.domain_name": "s3.local.lakefs.io",
    "gateways.s3.region": "us-east-1",
}
"""Every configuration key with its default ("" for none, or one derived from the data directory)."""

LIST_KEYS = frozenset({"blockstore.local.volumes"})
"""Keys holding a list of strings: a YAML list, or ``os.pathsep``-separated in the environment."""
BOOL_KEYS = frozenset({"blockstore.s3.force_path_style"})
"""Keys holding a boolean: YAML ``true``/``false``, or one of ``BOOLEANS`` as text."""
INT_KEYS = frozenset({"blockstore.local.replicas"})
"""Keys holding a whole number."""
BOOLEANS = {
    **dict.fromkeys(("true", "1", "yes", "on"), True),
    **dict.fromkeys(("false", "0", "no", "off"), False),
}

# The bucket names the S3 adapter accepts (S3-compatible servers are laxer than AWS): checked
# here too, so that a bad name is refused naming its key before anything connects.
_BUCKET = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{1,254}")


def env_name(key: str) -> str:
    return ENV_PREFIX + key.upper().replace(".", "_")


@dataclass(frozen=True, slots=True)
class LoggingSettings:
    format: LogFormat
    level: str
    """A Python logging level name (``INFO``)."""
    output: str
    """``-`` for standard output, ``=`` for standard error, else a file path."""


@dataclass(frozen=True, slots=True)
class DatabaseSettings:
    type: DatabaseType
    url: str
    """What :func:`lakectl.core.kv.open_store` opens."""


@dataclass(frozen=True, slots=True)
class LocalBlockstore:
    """Block directories: one (a plain block directory) or several (a volume set)."""

    paths: tuple[str, ...]
    """Absolute directories; with several, blocks are placed by rendezvous hashing."""
    replicas: int
    """Copies of each block, on that many of the ``paths`` (1 with a single path)."""


@dataclass(frozen=True, slots=True)
class S3Blockstore:
    """One bucket (that must exist) of S3-compatible object storage, under an optional key prefix."""

    bucket: str
    prefix: str
    endpoint: str | None
    """``http(s)://host:port`` of an S3-compatible server; ``None``: AWS."""
    region: str | None
    access_key_id: str | None
    """With the secret, or neither: then boto3's default credential chain (``AWS_*``, ~/.aws)."""
    secret_access_key: str | None = field(repr=False)
    force_path_style: bool = True


@dataclass(frozen=True, slots=True)
class BlockstoreSettings:
    type: BlockstoreType
    local: LocalBlockstore | None = None
    """Set when ``type`` is ``local``."""
    s3: S3Blockstore | None = None
    """Set when ``type`` is ``s3``."""


@dataclass(frozen=True, slots=True)
class S3GatewaySettings:
    host: str
    port: int
    """Default: the REST API's port + 1 on its host."""
    domain_name: str
    """Requests to ``<bucket>.<domain_name>`` are addressed virtual-host-style."""
    region: str
    """Reported by GetBucketLocation and HeadBucket."""

    @property
    def listen_address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class Settings:
    data_dir: str
    host: str
    port: int
    logging: LoggingSettings
    database: DatabaseSettings
    blockstore: BlockstoreSettings
    secret_key: str
    """``auth.encrypt.secret_key``; empty: a random key kept in ``<data dir>/auth-secret``."""
    s3: S3GatewaySettings

    @property
    def listen_address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def default_data_dir() -> str:
    from platformdirs import user_data_dir

    return os.path.join(user_data_dir("lakectl", appauthor=False), "server")


def load_settings(
    config_file: str | None = None,
    data_dir: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Settings from the file (``config_file``, else ``$LAKECTL_SERVER_CONFIG``, else none), the
    environment and the arguments; raise ``InvalidArgument`` naming the bad key."""
    env = os.environ if environ is None else environ
    config_file = config_file or env.get(CONFIG_ENV) or None
    values: dict[str, Any] = dict(KEYS)
    values.update(dict.fromkeys(LIST_KEYS, ()))
    if config_file:
        values.update(_flatten(_read_yaml(config_file), config_file))
    for key in KEYS:
        if env_name(key) in env:
            text = env[env_name(key)]
            values[key] = tuple(p for p in text.split(os.pathsep) if p) if key in LIST_KEYS else text
    if data_dir:
        values["data_dir"] = data_dir
    return _build(values)


def _read_yaml(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise InvalidArgument(f"cannot read configuration {path}: {e.strerror or e}", path=path) from e
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise InvalidArgument(f"invalid configuration {path}: {e}", path=path) from e


def _flatten(data: Any, source: str) -> dict[str, Any]:
    """``{"database": {"type": "sqlite"}}`` → ``{"database.type": "sqlite"}``; unknown keys and
    values of the wrong shape are errors (a typo must not silently fall back to a default).
    List keys map to tuples of strings, every other key to a string."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InvalidArgument(f"invalid configuration {source}: expected a mapping at the top level")
    out: dict[str, Any] = {}
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        prefix, node = stack.pop()
        for name, value in node.items():
            key = f"{prefix}{name}"
            if isinstance(value, dict):
                if not any(k.startswith(key + ".") for k in KEYS):
                    raise InvalidArgument(f"invalid configuration {source}: unknown key {key!r}", key=key)
                stack.append((key + ".", value))
                continue
            if key not in KEYS:
                if any(k.startswith(key + ".") for k in KEYS):
                    raise InvalidArgument(f"invalid configuration {source}: {key} must be a mapping", key=key)
                raise InvalidArgument(f"invalid configuration {source}: unknown key {key!r}", key=key)
            out[key] = _yaml_value(key, value, source)
    return out


def _yaml_value(key: str, value: Any, source: str) -> Any:
    """A YAML value in the form ``_build`` reads: a tuple of strings for list keys, else text."""
    if key in LIST_KEYS:
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise InvalidArgument(
                f"invalid configuration {source}: {key} must be a list of paths, not {value!r}", key=key
            )
        return tuple(value)
    if key in BOOL_KEYS and isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        kind = "true or false" if key in BOOL_KEYS else "a whole number" if key in INT_KEYS else "a string"
        raise InvalidArgument(f"invalid configuration {source}: {key} must be {kind}, not {value!r}", key=key)
    return str(value)


def _choice(key: str, value: str, kind: type[enum.Enum]) -> Any:
    try:
        return kind(value.lower())
    except ValueError:
        choices = ", ".join(str(k.value) for k in kind)
        raise InvalidArgument(f"{key}: {value!r} is not supported (choose from {choices})", key=key) from None


def _build(values: dict[str, Any]) -> Settings:
    data_dir = os.path.abspath(os.path.expanduser(values["data_dir"] or default_data_dir()))
    level = LOG_LEVELS.get(values["logging.level"].lower())
    if level is None:
        raise InvalidArgument(
            f"logging.level: unknown level {values['logging.level']!r} (choose from {', '.join(LOG_LEVELS)})",
            key="logging.level",
        )
    logging = LoggingSettings(
        _choice("logging.format", values["logging.format"], LogFormat), level, values["logging.output"] or "-"
    )
    host, port = parse_address(values["listen_address"])
    return Settings(
        data_dir=data_dir,
        host=host,
        port=port,
        logging=logging,
        database=_database(values, data_dir),
        blockstore=_blockstore(values, data_dir),
        secret_key=values["auth.encrypt.secret_key"],
        s3=_s3_gateway(values, host, port),
    )


def _s3_gateway(values: dict[str, Any], api_host: str, api_port: int) -> S3GatewaySettings:
    key = "gateways.s3.listen_address"
    if values[key]:
        host, port = parse_address(values[key], key)
    else:
        host, port = api_host, (api_port + 1 if api_port else 0)
        if port > 65535:
            raise InvalidArgument(f"{key}: set it: listen_address's port + 1 is no port", key=key)
    if port and port == api_port:
        raise InvalidArgument(f"{key}: the S3 gateway needs a port of its own, not {port}", key=key)
    region = values["gateways.s3.region"].strip()
    if not re.fullmatch(r"[a-z0-9-]{1,64}", region):
        raise InvalidArgument(f"gateways.s3.region: {region!r} is no region name", key="gateways.s3.region")
    domain = values["gateways.s3.domain_name"].strip().strip(".")
    if domain and not re.fullmatch(r"[A-Za-z0-9.-]{1,253}", domain):
        raise InvalidArgument(
            f"gateways.s3.domain_name: {domain!r} is no domain name", key="gateways.s3.domain_name"
        )
    return S3GatewaySettings(host, port, domain, region)


def _blockstore(values: dict[str, Any], data_dir: str) -> BlockstoreSettings:
    """The settings of the chosen type; the other type's keys are not read."""
    kind: BlockstoreType = _choice("blockstore.type", values["blockstore.type"], BlockstoreType)
    if kind is BlockstoreType.S3:
        return BlockstoreSettings(kind, s3=_s3(values))
    return BlockstoreSettings(kind, local=_local(values, data_dir))


def _local(values: dict[str, Any], data_dir: str) -> LocalBlockstore:
    path: str = values["blockstore.local.path"]
    volumes: tuple[str, ...] = values["blockstore.local.volumes"]
    text = values["blockstore.local.replicas"].strip()
    if re.fullmatch(r"[0-9]+", text) is None or int(text) < 1:
        raise InvalidArgument(
            f"blockstore.local.replicas: {text!r} is not a whole number of at least 1",
            key="blockstore.local.replicas",
        )
    replicas = int(text)
    if path and volumes:
        raise InvalidArgument(
            "blockstore.local.path and blockstore.local.volumes exclude each other: set one",
            key="blockstore.local.volumes",
        )
    paths = tuple(
        os.path.abspath(os.path.expanduser(p)) for p in volumes or [path or os.path.join(data_dir, "blocks")]
    )
    if len(set(paths)) != len(paths):
        duplicate = next(p for p in paths if paths.count(p) > 1)
        raise InvalidArgument(
            f"blockstore.local.volumes: {duplicate} is listed twice", key="blockstore.local.volumes"
        )
    if replicas > len(paths):
        where = f"the {len(paths)} volumes" if volumes else "one path (list blockstore.local.volumes)"
        raise InvalidArgument(
            f"blockstore.local.replicas: {replicas} copies need {replicas} volumes, not {where}",
            key="blockstore.local.replicas",
        )
    return LocalBlockstore(paths, replicas)


def _s3(values: dict[str, Any]) -> S3Blockstore:
    bucket: str = values["blockstore.s3.bucket"]
    if not bucket:
        raise InvalidArgument(
            "blockstore.s3.bucket is required with blockstore.type s3", key="blockstore.s3.bucket"
        )
    if _BUCKET.fullmatch(bucket) is None:
        raise InvalidArgument(
            f"blockstore.s3.bucket: {bucket!r} is no bucket name", key="blockstore.s3.bucket"
        )
    prefix: str = values["blockstore.s3.prefix"]
    if any(ord(c) < 0x20 or c == "\x7f" for c in prefix):
        raise InvalidArgument(
            f"blockstore.s3.prefix: {prefix!r} holds control characters", key="blockstore.s3.prefix"
        )
    endpoint: str = values["blockstore.s3.endpoint"]
    if endpoint:
        try:
            parts = urlsplit(endpoint)
            parts.port  # noqa: B018 -- raises ValueError on a bad port
        except ValueError:
            parts = None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidArgument(
                f"blockstore.s3.endpoint: {endpoint!r} is not an http(s)://host[:port] URL",
                key="blockstore.s3.endpoint",
            )
    key_id: str = values["blockstore.s3.access_key_id"]
    secret: str = values["blockstore.s3.secret_access_key"]
    if bool(key_id) != bool(secret):
        missing = "blockstore.s3.secret_access_key" if key_id else "blockstore.s3.access_key_id"
        raise InvalidArgument(
            f"{missing} is required with the other S3 credential (or set neither: boto3's default "
            "credential chain)",
            key=missing,
        )
    style = values["blockstore.s3.force_path_style"].strip().lower()
    if style not in BOOLEANS:
        raise InvalidArgument(
            f"blockstore.s3.force_path_style: {style!r} is not true or false",
            key="blockstore.s3.force_path_style",
        )
    if not BOOLEANS[style]:
        # The adapter addresses buckets path-style only: it works with IP endpoints and every
        # S3-compatible server, and AWS still accepts it.
        raise InvalidArgument(
            "blockstore.s3.force_path_style: false is not supported: the S3 adapter always "
            "addresses buckets path-style",
            key="blockstore.s3.force_path_style",
        )
    return S3Blockstore(
        bucket=bucket,
        prefix=prefix,
        endpoint=endpoint or None,
        region=values["blockstore.s3.region"] or None,
        access_key_id=key_id or None,
        secret_access_key=secret or None,
        force_path_style=True,
    )


def _database(values: dict[str, str], data_dir: str) -> DatabaseSettings:
    kind: DatabaseType = _choice("database.type", values["database.type"], DatabaseType)
    given = values["database.connection_string"]
    if kind is DatabaseType.MEMORY:
        return DatabaseSettings(kind, "memory://")
    if kind is DatabaseType.POSTGRES:
        if not given:
            raise InvalidArgument(
                "database.connection_string is required with database.type postgres "
                "(e.g. postgresql://user:password@host:5432/lakectl)",
                key="database.connection_string",
            )
        return DatabaseSettings(kind, given)
    if not given:
        return DatabaseSettings(kind, "sqlite:///" + os.path.join(data_dir, "lake.db"))
    if given.startswith("sqlite:///"):
        return DatabaseSettings(kind, given)
    if "://" in given:
        raise InvalidArgument(
            f"database.connection_string: {given!r} is no SQLite URL (sqlite:///path or a file path)",
            key="database.connection_string",
        )
    return DatabaseSettings(kind, "sqlite:///" + os.path.abspath(os.path.expanduser(given)))


def parse_address(text: str, key: str = "listen_address") -> tuple[str, int]:
    """``host:port`` (``[::1]:8000`` for IPv6) into its parts."""
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise InvalidArgument(f"{key}: {text!r} is not host:port", key=key)
    return host, int(port)
