"""Server settings: a YAML file with lakeFS's keys (today's and the 0.1 design's), every key also
settable by environment variable.

Every key is declared once, in :class:`Keys`: its name, the other names lakeFS gives the same
setting (``api.listen_address`` for ``listen_address``), its kind and default; the code reads and
names a setting through its ``Keys`` attribute, never by spelling the key again. Each name has two
environment variables: ``LAKECTL_SERVER_<NAME>`` and lakeFS's ``LAKEFS_<NAME>`` (the dotted name
upper-cased, dots as ``_``); ours win where both are set. Precedence, highest first: explicit
arguments (``--data-dir``), environment variables, the YAML file, defaults. The defaults give an
embedded lake under the data directory: SQLite metadata in ``<data dir>/lake.db`` and blocks in
``<data dir>/blocks``.

Keys lakeFS has for parts lakectl does not have are ignored with a warning or refused
(:mod:`server.lakefs_keys`); any other unknown key is refused, naming it.

Most keys hold one string. ``blockstore.local.volumes`` holds a list of directories (a YAML list;
in the environment, directories separated by ``os.pathsep`` as in ``PATH``),
``actions.webhook.allowed_hosts`` a list of names (a YAML list; in the environment, separated by
commas or spaces), ``blockstore.local.replicas`` a whole number and
``blockstore.s3.force_path_style`` a boolean (YAML ``true``/``false``; in the environment also
``1``/``0``, ``yes``/``no``, ``on``/``off``).
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from lakectl.core.workflow.webhooks import HostPolicy
from lakectl.errors import InvalidArgument
from server.configkeys import (
    BY_NAME,
    CONFIG_ENV,
    LAKEFS_ENV_PREFIX,
    TABLE,
    BlockstoreType,
    Key,
    Keys,
    Kind,
    LogFormat,
    env_form,
)
from server.lakefs_keys import FOREIGN, Fate, Foreign, foreign, has_deeper

_LISTS = (Kind.LIST, Kind.WORDS)


class DatabaseType(enum.Enum):
    SQLITE = "sqlite"
    POSTGRES = "postgres"
    MEMORY = "memory"


DATABASE_TYPES = {
    "sqlite": DatabaseType.SQLITE,
    "local": DatabaseType.SQLITE,  # lakeFS's embedded store: here, the SQLite lake
    "postgres": DatabaseType.POSTGRES,
    "memory": DatabaseType.MEMORY,
}
"""``database.type`` values, lakeFS's ``local`` among them."""


LOG_LEVELS = {
    "trace": "DEBUG",
    "debug": "DEBUG",
    "info": "INFO",
    "warn": "WARNING",
    "warning": "WARNING",
    "error": "ERROR",
    "fatal": "CRITICAL",
    "panic": "CRITICAL",
    "none": "CRITICAL",
}
"""lakeFS level names (case-insensitive) to Python logging levels."""

BOOLEANS = {
    **dict.fromkeys(("true", "1", "yes", "on"), True),
    **dict.fromkeys(("false", "0", "no", "off"), False),
}

# The bucket names the S3 adapter accepts (S3-compatible servers are laxer than AWS): checked
# here too, so that a bad name is refused naming its key before anything connects.
_BUCKET = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{1,254}")


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
    """What :func:`lakectl.core.kv.stores.open_store` opens."""


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
    session_token: str | None = field(default=None, repr=False)
    """A temporary credential's token, with the access key pair."""
    profile: str | None = None
    """A named profile of the AWS credentials file (instead of the access key pair)."""
    credentials_file: str | None = None
    """The AWS credentials file to read ``profile`` from (default: boto3's, ``~/.aws/credentials``)."""


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
class Installation:
    """lakeFS's ``installation.*``: the first admin user and its key, created on first run."""

    user_name: str
    access_key_id: str
    secret_access_key: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class ActionsSettings:
    """lakeFS's ``actions.*``: whether action hooks run at all, and command hooks (programs run
    on the server, so off unless the operator turns them on)."""

    enabled: bool = True
    command_enabled: bool = False
    webhook_hosts: HostPolicy = field(default_factory=HostPolicy)
    """Where webhooks may go: public addresses, and ``actions.webhook.allowed_hosts``."""


