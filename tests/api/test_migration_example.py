"""examples/migration.py, run as written, embedded and against a server: a good run lands
partitioned Parquet on main with every CSV row; a bad one is caught and leaves main as it was."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pyarrow.parquet as pq
import pytest

import lakectl
from tests.server.conftest import unique

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "migration.py"


@pytest.fixture(scope="module")
def migration() -> ModuleType:
    spec = importlib.util.spec_from_file_location("migration_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_good_migration_lands_every_row_as_partitioned_parquet(
    client: lakectl.Client, migration: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = unique("crm")
    diff = migration.run(client, repo)
    assert diff is not None and diff["added"] == sum(migration.REGIONS.values()) == 3500
    assert sorted(p["partition"] for p in diff["partitions"]) == ["region=amer", "region=apac", "region=emea"]
    main = lakectl.Repository(repo, client=client).branch("main")
    with main.object("tables/customers/region=apac/part-0.parquet").reader() as f:
        assert pq.read_table(f).num_rows == 800
    assert [c.message for c in main.log(max_amount=3)][1] == "migrate customers to Parquet"
    assert [b.id for b in lakectl.Repository(repo, client=client).branches(show_hidden=True)] == ["main"]
    assert "validated 3500 rows" in capsys.readouterr().out


def test_a_bad_migration_is_caught_and_main_is_untouched(
    client: lakectl.Client, migration: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = unique("crm")
    migration.seed(client, repo)
    main = lakectl.Repository(repo, client=client).branch("main")
    head = main.get_commit().id
    assert migration.run(client, repo, break_it=True) is None
    assert "amer: 1499 rows in Parquet, 1500 in the CSV" in capsys.readouterr().out
    assert main.get_commit().id == head and list(main.uncommitted()) == []
    assert not main.object("tables/customers/region=emea/part-0.parquet").exists()
    assert [b.id for b in lakectl.Repository(repo, client=client).branches(show_hidden=True)] == ["main"]
