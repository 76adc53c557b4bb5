"""Repositories: :class:`Repository`, :func:`repository` and :func:`repositories`, as lakeFS's
wrapper names them."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import TYPE_CHECKING

from lakectl.api.client import Client, default_client
from lakectl.api.models import RepositoryProperties
from lakectl.api.references import Branch, Reference, Tag
from lakectl.exceptions import ConflictException, api_errors

if TYPE_CHECKING:
    from lakectl.core.model import Repository as CoreRepository


class Repository:
    """A repository of the client's lake (``client``: the default one, ``Client()``, when None)."""

    def __init__(self, repository_id: str, client: Client | None = None) -> None:
        self._id = repository_id
        self._client = client if client is not None else default_client()
        self._properties: RepositoryProperties | None = None

    @property
    def id(self) -> str:
        return self._id

    @property
    def client(self) -> Client:
        return self._client

    def __repr__(self) -> str:
        return f"Repository(lakefs://{self._id})"

    def create(
        self,
        storage_namespace: str = "",
        default_branch: str = "main",
        include_samples: bool = False,
        exist_ok: bool = False,
    ) -> Repository:
        """Create the repository, with its default branch and first commit; with ``exist_ok``, an
        existing one is taken as it is. ``storage_namespace``: recorded (``local://<name>`` when
        empty). ``include_samples`` is accepted and ignored."""
        try:
            with api_errors():
                made = self._client.backend.create_repo(self._id, default_branch, storage_namespace)
            self._properties = _properties(made)
        except ConflictException:
            if not exist_ok:
                raise
        return self

    @property
    def properties(self) -> RepositoryProperties:
        if self._properties is None:
            with api_errors():
                self._properties = _properties(self._client.backend.get_repo(self._id))
        return self._properties

    def delete(self) -> None:
        with api_errors():
            self._client.backend.delete_repo(self._id)

    def branch(self, branch_id: str) -> Branch:
        return Branch(self._id, branch_id, self._client)

    def tag(self, tag_id: str) -> Tag:
        return Tag(self._id, tag_id, self._client)

    def ref(self, ref_id: str) -> Reference:
        return Reference(self._id, ref_id, self._client)

    def commit(self, commit_id: str) -> Reference:
        return Reference(self._id, commit_id, self._client)

    def branches(
        self,
        max_amount: int | None = None,
        after: str | None = None,
        prefix: str | None = None,
        show_hidden: bool = False,
    ) -> Iterator[Branch]:
        """Branches by name; hidden ones (transactions') only with ``show_hidden``."""
        with api_errors():
            found = self._client.backend.list_branches(self._id, after or "", show_hidden=show_hidden)
        yield from itertools.islice(
            (Branch(self._id, b.name, self._client) for b in found if b.name.startswith(prefix or "")),
            max_amount,
        )

    def tags(
        self, max_amount: int | None = None, after: str | None = None, prefix: str | None = None
    ) -> Iterator[Tag]:
        with api_errors():
            found = self._client.backend.list_tags(self._id, after or "")
        yield from itertools.islice(
            (Tag(self._id, t.name, self._client) for t in found if t.name.startswith(prefix or "")),
            max_amount,
        )


def repository(repository_id: str, client: Client | None = None) -> Repository:
    """The repository ``repository_id`` of the client's lake (not created: see ``create``)."""
    return Repository(repository_id, client)


def repositories(
    client: Client | None = None,
    max_amount: int | None = None,
    after: str | None = None,
    prefix: str | None = None,
) -> Iterator[Repository]:
    """The lake's repositories, by name."""
    client = client if client is not None else default_client()
    with api_errors():
        found = client.backend.list_repos(after or "")
    yield from itertools.islice(
        (Repository(r.name, client) for r in found if r.name.startswith(prefix or "")), max_amount
    )


def _properties(repo: CoreRepository) -> RepositoryProperties:
    return RepositoryProperties(repo.name, repo.creation_date, repo.default_branch, repo.storage_namespace)
