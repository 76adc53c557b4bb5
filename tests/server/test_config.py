"""Settings: defaults under the data directory, the YAML file, environment overrides, refusals."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from lakectl.errors import InvalidArgument, StorageError
from server.app import create_app, open_lake
from server.config import (
    BlockstoreSettings,
    DatabaseType,
    LocalBlockstore,
    S3Blockstore,
    Settings,
    load_settings,
)
from server.configkeys import BY_NAME, TABLE, BlockstoreType, Key, Keys, LogFormat, env_name
from server.lakefs_keys import FOREIGN
from tests.contract.test_block_adapters import (
    DUMMY_KEYS,
    REGION,
    all_keys,
    new_bucket,
    raw_client,
    s3_endpoint,
)
from tests.server.conftest import Live, commit, serve, unique, upload

__all__ = ["s3_endpoint"]


def test_defaults_give_an_embedded_lake_under_the_data_dir(tmp_path: Path) -> None:
    s = load_settings(None, str(tmp_path), environ={})
    assert s.data_dir == str(tmp_path)
    assert (s.host, s.port, s.listen_address) == ("127.0.0.1", 8000, "127.0.0.1:8000")
    assert s.database.type is DatabaseType.SQLITE
    assert s.database.url == "sqlite:///" + os.path.join(str(tmp_path), "lake.db")
    assert s.blockstore == BlockstoreSettings(
        BlockstoreType.LOCAL, local=LocalBlockstore((os.path.join(str(tmp_path), "blocks"),), 1)
    )
    assert (s.logging.format, s.logging.level, s.logging.output) == (LogFormat.TEXT, "INFO", "-")
    assert s.secret_key == ""


def test_data_dir_from_the_environment(tmp_path: Path) -> None:
    s = load_settings(None, None, environ={"LAKECTL_SERVER_DATA_DIR": str(tmp_path / "d")})
    assert s.data_dir == str(tmp_path / "d")


def test_yaml_keys_in_the_lakefs_layout(tmp_path: Path) -> None:
    conf = tmp_path / "server.yaml"
    conf.write_text(
        "logging: {format: json, level: DEBUG, output: '=' }\n"
        "database: {type: postgres, connection_string: 'postgresql://u:p@127.0.0.1:5432/lake'}\n"
        f"blockstore: {{type: local, local: {{path: {tmp_path / 'blk'}}}}}\n"
        "listen_address: 0.0.0.0:9000\n"
        "auth: {encrypt: {secret_key: s3cr3t}}\n"
    )
    s = load_settings(str(conf), str(tmp_path), environ={})
    assert (s.logging.format, s.logging.level, s.logging.output) == (LogFormat.JSON, "DEBUG", "=")
    assert (s.database.type, s.database.url) == (
        DatabaseType.POSTGRES,
        "postgresql://u:p@127.0.0.1:5432/lake",
    )
    assert s.blockstore.local == LocalBlockstore((str(tmp_path / "blk"),), 1)
    assert (s.host, s.port) == ("0.0.0.0", 9000)
    assert s.secret_key == "s3cr3t"


def test_environment_beats_the_file_and_arguments_beat_both(tmp_path: Path) -> None:
    conf = tmp_path / "server.yaml"
    conf.write_text(f"listen_address: 127.0.0.1:7000\ndata_dir: {tmp_path / 'from-file'}\n")
    env = {
        "LAKECTL_SERVER_CONFIG": str(conf),
        env_name("listen_address"): "127.0.0.1:7001",
        "LAKECTL_SERVER_DATABASE_CONNECTION_STRING": str(tmp_path / "meta.db"),
        "LAKECTL_SERVER_AUTH_ENCRYPT_SECRET_KEY": "k",
    }
    s = load_settings(None, None, environ=env)
    assert s.port == 7001 and s.data_dir == str(tmp_path / "from-file")
    assert s.database.url == "sqlite:///" + str(tmp_path / "meta.db")
    assert s.secret_key == "k"
    assert load_settings(None, str(tmp_path / "arg"), environ=env).data_dir == str(tmp_path / "arg")


def test_every_key_has_its_environment_variable() -> None:
    assert env_name("database.connection_string") == "LAKECTL_SERVER_DATABASE_CONNECTION_STRING"
    assert env_name("blockstore.local.path") == "LAKECTL_SERVER_BLOCKSTORE_LOCAL_PATH"
    assert env_name("auth.encrypt.secret_key") == "LAKECTL_SERVER_AUTH_ENCRYPT_SECRET_KEY"


def test_each_key_is_declared_once_and_named_by_its_environment_variable() -> None:
    """The code reads a setting through its ``Keys`` attribute: the attribute is the variable's
    suffix, so neither can drift from the key, and no name belongs to two settings."""
    declared = {attr: key for attr, key in vars(Keys).items() if isinstance(key, Key)}
    assert tuple(declared.values()) == TABLE
    for attr, key in declared.items():
        assert env_name(key.name) == "LAKECTL_SERVER_" + attr
    names = [name for key in TABLE for name in key.names]
    assert len(names) == len(set(names)) == len(BY_NAME)


@pytest.mark.parametrize(
    "text,needle",
    [
        ("listen_adress: 1.2.3.4:5\n", "unknown key 'listen_adress'"),
        ("database: {kind: sqlite}\n", "unknown key 'database.kind'"),
        ("logging: {level: chatty}\n", "logging.level"),
        ("logging: {format: xml}\n", "logging.format"),
        ("database: {type: oracle}\n", "database.type"),
        ("database: {type: postgres}\n", "connection_string is required"),
        ("database: {connection_string: 'mysql://x'}\n", "no SQLite URL"),
        ("blockstore: {type: gs}\n", "blockstore.type"),
        ("blockstore: {local: {path: /a, volumes: [/b, /c]}}\n", "exclude each other"),
        ("blockstore: {local: {volumes: /a}}\n", "blockstore.local.volumes must be a list of paths"),
        ("blockstore: {local: {volumes: [/a, 7]}}\n", "blockstore.local.volumes must be a list of paths"),
        ("blockstore: {local: {volumes: [/a, /b/../a]}}\n", "blockstore.local.volumes: /a is listed twice"),
        ("blockstore: {local: {volumes: [/a, /b], replicas: 3}}\n", "blockstore.local.replicas: 3 copies"),
        ("blockstore: {local: {replicas: 2}}\n", "blockstore.local.replicas: 2 copies"),
        ("blockstore: {local: {volumes: [/a], replicas: 0}}\n", "blockstore.local.replicas: '0'"),
        ("blockstore: {local: {volumes: [/a], replicas: two}}\n", "blockstore.local.replicas: 'two'"),
        ("blockstore: {local: {replicas: true}}\n", "blockstore.local.replicas must be a whole number"),
        ("blockstore: {local: {volume: [/a]}}\n", "unknown key 'blockstore.local.volume'"),
        ("blockstore: {type: s3}\n", "blockstore.s3.bucket is required"),
        ("blockstore: {type: s3, s3: {bucket: -x}}\n", "blockstore.s3.bucket: '-x'"),
        ("blockstore: {type: s3, s3: {bucket: b}}\n", "blockstore.s3.bucket: 'b'"),
        ("blockstore: {type: s3, s3: {bucket: bk, endpoint: 'ftp://h'}}\n", "blockstore.s3.endpoint"),
        ("blockstore: {type: s3, s3: {bucket: bk, endpoint: 'h:9000'}}\n", "blockstore.s3.endpoint"),
        ("blockstore: {type: s3, s3: {bucket: bk, endpoint: 'http://h:x'}}\n", "blockstore.s3.endpoint"),
        ('blockstore: {type: s3, s3: {bucket: bk, prefix: "a\\tb"}}\n', "blockstore.s3.prefix"),
        ("blockstore: {type: s3, s3: {bucket: bk, access_key_id: k}}\n", "blockstore.s3.secret_access_key"),
        ("blockstore: {type: s3, s3: {bucket: bk, secret_access_key: s}}\n", "blockstore.s3.access_key_id"),
        ("blockstore: {type: s3, s3: {bucket: bk, force_path_style: false}}\n", "force_path_style: false"),
        ("blockstore: {type: s3, s3: {bucket: bk, force_path_style: maybe}}\n", "force_path_style: 'maybe'"),
        ("blockstore: {type: s3, s3: {bucket: bk, force_path_style: [1]}}\n", "must be true or false"),
        (
            "blockstore: {type: s3, s3: {bucket: bk, credentials: {token: t}}}\n",
            "unknown key 'blockstore.s3.credentials.token'",
        ),
        ("listen_address: nowhere\n", "listen_address"),
        ("listen_address: 'localhost:99999'\n", "listen_address"),
        ("logging: [1, 2]\n", "logging must be a mapping"),
        ("listen_address: [1, 2]\n", "must be a string"),
        ("- a list\n", "mapping at the top level"),
        ("gateways: {s3: {listen_address: nowhere}}\n", "gateways.s3.listen_address: 'nowhere'"),
        (
            "listen_address: '127.0.0.1:9000'\ngateways: {s3: {listen_address: '127.0.0.1:9000'}}\n",
            "gateways.s3.listen_address: the S3 gateway needs a port of its own",
        ),
        ("listen_address: '127.0.0.1:65535'\n", "gateways.s3.listen_address: set it"),
        ("gateways: {s3: {region: 'Not A Region'}}\n", "gateways.s3.region"),
        ("gateways: {s3: {domain_name: 'bad domain'}}\n", "gateways.s3.domain_name"),
        ("gateways: {s3: {port: 1}}\n", "unknown key 'gateways.s3.port'"),
        ("a: [unclosed\n", "invalid configuration"),
    ],
)
def test_bad_configuration_is_refused_with_the_key(tmp_path: Path, text: str, needle: str) -> None:
    conf = tmp_path / "server.yaml"
    conf.write_text(text)
    with pytest.raises(InvalidArgument) as raised:
        load_settings(str(conf), str(tmp_path), environ={})
    assert needle in raised.value.message
    if "blockstore." in needle:
        assert raised.value.details["key"] in raised.value.message


def test_a_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="cannot read configuration"):
        load_settings(str(tmp_path / "absent.yaml"), str(tmp_path), environ={})


def test_the_s3_gateway_listens_beside_the_api(tmp_path: Path) -> None:
    default = load_settings(None, str(tmp_path), environ={env_name("listen_address"): "10.0.0.1:9000"})
    assert (default.s3.listen_address, default.s3.region, default.s3.domain_name) == (
        "10.0.0.1:9001",
        "us-east-1",
        "s3.local.lakefs.io",
    )
    conf = tmp_path / "server.yaml"
    conf.write_text(
        "gateways: {s3: {listen_address: '0.0.0.0:7000', domain_name: s3.example.com, region: eu-west-1}}\n"
    )
    s = load_settings(str(conf), str(tmp_path), environ={env_name("gateways.s3.region"): "eu-central-1"})
    assert (s.s3.host, s.s3.port, s.s3.domain_name, s.s3.region) == (
        "0.0.0.0",
        7000,
        "s3.example.com",
        "eu-central-1",
    )


def test_ipv6_listen_address(tmp_path: Path) -> None:
    s = load_settings(None, str(tmp_path), environ={env_name("listen_address"): "[::1]:8080"})
    assert (s.host, s.port, s.listen_address) == ("::1", 8080, "[::1]:8080")


# --- blockstores ----------------------------------------------------------------------------


def test_local_volumes_and_replicas_from_yaml(tmp_path: Path) -> None:
    conf = tmp_path / "server.yaml"
    conf.write_text("blockstore:\n  local:\n    volumes: [v1, ~/v2, /srv/v3]\n    replicas: 2\n")
    s = load_settings(str(conf), str(tmp_path), environ={})
    paths = (os.path.abspath("v1"), os.path.expanduser("~/v2"), "/srv/v3")
    assert s.blockstore == BlockstoreSettings(BlockstoreType.LOCAL, local=LocalBlockstore(paths, 2))


def test_local_volumes_and_replicas_from_the_environment(tmp_path: Path) -> None:
    conf = tmp_path / "server.yaml"
    conf.write_text(f"blockstore: {{local: {{path: {tmp_path / 'one'}}}}}\n")
    env = {
        env_name("blockstore.local.path"): "",  # the environment may clear what the file set
        env_name("blockstore.local.volumes"): os.pathsep.join(["/a", "/b", "", "/c"]),
        env_name("blockstore.local.replicas"): "3",
    }
    s = load_settings(str(conf), str(tmp_path), environ=env)
    assert s.blockstore.local == LocalBlockstore(("/a", "/b", "/c"), 3)
    bad = {**env, env_name("blockstore.local.replicas"): "4"}
    with pytest.raises(InvalidArgument, match=r"blockstore\.local\.replicas: 4 copies need 4 volumes"):
        load_settings(str(conf), str(tmp_path), environ=bad)


def test_s3_from_yaml_and_environment(tmp_path: Path) -> None:
    conf = tmp_path / "server.yaml"
    conf.write_text(
        "blockstore:\n  type: s3\n  s3:\n    bucket: lake-blocks\n    prefix: prod/blocks\n"
        "    endpoint: 'http://127.0.0.1:9000'\n    region: eu-west-1\n    force_path_style: true\n"
        "  local: {path: /ignored}\n"
    )
    env = {
        env_name("blockstore.s3.access_key_id"): "AKIA-TEST",
        env_name("blockstore.s3.secret_access_key"): "very-secret",
        env_name("blockstore.s3.force_path_style"): "YES",
    }
    s = load_settings(str(conf), str(tmp_path), environ=env)
    assert s.blockstore == BlockstoreSettings(
        BlockstoreType.S3,
        s3=S3Blockstore(
            bucket="lake-blocks",
            prefix="prod/blocks",
            endpoint="http://127.0.0.1:9000",
            region="eu-west-1",
            access_key_id="AKIA-TEST",
            secret_access_key="very-secret",
            force_path_style=True,
        ),
    )
    assert "very-secret" not in repr(s)


def test_s3_defaults_leave_endpoint_region_and_credentials_to_boto3(tmp_path: Path) -> None:
    env = {env_name("blockstore.type"): "S3", env_name("blockstore.s3.bucket"): "lake"}
    s = load_settings(None, str(tmp_path), environ=env)
    assert s.blockstore.s3 == S3Blockstore("lake", "", None, None, None, None, True)
    assert s.blockstore.local is None


def _store(live: Live, data: bytes) -> str:
    """Create a repository on the live server, upload ``data``, commit; return the repository."""
    repo = unique("blk")
    with live.client((live.key_id, live.secret)) as api:
        r = api.post("/repositories", json={"name": repo, "storage_namespace": f"local://{repo}"})
        assert r.status_code == 201, r.text
        upload(api, repo, "main", "data/obj.bin", data)
        commit(api, repo, "main", "one object")
    return repo


def _read(live: Live, repo: str) -> bytes:
    with live.client((live.key_id, live.secret)) as api:
        r = api.get(f"/repositories/{repo}/refs/main/objects", params={"path": "data/obj.bin"})
        assert r.status_code == 200, r.text
        return r.content


def test_an_app_on_three_volumes_with_two_replicas_stores_each_block_twice(tmp_path: Path) -> None:
    volumes = [tmp_path / f"v{i}" for i in range(3)]
    env = {
        env_name("blockstore.local.volumes"): os.pathsep.join(map(str, volumes)),
        env_name("blockstore.local.replicas"): "2",
    }
    data = os.urandom(300_000)
    with serve(load_settings(None, str(tmp_path / "server"), environ=env)) as live:
        repo = _store(live, data)
        copies: dict[str, list[Path]] = {}
        for v in volumes:
            for f in v.glob("*/*"):
                copies.setdefault(f.name, []).append(v)
        assert copies, "no block was stored in any volume"
        assert {md5: len(where) for md5, where in copies.items()} == dict.fromkeys(copies, 2)
        assert not (tmp_path / "server" / "blocks").exists(), "blocks went to the default directory"
        # Either copy serves a read: remove the first copy of every block, read again.
        for md5, where in copies.items():
            (where[0] / md5[:3] / md5).unlink()
        assert hashlib.md5(_read(live, repo)).hexdigest() == hashlib.md5(data).hexdigest()


def test_an_app_on_s3_round_trips_an_object_through_the_api(tmp_path: Path, s3_endpoint: str) -> None:
    bucket = new_bucket(raw_client(s3_endpoint))
    conf = tmp_path / "server.yaml"
    conf.write_text(
        f"blockstore:\n  type: s3\n  s3:\n    bucket: {bucket}\n    prefix: lake/blocks\n"
        f"    endpoint: '{s3_endpoint}'\n    region: {REGION}\n"
        f"    access_key_id: {DUMMY_KEYS['aws_access_key_id']}\n"
        f"    secret_access_key: {DUMMY_KEYS['aws_secret_access_key']}\n"
    )
    data = os.urandom(200_000)
    with serve(load_settings(str(conf), str(tmp_path / "server"), environ={})) as live:
        repo = _store(live, data)
        assert _read(live, repo) == data
    keys = all_keys(raw_client(s3_endpoint), bucket)
    assert keys and all(k.startswith("lake/blocks/") for k in keys), keys
    assert not (tmp_path / "server" / "blocks").exists(), "blocks went to the default directory"


def test_an_app_on_a_missing_bucket_does_not_start(tmp_path: Path, s3_endpoint: str) -> None:
    env = {
        env_name("blockstore.type"): "s3",
        env_name("blockstore.s3.bucket"): "no-such-bucket",
        env_name("blockstore.s3.endpoint"): s3_endpoint,
        env_name("blockstore.s3.region"): REGION,
        env_name("blockstore.s3.access_key_id"): "testing",
        env_name("blockstore.s3.secret_access_key"): "testing",
    }
    with pytest.raises(StorageError, match="no-such-bucket"):
        create_app(load_settings(None, str(tmp_path), environ=env))


# --- lakeFS's keys: today's, the 0.1 design's, and those of parts lakectl does not have ---------


def _load(tmp_path: Path, text: str, **env: str) -> Settings:
    conf = tmp_path / "lakefs.yaml"
    conf.write_text(text)
    return load_settings(str(conf), str(tmp_path), environ=env)


def test_todays_lakefs_keys_mean_what_lakefs_means(tmp_path: Path) -> None:
    s = _load(
        tmp_path,
        "database: {type: local, local: {path: ~/lakefs/metadata}, postgres: {connection_string: ignored}}\n"
        "blockstore:\n  type: s3\n  s3:\n    bucket: lake\n    region: eu-west-1\n"
        "    endpoint: 'http://127.0.0.1:9000'\n    force_path_style: true\n"
        "    credentials: {access_key_id: AKIA1, secret_access_key: s1, session_token: t1}\n",
    )
    assert (s.database.type, s.database.url) == (
        DatabaseType.SQLITE,
        "sqlite:///" + os.path.expanduser("~/lakefs/metadata/lake.db"),
    )
    assert s.blockstore.s3 == S3Blockstore(
        "lake", "", "http://127.0.0.1:9000", "eu-west-1", "AKIA1", "s1", True, session_token="t1"
    )
    pg = _load(tmp_path, "database: {type: postgres, postgres: {connection_string: 'postgres://u@h/db'}}\n")
    assert (pg.database.type, pg.database.url) == (DatabaseType.POSTGRES, "postgres://u@h/db")


def test_a_postgres_connection_string_without_a_type_means_postgres(tmp_path: Path) -> None:
    """lakeFS before ``database.type`` had only ``database.connection_string``, for PostgreSQL."""
    s = _load(
        tmp_path, "database: {connection_string: 'postgres://localhost:5432/postgres?sslmode=disable'}\n"
    )
    assert s.database.type is DatabaseType.POSTGRES
    assert _load(tmp_path, f"database: {{connection_string: {tmp_path / 'm.db'}}}\n").database.type is (
        DatabaseType.SQLITE
    )


def test_the_01_design_keys(tmp_path: Path) -> None:
    s = _load(
        tmp_path,
        "api: {listen_address: '127.0.0.1:8001'}\n"
        "metadata: {db: {type: sqlite, path: /srv/meta}}\n"
        "gateways: {s3: {listen_address: '127.0.0.1:8000'}}\n"
        "blockstore:\n  type: s3\n  s3:\n    bucket: lake\n    region: us-east-1\n"
        "    credentials: {access_key_id: AKIA2, access_secret_key: s2}\n",
    )
    assert (s.listen_address, s.s3.listen_address) == ("127.0.0.1:8001", "127.0.0.1:8000")
    assert s.database.url == "sqlite:////srv/meta/lake.db"
    assert s.blockstore.s3 is not None
    assert (s.blockstore.s3.access_key_id, s.blockstore.s3.secret_access_key) == ("AKIA2", "s2")


def test_profile_and_credentials_file(tmp_path: Path) -> None:
    creds = tmp_path / "aws-credentials"
    creds.write_text("[lake]\naws_access_key_id = AKIAFILE\naws_secret_access_key = from-file\n")
    s = _load(
        tmp_path,
        f"blockstore: {{type: s3, s3: {{bucket: lake, profile: lake, credentials_file: {creds}}}}}\n",
    )
    assert s.blockstore.s3 is not None
    assert (s.blockstore.s3.profile, s.blockstore.s3.credentials_file) == ("lake", str(creds))


@pytest.mark.parametrize(
    "text,needle",
    [
        (
            "metadata: {db: {type: badger}}\n",
            "metadata.db.type: badger is not supported: use local (the embedded SQLite lake, in the "
            "directory metadata.db.path) or postgres",
        ),
        ("database: {type: badger}\n", "database.type: badger is not supported: use local"),
        ("metadata: {db: {badger: {path: ~/m}}}\n", "metadata.db.badger.path: badger is not supported"),
        ("metadata: {badger: {path: ~/m}}\n", "metadata.badger.path: badger is not supported"),
        ("database: {type: dynamodb}\n", "database.type: 'dynamodb' is not supported"),
        (
            "database: {dynamodb: {table_name: kv}}\n",
            "database.dynamodb.table_name: DynamoDB is not supported",
        ),
        ("database: {type: postgres, postgres: {connection_string: 'mysql://x'}}\n", "no postgres://"),
        (
            "database: {type: postgres, connection_string: 'postgres://a/b', "
            "postgres: {connection_string: 'postgres://c/d'}}\n",
            "database.connection_string and database.postgres.connection_string are the same setting",
        ),
        ("database: {local: {path: /m}, connection_string: /n.db}\n", "exclude each other"),
        (
            "listen_address: '127.0.0.1:1'\napi: {listen_address: '127.0.0.1:2'}\n",
            "listen_address and api.listen_address are the same setting: set one",
        ),
        ("blockstore: {gs: {credentials_file: /k.json}}\n", "blockstore.gs.credentials_file: Google Cloud"),
        ("blockstore: {azure: {storage_account: a}}\n", "blockstore.azure.storage_account: Azure"),
        ("blockstore: {s3: {server_side_encryption: 'aws:kms'}}\n", "server-side encryption"),
        ("auth: {remote_authenticator: {enabled: true}}\n", "remote authenticators are not supported"),
        ("auth: {login_duration: 1h}\n", "auth.login_duration: login tokens are valid 168h"),
        ("auth: {oidc: {friendly_name_claim_name: n}}\n", "OIDC"),
        ("gateways: {s3: {fallback_url: 'http://s3proxy'}}\n", "gateways.s3.fallback_url: requests for"),
        ("tls: {enabled: true, cert_file: /c}\n", "tls.enabled: the server speaks plain HTTP"),
        (
            "installation: {user_name: admin, access_key_id: AKIA}\n",
            "installation.secret_access_key is required with installation.user_name, "
            "installation.access_key_id",
        ),
        ("stats: {enabled: false, colour: blue}\nstatz: 1\n", "unknown key 'statz'"),
        (
            "blockstore: {type: s3, s3: {bucket: bk, credentials: {session_token: t}}}\n",
            "blockstore.s3.credentials.session_token: needs the access key id",
        ),
        (
            "blockstore: {type: s3, s3: {bucket: bk, profile: p, credentials: {access_key_id: a, "
            "secret_access_key: s}}}\n",
            "blockstore.s3.profile: set either it or blockstore.s3.credentials.access_key_id",
        ),
        ("blockstore: {type: s3, s3: {bucket: bk, credentials_file: /no/such}}\n", "/no/such is no file"),
        (
            "blockstore: {type: s3, s3: {bucket: bk, credentials: {access_key_id: a}}}\n",
            "blockstore.s3.secret_access_key is required",
        ),
    ],
)
def test_lakefs_keys_refused_name_the_key_and_why(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        _load(tmp_path, text)
    assert needle in raised.value.message, raised.value.message
    assert raised.value.details["key"] in raised.value.message


@pytest.mark.parametrize(
    "text,warning",
    [
        ("stats: {enabled: false, flush_interval: 30s}\n", "ignored stats.enabled, stats.flush_interval: "),
        ("ugc: {prepare_interval: 1m}\n", "ignored ugc.prepare_interval: "),
        ("security: {audit_check_interval: 24h}\n", "ignored security.audit_check_interval: "),
        (
            "committed: {local_cache: {size_bytes: 1, dir: /c}}\n",
            "ignored committed.local_cache.size_bytes, ",
        ),
        ("graveler: {commit_cache: {size: 5}}\n", "ignored graveler.commit_cache.size: "),
        ("actions: {lua: {net_http_enabled: true}}\n", "ignored actions.lua.net_http_enabled: lakectl runs"),
        ("email_subscription: {enabled: false}\n", "ignored email_subscription.enabled: "),
        ("ui: {enabled: true}\n", "ignored ui.enabled: "),
        ("tls: {enabled: false, cert_file: /c}\n", "ignored tls.cert_file: "),
        ("auth: {login_duration: 168h, cache: {enabled: true}}\n", "ignored auth.login_duration: "),
        (
            "database: {postgres: {max_open_connections: 25}}\n",
            "ignored database.postgres.max_open_connections",
        ),
        (
            "blockstore: {s3: {discover_bucket_region: false}}\n",
            "ignored blockstore.s3.discover_bucket_region",
        ),
        ("logging: {audit_log_level: INFO, level: NONE}\n", "ignored logging.audit_log_level: "),
    ],
)
def test_harmless_lakefs_keys_are_ignored_with_one_warning(tmp_path: Path, text: str, warning: str) -> None:
    s = _load(tmp_path, text)
    assert any(w.startswith(warning) for w in s.warnings), s.warnings
    assert len(s.warnings) == len({w.split(": ", 1)[1] for w in s.warnings})  # one line per reason


def test_lakefs_environment_variables_beside_ours(tmp_path: Path) -> None:
    env = {
        "LAKEFS_DATABASE_TYPE": "local",
        "LAKEFS_DATABASE_LOCAL_PATH": str(tmp_path / "meta"),
        "LAKEFS_BLOCKSTORE_LOCAL_PATH": str(tmp_path / "lakefs-blocks"),
        "LAKEFS_AUTH_ENCRYPT_SECRET_KEY": "from-lakefs",
        "LAKEFS_LISTEN_ADDRESS": "127.0.0.1:7100",
        "LAKEFS_BLOCKSTORE_S3_CREDENTIALS_ACCESS_KEY_ID": "unread",  # blockstore.type is local
    }
    s = load_settings(None, str(tmp_path), environ=env)
    assert s.database.url == "sqlite:///" + str(tmp_path / "meta" / "lake.db")
    assert s.blockstore.local == LocalBlockstore((str(tmp_path / "lakefs-blocks"),), 1)
    assert (s.secret_key, s.port) == ("from-lakefs", 7100)
    ours = {
        **env,
        "LAKECTL_SERVER_AUTH_ENCRYPT_SECRET_KEY": "ours",
        "LAKECTL_SERVER_LISTEN_ADDRESS": "[::1]:7200",
    }
    s = load_settings(None, str(tmp_path), environ=ours)
    assert (s.secret_key, s.listen_address) == ("ours", "[::1]:7200")
    conf = tmp_path / "lakefs.yaml"
    conf.write_text("api: {listen_address: '127.0.0.1:7300'}\n")  # the environment beats the file
    assert load_settings(str(conf), str(tmp_path), environ=env).port == 7100


def test_lakefs_variables_of_foreign_keys_warn_or_refuse(tmp_path: Path) -> None:
    env = {
        "LAKEFS_STATS_ENABLED": "false",
        "LAKEFS_UNRELATED_TOOL": "x",
        "LAKEFS_TLS_ENABLED": "false",
        "LAKEFS_INSTALLATION_FIXED_ID": "abc",
    }
    s = load_settings(None, str(tmp_path), environ=env)
    assert s.warnings == (
        "ignored LAKEFS_INSTALLATION_FIXED_ID: lakectl keeps no installation id",
        "ignored LAKEFS_STATS_ENABLED: lakectl collects and sends no usage data",
        "ignored LAKEFS_TLS_ENABLED: the server speaks plain HTTP: put a TLS proxy in front of it",
    )
    for variable, needle in [
        ("LAKEFS_AUTH_LDAP_SERVER_ENDPOINT", "LAKEFS_AUTH_LDAP_SERVER_ENDPOINT: LDAP"),
        ("LAKEFS_BLOCKSTORE_AZURE_STORAGE_ACCOUNT", "LAKEFS_BLOCKSTORE_AZURE_STORAGE_ACCOUNT: Azure"),
        ("LAKEFS_TLS_ENABLED", "LAKEFS_TLS_ENABLED: the server speaks plain HTTP"),
    ]:
        with pytest.raises(InvalidArgument, match=needle.replace("`", ".")):
            load_settings(None, str(tmp_path), environ={variable: "true"})


def test_installation_creates_the_first_admin_on_the_first_run(tmp_path: Path) -> None:
    """lakeFS's installation.*: the server sets itself up with the given user and key, once."""
    env = {
        "LAKEFS_INSTALLATION_USER_NAME": "quickstart",
        "LAKEFS_INSTALLATION_ACCESS_KEY_ID": "AKIAEXAMPLEINSTALLED",
        "LAKEFS_INSTALLATION_SECRET_ACCESS_KEY": "installed/secret+key",
    }
    settings = load_settings(None, str(tmp_path), environ=env)
    assert settings.installation is not None and "installed/secret" not in repr(settings)
    for _ in range(2):  # the second start finds the server set up and changes nothing
        app = create_app(settings)
        auth = app.state.auth
        try:
            assert auth.authenticate("AKIAEXAMPLEINSTALLED", "installed/secret+key").id == "quickstart"
            assert [u.id for u in auth.list_users()] == ["quickstart"]
            assert [c.access_key_id for c in auth.list_credentials(auth.get_user("quickstart"))] == [
                "AKIAEXAMPLEINSTALLED"
            ]
        finally:
            app.state.lake.close()


