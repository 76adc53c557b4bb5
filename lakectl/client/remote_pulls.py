"""The pull-request verbs of :class:`~lakectl.client.remote.RemoteBackend`: lakeFS's PullsApi
paths and lakectl's extensions (comments, reviews, the merge gate), decoded into the records of
:mod:`lakectl.core.workflow.pulls`."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

    from lakectl.core.workflow.pulls import (
        Comment,
        Gate,
        PullRequest,
        PullStatus,
        Review,
        StatusFilter,
        Verdict,
    )


class PullsOverHttp:
    """Mixed into the remote backend, which supplies the transport."""

    if TYPE_CHECKING:
        # An attribute, not a method: the backend's _call takes keyword options of its own, which
        # a ``**kw`` method here would make an incompatible override.
        _call: Callable[..., httpx.Response]

        def _json(self, method: str, path: str, **kw: Any) -> Any: ...

        def _pages(
            self,
            path: str,
            params: Mapping[str, Any] | None = None,
            after: str = "",
            amount: int | None = None,
        ) -> Iterator[dict[str, Any]]: ...

        def _repo(self, repo: str) -> str: ...

    def _pull(self, repo: str, pull_id: str, tail: str = "") -> str:
        from lakectl.core.workflow.pulls import parse_id

        return f"{self._repo(repo)}/pulls/{parse_id(pull_id)}{tail}"  # InvalidArgument before sending

    def create_pull(
        self, repo: str, title: str, source: str, dest: str, description: str = ""
    ) -> PullRequest:
        body = {
            "title": title,
            "description": description,
            "source_branch": source,
            "destination_branch": dest,
        }
        created = self._json("POST", f"{self._repo(repo)}/pulls", json=body, idempotent=False)
        return self.get_pull(repo, str(created["id"]))

    def list_pulls(
        self, repo: str, status: StatusFilter, after: str = "", amount: int | None = None
    ) -> list[PullRequest]:
        from lakectl.core.workflow.pulls import PullRequest

        found = self._pages(f"{self._repo(repo)}/pulls", {"status": status.value}, after, amount)
        return [PullRequest.from_dict(d) for d in found]

    def get_pull(self, repo: str, pull_id: str) -> PullRequest:
        from lakectl.core.workflow.pulls import PullRequest

        return PullRequest.from_dict(self._json("GET", self._pull(repo, pull_id)))

    def update_pull(
        self,
        repo: str,
        pull_id: str,
        title: str | None = None,
        description: str | None = None,
        status: PullStatus | None = None,
    ) -> PullRequest:
        body = {"title": title, "description": description, "status": status.value if status else None}
        body = {k: v for k, v in body.items() if v is not None}
        self._call("PATCH", self._pull(repo, pull_id), json=body, idempotent=True)
        return self.get_pull(repo, pull_id)

    def merge_pull(
        self, repo: str, pull_id: str, strategies: Sequence[str] = (), message: str | None = None
    ) -> PullRequest:
        body: dict[str, Any] = {"strategies": list(strategies)}
        if message is not None:
            body["message"] = message
        self._call("PUT", self._pull(repo, pull_id, "/merge"), json=body, idempotent=False)
        return self.get_pull(repo, pull_id)

    def comment_pull(self, repo: str, pull_id: str, body: str) -> Comment:
        from lakectl.core.workflow.pulls import Comment

        url = self._pull(repo, pull_id, "/comments")
        return Comment.from_dict(self._json("POST", url, json={"body": body}, idempotent=False))

    def list_pull_comments(self, repo: str, pull_id: str) -> list[Comment]:
        from lakectl.core.workflow.pulls import Comment

        found = self._json("GET", self._pull(repo, pull_id, "/comments"))
        return [Comment.from_dict(d) for d in found["results"]]

    def review_pull(self, repo: str, pull_id: str, verdict: Verdict, body: str = "") -> Review:
        from lakectl.core.workflow.pulls import Review

        url = self._pull(repo, pull_id, "/reviews")
        return Review.from_dict(self._json("POST", url, json={"verdict": verdict.value, "body": body}))

    def list_pull_reviews(self, repo: str, pull_id: str) -> list[Review]:
        from lakectl.core.workflow.pulls import Review

        found = self._json("GET", self._pull(repo, pull_id, "/reviews"))
        return [Review.from_dict(d) for d in found["results"]]

    def pull_gate(self, repo: str, pull_id: str) -> Gate:
        from lakectl.core.workflow.pulls import Gate

        return Gate.from_dict(self._json("GET", self._pull(repo, pull_id, "/status")))
