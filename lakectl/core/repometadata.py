"""A repository's metadata: free key-value pairs of the repository itself, as lakeFS keeps them
(``GET``, ``POST`` and ``DELETE /repositories/{repository}/metadata``; tools such as lakefs-spec
read them). Kept as one setting of the repository, so that the journal records each change with
the whole new value and a rebuild or a recovery replays it as any setting."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping

from lakectl.core import keys, porcelain
from lakectl.core.events import Event, Verb, announced
from lakectl.core.kv.retry import AGAIN, SETTING, Again, retry
from lakectl.core.lake import Lake
from lakectl.core.limits import check_metadata
from lakectl.core.model import RepositoryId
from lakectl.errors import InvalidArgument, KeyNotFound, PredicateFailed

__all__ = ["delete", "get", "replace", "update"]


def get(lake: Lake, repo: str) -> dict[str, str]:
    """The repository's metadata (empty when none was ever set); ``NotFound`` for no repository."""
    rid = porcelain.get_repo(lake, repo).name
    return _read(lake, rid)[0]


def update(lake: Lake, repo: str, metadata: Mapping[str, str]) -> dict[str, str]:
    """Set these keys (the others stay), as lakeFS's ``setRepositoryMetadata``; the result is
    held to the limits of any metadata. Returns the repository's metadata after the change."""
    if not isinstance(metadata, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise InvalidArgument("repository metadata maps strings to strings")
    return _change(lake, repo, lambda current: {**current, **metadata})


def delete(lake: Lake, repo: str, names: Iterable[str]) -> dict[str, str]:
    """Remove these keys (absent ones are not an error), as lakeFS's ``deleteRepositoryMetadata``.
    Returns the repository's metadata after the change."""
    gone = list(names)
    if not all(isinstance(k, str) for k in gone):
        raise InvalidArgument("repository metadata keys are strings")
    return _change(lake, repo, lambda current: {k: v for k, v in current.items() if k not in gone})


def replace(lake: Lake, rid: RepositoryId, value: Mapping[str, str] | None) -> None:
    """Make the metadata exactly ``value`` (a replay of the journal's setting)."""
    _change(lake, rid, lambda _: dict(value or {}))


def _read(lake: Lake, rid: RepositoryId) -> tuple[dict[str, str], bytes | None]:
    try:
        raw = lake.kv.get(keys.repo_partition(rid), keys.REPOSITORY_METADATA)
    except KeyNotFound:
        return {}, None
    return dict(json.loads(raw)), raw


def _change(lake: Lake, repo: str, how: Callable[[dict[str, str]], dict[str, str]]) -> dict[str, str]:
    rid = porcelain.get_repo(lake, repo).name

    def attempt() -> dict[str, str] | Again:
        current, raw = _read(lake, rid)
        wanted = check_metadata(how(current), "repository metadata")
        if wanted == current:
            return current
        event = Event(Verb.SETTINGS, rid, payload={"key": keys.REPOSITORY_METADATA, "value": wanted})
        try:
            with announced(lake.events, event):
                value = json.dumps(wanted, sort_keys=True).encode()
                lake.kv.set_if(keys.repo_partition(rid), keys.REPOSITORY_METADATA, value, raw)
        except PredicateFailed:
            return AGAIN  # another writer changed it meanwhile: apply ours over theirs
        lake.events.after(event)
        return wanted

    return retry(SETTING, attempt, f"could not change the metadata of repository {repo!r}: it kept changing")
