"""The committer comes from the environment, then the configuration file, then the login."""

import pytest

from lakectl.core.lake import default_committer
from lakectl.errors import InvalidArgument


@pytest.fixture
def config(tmp_path, monkeypatch):
    path = tmp_path / "lakectl.yaml"
    monkeypatch.setenv("LAKECTL_CONFIG", str(path))
    monkeypatch.delenv("LAKECTL_COMMITTER", raising=False)
    return path


def test_env_wins_over_config(config, monkeypatch):
    config.write_text("user:\n  name: Ada\n")
    monkeypatch.setenv("LAKECTL_COMMITTER", "Grace")
    assert default_committer() == "Grace"


def test_config_user_name(config):
    config.write_text("user:\n  name: Ada Lovelace\n")
    assert default_committer() == "Ada Lovelace"


def test_missing_config_falls_back_to_login(config):
    assert default_committer()  # the login name, whatever it is here


def test_malformed_config_is_a_clear_error(config):
    config.write_text("user: [unclosed\n")
    with pytest.raises(InvalidArgument, match="invalid configuration"):
        default_committer()
