"""Settings: defaults under the data directory, the YAML file, environment overrides, refusals."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lakectl.errors import InvalidArgument
from server.config import DatabaseType, LogFormat, env_name, load_settings


def test_defaults_give_an_embedded_lake_under_the_data_dir(tmp_path: Path) -> None:
    s = load_settings(None, str(tmp_path), environ={})
    assert s.data_dir == str(tmp_path)
    assert (s.host, s.port, s.listen_address) == ("127.0.0.1", 8000, "127.0.0.1:8000")
    assert s.database.type is DatabaseType.SQLITE
    assert s.database.url == "sqlite:///" + os.path.join(str(tmp_path), "lake.db")
    assert s.blockstore.local_path == os.path.join(str(tmp_path), "blocks")
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
    assert s.blockstore.local_path == str(tmp_path / "blk")
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
        ("listen_address: nowhere\n", "listen_address"),
        ("listen_address: 'localhost:99999'\n", "listen_address"),
        ("logging: [1, 2]\n", "logging must be a mapping"),
        ("listen_address: [1, 2]\n", "must be a string"),
        ("- a list\n", "mapping at the top level"),
        ("a: [unclosed\n", "invalid configuration"),
    ],
)
def test_bad_configuration_is_refused_with_the_key(tmp_path: Path, text: str, needle: str) -> None:
    conf = tmp_path / "server.yaml"
    conf.write_text(text)
    with pytest.raises(InvalidArgument) as raised:
        load_settings(str(conf), str(tmp_path), environ={})
    assert needle in raised.value.message


def test_a_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="cannot read configuration"):
        load_settings(str(tmp_path / "absent.yaml"), str(tmp_path), environ={})


def test_ipv6_listen_address(tmp_path: Path) -> None:
    s = load_settings(None, str(tmp_path), environ={env_name("listen_address"): "[::1]:8080"})
    assert (s.host, s.port, s.listen_address) == ("::1", 8080, "[::1]:8080")