def test_every_key_and_every_lakefs_entry_is_documented() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "server.md").read_text()
    missing = [name for name in BY_NAME if f"`{name}`" not in doc]
    missing += [entry.prefix for entry in FOREIGN if f"`{entry.prefix}`" not in doc]
    assert not missing, f"not in docs/server.md: {missing}"


def test_s3_profile_credentials_file_and_session_token_reach_boto3(tmp_path: Path, s3_endpoint: str) -> None:
    bucket = new_bucket(raw_client(s3_endpoint))
    creds = tmp_path / "aws-credentials"
    creds.write_text("[lake]\naws_access_key_id = AKIAFILE\naws_secret_access_key = from-file\n")
    base = f"blockstore: {{type: s3, s3: {{bucket: {bucket}, endpoint: '{s3_endpoint}', region: {REGION}, "
    by_profile = _load(tmp_path, base + f"profile: lake, credentials_file: {creds}}}}}\n")
    by_token = _load(
        tmp_path,
        base + "credentials: {access_key_id: AKIATOKEN, secret_access_key: s, session_token: tok}}}\n",
    )
    for settings, expected in [
        (by_profile, ("AKIAFILE", "from-file", None)),
        (by_token, ("AKIATOKEN", "s", "tok")),
    ]:
        lake = open_lake(settings)
        try:
            frozen = lake.blocks._client._request_signer._credentials.get_frozen_credentials()  # type: ignore[attr-defined]
            assert (frozen.access_key, frozen.secret_key, frozen.token) == expected
            data = os.urandom(1000)
            locator = f"{hashlib.md5(data).hexdigest()}+{len(data)}"
            lake.blocks.put(locator, data)
            assert lake.blocks.get(locator) == data
        finally:
            lake.close()
    no_profile = _load(tmp_path, base + f"profile: nobody, credentials_file: {creds}}}}}\n")
    with pytest.raises(StorageError, match="nobody"):
        create_app(no_profile)