@dataclass(frozen=True, slots=True)
class AwsIamSettings:
    """lakeFS's AWS IAM login (``auth.external.aws_auth.*``): the STS asked who signed a login's
    ``GetCallerIdentity``, and the ``X-LakeFS-Server-ID`` clients must sign."""

    sts_endpoint: str | None = None
    """``http(s)://host[:port]`` of the only STS asked; None: AWS's STS hosts."""
    server_id: str | None = None
    """None: the header is optional, and sent as the host name the login addressed."""


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
    installation: Installation | None = None
    """The admin user to create when the lake is not set up yet (lakeFS's ``installation.*``)."""
    warnings: tuple[str, ...] = ()
    """One line per lakeFS key accepted and ignored (:mod:`server.lakefs_keys`), for the operator."""
    actions: ActionsSettings = field(default_factory=ActionsSettings)
    aws_iam: AwsIamSettings = field(default_factory=AwsIamSettings)
    allowed_external_prefixes: tuple[str, ...] = ()
    """lakeFS's ``blockstore.local.allowed_external_prefixes``: absolute directories of this host
    under which zero-copy import may read (none by default), whatever the blockstore type."""
    config_file: str = ""
    """The YAML file the settings were read from (absolute; empty: none), never importable."""

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
    values = _Values()
    ignored: dict[Foreign, list[str]] = {}
    if config_file:
        given, foreign_keys = _flatten(_read_yaml(config_file), config_file)
        for name, value in given:
            values.put(BY_NAME[name], value, name, config_file)
        _sort_foreign(
            [(k, k, value) for k, value in foreign_keys], ignored, f"invalid configuration {config_file}: "
        )
    for key in TABLE:
        for variable, name in key.env_names:
            if variable in env:
                text = env[variable]
                values.put(key, _env_value(key, text), name, None)
                break
    _sort_foreign(_foreign_env(env), ignored, "")
    if data_dir:
        values.put(Keys.DATA_DIR, data_dir, Keys.DATA_DIR.name, None)
    warnings = tuple(f"ignored {', '.join(keys)}: {entry.reason}" for entry, keys in ignored.items())
    settings = _build(values, warnings)
    if config_file:
        settings = replace(settings, config_file=os.path.abspath(os.path.expanduser(config_file)))
    return settings


class _Values:
    """Each setting's value and the name it was given by, which error messages use."""

    def __init__(self) -> None:
        self._value: dict[str, Any] = {k.name: () if k.kind in _LISTS else k.default for k in TABLE}
        self._name: dict[str, str] = {k.name: k.name for k in TABLE}
        self._from_file: dict[str, tuple[str, Any]] = {}

    def put(self, key: Key, value: Any, name: str, source: str | None) -> None:
        if source is not None:  # the file: two names of one setting must not disagree
            earlier = self._from_file.get(key.name)
            if earlier is not None and earlier[0] != name and earlier[1] != value:
                raise InvalidArgument(
                    f"invalid configuration {source}: {earlier[0]} and {name} are the same setting: set one",
                    key=name,
                )
            self._from_file[key.name] = (name, value)
        self._value[key.name] = value
        self._name[key.name] = name

    def __getitem__(self, key: Key) -> Any:
        return self._value[key.name]

    def name(self, key: Key) -> str:
        """The name the setting was given by (an alias, perhaps), for messages."""
        return self._name[key.name]

    def bad(self, key: Key, message: str) -> InvalidArgument:
        return InvalidArgument(f"{self.name(key)}: {message}", key=self.name(key))


def _env_value(key: Key, text: str) -> Any:
    if key.kind is Kind.WORDS:  # host names and IPv6 addresses hold ':', so not os.pathsep here
        return tuple(w for w in re.split(r"[,\s]+", text) if w)
    return tuple(p for p in text.split(os.pathsep) if p) if key.kind is Kind.LIST else text


