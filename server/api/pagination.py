"""The lakeFS pagination envelope: ``after``/``amount``/``prefix`` in, ``{pagination, results}`` out."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import Annotated, Any, TypeVar

from fastapi import Query

T = TypeVar("T")

MAX_PER_PAGE = 1000
DEFAULT_PER_PAGE = 100

After = Annotated[str, Query(description="return items after this value")]
Prefix = Annotated[str, Query(description="return items prefixed with this value")]
Amount = Annotated[int | None, Query(ge=-1, le=MAX_PER_PAGE, description="how many items to return")]


def page_size(amount: int | None) -> int:
    """lakeFS's rule: absent, 0 or -1 mean the default page; the maximum is validated before."""
    if amount is None or amount <= 0:
        return DEFAULT_PER_PAGE
    return amount


def page(
    items: Iterable[T],
    amount: int | None,
    offset: Callable[[T], str],
    render: Callable[[T], dict[str, Any]],
    limit: bool = False,
) -> dict[str, Any]:
    """One page of ``items`` (already past ``after``): reads one item more than it returns to
    know whether more follow; ``next_offset`` is the offset of the last item returned. With
    ``limit``, the caller wants this page only: ``has_more`` is false."""
    size = page_size(amount)
    taken = list(islice(iter(items), size + 1))
    results = taken[:size]
    has_more = len(taken) > size and not limit
    return {
        "pagination": {
            "has_more": has_more,
            "next_offset": offset(results[-1]) if has_more else "",
            "results": len(results),
            "max_per_page": MAX_PER_PAGE,
        },
        "results": [render(x) for x in results],
    }


def by_name(items: Iterable[T], name: Callable[[T], str], prefix: str, after: str) -> Iterator[T]:
    """Items (sorted by name) that start with ``prefix`` and come after ``after``."""
    for item in items:
        n = name(item)
        if n.startswith(prefix) and n > after:
            yield item