def test_lakefs_minio_example_serves_through_s3(tmp_path: Path, s3_endpoint: str) -> None:
    """The shape of lakeFS's documented MinIO configuration (``credentials`` section,
    ``discover_bucket_region``), plus the one bucket lakectl keeps its blocks in."""
    bucket = new_bucket(raw_client(s3_endpoint))
    s = _load(
        tmp_path,
        "database: {type: local}\n"
        "auth: {encrypt: {secret_key: 10a718b3f285d89c36e9864494cdd1507f}}\n"
        "blockstore:\n  type: s3\n  s3:\n    force_path_style: true\n"
        f"    endpoint: {s3_endpoint}\n    discover_bucket_region: false\n    bucket: {bucket}\n"
        f"    region: {REGION}\n"
        f"    credentials:\n      access_key_id: {DUMMY_KEYS['aws_access_key_id']}\n"
        f"      secret_access_key: {DUMMY_KEYS['aws_secret_access_key']}\n",
    )
    assert s.warnings == ("ignored blockstore.s3.discover_bucket_region: the region is blockstore.s3.region",)
    data = os.urandom(100_000)
    with serve(s) as live:
        assert _read(live, _store(live, data)) == data
    assert all_keys(raw_client(s3_endpoint), bucket), "no block went to the bucket"