def _sort_foreign(found: list[tuple[str, str, Any]], ignored: dict[Foreign, list[str]], where: str) -> None:
    """Refuse the refused keys among ``found`` (``(shown name, dotted key, value)``); add the
    others to ``ignored`` by their entry."""
    for shown, key, value in found:
        entry = foreign(key)
        assert entry is not None
        text = ("true" if value else "false") if isinstance(value, bool) else str(value).lower()
        if entry.fate is Fate.REFUSE and text != entry.harmless:
            raise InvalidArgument(f"{where}{shown}: {entry.reason}", key=shown)
        ignored.setdefault(entry, []).append(shown)


def _foreign_env(env: Mapping[str, str]) -> list[tuple[str, str, Any]]:
    """lakeFS's variables of the keys in :mod:`server.lakefs_keys`: ``(variable, key, value)``."""
    known = {variable for key in TABLE for variable, _ in key.env_names}
    found = []
    for variable in sorted(env):
        if variable.startswith(LAKEFS_ENV_PREFIX) and variable not in known:
            key = _env_key(variable[len(LAKEFS_ENV_PREFIX) :])
            if key is not None:
                found.append((variable, key, env[variable]))
    return found


def _env_key(rest: str) -> str | None:
    """The dotted key of a lakeFS variable (``STATS_FLUSH_INTERVAL`` → ``stats.flush_interval``)
    under the longest entry whose variable prefixes it: names hold ``_``, so only the entry's
    part of the name is certain."""
    best = None
    for entry in FOREIGN:
        flat = env_form(entry.prefix)
        longer = best is None or len(flat) > len(env_form(best))
        if (rest == flat or rest.startswith(flat + "_")) and longer:
            best = entry.prefix
    if best is None:
        return None
    return best if rest == env_form(best) else best + "." + rest[len(env_form(best)) + 1 :].lower()


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


def _is_section(key: str) -> bool:
    return any(name.startswith(key + ".") for name in BY_NAME)


def _flatten(data: Any, source: str) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    """``{"database": {"type": "sqlite"}}`` → ``[("database.type", "sqlite")]``, and the leaves
    under lakeFS keys lakectl has no part for, apart. Unknown keys and values of the wrong shape
    are errors (a typo must not silently fall back to a default). List keys map to tuples of
    strings, every other key to a string."""
    if data is None:
        return [], []
    if not isinstance(data, dict):
        raise InvalidArgument(f"invalid configuration {source}: expected a mapping at the top level")
    out: list[tuple[str, Any]] = []
    others: list[tuple[str, Any]] = []
    _walk("", data, source, out, others)
    return out, others


def _walk(prefix: str, node: dict[Any, Any], source: str, out: list[Any], others: list[Any]) -> None:
    """Sort the keys of one mapping, in the file's order, into ``out`` and ``others``."""
    for name, value in node.items():
        key = f"{prefix}{name}"
        if key in BY_NAME:
            out.append((key, _yaml_value(BY_NAME[key], value, source)))
        elif isinstance(value, dict) and (_is_section(key) or has_deeper(key)):
            _walk(key + ".", value, source, out, others)
        elif foreign(key) is not None:
            others.extend(_leaves(key, value))
        elif _is_section(key):
            raise InvalidArgument(f"invalid configuration {source}: {key} must be a mapping", key=key)
        else:
            raise InvalidArgument(f"invalid configuration {source}: unknown key {key!r}", key=key)


def _leaves(key: str, value: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict) and value:
        for name, inner in value.items():
            yield from _leaves(f"{key}.{name}", inner)
    else:
        yield key, value


def _yaml_value(key: Key, value: Any, source: str) -> Any:
    """A YAML value in the form ``_build`` reads: a tuple of strings for list keys, else text."""
    if key.kind in _LISTS:
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise InvalidArgument(
                f"invalid configuration {source}: {key.name} must be {key.kind.value}, not {value!r}",
                key=key.name,
            )
        return tuple(value)
    if key.kind is Kind.BOOL and isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InvalidArgument(
            f"invalid configuration {source}: {key.name} must be {key.kind.value}, not {value!r}",
            key=key.name,
        )
    return str(value)


