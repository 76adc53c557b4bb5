"""Garbage-collection rules over the REST API, as lakeFS's ``settings/gc_rules``."""

from __future__ import annotations

import httpx


def test_gc_rules_lifecycle(api: httpx.Client, repo: str) -> None:
    url = f"/repositories/{repo}/settings/gc_rules"
    assert api.get(url).status_code == 404
    rules = {"default_retention_days": 14, "branches": [{"branch_id": "main", "retention_days": 30}]}
    assert api.put(url, json=rules).status_code == 204
    assert api.get(url).json() == rules
    for bad in ({"default_retention_days": -3}, {"branches": []}, [1], {"default_retention_days": 1, "x": 2}):
        refused = api.put(url, json=bad)
        assert refused.status_code == 400 and "gc rules" in refused.json()["message"], refused.text
    assert api.get(url).json() == rules, "a refused update changes nothing"
    assert api.delete(url).status_code == 204
    assert api.get(url).status_code == 404
    assert api.put("/repositories/no-such-repo/settings/gc_rules", json=rules).status_code == 404
