"""The server's settings, each declared once: its name, the other names lakeFS gives it, its
kind and its default (:class:`Keys`), and the environment variables that set it. Reading them
(a YAML file, the environment, defaults) is :mod:`server.config`'s business."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from lakectl.core import hostpaths
from lakectl.core.workflow import webhooks

ENV_PREFIX = "LAKECTL_SERVER_"
LAKEFS_ENV_PREFIX = "LAKEFS_"
CONFIG_ENV = ENV_PREFIX + "CONFIG"
"""Environment variable naming the YAML file when ``--config`` is not given."""


class LogFormat(enum.Enum):
    TEXT = "text"
    JSON = "json"


class BlockstoreType(enum.Enum):
    LOCAL = "local"
    S3 = "s3"


class Kind(enum.Enum):
    TEXT = "a string"
    LIST = "a list of paths"
    BOOL = "true or false"
    INT = "a whole number"
    WORDS = "a list of names"


@dataclass(frozen=True, slots=True)
class Key:
    """One setting: its name, the other names it goes by, its kind and its default."""

    name: str
    default: str = ""
    """"" for none, or one derived from the data directory."""
    kind: Kind = Kind.TEXT
    aliases: tuple[str, ...] = ()
    """lakeFS's names for the same setting, where they differ from ``name``."""

    def __str__(self) -> str:
        """The key as messages cite it: ``f"{Keys.BLOCKSTORE_S3_BUCKET} is required"``."""
        return self.name

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)

    @property
    def env_names(self) -> tuple[tuple[str, str], ...]:
        """``(variable, dotted name)`` pairs in precedence order: ours, then lakeFS's."""
        return tuple((p + env_form(n), n) for p in (ENV_PREFIX, LAKEFS_ENV_PREFIX) for n in self.names)


class Keys:
    """Every setting, once. Code names a setting by its attribute here, the key upper-cased with
    dots as ``_`` (its environment variable without the prefix; a test holds every attribute to
    it), so that a misspelt key is an AttributeError, not a setting silently never read. Two keys
    are named by the core modules whose messages cite them."""

    DATA_DIR = Key("data_dir")
    LISTEN_ADDRESS = Key("listen_address", "127.0.0.1:8000", aliases=("api.listen_address",))
    LOGGING_FORMAT = Key("logging.format", LogFormat.TEXT.value)
    LOGGING_LEVEL = Key("logging.level", "info")
    LOGGING_OUTPUT = Key("logging.output", "-")
    DATABASE_TYPE = Key("database.type", aliases=("metadata.db.type",))
    DATABASE_CONNECTION_STRING = Key("database.connection_string", aliases=("metadata.db.connection_string",))
    DATABASE_LOCAL_PATH = Key("database.local.path", aliases=("metadata.db.path",))
    DATABASE_POSTGRES_CONNECTION_STRING = Key("database.postgres.connection_string")
    BLOCKSTORE_TYPE = Key("blockstore.type", BlockstoreType.LOCAL.value)
    BLOCKSTORE_LOCAL_PATH = Key("blockstore.local.path")
    BLOCKSTORE_LOCAL_VOLUMES = Key("blockstore.local.volumes", kind=Kind.LIST)
    BLOCKSTORE_LOCAL_REPLICAS = Key("blockstore.local.replicas", "1", Kind.INT)
    BLOCKSTORE_LOCAL_ALLOWED_EXTERNAL_PREFIXES = Key(hostpaths.SETTING, kind=Kind.LIST)
    BLOCKSTORE_S3_BUCKET = Key("blockstore.s3.bucket")
    BLOCKSTORE_S3_PREFIX = Key("blockstore.s3.prefix")
    BLOCKSTORE_S3_ENDPOINT = Key("blockstore.s3.endpoint")
    BLOCKSTORE_S3_REGION = Key("blockstore.s3.region")
    BLOCKSTORE_S3_ACCESS_KEY_ID = Key(
        "blockstore.s3.access_key_id", aliases=("blockstore.s3.credentials.access_key_id",)
    )
    BLOCKSTORE_S3_SECRET_ACCESS_KEY = Key(
        "blockstore.s3.secret_access_key",
        aliases=(
            "blockstore.s3.credentials.secret_access_key",
            "blockstore.s3.credentials.access_secret_key",
        ),
    )
    BLOCKSTORE_S3_SESSION_TOKEN = Key(
        "blockstore.s3.session_token", aliases=("blockstore.s3.credentials.session_token",)
    )
    BLOCKSTORE_S3_PROFILE = Key("blockstore.s3.profile")
    BLOCKSTORE_S3_CREDENTIALS_FILE = Key("blockstore.s3.credentials_file")
    BLOCKSTORE_S3_FORCE_PATH_STYLE = Key("blockstore.s3.force_path_style", "true", Kind.BOOL)
    AUTH_ENCRYPT_SECRET_KEY = Key("auth.encrypt.secret_key")
    AUTH_EXTERNAL_AWS_AUTH_STS_ENDPOINT = Key("auth.external.aws_auth.sts_endpoint")
    AUTH_EXTERNAL_AWS_AUTH_SERVER_ID = Key("auth.external.aws_auth.server_id")
    GATEWAYS_S3_LISTEN_ADDRESS = Key("gateways.s3.listen_address")
    GATEWAYS_S3_DOMAIN_NAME = Key("gateways.s3.domain_name", "s3.local.lakefs.io")
    GATEWAYS_S3_REGION = Key("gateways.s3.region", "us-east-1")
    INSTALLATION_USER_NAME = Key("installation.user_name")
    INSTALLATION_ACCESS_KEY_ID = Key("installation.access_key_id")
    INSTALLATION_SECRET_ACCESS_KEY = Key("installation.secret_access_key")
    ACTIONS_ENABLED = Key("actions.enabled", "true", Kind.BOOL)
    ACTIONS_COMMAND_ENABLED = Key("actions.command.enabled", "false", Kind.BOOL)
    ACTIONS_WEBHOOK_ALLOWED_HOSTS = Key(webhooks.ALLOWED_HOSTS_KEY, kind=Kind.WORDS)


TABLE: tuple[Key, ...] = tuple(k for k in vars(Keys).values() if isinstance(k, Key))
"""Every setting, in :class:`Keys`' order."""

BY_NAME: dict[str, Key] = {name: key for key in TABLE for name in key.names}
"""Every accepted name (aliases included) to its setting."""


def env_form(name: str) -> str:
    """A dotted name as environment variables spell it: upper case, dots as ``_``."""
    return name.upper().replace(".", "_")


def env_name(key: str) -> str:
    """Our environment variable of the dotted ``key``."""
    return ENV_PREFIX + env_form(key)
