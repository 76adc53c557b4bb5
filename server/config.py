"""Server settings: a YAML file in the lakeFS 0.1 layout, every key overridable by environment variable.

Precedence, highest first: explicit arguments (``--data-dir``), ``LAKECTL_SERVER_<KEY>``
environment variables (the dotted key upper-cased, dots as ``_``: ``database.connection_string``
is ``LAKECTL_SERVER_DATABASE_CONNECTION_STRING``), the YAML file, defaults. The defaults give an
embedded lake under the data directory: SQLite metadata in ``<data dir>/lake.db`` and blocks in
``<data dir>/blocks``.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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
    "auth.encrypt.secret_key": "",
}
"""Every configuration key with its default ("" for the ones derived from the data directory)."""


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
class BlockstoreSettings:
    type: BlockstoreType
    local_path: str


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
    values = dict(KEYS)
    if config_file:
        values.update(_flatten(_read_yaml(config_file), config_file))
    for key in KEYS:
        if env_name(key) in env:
            values[key] = env[env_name(key)]
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


def _flatten(data: Any, source: str) -> dict[str, str]:
    """``{"database": {"type": "sqlite"}}`` → ``{"database.type": "sqlite"}``; unknown keys and
    values that are not scalars are errors (a typo must not silently fall back to a default)."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InvalidArgument(f"invalid configuration {source}: expected a mapping at the top level")
    out: dict[str, str] = {}
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
            if isinstance(value, bool) or not isinstance(value, str | int | float):
                raise InvalidArgument(
                    f"invalid configuration {source}: {key} must be a string, not {value!r}", key=key
                )
            out[key] = str(value)
    return out


def _choice(key: str, value: str, kind: type[enum.Enum]) -> Any:
    try:
        return kind(value.lower())
    except ValueError:
        choices = ", ".join(str(k.value) for k in kind)
        raise InvalidArgument(f"{key}: {value!r} is not supported (choose from {choices})", key=key) from None


def _build(values: dict[str, str]) -> Settings:
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
    blocks = values["blockstore.local.path"] or os.path.join(data_dir, "blocks")
    blockstore = BlockstoreSettings(
        _choice("blockstore.type", values["blockstore.type"], BlockstoreType),
        os.path.abspath(os.path.expanduser(blocks)),
    )
    return Settings(
        data_dir=data_dir,
        host=host,
        port=port,
        logging=logging,
        database=_database(values, data_dir),
        blockstore=blockstore,
        secret_key=values["auth.encrypt.secret_key"],
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


def parse_address(text: str) -> tuple[str, int]:
    """``host:port`` (``[::1]:8000`` for IPv6) into its parts."""
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise InvalidArgument(f"listen_address: {text!r} is not host:port", key="listen_address")
    return host, int(port)