def _choice(v: _Values, key: Key, kind: type[enum.Enum]) -> Any:
    try:
        return kind(v[key].lower())
    except ValueError:
        choices = ", ".join(str(k.value) for k in kind)
        raise v.bad(key, f"{v[key]!r} is not supported (choose from {choices})") from None


def _build(v: _Values, warnings: tuple[str, ...]) -> Settings:
    data_dir = os.path.abspath(os.path.expanduser(v[Keys.DATA_DIR] or default_data_dir()))
    level = LOG_LEVELS.get(v[Keys.LOGGING_LEVEL].lower())
    if level is None:
        raise v.bad(
            Keys.LOGGING_LEVEL,
            f"unknown level {v[Keys.LOGGING_LEVEL]!r} (choose from {', '.join(LOG_LEVELS)})",
        )
    logging = LoggingSettings(
        _choice(v, Keys.LOGGING_FORMAT, LogFormat), level, v[Keys.LOGGING_OUTPUT] or "-"
    )
    host, port = parse_address(v[Keys.LISTEN_ADDRESS], v.name(Keys.LISTEN_ADDRESS))
    return Settings(
        data_dir=data_dir,
        host=host,
        port=port,
        logging=logging,
        database=_database(v, data_dir),
        blockstore=_blockstore(v, data_dir),
        secret_key=v[Keys.AUTH_ENCRYPT_SECRET_KEY],
        s3=_s3_gateway(v, host, port),
        installation=_installation(v),
        warnings=warnings,
        actions=ActionsSettings(
            _bool(v, Keys.ACTIONS_ENABLED), _bool(v, Keys.ACTIONS_COMMAND_ENABLED), _webhook_hosts(v)
        ),
        aws_iam=_aws_iam(v),
        allowed_external_prefixes=_external_prefixes(v),
    )


def _external_prefixes(v: _Values) -> tuple[str, ...]:
    """Absolute directories (``local://`` as lakeFS writes them, or a plain path)."""
    key = Keys.BLOCKSTORE_LOCAL_ALLOWED_EXTERNAL_PREFIXES
    prefixes = []
    for given in v[key]:
        path = os.path.expanduser(given.removeprefix("local://"))
        if not os.path.isabs(path) or "\x00" in path:
            raise v.bad(key, f"{given!r} is not an absolute directory")
        prefixes.append(os.path.normpath(path))
    return tuple(prefixes)


def _aws_iam(v: _Values) -> AwsIamSettings:
    key = Keys.AUTH_EXTERNAL_AWS_AUTH_STS_ENDPOINT
    endpoint: str = v[key].strip().rstrip("/")
    if endpoint:
        try:
            parts = urlsplit(endpoint)
            parts.port  # noqa: B018 -- raises ValueError on a bad port
        except ValueError:
            parts = None
        if (
            parts is None
            or parts.scheme not in ("http", "https")
            or not parts.hostname
            or parts.path
            or parts.query
            or parts.username
        ):
            raise v.bad(key, f"{endpoint!r} is not an http(s)://host[:port] URL")
    server_id: str = v[Keys.AUTH_EXTERNAL_AWS_AUTH_SERVER_ID].strip()
    if server_id and not re.fullmatch(r"[!-~]{1,253}", server_id):
        raise v.bad(Keys.AUTH_EXTERNAL_AWS_AUTH_SERVER_ID, f"{server_id!r} is not 1-253 printable characters")
    return AwsIamSettings(endpoint or None, server_id or None)


def _webhook_hosts(v: _Values) -> HostPolicy:
    try:
        return HostPolicy.parse(v[Keys.ACTIONS_WEBHOOK_ALLOWED_HOSTS])
    except InvalidArgument as e:
        raise v.bad(Keys.ACTIONS_WEBHOOK_ALLOWED_HOSTS, e.message) from None


def _bool(v: _Values, key: Key) -> bool:
    text = v[key].strip().lower()
    if text not in BOOLEANS:
        raise v.bad(key, f"{text!r} is not true or false")
    return BOOLEANS[text]