def test_actions_keys_are_lakefs_s(tmp_path: Path) -> None:
    default = _load(tmp_path, "")
    assert (default.actions.enabled, default.actions.command_enabled) == (True, False)
    s = _load(tmp_path, "actions: {enabled: false, command: {enabled: true}}\n")
    assert (s.actions.enabled, s.actions.command_enabled) == (False, True)
    assert not s.warnings
    env = load_settings(None, str(tmp_path), environ={"LAKEFS_ACTIONS_COMMAND_ENABLED": "yes"})
    assert env.actions.command_enabled
    with pytest.raises(InvalidArgument) as raised:
        load_settings(None, str(tmp_path), environ={"LAKECTL_SERVER_ACTIONS_ENABLED": "maybe"})
    assert raised.value.message.startswith("actions.enabled: 'maybe' is not true or false")
    lake = create_app(s).state.lake
    try:
        # actions.enabled false: no hooks run, the journal alone (on for a new lake) hears verbs
        assert type(lake.events).__name__ == "Journal"
    finally:
        lake.close()


def test_allowed_external_prefixes_from_yaml_and_the_environment(tmp_path: Path) -> None:
    assert load_settings(None, str(tmp_path), environ={}).allowed_external_prefixes == ()  # none by default
    conf = tmp_path / "server.yaml"
    conf.write_text(
        "blockstore:\n  local:\n    allowed_external_prefixes: [/data/in/, 'local:///srv/x/../y']\n"
    )
    s = load_settings(str(conf), str(tmp_path), environ={})
    assert s.allowed_external_prefixes == ("/data/in", "/srv/y") and s.config_file == str(conf)
    lakefs = {"LAKEFS_BLOCKSTORE_LOCAL_ALLOWED_EXTERNAL_PREFIXES": os.pathsep.join(["/a", "/b"])}
    assert load_settings(None, str(tmp_path), environ=lakefs).allowed_external_prefixes == ("/a", "/b")
    conf.write_text("blockstore:\n  local:\n    allowed_external_prefixes: [relative/dir]\n")
    with pytest.raises(InvalidArgument, match="allowed_external_prefixes: 'relative/dir' is not an absolute"):
        load_settings(str(conf), str(tmp_path), environ={})


def test_the_confinement_never_holds_the_servers_own_files(tmp_path: Path) -> None:
    from server.app import confinement

    conf = tmp_path / "etc" / "server.yaml"
    conf.parent.mkdir()
    conf.write_text(
        f"blockstore: {{local: {{volumes: [{tmp_path / 'v1'}, {tmp_path / 'v2'}], "
        f"allowed_external_prefixes: [{tmp_path}]}}}}\n"
        f"database: {{connection_string: {tmp_path / 'meta' / 'lake.db'}}}\n"
        f"logging: {{output: {tmp_path / 'log' / 'server.log'}}}\n"
    )
    c = confinement(load_settings(str(conf), str(tmp_path / "data"), environ={}))
    real = os.path.realpath(tmp_path)
    assert c.allowed == (real,)
    for own in ("data", "v1", "v2", "etc/server.yaml", "meta/lake.db", "meta/lake.db-wal", "log/server.log"):
        assert os.path.join(real, own) in c.forbidden, own
    assert {"/proc", "/sys", "/dev"} <= set(c.forbidden)
    assert c.refusal(os.path.join(real, "meta", "other")) is None  # the database's neighbours are data
