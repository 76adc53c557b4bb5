"""Request bodies of the lakeFS API: strict (no coercion, unknown fields refused) pydantic models."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from lakectl.errors import InvalidArgument

Metadata = dict[str, str]


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


def unsupported(what: str) -> InvalidArgument:
    return InvalidArgument(f"{what} is not supported by this server")


class RepositoryCreation(Body):
    name: str
    storage_namespace: str
    default_branch: str = "main"
    sample_data: bool = False
    read_only: bool = False
    storage_id: str | None = None


class RepositoryMetadataSet(Body):
    metadata: dict[str, str]


class RepositoryMetadataKeys(Body):
    keys: list[str]


class StatsEvent(Body):
    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)
    class_: str = Field(alias="class")
    name: str
    count: int


class StatsEvents(Body):
    events: list[StatsEvent] = Field(max_length=1000)


class CommPrefs(Body):
    """lakeFS ``CommPrefsInput``, by its camelCase field names on the wire."""

    email: str | None = None
    firstName: str | None = None
    lastName: str | None = None
    companyName: str | None = None
    country: str | None = None
    featureUpdates: bool
    securityUpdates: bool


class BranchCreation(Body):
    name: str
    source: str
    force: bool = False
    hidden: bool = False


class TagCreation(Body):
    id: str
    ref: str
    force: bool = False


class CommitCreation(Body):
    message: str
    metadata: Metadata | None = None
    date: int | None = None
    allow_empty: bool = False
    force: bool = False
    prefixes: list[str] = []
    """lakectl's extension: commit only the changes under these (the rest stays staged)."""


class ResetCreation(Body):
    type: str
    path: str = ""
    force: bool = False


class CommitOverrides(Body):
    message: str | None = None
    metadata: Metadata | None = None


class RevertCreation(Body):
    ref: str
    parent_number: int
    commit_overrides: CommitOverrides | None = None
    force: bool = False
    allow_empty: bool = False


class CherryPickCreation(Body):
    ref: str
    parent_number: int = 0
    commit_overrides: CommitOverrides | None = None
    force: bool = False


class Merge(Body):
    message: str | None = None
    metadata: Metadata | None = None
    strategy: str | None = None
    force: bool = False
    allow_empty: bool = False
    squash_merge: bool = False
    strategies: list[str] | None = None
    """lakectl extension: per-path strategy rules (``tables/**=source-wins``), as the CLI takes."""


class PathList(Body):
    paths: list[str]


class ObjectCopyCreation(Body):
    src_path: str
    src_ref: str | None = None
    force: bool = False
    shallow: bool = False


class UserMetadataUpdate(Body):
    """lakeFS ``UpdateObjectUserMetadata``: the object's whole new user metadata."""

    set: Metadata


class StagingLocation(Body):
    physical_address: str | None = None
    presigned_url: str | None = None
    presigned_url_expiry: int | None = None
    token: str | None = None
    """Sent by older lakeFS clients; this server's addresses need none."""


class StagingMetadata(Body):
    staging: StagingLocation
    checksum: str
    size_bytes: int = Field(ge=0)
    user_metadata: Metadata | None = None
    content_type: str | None = None
    mtime: int | None = None
    force: bool = False


class ObjectStageCreation(Body):
    physical_address: str
    checksum: str
    size_bytes: int = Field(ge=0)
    mtime: int | None = None
    metadata: Metadata | None = None
    content_type: str | None = None
    force: bool = False


class AccessKeyCredentials(Body):
    access_key_id: str = Field(min_length=1)
    secret_access_key: str = Field(min_length=1)


class Setup(Body):
    username: str
    key: AccessKeyCredentials | None = None
    # The remaining fields are lakeFS's (camelCase on the wire); accepted and not stored.
    firstName: str | None = None
    lastName: str | None = None
    email: str | None = None
    companyName: str | None = None
    country: str | None = None
    featureUpdates: bool | None = None
    securityUpdates: bool | None = None


class PullRequestCreation(Body):
    title: str
    description: str = ""
    source_branch: str
    destination_branch: str


class PullRequestBasic(Body):
    status: str | None = None
    title: str | None = None
    description: str | None = None


class PullRequestMerge(Body):
    """lakectl's extension of lakeFS's body-less merge: a strategy and a message."""

    strategy: str | None = None
    strategies: list[str] | None = None
    message: str | None = None


class PullRequestReview(Body):
    """lakectl's extension: a verdict (``approved`` or ``changes_requested``) and a comment."""

    verdict: str
    body: str = ""


class PullRequestComment(Body):
    body: str