def _installation(v: _Values) -> Installation | None:
    """All three keys or none, as lakeFS requires."""
    names = (
        Keys.INSTALLATION_USER_NAME,
        Keys.INSTALLATION_ACCESS_KEY_ID,
        Keys.INSTALLATION_SECRET_ACCESS_KEY,
    )
    given = [v[n] for n in names]
    if not any(given):
        return None
    if not all(given):
        missing = names[given.index("")].name
        others = ", ".join(n.name for n, g in zip(names, given, strict=True) if g)
        raise InvalidArgument(f"{missing} is required with {others}", key=missing)
    return Installation(*given)


def _s3_gateway(v: _Values, api_host: str, api_port: int) -> S3GatewaySettings:
    key = Keys.GATEWAYS_S3_LISTEN_ADDRESS
    if v[key]:
        host, port = parse_address(v[key], key.name)
    else:
        host, port = api_host, (api_port + 1 if api_port else 0)
        if port > 65535:
            raise v.bad(key, f"set it: {v.name(Keys.LISTEN_ADDRESS)}'s port + 1 is no port")
    if port and port == api_port:
        raise v.bad(key, f"the S3 gateway needs a port of its own, not {port}")
    region = v[Keys.GATEWAYS_S3_REGION].strip()
    if not re.fullmatch(r"[a-z0-9-]{1,64}", region):
        raise v.bad(Keys.GATEWAYS_S3_REGION, f"{region!r} is no region name")
    domain = v[Keys.GATEWAYS_S3_DOMAIN_NAME].strip().strip(".")
    if domain and not re.fullmatch(r"[A-Za-z0-9.-]{1,253}", domain):
        raise v.bad(Keys.GATEWAYS_S3_DOMAIN_NAME, f"{domain!r} is no domain name")
    return S3GatewaySettings(host, port, domain, region)


def _blockstore(v: _Values, data_dir: str) -> BlockstoreSettings:
    """The settings of the chosen type; the other type's keys are not read."""
    kind: BlockstoreType = _choice(v, Keys.BLOCKSTORE_TYPE, BlockstoreType)
    if kind is BlockstoreType.S3:
        return BlockstoreSettings(kind, s3=_s3(v))
    return BlockstoreSettings(kind, local=_local(v, data_dir))


def _local(v: _Values, data_dir: str) -> LocalBlockstore:
    path: str = v[Keys.BLOCKSTORE_LOCAL_PATH]
    volumes: tuple[str, ...] = v[Keys.BLOCKSTORE_LOCAL_VOLUMES]
    text = v[Keys.BLOCKSTORE_LOCAL_REPLICAS].strip()
    if re.fullmatch(r"[0-9]+", text) is None or int(text) < 1:
        raise v.bad(Keys.BLOCKSTORE_LOCAL_REPLICAS, f"{text!r} is not a whole number of at least 1")
    replicas = int(text)
    if path and volumes:
        raise InvalidArgument(
            f"{Keys.BLOCKSTORE_LOCAL_PATH} and {Keys.BLOCKSTORE_LOCAL_VOLUMES} exclude each other: set one",
            key=Keys.BLOCKSTORE_LOCAL_VOLUMES.name,
        )
    paths = tuple(
        os.path.abspath(os.path.expanduser(p)) for p in volumes or [path or os.path.join(data_dir, "blocks")]
    )
    if len(set(paths)) != len(paths):
        duplicate = next(p for p in paths if paths.count(p) > 1)
        raise v.bad(Keys.BLOCKSTORE_LOCAL_VOLUMES, f"{duplicate} is listed twice")
    if replicas > len(paths):
        where = f"the {len(paths)} volumes" if volumes else f"one path (list {Keys.BLOCKSTORE_LOCAL_VOLUMES})"
        raise v.bad(Keys.BLOCKSTORE_LOCAL_REPLICAS, f"{replicas} copies need {replicas} volumes, not {where}")
    return LocalBlockstore(paths, replicas)


def _s3(v: _Values) -> S3Blockstore:
    bucket: str = v[Keys.BLOCKSTORE_S3_BUCKET]
    if not bucket:
        raise InvalidArgument(
            f"{Keys.BLOCKSTORE_S3_BUCKET} is required with {Keys.BLOCKSTORE_TYPE} s3",
            key=Keys.BLOCKSTORE_S3_BUCKET.name,
        )
    if _BUCKET.fullmatch(bucket) is None:
        raise v.bad(Keys.BLOCKSTORE_S3_BUCKET, f"{bucket!r} is no bucket name")
    prefix: str = v[Keys.BLOCKSTORE_S3_PREFIX]
    if any(ord(c) < 0x20 or c == "\x7f" for c in prefix):
        raise v.bad(Keys.BLOCKSTORE_S3_PREFIX, f"{prefix!r} holds control characters")
    endpoint: str = v[Keys.BLOCKSTORE_S3_ENDPOINT]
    if endpoint:
        try:
            parts = urlsplit(endpoint)
            parts.port  # noqa: B018 -- raises ValueError on a bad port
        except ValueError:
            parts = None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise v.bad(Keys.BLOCKSTORE_S3_ENDPOINT, f"{endpoint!r} is not an http(s)://host[:port] URL")
    key_id: str = v[Keys.BLOCKSTORE_S3_ACCESS_KEY_ID]
    secret: str = v[Keys.BLOCKSTORE_S3_SECRET_ACCESS_KEY]
    token: str = v[Keys.BLOCKSTORE_S3_SESSION_TOKEN]
    if bool(key_id) != bool(secret):
        missing = Keys.BLOCKSTORE_S3_SECRET_ACCESS_KEY if key_id else Keys.BLOCKSTORE_S3_ACCESS_KEY_ID
        raise InvalidArgument(
            f"{v.name(missing)} is required with the other S3 credential (or set neither: boto3's default "
            "credential chain)",
            key=v.name(missing),
        )
    if token and not key_id:
        raise v.bad(Keys.BLOCKSTORE_S3_SESSION_TOKEN, "needs the access key id and secret it was issued with")
    profile: str = v[Keys.BLOCKSTORE_S3_PROFILE]
    credentials_file: str = v[Keys.BLOCKSTORE_S3_CREDENTIALS_FILE]
    if key_id and (profile or credentials_file):
        other = Keys.BLOCKSTORE_S3_PROFILE if profile else Keys.BLOCKSTORE_S3_CREDENTIALS_FILE
        raise v.bad(other, f"set either it or {v.name(Keys.BLOCKSTORE_S3_ACCESS_KEY_ID)}, not both")
    if credentials_file:
        credentials_file = os.path.abspath(os.path.expanduser(credentials_file))
        if not os.path.isfile(credentials_file):
            raise v.bad(Keys.BLOCKSTORE_S3_CREDENTIALS_FILE, f"{credentials_file} is no file")
    style = v[Keys.BLOCKSTORE_S3_FORCE_PATH_STYLE].strip().lower()
    if style not in BOOLEANS:
        raise v.bad(Keys.BLOCKSTORE_S3_FORCE_PATH_STYLE, f"{style!r} is not true or false")
    if not BOOLEANS[style]:
        # The adapter addresses buckets path-style only: it works with IP endpoints and every
        # S3-compatible server, and AWS still accepts it.
        raise v.bad(
            Keys.BLOCKSTORE_S3_FORCE_PATH_STYLE,
            "false is not supported: the S3 adapter always addresses buckets path-style",
        )
    return S3Blockstore(
        bucket=bucket,
        prefix=prefix,
        endpoint=endpoint or None,
        region=v[Keys.BLOCKSTORE_S3_REGION] or None,
        access_key_id=key_id or None,
        secret_access_key=secret or None,
        force_path_style=True,
        session_token=token or None,
        profile=profile or None,
        credentials_file=credentials_file or None,
    )


def _database(v: _Values, data_dir: str) -> DatabaseSettings:
    """The database of the chosen type; the other types' keys are not read. With no type, a
    PostgreSQL connection string means PostgreSQL (lakeFS before ``database.type``), else SQLite."""
    given: str = v[Keys.DATABASE_CONNECTION_STRING]
    postgres: str = v[Keys.DATABASE_POSTGRES_CONNECTION_STRING]
    text = v[Keys.DATABASE_TYPE].strip().lower()
    if text == "badger":  # the lakeFS 0.1 design's embedded store
        path = (
            # named as the type was: by the 0.1 design's name, or by today's
            Keys.DATABASE_LOCAL_PATH.aliases[0]
            if v.name(Keys.DATABASE_TYPE) in Keys.DATABASE_TYPE.aliases
            else Keys.DATABASE_LOCAL_PATH.name
        )
        raise v.bad(
            Keys.DATABASE_TYPE,
            f"badger is not supported: use local (the embedded SQLite lake, in the directory {path}) "
            "or postgres",
        )
    if not text:
        kind = DatabaseType.POSTGRES if postgres or _is_postgres(given) else DatabaseType.SQLITE
    elif text in DATABASE_TYPES:
        kind = DATABASE_TYPES[text]
    else:
        raise v.bad(
            Keys.DATABASE_TYPE,
            f"{v[Keys.DATABASE_TYPE]!r} is not supported (choose from local, sqlite, postgres, memory)",
        )
    if kind is DatabaseType.MEMORY:
        return DatabaseSettings(kind, "memory://")
    if kind is DatabaseType.POSTGRES:
        if given and postgres and given != postgres:
            raise InvalidArgument(
                f"{v.name(Keys.DATABASE_CONNECTION_STRING)} and {Keys.DATABASE_POSTGRES_CONNECTION_STRING} "
                "are the same setting: set one",
                key=Keys.DATABASE_POSTGRES_CONNECTION_STRING.name,
            )
        url = postgres or given
        if not url:
            raise InvalidArgument(
                f"{Keys.DATABASE_POSTGRES_CONNECTION_STRING} is required with {Keys.DATABASE_TYPE} "
                "postgres (e.g. postgresql://user:password@host:5432/lakectl)",
                key=Keys.DATABASE_POSTGRES_CONNECTION_STRING.name,
            )
        if not _is_postgres(url):
            name = (
                Keys.DATABASE_POSTGRES_CONNECTION_STRING.name
                if postgres
                else v.name(Keys.DATABASE_CONNECTION_STRING)
            )
            raise InvalidArgument(f"{name}: {url!r} is no postgres:// or postgresql:// URL", key=name)
        return DatabaseSettings(kind, url)
    directory: str = v[Keys.DATABASE_LOCAL_PATH]
    if directory and given:
        raise InvalidArgument(
            f"{v.name(Keys.DATABASE_LOCAL_PATH)} and {v.name(Keys.DATABASE_CONNECTION_STRING)} exclude each "
            "other: set one",
            key=v.name(Keys.DATABASE_LOCAL_PATH),
        )
    if directory:  # lakeFS's embedded store is a directory: the lake's SQLite file goes in it
        path = os.path.join(os.path.abspath(os.path.expanduser(directory)), "lake.db")
        return DatabaseSettings(kind, "sqlite:///" + path)
    if not given:
        return DatabaseSettings(kind, "sqlite:///" + os.path.join(data_dir, "lake.db"))
    if given.startswith("sqlite:///"):
        return DatabaseSettings(kind, given)
    if "://" in given:
        raise v.bad(
            Keys.DATABASE_CONNECTION_STRING, f"{given!r} is no SQLite URL (sqlite:///path or a file path)"
        )
    return DatabaseSettings(kind, "sqlite:///" + os.path.abspath(os.path.expanduser(given)))


def _is_postgres(url: str) -> bool:
    return url.startswith(("postgres://", "postgresql://"))


def parse_address(text: str, key: str = Keys.LISTEN_ADDRESS.name) -> tuple[str, int]:
    """``host:port`` (``[::1]:8000`` for IPv6) into its parts."""
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise InvalidArgument(f"{key}: {text!r} is not host:port", key=key)
    return host, int(port)
